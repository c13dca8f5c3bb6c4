// Package apierr is the one error table of agentfs serve: it turns the
// sentinel errors of the packages a request can meet (exec, snapshot,
// overlay, fs/control, blobstore, serve/workspace, and the errno values
// of the kernel's answers) into a stable API error code and an HTTP status.
// The HTTP API and the MCP tools both classify errors here, so a client sees
// the same code for the same failure whichever door it came through.
//
// Codes are part of the API contract (serve/openapi.json): they are only
// ever added, never renamed or given another meaning. An error that matches
// no entry of the table is "internal" (500).
package apierr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"syscall"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/changefeed"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/serve/workspace"
	"github.com/agentfs/agentfs/snapshot"
)

// Code is a stable API error code, e.g. "not_found".
type Code string

// The API error codes.
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

// Status is the HTTP status of code; 500 for a code that does not exist.
func (c Code) Status() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// entry maps one sentinel to its code.
type entry struct {
	name string // the sentinel as Go names it ("exec.ErrPathEscape"), for the tests and the docs
	err  error
	code Code
}

// table is the error table, first match wins: more specific sentinels come
// before the ones they may wrap (a *exec.PathError before fs.ErrNotExist).
var table = []entry{
	// Path confinement first: an escape is never reported as anything else.
	{"exec.ErrPathEscape", exec.ErrPathEscape, PathEscape},

	// Time and cancellation.
	{"context.DeadlineExceeded", context.DeadlineExceeded, Timeout},
	{"context.Canceled", context.Canceled, Canceled},

	// serve/workspace.
	{"serve/workspace.ErrNotFound", workspace.ErrNotFound, NotFound},
	{"serve/workspace.ErrExists", workspace.ErrExists, Exists},
	{"serve/workspace.ErrInvalidName", workspace.ErrInvalidName, InvalidArgument},
	{"serve/workspace.ErrInvalidArgument", workspace.ErrInvalidArgument, InvalidArgument},
	{"serve/workspace.ErrBusy", workspace.ErrBusy, Busy},
	{"serve/workspace.ErrExpired", workspace.ErrExpired, Expired},
	{"serve/workspace.ErrClosed", workspace.ErrClosed, Unavailable},

	// exec.
	{"exec.ErrRefused", exec.ErrRefused, PolicyRefused},
	{"exec.ErrNotUnique", exec.ErrNotUnique, NotUnique},
	{"exec.ErrNoMatch", exec.ErrNoMatch, NoMatch},
	{"exec.ErrUnknownJob", exec.ErrUnknownJob, NotFound},
	{"exec.ErrOutOfRange", exec.ErrOutOfRange, OutOfRange},
	{"exec.ErrBinary", exec.ErrBinary, BinaryFile},
	{"exec.ErrInvalid", exec.ErrInvalid, InvalidArgument},
	{"exec.ErrClosed", exec.ErrClosed, Unavailable},
	{"exec.ErrSync", exec.ErrSync, Unavailable},
	{"exec.ErrChanges", exec.ErrChanges, Internal},
	{"exec.ErrDockerUnavailable", exec.ErrDockerUnavailable, Unavailable},
	{"exec.ErrImageMissing", exec.ErrImageMissing, Unavailable},
	{"exec.ErrRootUser", exec.ErrRootUser, InvalidArgument},

	// overlay (virtual workspaces), also through fs/control.
	{"overlay.ErrNotVirtual", overlay.ErrNotVirtual, InvalidArgument},
	{"overlay.ErrBaseMismatch", overlay.ErrBaseMismatch, Conflict},
	{"overlay.ErrConflict", overlay.ErrConflict, Conflict},
	{"overlay.ErrNeedParent", overlay.ErrNeedParent, InvalidArgument},
	{"overlay.ErrEntangled", overlay.ErrEntangled, Conflict},

	// fs/control and fs.
	{"fs/control.ErrNotMount", control.ErrNotMount, Unavailable},
	{"fs/control.ErrNotRunning", control.ErrNotRunning, Unavailable},
	{"fs/control.ErrNoHistory", control.ErrNoHistory, Unavailable},
	{"fs/control.ErrNoChanges", control.ErrNoChanges, Unavailable},
	{"fs/changefeed.ErrBadID", changefeed.ErrBadID, InvalidArgument},
	{"fs/changefeed.ErrClosed", changefeed.ErrClosed, Unavailable},
	{"fs/control.ErrBusy", control.ErrBusy, Busy}, // fs.ErrBusy

	// snapshot (history).
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

	// cache (the mount's engine, reached through the control socket).
	{"cache.ErrReadOnly", cache.ErrReadOnly, Forbidden},

	// blobstore.
	{"blobstore.ErrNotFound", blobstore.ErrNotFound, NotFound},
	{"blobstore.ErrExists", blobstore.ErrExists, Exists},
	{"blobstore.ErrTransient", blobstore.ErrTransient, Unavailable},

	// The kernel's answers (file operations on a mount), last: the
	// sentinels above may wrap an errno too.
	{"syscall.ENOTDIR", syscall.ENOTDIR, NotADirectory},
	{"syscall.EISDIR", syscall.EISDIR, IsADirectory},
	{"syscall.ENOTEMPTY", syscall.ENOTEMPTY, NotEmpty},
	{"io/fs.ErrNotExist", fs.ErrNotExist, NotFound},
	{"io/fs.ErrExist", fs.ErrExist, Exists},
	{"io/fs.ErrPermission", fs.ErrPermission, Forbidden},
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

// Error is an API error: the body {"error": Error} of every failed request,
// and the structured content of a failed MCP tool call. It is also an error
// value that handlers return to choose the code themselves.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	// Path is the workspace path the failed request named, if any.
	Path string `json:"path,omitempty"`
	// Rule is the name of the policy rule that refused a command
	// (policy_refused), e.g. "rm-root".
	Rule string `json:"rule,omitempty"`

	err error
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Unwrap returns the error that was classified, if any.
func (e *Error) Unwrap() error { return e.err }

// Status is the HTTP status of e's code.
func (e *Error) Status() int { return e.Code.Status() }

// New returns an *Error with code and a message formatted as fmt.Sprintf.
// Handlers use it for failures that no sentinel describes (a missing
// token, a malformed field).
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf classifies err: the code of an *Error it wraps, else of the first
// table entry it matches with errors.Is, else an *http.MaxBytesError is
// too_large, else internal. A nil err has no code ("").
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	for _, e := range table {
		if errors.Is(err, e.err) {
			return e.code
		}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return TooLarge
	}
	return Internal
}

// From returns err as an *Error: err itself (its Path filled in from path
// when empty) if it is one, else a new one with err's code and message.
// path is the workspace path the request named, "" for none.
func From(err error, path string) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		if ae.Path == "" && path != "" {
			c := *ae
			c.Path = path
			return &c
		}
		return ae
	}
	e := &Error{Code: CodeOf(err), Message: err.Error(), Path: path, err: err}
	var pe *exec.PolicyError
	if e.Code == PolicyRefused && errors.As(err, &pe) {
		e.Rule = pe.Rule
	}
	return e
}

// Write answers err over HTTP as every agentfs serve door does: the status
// of its code and the body {"error": {"code", "message", "path"}} as JSON
// (with <, > and & not escaped). err is classified as From(err, "") does,
// so an *Error keeps its code and path. Headers that depend on the door
// (Retry-After, WWW-Authenticate) are the caller's to set first.
func Write(w http.ResponseWriter, err error) {
	e := From(err, "")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status())
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(body{e})
}

// body is the JSON body of every failed HTTP request.
type body struct {
	Error *Error `json:"error"`
}
