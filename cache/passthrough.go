package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache/commit"
	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// This file lets the FUSE layer hand a file's local data file to the
// kernel (FUSE passthrough): reads of a pinned file go straight to its data
// file, without the engine seeing them. A pin is the engine's promise that,
// while it lasts, the data file holds the file's whole current content, at
// its full size, in the same file. What that means for the file's local
// data is data.File's (Pin, Whole, GrowPinned, Refill, Adoptable, and
// Evict passing a pinned file over); what it means for the record is here:
//
//   - eviction leaves a pinned file's blocks alone (data.File.Evict), and
//     the block cache keeps them out of what triggers it; pins are
//     bounded (data.Cache.Pin): at most half of Options.CacheSize, each
//     pinned file taken at its size, and data.MaxPinnedFiles files, so the
//     cache keeps within its size; a file with no room is not pinned;
//   - a truncate that grows a pinned file grows its data file too
//     (data.File.GrowPinned), so the kernel reads zeros up to the new size;
//   - a reconcile (restore, discard, a read-only mount following its
//     branch) fetches the new chunks of a pinned file before it changes
//     anything and writes them into the same data file (the Reconciler of
//     cache/commit through live: fetchPinned, refillPinned) instead of
//     forgetting them;
//   - a pinned file is never inline (inline files are never pinned, and a
//     reconcile keeps a pinned file out of the database);
//   - removing the file (unlink, a reconcile dropping it) removes the data
//     file's name only: the kernel's reference keeps its bytes, as for any
//     file removed while open.
//
// A pin lives on an open node: the FUSE layer keeps an open of the file
// for as long as it keeps a pin, which is until the kernel forgets the
// inode, since a mapping of the data file outlives the handle that made
// it. Writes that come through the engine land in the same data file, so
// pinned readers and mappings see them at once. A shared writable mapping
// writes the data file behind the engine; AdoptPinned records such
// writes when the FUSE layer calls it.

// PinLocal pins the data file of open regular file ino for passthrough
// and returns a new descriptor of it (the caller closes it), if the file's
// whole content is local (every block dirty, present, or a hole, none
// remote or still on a host base, and the file not inline) and, for a
// file not pinned yet, the block cache's pin budget has room for it
// (data.Cache.Pin). Otherwise it returns nil and pins nothing, and full
// reports whether that was for want of room: the file was whole. With force, a file already pinned is pinned
// again whatever its state (it stays whole while pinned). With writable,
// the pin is for a handle that may write: a shared writable mapping made
// through it writes the data file behind the engine, so from then until
// the file's last Unpin every checkpoint adopts the file (AdoptPinned)
// before it captures anything. Every pin is undone by one Unpin. A data
// file longer than the file is ErrIO.
func (v *Volume) PinLocal(ino uint64, force, writable bool) (f *os.File, full bool, err error) {
	n, err := v.openNode(ino)
	if err != nil {
		return nil, false, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	f, err = n.d.Pin(n.Layout(), force)
	if err != nil {
		return nil, false, ioErr(err)
	}
	if f == nil {
		return nil, n.d.Whole(n.Layout()), nil
	}
	if writable {
		v.adopted.watch(ino)
	}
	return f, false, nil
}

// Unpin undoes one PinLocal of open file ino.
func (v *Volume) Unpin(ino uint64) {
	n := v.lookupNode(ino)
	if n == nil {
		return
	}
	n.mu.Lock()
	n.d.Unpin()
	if !n.d.Pinned() {
		v.adopted.forget(ino)
	}
	n.mu.Unlock()
}

// fetchPinned fetches, before a reconcile changes pinned file ino to
// entry e, the chunks of e whose bytes it does not keep, by block
// (data.Fetcher.Chunks). Caller holds the file's node.mu exclusively.
func (v *Volume) fetchPinned(ctx context.Context, ino uint64, e *snapshot.Entry, keep map[uint64]bool) (map[uint64][]byte, error) {
	chunks, err := v.fetch.Chunks(ctx, e.Chunks, keep)
	if err != nil {
		return nil, fmt.Errorf("refill open file %d: %w", ino, ioErr(err))
	}
	return chunks, nil
}

// refillPinned installs the chunks fetchPinned fetched into the data file
// of pinned n, now that its record is the new one (data.File.Refill), and
// persists its presence. Caller holds n.mu exclusively.
func (v *Volume) refillPinned(n *node, chunks map[uint64][]byte) error {
	if err := n.d.Refill(n.Layout(), chunks); err != nil {
		return err
	}
	return v.persistNode(n)
}

// AdoptPinned takes the data file of pinned open file ino as the truth
// for every block (data.File.Adoptable) that it holds differently from the
// record: a clean block whose bytes are no longer its committed chunk's
// (compared by the chunk's name, Repo.HashOf of the bytes, with zeros past
// them) or a hole that is no longer zeros becomes dirty, and it and every
// block dirty already gets a new write generation, so that the next
// checkpoint captures the bytes the data file holds now and a checkpoint
// that captured a block before this call does not mark it clean. A block
// copied from the file's origin is taken as changed (the origin is not
// read). If the data file has not changed since the file's last adoption
// (its stamp: see adoptState), nothing is read. Call it when a writer
// could have changed the data file behind the engine (a shared writable
// mmap through a passthrough handle).
//
// The data file is read and hashed under no lock of the engine
// (compareData): the file's lock is held only to note what the record
// says of each clean block (its key: chunk and extent, recordedAs) and to
// mark the changed blocks, under the locks of a write (lockData), so a
// write to the file, and any namespace change, goes on during the hash.
// A block is left clean only if, under lockData, it is clean, its key is
// the one noted, and the bytes read matched that key. That leaves no block
// wrongly clean. Between the note and the recheck, the engine changes a
// clean block's bytes in the data file only by
//   - a write, which makes the block dirty, under lockData, before its
//     bytes land; the block is clean again at the recheck only if a
//     checkpoint's apply marked it clean since, and then (its write
//     generation says so) under the chunk of bytes it captured after the
//     write: a new key, or the same key naming the bytes the data file
//     now holds;
//   - a truncation, which drops the chunks past the new size (a new key
//     for a block that had one; a hole's bytes stay zeros) and makes the
//     block it cuts dirty;
//   - a reconcile's refill, which writes a new chunk's bytes under its
//     new key.
//
// Eviction and fetches do not reach it: a pinned file is never evicted,
// and a file unpinned during the hash has no adoptable blocks at the
// recheck (re-pinning it needs it whole again).
//
// So a block clean under the noted key at the recheck holds that key's
// bytes in the data file, but for what stores through a mapping wrote; a
// store the reads missed came after the stamp was taken and the data file
// written back, so it moved the stamp, and the next adoption reads again
// (adoptState). TestAdoptPinnedHashUnlocked holds the hash midway.
func (v *Volume) AdoptPinned(ctx context.Context, ino uint64) error {
	n, err := v.openNode(ino)
	if err != nil {
		return err
	}
	cmp, err := v.compareData(n)
	if err != nil || cmp.unchanged {
		return err
	}
	v.lockData(n)
	defer v.unlockData(n)
	dirtied := false
	for _, b := range n.d.Adoptable(n.Layout()) {
		if !n.rec.IsDirty(b) {
			if seen, ok := cmp.same[b]; ok && seen == v.recordedAs(n, b) {
				continue
			}
			v.dirtyBlock(n, b)
			dirtied = true
		}
		// Even a block dirty already: a checkpoint may hold a capture of
		// it older than the data file's bytes.
		v.gens.Bump(n.ino, b)
	}
	if dirtied {
		v.markModified(n.rec)
		if err := v.update(func(txn *meta.Txn, d *meta.Delta) error { return v.persistTxn(txn, d, n) }); err != nil {
			if n.d.Pinned() {
				v.adopted.set(ino, stamp{})
			}
			return fmt.Errorf("cache database: %w", err)
		}
		n.persisted()
	}
	if n.d.Pinned() { // its last Unpin (adopted.forget) may have come meanwhile
		v.adopted.set(ino, cmp.stamp)
	}
	return nil
}

// dataComparison is what compareData found of a pinned file's data file.
type dataComparison struct {
	unchanged bool              // the data file did not change since the last adoption: nothing to do
	stamp     stamp             // its stamp before it was read (the zero stamp: not trusted)
	same      map[uint64]recKey // the clean blocks that held what the record said, and what it said
}

// recKey is what a file's record says of one block: its chunk's hash
// (zero for none) and how much of the block lies within the file (what
// asRecorded compares), so that a file growing or shrinking elsewhere
// changes no other block's key.
type recKey struct {
	hash   snapshot.Hash
	extent uint64
}

// recordedAs returns what n's record says of block b. Caller holds n.mu.
func (v *Volume) recordedAs(n *node, b uint64) recKey {
	k := recKey{extent: uint64(data.Extent(b, n.rec.Size, v.chunkSize))}
	if c, ok := n.rec.Chunk(b); ok {
		k.hash = c.Hash
	}
	return k
}

// cleanBlock is what a pinned file's record said of one of its clean
// blocks when an adoption began (adoptSnapshot).
type cleanBlock struct {
	b     uint64
	key   recKey
	raw   int  // the chunk's length (RawLen), if chunk
	chunk bool // the block has a committed chunk (else it is a hole)
}

// adoptSnapshot notes, under n's lock held shared, what n's record says of
// each clean block of its data file that may still hold it (not a copy of
// the file's origin, which is taken as changed), and returns them with a
// descriptor of the data file of its own (nil, and no blocks, if there is
// nothing to adopt), which the caller closes.
func (v *Volume) adoptSnapshot(n *node) (*os.File, []cleanBlock, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	blocks := n.d.Adoptable(n.Layout())
	if len(blocks) == 0 {
		return nil, nil, nil
	}
	f, err := n.d.DupData()
	if err != nil || f == nil {
		return nil, nil, err
	}
	var clean []cleanBlock
	for _, b := range blocks {
		if n.rec.IsDirty(b) {
			continue
		}
		cb := cleanBlock{b: b, key: v.recordedAs(n, b)}
		if c, ok := n.rec.Chunk(b); ok {
			cb.raw, cb.chunk = int(c.RawLen), true
		} else if n.rec.HasOrigin && b*v.chunkSize < n.rec.OriginSize {
			continue
		}
		clean = append(clean, cb)
	}
	return f, clean, nil
}

// compareData reads the clean blocks of pinned file n's data file, under
// no lock of the engine once adoptSnapshot noted them, and reports which
// held what the record said (asRecorded), unless the data file's stamp
// says it did not change since the last adoption. A trusted stamp is
// taken before the data file is written back, so that a store the reads
// miss moves it (adoptState).
func (v *Volume) compareData(n *node) (dataComparison, error) {
	f, clean, err := v.adoptSnapshot(n)
	if err != nil || f == nil {
		return dataComparison{unchanged: err == nil}, err
	}
	defer f.Close()
	st, sure, err := stampOf(f)
	if err != nil {
		return dataComparison{}, err
	}
	if sure && v.adopted.unchanged(n.ino, st) {
		return dataComparison{unchanged: true}, nil
	}
	if sure {
		// Every store after this one faults into a clean page and
		// moves the stamp taken above (adoptState).
		if err := writeBack(f); err != nil {
			return dataComparison{}, err
		}
	} else {
		st = stamp{}
	}
	cmp := dataComparison{stamp: st, same: map[uint64]recKey{}}
	buf := make([]byte, v.chunkSize)
	for _, cb := range clean {
		same, err := v.asRecorded(f, cb, buf)
		if err != nil {
			return dataComparison{}, err
		}
		if same {
			cmp.same[cb.b] = cb.key
		}
		if v.adoptHook != nil {
			v.adoptHook(n.ino, cb.b)
		}
	}
	return cmp, nil
}

// asRecorded reports whether data file f holds for clean block cb what
// the record said of it: its committed chunk's bytes (their name,
// Repo.HashOf, is the chunk's hash) and zeros up to the block's end within
// the file, or zeros for a block without a chunk. buf holds a block.
func (v *Volume) asRecorded(f *os.File, cb cleanBlock, buf []byte) (bool, error) {
	p := buf[:cb.key.extent]
	k, err := f.ReadAt(p, int64(cb.b*v.chunkSize))
	if err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("cache data file: %w", err)
	}
	clear(p[k:]) // not written yet: a hole
	raw := p[:0]
	if cb.chunk {
		if cb.raw > len(p) {
			return false, nil
		}
		raw = p[:cb.raw]
		if v.repo.HashOf(raw) != cb.key.hash {
			return false, nil
		}
	}
	return commit.IsZero(p[len(raw):]), nil
}

// adoptMapped adopts (AdoptPinned) every pinned file that a writable pin
// or an adoption put in v.adopted, before a checkpoint captures, so that
// the checkpoint includes what shared writable mappings stored before it
// began, also after every descriptor of the file was closed. One that
// fails is logged: the checkpoint goes on without it. Caller holds v.cpMu.
func (v *Volume) adoptMapped(ctx context.Context) {
	for _, ino := range v.adopted.list() {
		err := v.AdoptPinned(ctx, ino)
		if err != nil && !errors.Is(err, ErrInvalid) { // ErrInvalid: no longer open
			v.log.Warn("checkpoint: cannot adopt the data file of a file mapped writable; its mapping's stores since the last adoption are not in this checkpoint", "ino", ino, "err", err)
		}
	}
}

// adoptState keeps the pinned files a writer may change behind the engine:
// those pinned for a writable handle (PinLocal) or adopted since their
// first pin, which every checkpoint adopts (adoptMapped), each with the
// stamp of its data file taken at its last adoption (AdoptPinned), so that
// an adoption of a data file that did not change since reads nothing. A
// stamp is the data file's inode, size, mtime and ctime (statx); every
// write to the data file moves it: the engine's writes, truncations and
// punches, and a store through a shared writable mapping, since the
// kernel updates a file's times when a store faults into a page that is
// not yet writable in the mapping, which every page is after a writeback
// (writeBack, which the adoption runs after taking the stamp, so that any
// store its reads miss faults after the stamp). The stamp is trusted only
// where both hold: on a filesystem known to update times at such faults
// (ext2/3/4, XFS, Btrfs, F2FS; not tmpfs) and with a ctime in an earlier
// second than the coarse clock's at the statx, so that a later update,
// even to a coarse time or on a filesystem that keeps whole seconds (the
// old ext2 driver: same magic number), differs from it (multigrain
// timestamps, Linux 6.13 and later, promise that for any ctime statx read,
// but are not detected here). Otherwise the adoption compares every clean
// block. An entry ends with the file's last Unpin. Its
// mutex is a leaf.
type adoptState struct {
	mu sync.Mutex
	m  map[uint64]stamp // guarded by mu; the zero stamp: compare
}

// stamp is what statx says of a data file that every write to it changes
// (adoptState).
type stamp struct {
	ino, size    uint64
	mtime, ctime unix.StatxTimestamp
}

// unchanged reports whether ino's data file had stamp st at its last
// adoption.
func (a *adoptState) unchanged(ino uint64, st stamp) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	old, ok := a.m[ino]
	return ok && old != stamp{} && old == st
}

// set records st as ino's stamp at its last adoption.
func (a *adoptState) set(ino uint64, st stamp) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[uint64]stamp{}
	}
	a.m[ino] = st
}

// watch adds ino, with no stamp yet, unless a has it.
func (a *adoptState) watch(ino uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[ino]; ok {
		return
	}
	if a.m == nil {
		a.m = map[uint64]stamp{}
	}
	a.m[ino] = stamp{}
}

// list returns the files a holds.
func (a *adoptState) list() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Collect(maps.Keys(a.m))
}

// forget drops what a records of ino (its last pin ended).
func (a *adoptState) forget(ino uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, ino)
}

// timesAtFault are the filesystems (statfs f_type) whose shared writable
// mappings update the file's times when a store faults into a page made
// read-only by writeback (their page_mkwrite calls file_update_time).
var timesAtFault = map[int64]bool{
	unix.EXT4_SUPER_MAGIC:  true, // also ext2 and ext3
	unix.XFS_SUPER_MAGIC:   true,
	unix.BTRFS_SUPER_MAGIC: true,
	unix.F2FS_SUPER_MAGIC:  true,
}

// stampOf returns data file f's stamp and whether a later write to f is
// sure to change it (adoptState).
func stampOf(f *os.File) (stamp, bool, error) {
	fd := int(f.Fd())
	var sx unix.Statx_t
	const mask = unix.STATX_INO | unix.STATX_SIZE | unix.STATX_MTIME | unix.STATX_CTIME
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, mask, &sx); err != nil {
		return stamp{}, false, fmt.Errorf("cache data file: statx: %w", err)
	}
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now); err != nil {
		return stamp{}, false, fmt.Errorf("clock: %w", err)
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return stamp{}, false, fmt.Errorf("cache data file: statfs: %w", err)
	}
	st := stamp{ino: sx.Ino, size: sx.Size, mtime: sx.Mtime, ctime: sx.Ctime}
	old := sx.Ctime.Sec < now.Sec
	return st, old && timesAtFault[fs.Type] && sx.Mask&mask == mask, nil
}

// writeBack writes data file f's dirty pages back and waits for it, which
// makes every page of it read-only in the mappings that share it: the
// next store to each faults (adoptState).
func writeBack(f *os.File) error {
	flags := unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	if err := unix.SyncFileRange(int(f.Fd()), 0, 0, flags); err != nil {
		return fmt.Errorf("cache data file: write back: %w", err)
	}
	return nil
}
