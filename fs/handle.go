package fs

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/cache"
)

// handle is an open regular file: one engine Open (or Create), released
// exactly once.
type handle struct {
	ino      uint64
	flags    uint32 // open(2) flags, for debugging
	released atomic.Bool
	// written: the file changed through this handle since its last flush
	// (see changes.go).
	written atomic.Bool
}

func newHandle(ino uint64, flags uint32) *handle { return &handle{ino: ino, flags: flags} }

// release reports whether this call is the one that must release the
// engine's open.
func (h *handle) release() bool { return h.released.CompareAndSwap(false, true) }

// dirHandle is an open directory. Its listing is a snapshot of the engine's
// entries, taken at the first read and again when the reader rewinds to
// offset 0, so concurrent changes never make it skip or repeat an entry.
// Offsets are positions in the snapshot: "." is 1, ".." 2, the first entry
// 3.
//
// Lock order: dirHandle.mu is taken by go-fuse's request goroutines (which
// already serialise the reads of one handle) and never held across a call
// that could re-enter it.
type dirHandle struct {
	n *node

	mu      sync.Mutex
	entries []fuse.DirEntry // guarded by mu; nil until the first read
	pos     int             // guarded by mu: index of the next entry
}

var (
	_ gofs.FileReaddirenter = (*dirHandle)(nil)
	_ gofs.FileSeekdirer    = (*dirHandle)(nil)
	_ gofs.FileLookuper     = (*dirHandle)(nil)
	_ gofs.FileFsyncdirer   = (*dirHandle)(nil)
	_ gofs.FileReleasedirer = (*dirHandle)(nil)
)

// load takes the snapshot. Caller holds mu.
func (d *dirHandle) load(ctx context.Context) (errno syscall.Errno) {
	defer d.n.fsys.ops.done(opReaddir, time.Now(), &errno)
	ents, err := d.n.fsys.vol.ReadDir(ctx, d.n.ino())
	if err != nil {
		return d.n.errno("readdir", err)
	}
	parent := d.n.ino()
	if _, p := d.n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	out := make([]fuse.DirEntry, 0, len(ents)+2)
	out = append(out,
		fuse.DirEntry{Name: ".", Ino: d.n.ino(), Mode: syscall.S_IFDIR, Off: 1},
		fuse.DirEntry{Name: "..", Ino: parent, Mode: syscall.S_IFDIR, Off: 2})
	for i, e := range ents {
		out = append(out, fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: cache.TypeMode(e.Type), Off: uint64(i + 3)})
	}
	d.entries = out
	d.pos = 0
	return 0
}

// Readdirent returns the next entry, or nil at the end.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.entries == nil {
		if errno := d.load(ctx); errno != 0 {
			return nil, errno
		}
	}
	if d.pos >= len(d.entries) {
		return nil, 0
	}
	e := d.entries[d.pos]
	d.pos++
	return &e, 0
}

// Seekdir moves to offset off (as returned in an entry's Off); 0 rewinds
// and takes a fresh snapshot.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off == 0 {
		d.entries = nil
		d.pos = 0
		return 0
	}
	if d.entries == nil {
		if errno := d.load(ctx); errno != 0 {
			return errno
		}
	}
	d.pos = int(min(off, uint64(len(d.entries))))
	return 0
}

// Lookup answers READDIRPLUS for one entry the handle has just listed.
func (d *dirHandle) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return d.n.Lookup(ctx, name, out)
}

// Fsyncdir makes the directory's entries survive a crash of the server.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.n.Fsync(ctx, nil, flags)
}

// Releasedir drops the snapshot.
func (d *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) {
	d.mu.Lock()
	d.entries = nil
	d.mu.Unlock()
}
