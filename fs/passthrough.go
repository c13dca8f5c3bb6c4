package fs

import (
	"context"
	"os"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE passthrough (Tuning.Passthrough): a read-only open of a file whose
// whole content is in its local data file gets that file as its backing
// file, and the kernel serves its reads (and mmap) from it without asking
// the server. The engine pins the data file while such a handle is open
// (cache.Volume.PinLocal): it is never evicted, punched, cut or replaced
// under it.
//
// The kernel allows one io mode per inode at a time (fs/fuse/iomode.c): all
// opens of an inode are passthrough (with the same backing file) or none
// are; an open in the other mode fails with EIO. So the mode is decided per
// inode, by the opens the server has answered and not yet seen released
// (ioModes): the kernel drops an open's mode before it sends RELEASE, so
// the server's counts are never below the kernel's, and an open follows
// whichever mode is held, choosing afresh only when none is:
//
//   - no open held: a read-only open of a file that is whole locally is
//     passthrough, any other open cached;
//   - cached opens held: cached;
//   - passthrough opens held: passthrough, a writer too. A writer gets
//     FOPEN_DIRECT_IO as well: its read(2) and write(2) still reach the
//     server (dirty tracking, size, mtime and the change feed stay the
//     engine's), but its mmap maps the backing file, so a shared writable
//     mapping changes the data file behind the engine. Its fsync and its
//     release therefore mark every block not dirty yet (clean ones and
//     holes) dirty (adoptWritten, cache.Volume.AdoptPinned): the next
//     checkpoint captures whatever such a mapping wrote. Bytes written
//     only through such a mapping are not in the change feed and do not
//     move mtime.
//
// A cached open that follows a period in which a passthrough writer wrote
// drops the inode's page cache (no FOPEN_KEEP_CACHE): pages cached before
// the period may be stale.

// ptHandle is a handle whose reads the kernel serves from the backing
// file fd (a descriptor of the engine's data file, owned by the handle).
type ptHandle struct {
	*handle
	fd     *os.File
	writer bool // opened for writing (FOPEN_DIRECT_IO)
}

var _ gofs.FilePassthroughFder = (*ptHandle)(nil)

// PassthroughFd gives go-fuse the backing file to register with the
// kernel (once per inode while it is in passthrough mode).
func (h *ptHandle) PassthroughFd() (int, bool) { return int(h.fd.Fd()), true }

// asHandle returns the handle behind f, or nil if f is not one of ours.
func asHandle(f gofs.FileHandle) *handle {
	switch h := f.(type) {
	case *handle:
		return h
	case *ptHandle:
		return h.handle
	}
	return nil
}

// ioModes holds, per inode with open handles, the handles of each io mode
// the server has answered and not yet released.
type ioModes struct {
	mu sync.Mutex
	m  map[uint64]*ioMode // guarded by mu
}

type ioMode struct {
	pt, cached int
	// stale: a passthrough writer wrote through the server; the next
	// cached open drops the inode's page cache.
	stale bool
}

// open decides the io mode of a new open of h (open(2) flags flags) and
// returns the handle to give go-fuse and the FOPEN_* flags. The engine's
// Open of h.ino has succeeded.
func (fsys *filesystem) open(ctx context.Context, h *handle, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	out := fsys.openFlags(flags)
	readOnly := flags&syscall.O_ACCMODE == syscall.O_RDONLY && flags&syscall.O_TRUNC == 0
	fsys.io.mu.Lock()
	defer fsys.io.mu.Unlock()
	if fsys.io.m == nil {
		fsys.io.m = map[uint64]*ioMode{}
	}
	m := fsys.io.m[h.ino]
	if m == nil {
		m = &ioMode{}
		fsys.io.m[h.ino] = m
	}
	if m.pt == 0 && (m.cached > 0 || !readOnly || !fsys.passthrough.Load()) {
		m.cached++
		if m.stale {
			out &^= fuse.FOPEN_KEEP_CACHE
			m.stale = false
		}
		return h, out, 0
	}
	fd, err := fsys.vol.PinLocal(h.ino, m.pt > 0)
	if err != nil {
		if m.pt == 0 {
			fsys.log.Warn("passthrough: cannot pin the data file; serving reads", "ino", h.ino, "err", err)
			m.cached++
			return h, out, 0
		}
		fsys.drop(h.ino, m)
		return nil, 0, fsys.toErrno("open", h.ino, err)
	}
	if fd == nil { // not whole locally
		m.cached++
		return h, out, 0
	}
	m.pt++
	ph := &ptHandle{handle: h, fd: fd, writer: !readOnly}
	if ph.writer {
		out |= fuse.FOPEN_DIRECT_IO
		m.stale = true
	}
	return ph, out, 0
}

// passthroughOpen reports whether ino has passthrough handles open: then
// every handle of it is one (the kernel's io modes exclude each other), so
// a WRITE of ino comes through a passthrough writer, an FOPEN_DIRECT_IO
// handle.
func (fsys *filesystem) passthroughOpen(ino uint64) bool {
	fsys.io.mu.Lock()
	defer fsys.io.mu.Unlock()
	m := fsys.io.m[ino]
	return m != nil && m.pt > 0
}

// drop forgets m, the mode of ino, if it holds nothing. Caller holds
// fsys.io.mu.
func (fsys *filesystem) drop(ino uint64, m *ioMode) {
	if m.pt == 0 && m.cached == 0 && !m.stale {
		delete(fsys.io.m, ino)
	}
}

// adoptWritten makes the engine take the data file as the truth for the
// blocks it does not know dirty, if f is a passthrough writer: a shared
// writable mapping of f maps the data file and writes it without the
// server (cache.Volume.AdoptPinned). Called at f's fsync, so that an
// fsync after writes through a mapping makes them durable as any write,
// and at its release.
func (fsys *filesystem) adoptWritten(ctx context.Context, f gofs.FileHandle) error {
	if ph, ok := f.(*ptHandle); ok && ph.writer {
		return fsys.vol.AdoptPinned(ctx, ph.ino)
	}
	return nil
}

// release ends the io mode of handle f, before the engine's Release: a
// passthrough writer's file has its clean blocks marked dirty, and the
// data file is unpinned.
func (fsys *filesystem) release(ctx context.Context, f gofs.FileHandle) error {
	h := asHandle(f)
	if h == nil {
		return nil
	}
	ph, pt := f.(*ptHandle)
	err := fsys.adoptWritten(ctx, f)
	if pt {
		fsys.vol.Unpin(h.ino)
		_ = ph.fd.Close()
	}
	fsys.io.mu.Lock()
	defer fsys.io.mu.Unlock()
	if m := fsys.io.m[h.ino]; m != nil {
		if pt {
			m.pt--
		} else {
			m.cached--
		}
		fsys.drop(h.ino, m)
	}
	return err
}
