// Package errcode is agentfs's one error table: it gives every sentinel
// error of the packages below serve (blobstore, snapshot, cache, overlay,
// fs, the context errors and the errno values of the kernel's answers) a
// name and a stable code. Two doors use it:
//
//   - the control socket of a mount (fs/control) sends an error's entry
//     name across the socket, so that the client's error matches the same
//     sentinel with errors.Is, and answers with the HTTP status of its code
//     (the client and the server may be of different versions: a name an
//     entry had before still decodes, Table.Decode);
//   - the agentfs serve API (serve/apierr) answers with the code and its
//     status.
//
// A layer that has sentinels of its own extends the table with Join:
// fs/control adds its own (control.Errors), serve/apierr adds exec's and
// serve/workspace's. Each table is first match wins, and each layer's
// tests check, by parsing the sources (Unmapped), that no sentinel of the
// packages it covers is missing.
//
// Codes are part of the serve API contract (serve/openapi.json): they are
// only ever added, never renamed or given another meaning. An error that
// matches no entry is Internal.
package errcode

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"net/http"
	"syscall"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/cache/commit"
	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/ns"
	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/changefeed"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

// Code is a stable error code, e.g. "not_found".
type Code string

// The codes.
const (
	NotFound        Code = "not_found"        // the workspace, file, job, snapshot or branch does not exist
	Exists          Code = "exists"           // the name is taken
	PathEscape      Code = "path_escape"      // a path is absolute, climbs out with "..", or a symlink points out
	NotADirectory   Code = "not_a_directory"  // a directory was expected
	IsADirectory    Code = "is_a_directory"   // a file was expected
	NotEmpty        Code = "not_empty"        // a directory is not empty (remove it recursively)
	NotUnique       Code = "not_unique"       // an edit's old string, or a reference, matches more than once
	PolicyRefused   Code = "policy_refused"   // the command policy refused the command
	Timeout         Code = "timeout"          // the request ran out of time
	Conflict        Code = "conflict"         // concurrent changes collide (a commit's base moved, a lease was lost)
	Busy            Code = "busy"             // the resource is in use or a cap is reached; retry later
	Unauthorized    Code = "unauthorized"     // no valid token
	Forbidden       Code = "forbidden"        // the token may not do this (another workspace, read-only)
	InvalidArgument Code = "invalid_argument" // the request is malformed
	TooLarge        Code = "too_large"        // the request body is over the limit
	Expired         Code = "expired"          // the workspace's lifetime ended: fork it or delete it
	Unavailable     Code = "unavailable"      // a service below (mount server, docker, store) is not available
	Canceled        Code = "canceled"         // the client went away
	Internal        Code = "internal"         // a bug or a corruption; see the daemon's log
	NoMatch         Code = "no_match"         // an edit's old string does not occur in the file
	OutOfRange      Code = "out_of_range"     // a numbered read's line offset is at or past the end of the file
	BinaryFile      Code = "binary_file"      // a text operation (numbered read, edit) met a binary file: read it as bytes
)

// statuses gives every code its HTTP status.
var statuses = map[Code]int{
	NotFound:        http.StatusNotFound,
	Exists:          http.StatusConflict,
	PathEscape:      http.StatusBadRequest,
	NotADirectory:   http.StatusBadRequest,
	IsADirectory:    http.StatusBadRequest,
	NotEmpty:        http.StatusConflict,
	NotUnique:       http.StatusConflict,
	PolicyRefused:   http.StatusForbidden,
	Timeout:         http.StatusGatewayTimeout,
	Conflict:        http.StatusConflict,
	Busy:            http.StatusTooManyRequests,
	Unauthorized:    http.StatusUnauthorized,
	Forbidden:       http.StatusForbidden,
	InvalidArgument: http.StatusBadRequest,
	TooLarge:        http.StatusRequestEntityTooLarge,
	Expired:         http.StatusGone,
	Unavailable:     http.StatusServiceUnavailable,
	Canceled:        499, // client closed the request (nginx's convention)
	Internal:        http.StatusInternalServerError,
	NoMatch:         http.StatusNotFound,
	OutOfRange:      http.StatusBadRequest,
	BinaryFile:      http.StatusBadRequest,
}

// Codes lists every code, in a stable order.
func Codes() []Code {
	return []Code{NotFound, Exists, PathEscape, NotADirectory, IsADirectory, NotEmpty, NotUnique,
		PolicyRefused, Timeout, Conflict, Busy, Unauthorized, Forbidden, InvalidArgument, TooLarge,
		Expired, Unavailable, Canceled, Internal, NoMatch, OutOfRange, BinaryFile}
}

// Status is the HTTP status of c; 500 for a code that does not exist.
func (c Code) Status() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Entry maps one sentinel error to its code.
type Entry struct {
	// Name is the sentinel as Go names it, prefixed with its package's
	// directory in the module ("snapshot.ErrNoRef", "fs/control.ErrNoHistory",
	// "syscall.ENOTDIR"). It is unique in a table; the control socket
	// sends it across, so a sentinel that moves to another package keeps
	// its old name as an alias that Decode understands (renamed).
	Name string
	Err  error
	Code Code
}

// Table is an ordered error table: the first entry an error matches
// (errors.Is) classifies it, so an entry comes before those whose
// sentinels its own may wrap.
type Table []Entry

// Lookup returns the first entry err matches; false if none (or err is
// nil).
func (t Table) Lookup(err error) (Entry, bool) {
	if err == nil {
		return Entry{}, false
	}
	for _, e := range t {
		if errors.Is(err, e.Err) {
			return e, true
		}
	}
	return Entry{}, false
}

// ByName returns the entry called name; false if there is none.
func (t Table) ByName(name string) (Entry, bool) {
	for _, e := range t {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// Decode returns the entry a peer's name stands for: the entry called
// name, or, for a name an entry had in an earlier version (renamed), the
// entry called what it is called now; false if there is none. The control
// socket's client decodes the server's names with it, so that a CLI
// matches the errors of a mount server still running an older version
// (an upgrade with live mounts) to the same sentinels. The other way
// round is not covered: an older CLI does not know a newer server's
// names.
func (t Table) Decode(name string) (Entry, bool) {
	if e, ok := t.ByName(name); ok {
		return e, true
	}
	if now, ok := renamed[name]; ok {
		return t.ByName(now)
	}
	return Entry{}, false
}

// renamed maps the names entries had in earlier versions to their names
// now (Decode). A renamed entry's old name stays here for good: mount
// servers of the old version may still be running. No old name is the
// name of an entry.
var renamed = map[string]string{
	// 6b53d8c: the namespace's error kinds moved from cache to cache/ns
	// (cache.ErrNotFound is ns.ErrNotFound).
	"cache.ErrNotFound":     "cache/ns.ErrNotFound",
	"cache.ErrExists":       "cache/ns.ErrExists",
	"cache.ErrNotEmpty":     "cache/ns.ErrNotEmpty",
	"cache.ErrNotDir":       "cache/ns.ErrNotDir",
	"cache.ErrIsDir":        "cache/ns.ErrIsDir",
	"cache.ErrInvalid":      "cache/ns.ErrInvalid",
	"cache.ErrNameTooLong":  "cache/ns.ErrNameTooLong",
	"cache.ErrNoAttr":       "cache/ns.ErrNoAttr",
	"cache.ErrRange":        "cache/ns.ErrRange",
	"cache.ErrNotSupported": "cache/ns.ErrNotSupported",
	"cache.ErrPermission":   "cache/ns.ErrPermission",
	"cache.ErrNoSpace":      "cache/ns.ErrNoSpace",
	"cache.ErrIO":           "cache/ns.ErrIO",
}

// Join returns the tables one after the other. An entry whose name an
// earlier one has is left out, so a layer can put cross-cutting entries
// (Context) ahead of its own and then append a lower table that has them
// too; two entries of one name that differ are a bug, and Join panics.
func Join(tables ...Table) Table {
	var out Table
	seen := map[string]Entry{}
	for _, t := range tables {
		for _, e := range t {
			if prev, ok := seen[e.Name]; ok {
				if !errors.Is(prev.Err, e.Err) || prev.Code != e.Code {
					panic(fmt.Sprintf("errcode: %s is in the table twice, as %q and %q", e.Name, prev.Code, e.Code))
				}
				continue
			}
			seen[e.Name] = e
			out = append(out, e)
		}
	}
	return out
}

// Context are the errors of a request that ran out of time or whose
// client went away. A table that has them puts them first: whatever
// sentinel wraps them, the request timed out or was cancelled.
var Context = Table{
	{"context.DeadlineExceeded", context.DeadlineExceeded, Timeout},
	{"context.Canceled", context.Canceled, Canceled},
}

// Engine are the sentinels of the packages below fs/control: overlay,
// fs, snapshot, cache and blobstore, the more specific first.
var Engine = Table{
	// overlay (virtual workspaces).
	{"overlay.ErrNotVirtual", overlay.ErrNotVirtual, InvalidArgument},
	{"overlay.ErrBaseMismatch", overlay.ErrBaseMismatch, Conflict},
	{"overlay.ErrConflict", overlay.ErrConflict, Conflict},
	{"overlay.ErrNeedParent", overlay.ErrNeedParent, InvalidArgument},
	{"overlay.ErrEntangled", overlay.ErrEntangled, Conflict},

	// fs (the FUSE server) and its change feed.
	{"fs.ErrBusy", afs.ErrBusy, Busy},
	{"fs.ErrNotMounted", afs.ErrNotMounted, NotFound},
	{"fs/changefeed.ErrBadID", changefeed.ErrBadID, InvalidArgument},
	{"fs/changefeed.ErrClosed", changefeed.ErrClosed, Unavailable},

	// snapshot (history; encrypted volumes' keys first: a wrong key may
	// look like corruption).
	{"snapshot.ErrKeyRequired", snapshot.ErrKeyRequired, Forbidden},
	{"snapshot.ErrWrongKey", snapshot.ErrWrongKey, Forbidden},
	{"snapshot.ErrBadName", snapshot.ErrBadName, InvalidArgument},
	{"snapshot.ErrSnapshotExists", snapshot.ErrSnapshotExists, Exists},
	{"snapshot.ErrBranchExists", snapshot.ErrBranchExists, Exists},
	{"snapshot.ErrVolumeExists", snapshot.ErrVolumeExists, Exists},
	{"snapshot.ErrNoSnapshot", snapshot.ErrNoSnapshot, NotFound},
	{"snapshot.ErrNoRef", snapshot.ErrNoRef, NotFound},
	{"snapshot.ErrNoCommits", snapshot.ErrNoCommits, NotFound},
	{"snapshot.ErrNoEntry", snapshot.ErrNoEntry, NotFound},
	{"snapshot.ErrNoVolume", snapshot.ErrNoVolume, NotFound},
	{"snapshot.ErrAmbiguousRef", snapshot.ErrAmbiguousRef, NotUnique},
	{"snapshot.ErrDefaultBranch", snapshot.ErrDefaultBranch, InvalidArgument},
	{"snapshot.ErrBadRetention", snapshot.ErrBadRetention, InvalidArgument},
	{"snapshot.ErrLeaseHeld", snapshot.ErrLeaseHeld, Busy},
	{"snapshot.ErrLeaseLost", snapshot.ErrLeaseLost, Conflict},
	{"snapshot.ErrVolumeChanged", snapshot.ErrVolumeChanged, Unavailable}, // the store at the URL is not the volume opened: retry once it is back
	{"snapshot.ErrCommitExists", snapshot.ErrCommitExists, Conflict},
	{"snapshot.ErrSourceGone", snapshot.ErrSourceGone, Conflict},
	{"snapshot.ErrTooLarge", snapshot.ErrTooLarge, TooLarge},
	{"snapshot.ErrFormatTooNew", snapshot.ErrFormatTooNew, Unavailable},
	{"snapshot.ErrCorrupt", snapshot.ErrCorrupt, Internal},
	{"snapshot.ErrMissing", snapshot.ErrMissing, Internal},

	// cache (the mount's engine: its error kinds, which fs/errno.go turns
	// into errno values for the kernel); the namespace's kinds are
	// cache/ns's, which cache returns under the same names.
	{"cache.ErrReadOnly", cache.ErrReadOnly, Forbidden},
	{"cache/ns.ErrNotFound", ns.ErrNotFound, NotFound},
	{"cache/ns.ErrExists", ns.ErrExists, Exists},
	{"cache/ns.ErrNotEmpty", ns.ErrNotEmpty, NotEmpty},
	{"cache/ns.ErrNotDir", ns.ErrNotDir, NotADirectory},
	{"cache/ns.ErrIsDir", ns.ErrIsDir, IsADirectory},
	{"cache/ns.ErrInvalid", ns.ErrInvalid, InvalidArgument},
	{"cache/ns.ErrNameTooLong", ns.ErrNameTooLong, InvalidArgument},
	{"cache/ns.ErrNoAttr", ns.ErrNoAttr, NotFound},
	{"cache/ns.ErrRange", ns.ErrRange, InvalidArgument},
	{"cache/ns.ErrNotSupported", ns.ErrNotSupported, InvalidArgument},
	{"cache/ns.ErrPermission", ns.ErrPermission, Forbidden},
	{"cache.ErrFileTooBig", cache.ErrFileTooBig, TooLarge},
	{"cache.ErrLoop", cache.ErrLoop, InvalidArgument},
	{"cache/ns.ErrNoSpace", ns.ErrNoSpace, Unavailable},
	{"cache/ns.ErrIO", ns.ErrIO, Internal},
	{"cache.ErrClosed", cache.ErrClosed, Unavailable},
	{"cache/data.ErrOrigin", data.ErrOrigin, Internal},                 // a virtual workspace's host file could not be read (cache wraps it in ErrIO)
	{"cache/data.ErrDataFile", data.ErrDataFile, Internal},             // a data file longer than its file (cache wraps it in ErrIO)
	{"cache/data.ErrInlineMissing", data.ErrInlineMissing, Internal},   // an inline file's stored bytes are missing (cache wraps it in ErrIO)
	{"cache/commit.ErrInconsistent", commit.ErrInconsistent, Internal}, // a checkpoint found the namespace's records inconsistent (cache wraps it in ErrIO)

	// blobstore.
	{"blobstore.ErrNotFound", blobstore.ErrNotFound, NotFound},
	{"blobstore.ErrExists", blobstore.ErrExists, Exists},
	{"blobstore.ErrTransient", blobstore.ErrTransient, Unavailable},
	{"blobstore.ErrNoSpace", blobstore.ErrNoSpace, Unavailable}, // the store's disk is full or its quota reached: free space there (checkpoints retry)
}

// Errno are the kernel's answers (file operations on a mount, a host
// directory). They go last: the sentinels above may wrap an errno too.
var Errno = Table{
	{"syscall.ENOTDIR", syscall.ENOTDIR, NotADirectory},
	{"syscall.EISDIR", syscall.EISDIR, IsADirectory},
	{"syscall.ENOTEMPTY", syscall.ENOTEMPTY, NotEmpty},
	{"io/fs.ErrNotExist", iofs.ErrNotExist, NotFound},
	{"io/fs.ErrExist", iofs.ErrExist, Exists},
	{"io/fs.ErrPermission", iofs.ErrPermission, Forbidden},
	{"syscall.EROFS", syscall.EROFS, Forbidden},
	{"syscall.ENAMETOOLONG", syscall.ENAMETOOLONG, InvalidArgument},
	{"syscall.ELOOP", syscall.ELOOP, InvalidArgument},
	{"syscall.EINVAL", syscall.EINVAL, InvalidArgument},
	{"syscall.EXDEV", syscall.EXDEV, InvalidArgument},
	{"syscall.EFBIG", syscall.EFBIG, TooLarge},
	{"syscall.ENOSPC", syscall.ENOSPC, Unavailable},
	{"syscall.EDQUOT", syscall.EDQUOT, Unavailable},
	{"syscall.ENOTCONN", syscall.ENOTCONN, Unavailable}, // a mount whose server died
	{"syscall.EBUSY", syscall.EBUSY, Busy},
}

// Below is the table of the sentinels of every layer below fs/control:
// Engine, then Errno. Context is not part of it: a door puts it first
// where a deadline or cancellation is the request's own (serve/apierr),
// and leaves it out where it is not (the control socket: the client sees
// its own context end on its side; one that ended in the server is the
// server's, such as its sync before a forced unmount).
var Below = Join(Engine, Errno)
