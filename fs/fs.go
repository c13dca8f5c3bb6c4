package fs

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/fs/changefeed"
)

// filesystem is what every node of one mount shares.
type filesystem struct {
	vol       *cache.Volume
	log       *slog.Logger
	readOnly  bool
	keepCache bool // FOPEN_KEEP_CACHE on file opens
	dirCache  bool // FOPEN_CACHE_DIR on directory opens
	noFlush   bool // answer FLUSH with ENOSYS, so the kernel stops sending it (Tuning.NoFlush)
	directWr  bool // FOPEN_DIRECT_IO on write-only opens (Tuning.DirectWrite)
	posixACL  bool // the kernel enforces POSIX ACLs (Tuning.PosixACL); else their attributes are EOPNOTSUPP
	atime     Atime
	gen       uint32 // the generation of every node (file handles; export.go)
	ops       opCounters
	changes   *changefeed.Feed // the change feed (changes.go)
	// passthrough: read-only opens of files whole locally may get their
	// data file as backing file (Tuning.Passthrough, passthrough.go); set
	// once the kernel has offered FUSE passthrough.
	passthrough atomic.Bool
	io          ioModes // io mode of each inode with open handles
	// server is the mount's FUSE server, set once it is mounted, for the
	// attribute invalidations of touchAtime.
	server atomic.Pointer[fuse.Server]

	tombMu sync.Mutex
	// tombs holds the last attributes of directories removed while the
	// kernel still knows them (an open descriptor, a working directory):
	// the engine forgets a removed directory at once, but fstat of such a
	// descriptor must still work and report nlink 0, as on ext4. An entry
	// lives until go-fuse forgets the inode. Guarded by tombMu.
	tombs map[uint64]cache.Attr
}

// bury remembers the attributes of removed directory a.
func (fsys *filesystem) bury(a cache.Attr) {
	a.Nlink = 0
	a.Ctime = time.Now().UnixNano()
	fsys.tombMu.Lock()
	if fsys.tombs == nil {
		fsys.tombs = map[uint64]cache.Attr{}
	}
	fsys.tombs[a.Ino] = a
	fsys.tombMu.Unlock()
}

// tomb returns the remembered attributes of removed directory ino.
func (fsys *filesystem) tomb(ino uint64) (cache.Attr, bool) {
	fsys.tombMu.Lock()
	defer fsys.tombMu.Unlock()
	a, ok := fsys.tombs[ino]
	return a, ok
}

// forget drops what fsys remembers of ino, once the kernel forgot it.
func (fsys *filesystem) forget(ino uint64) {
	fsys.tombMu.Lock()
	delete(fsys.tombs, ino)
	fsys.tombMu.Unlock()
	fsys.io.mu.Lock()
	m := fsys.io.m[ino]
	if m != nil && m.pt == 0 && m.cached == 0 {
		delete(fsys.io.m, ino)
	} else {
		m = nil
	}
	fsys.io.mu.Unlock()
	if m != nil {
		fsys.unhold(ino, m)
	}
}

// openFlags are the FOPEN_* flags of a regular file's open with open(2)
// flags flags: the kernel keeps the file's page cache across opens, since
// every write goes through this mount (truncating opens drop it); and a
// descriptor sends no FLUSH at its close(2) (FOPEN_NOFLUSH), a round trip,
// unless it may write while the change feed is active (noFlushAt).
func (fsys *filesystem) openFlags(flags uint32) uint32 {
	trunc := flags&syscall.O_TRUNC != 0
	var out uint32
	if !trunc && fsys.keepCache {
		out |= fuse.FOPEN_KEEP_CACHE
	}
	if fsys.noFlushAt(flags) {
		out |= fuse.FOPEN_NOFLUSH
	}
	if fsys.directWr && flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		out |= fuse.FOPEN_DIRECT_IO
	}
	return out
}

// noFlushAt reports whether a descriptor opened with open(2) flags flags
// can do without FLUSH at its close(2). FLUSH does two things: the engine
// persists the file's in-memory attributes (and an inline file's bytes),
// and the change feed reports the file modified if the descriptor wrote.
// The first needs no FLUSH: the kernel sends RELEASE as the last
// descriptor of an open file goes (right after close(2) returns, unless
// a dup, a fork or a mapping still holds it), a written descriptor's
// RELEASE persists the file (node.Release), and every checkpoint
// persists the files still open.
// The second does: a RELEASE is answered after close(2) has returned, so
// once someone has subscribed to the feed (changefeed.Feed.Active; it
// stays active) a descriptor that may write keeps its FLUSH, and its
// "modified" still comes at its close. A descriptor open for reading
// only (and not truncating) writes nothing and never needs it.
func (fsys *filesystem) noFlushAt(flags uint32) bool {
	readOnly := flags&syscall.O_ACCMODE == syscall.O_RDONLY && flags&syscall.O_TRUNC == 0
	return readOnly || !fsys.changes.Active()
}

// dirOpenFlags are the FOPEN_* flags of a directory's open: the kernel
// caches listings and keeps them across opens, until a change in the
// directory (through this mount) or an invalidation drops them.
func (fsys *filesystem) dirOpenFlags() uint32 {
	if !fsys.dirCache {
		return 0
	}
	return fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
}
