package fs

import (
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE passthrough (Tuning.Passthrough): a read-only open of a file whose
// whole content is in its local data file gets that file as its backing
// file, and the kernel serves its reads (and mmap) from it without asking
// the server. The engine pins the data file from such a handle's open
// until the kernel forgets the inode (cache.Volume.PinLocal, ioMode.held):
// it is never evicted, punched, cut or replaced under it.
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
//     release therefore adopt the data file (adoptWritten,
//     cache.Volume.AdoptPinned: the blocks whose bytes differ from the
//     record become dirty), and so does every checkpoint while the inode
//     is pinned for a writer (its pin is writable: PinLocal). Bytes
//     written only through such a mapping are not in the change feed and
//     do not move mtime.
//
// A mapping outlives its handle's RELEASE (close(2) of a mapped file, as
// the dynamic loader does): the kernel's vma holds the backing file, and
// through it the FUSE file's path, so the kernel forgets the inode only
// once the last mapping is gone. The first passthrough handle of an inode
// to be released therefore hands its pin to the inode, with an engine open
// of its own (ioMode.held), until the kernel forgets the inode (forget):
// the data file stays whole and unevicted under any mapping. After a
// passthrough writer, the fsync and release of any handle of the held
// inode, and its forget, adopt the data file again, as does every
// checkpoint until the forget (the engine's, since the writer's pin), so
// what a mapping wrote after the writer's close is in the next checkpoint
// (the unmount's final one included); a crash of the server loses what it
// wrote since the last adoption (fs/doc.go, "Passthrough"). An adoption
// uploads only the blocks the data file changed, and reads nothing if it
// did not change since the last one. Held inodes count in the cache's
// size but cannot be evicted until forgotten; the block cache bounds the
// pins (data.Cache.Pin): at most half of --cache-size (each file at its
// size) and data.MaxPinnedFiles files, each with a data-file descriptor
// in the server. A read-only open of a file that has no room is cached
// (its reads reach the server), like one of a file not whole locally;
// room comes back as the kernel forgets held inodes, which such an open
// asks it to do for the held inodes no handle has open (reclaim:
// FUSE_NOTIFY_PRUNE drops their unused dentries; one still mapped, or
// otherwise in use, stays, with its pin; one prune at a time, at most one
// per pruneInterval unless a hold ended since the last).
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
	// reclaiming: a reclaim is under way; noPrune: the kernel refused a
	// prune as unsupported (FUSE_NOTIFY_PRUNE, protocol 7.45: ENOSYS or
	// EINVAL), so reclaim asks no more. Guarded by mu.
	reclaiming, noPrune bool
	// prunedAt: when the last reclaim began; zero once a hold ended
	// since (unhold). Guarded by mu.
	prunedAt time.Time
	// prune sends FUSE_NOTIFY_PRUNE (fuse.Server.PruneNotify; set before
	// the mount is served; nil: never). now is the clock of prunedAt
	// (time.Now if nil). Tests set both.
	prune func(inos []uint64) fuse.Status
	now   func() time.Time
	// unholding, for tests, is called by unhold before it ends a hold,
	// with no lock held.
	unholding func(ino uint64)
}

type ioMode struct {
	pt, cached int
	// held: the inode keeps one engine open and one pin of its data file
	// from the release of its first passthrough handle until the kernel
	// forgets it (forget), since a mapping made through a passthrough
	// handle maps the data file and outlives the handle's RELEASE.
	held bool
	// mapWriter: a passthrough writer was open while held; its shared
	// mappings may write the data file until the inode is forgotten.
	mapWriter bool
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
	fd, full, err := fsys.vol.PinLocal(h.ino, m.pt > 0, !readOnly)
	if err != nil {
		if m.pt == 0 {
			fsys.log.Warn("passthrough: cannot pin the data file; serving reads", "ino", h.ino, "err", err)
			m.cached++
			return h, out, 0
		}
		fsys.drop(h.ino, m)
		return nil, 0, fsys.toErrno("open", h.ino, err)
	}
	if fd == nil { // not whole locally, or no room in the pin budget
		if full {
			fsys.reclaim()
		}
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
	if m.pt == 0 && m.cached == 0 && !m.stale && !m.held {
		delete(fsys.io.m, ino)
	}
}

// adoptWritten makes the engine take the data file as the truth for
// f's file (cache.Volume.AdoptPinned), if f is a passthrough writer or its
// inode is held after one (ioMode.mapWriter): a shared writable mapping
// made through a passthrough writer maps the data file and writes it
// without the server, also after the writer's close. Called at f's fsync,
// so that an fsync after writes through a mapping makes them durable as
// any write, and at its release.
func (fsys *filesystem) adoptWritten(ctx context.Context, f gofs.FileHandle) error {
	h := asHandle(f)
	if h == nil {
		return nil
	}
	if ph, ok := f.(*ptHandle); ok && ph.writer || fsys.mapWritten(h.ino) {
		return fsys.vol.AdoptPinned(ctx, h.ino)
	}
	return nil
}

// mapWritten reports whether ino is held after a passthrough writer
// (ioMode.mapWriter).
func (fsys *filesystem) mapWritten(ino uint64) bool {
	fsys.io.mu.Lock()
	defer fsys.io.mu.Unlock()
	m := fsys.io.m[ino]
	return m != nil && m.held && m.mapWriter
}

// release ends the io mode of handle f, before the engine's Release: a
// passthrough writer's file is adopted (cache.Volume.AdoptPinned: the
// blocks its data file holds differently from the record become dirty). The first
// passthrough handle of an inode to be released hands its pin to the
// inode, with an engine open of its own (ioMode.held): a mapping made
// through the handle (the dynamic loader maps and closes) keeps reading
// and writing the data file after RELEASE, until the kernel forgets the
// inode (the mapping holds the inode through its backing file), so the
// data file must stay whole and unevicted until then. Other handles unpin.
func (fsys *filesystem) release(ctx context.Context, f gofs.FileHandle) error {
	h := asHandle(f)
	if h == nil {
		return nil
	}
	ph, pt := f.(*ptHandle)
	err := fsys.adoptWritten(ctx, f)
	fsys.io.mu.Lock()
	defer fsys.io.mu.Unlock()
	m := fsys.io.m[h.ino]
	if pt {
		_ = ph.fd.Close()
		switch {
		case m == nil || m.held:
			fsys.vol.Unpin(h.ino)
		default:
			if _, oerr := fsys.vol.Open(ctx, h.ino, false); oerr != nil {
				fsys.vol.Unpin(h.ino)
				err = errors.Join(err, oerr)
			} else {
				m.held = true
			}
		}
		if m != nil && ph.writer {
			m.mapWriter = true
		}
	}
	if m != nil {
		if pt {
			m.pt--
		} else {
			m.cached--
		}
		fsys.drop(h.ino, m)
	}
	return err
}

// pruneInterval is the least time between two reclaims while no hold
// ends.
const pruneInterval = time.Second

// reclaim asks the kernel to forget the held inodes that no handle has
// open, so that the pin budget has room again: FUSE_NOTIFY_PRUNE makes it
// drop their unused dentries, and an inode left unused is forgotten
// (FORGET ends its hold: forget, unhold), while one still mapped, or in
// use otherwise (a working directory, a hard link's other dentry), stays,
// with its pin. At most one reclaim is under way, on a goroutine of its
// own: a notification must not be sent from a request handler, since the
// kernel may need a lock the request holds. And at most one begins per
// pruneInterval, unless a hold ended since the last one (room came back,
// yet an open found none): every open refused for want of room calls
// this, and while the held inodes stay in use a prune of them is the
// same wasted walk each time. A kernel without prune (before FUSE
// protocol 7.45, Linux 6.18) refuses it: go-fuse's PruneNotify answers
// ENOSYS without sending when the kernel's INIT announced an older
// protocol, and a kernel that gets a notify code it does not know answers
// EINVAL (fs/fuse/dev.c, fuse_notify). After either answer reclaim asks
// no more (noPrune, logged once): held inodes are then forgotten only
// when the kernel drops them itself, and an open that finds no pin room
// is served without passthrough as before (TestReclaimUnsupported).
// Caller holds fsys.io.mu.
func (fsys *filesystem) reclaim() {
	prune := fsys.io.prune
	if prune == nil || fsys.io.reclaiming || fsys.io.noPrune {
		return
	}
	now := time.Now
	if fsys.io.now != nil {
		now = fsys.io.now
	}
	t := now()
	if last := fsys.io.prunedAt; !last.IsZero() && t.Sub(last) < pruneInterval {
		return
	}
	var idle []uint64
	for ino, m := range fsys.io.m {
		if m.held && m.pt == 0 && m.cached == 0 {
			idle = append(idle, ino)
		}
	}
	if len(idle) == 0 {
		return
	}
	fsys.io.reclaiming, fsys.io.prunedAt = true, t
	go func() {
		st := prune(idle)
		fsys.io.mu.Lock()
		defer fsys.io.mu.Unlock()
		fsys.io.reclaiming = false
		switch st {
		case fuse.OK:
		case fuse.ENOSYS, fuse.EINVAL:
			fsys.io.noPrune = true
			fsys.log.Info("passthrough: the kernel cannot prune idle inodes (FUSE_NOTIFY_PRUNE, Linux 6.18 or later); pinned files are released only when the kernel forgets their inodes (memory pressure, drop_caches), and opens that find no pin room are served without passthrough", "status", st)
		default:
			fsys.log.Debug("passthrough: prune of held inodes", "inodes", len(idle), "status", st)
		}
	}()
}

// unhold ends the hold of ino (ioMode.held) when the kernel forgets it:
// no mapping of its data file is left, so what a writer's mapping wrote
// is adopted (cache.Volume.AdoptPinned), the data file unpinned and the
// hold's engine open released. The caller (forget) has taken m out of
// fsys.io.m and does not hold fsys.io.mu: an adoption may read the whole
// data file, and with prune (reclaim) such forgets are routine, so the
// opens and releases of other inodes must not wait for it. An open of
// ino that comes meanwhile (the kernel looked the name up again) starts
// a new mode for the inode, whatever this has done yet: its engine open
// and its pin count on top of the hold's (PinLocal pins a file already
// pinned without asking the budget), so they outlive this Unpin and
// Release (TestUnholdOutsideLock).
func (fsys *filesystem) unhold(ino uint64, m *ioMode) {
	if !m.held {
		return
	}
	if fsys.io.unholding != nil {
		fsys.io.unholding(ino)
	}
	ctx := context.Background()
	var err error
	if m.mapWriter {
		err = fsys.vol.AdoptPinned(ctx, ino)
	}
	fsys.vol.Unpin(ino)
	err = errors.Join(err, fsys.vol.Release(ctx, ino))
	m.held, m.mapWriter = false, false
	fsys.io.mu.Lock()
	fsys.io.prunedAt = time.Time{} // room came back: the next reclaim may begin at once
	fsys.io.mu.Unlock()
	if err != nil {
		fsys.log.Warn("passthrough: end of the hold of a forgotten inode", "ino", ino, "err", err)
	}
}
