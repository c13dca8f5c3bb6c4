// Package control is the local control channel of a running agentfs mount:
// a small JSON-over-HTTP protocol on a unix socket that the mount server
// listens on, the server side of it, and the client that `agentfs sync`,
// `agentfs status`, `agentfs umount`, exec/ and bench/ use.
//
// # Finding a mount
//
// Every agentfs mount is a FUSE mount of type "fuse.agentfs" whose source
// (fsname) is "agentfs:" followed by its cache directory, and its server
// listens on the socket control.sock in that cache directory (mode 0600:
// only the user who mounted, and root, may talk to it). Find reads
// /proc/self/mountinfo, takes the mount that holds the directory it is
// given, and dials that socket; it then checks that the server's answer
// names the same mount point and device. No request goes through the mount
// itself and nothing is guessed from process lists, so a hung or dead
// mount is reported (ErrNotRunning) instead of waited on.
//
// This package owns no filesystem behaviour: the server delegates every
// request to a Backend (the mount command's volume and FUSE server).
package control

import (
	"errors"
	"time"

	"github.com/agentfs/agentfs/cache"
	afs "github.com/agentfs/agentfs/fs"
)

// SocketName is the file name of a mount's control socket in its cache
// directory.
const SocketName = "control.sock"

// SourcePrefix starts the mountinfo source (fsname) of every agentfs
// mount; the rest is the mount's cache directory.
const SourcePrefix = "agentfs:"

// MountFSType is the filesystem type of agentfs mounts in mountinfo.
const MountFSType = "fuse." + afs.FSType

// Errors of the client. Check them with errors.Is.
var (
	// ErrNotMount: the directory is not inside an agentfs mount.
	ErrNotMount = errors.New("not an agentfs mount")
	// ErrNotRunning: the directory is inside an agentfs mount whose
	// server does not answer (it was killed; the mount is stale).
	ErrNotRunning = errors.New("the agentfs mount server is not running")
	// ErrBusy: an unmount without force found the mount in use.
	ErrBusy = afs.ErrBusy
)

// Info identifies a running mount.
type Info struct {
	MountPoint string    `json:"mount_point"`
	Dev        string    `json:"dev"` // "major:minor" of the mount
	URL        string    `json:"url"` // the volume's store URL, without credentials
	Branch     string    `json:"branch"`
	CacheDir   string    `json:"cache_dir"`
	ReadOnly   bool      `json:"read_only"`
	PID        int       `json:"pid"` // the server process
	Started    time.Time `json:"started"`
	Version    string    `json:"version,omitempty"`
	// Virtual describes the workspace of a virtual mount (nil otherwise).
	Virtual *VirtualInfo `json:"virtual,omitempty"`
}

// Status is what `agentfs status` shows: the mount, the engine's state and
// the blob store's counters.
type Status struct {
	Info   Info         `json:"mount"`
	Volume cache.Status `json:"volume"`
	Store  Stats        `json:"store"`
	// FUSE counts the kernel's requests by kind since the mount started.
	FUSE []afs.OpStats `json:"fuse"`
	// Refs counts the volume's branches and snapshots; nil when the mount
	// serves no history or the count failed.
	Refs *RefCounts `json:"refs,omitempty"`
	// Retention is the volume's retention policy and the mount's last
	// background gc; nil when the mount serves no history or reading the
	// policy failed.
	Retention *Retention `json:"retention,omitempty"`
}

// Stats are cumulative counters of a mount since it was mounted; they
// never decrease while the mount lives.
type Stats struct {
	BlobPuts        int64 `json:"blob_puts"`        // PUTs to the blob store, conditional creates included
	BlobGets        int64 `json:"blob_gets"`        // GETs (whole objects or ranges)
	BlobErrors      int64 `json:"blob_errors"`      // failed blob store calls (not-found and already-exists answers excluded)
	BytesUploaded   int64 `json:"bytes_uploaded"`   // payload bytes sent
	BytesDownloaded int64 `json:"bytes_downloaded"` // payload bytes received
	// CacheHits and CacheMisses count reads served by the local data
	// cache and reads that fetched from the blob store. The engine does not
	// count them yet; they stay 0.
	CacheHits   int64 `json:"cache_hits"`
	CacheMisses int64 `json:"cache_misses"`
}

// Invalidation names what the kernel must forget about a mount (see
// fs.Server's Invalidate methods): one inode (Ino), one directory entry
// (Parent and Name), or, with All, everything.
type Invalidation struct {
	All    bool   `json:"all,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Parent uint64 `json:"parent,omitempty"`
	Name   string `json:"name,omitempty"`
}
