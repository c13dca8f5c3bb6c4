package cache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// node is the in-memory state of a regular file that is open (or in use by
// the engine). While a node exists its rec is the authoritative record of
// the inode; namespace changes read and install it through ns.Change
// (nsFile, namespace.go).
//
// A block of the file is in one of these states (data.Source):
//   - dirty (rec.Dirty): the local bytes are newer than any chunk;
//   - present (n.d): clean, and the local bytes are those of its
//     committed chunk (the block cache), or a copy of its origin's;
//   - remote: it has a committed chunk not present locally;
//   - lower: it reads through to the file's origin in the lower layer;
//   - a hole: none of the above; it reads as zeros.
//
// The local bytes, the present blocks and the origin file are n.d's (a
// data.File, with its invariants); the record says which blocks are dirty
// or committed. Local bytes live in a data file of the inode's own, or,
// for an inline file (rec.Inline: small, only block 0), in memory and the
// database. Invariant: data-file bytes outside dirty and present blocks,
// and past the file's size, are zeros (holes): truncation cuts the file,
// eviction and SwitchTo punch blocks out. Reads of holes rely on it.
type node struct {
	v   *Volume
	ino uint64

	mu sync.RWMutex
	// guarded by mu (n.d too, but for its atomic NoteRead):
	rec      *meta.Inode
	memDirty bool       // rec has changes not yet persisted
	d        *data.File // the local data state

	opens int // guarded by v.nodesMu
}

// A file's record and data records as the data side reads and writes
// them: meta's adapters, which implement data's interfaces.
var (
	_ data.Layout     = meta.FileLayout{}
	_ data.RecordsTxn = meta.FileRecords{}
)

// A node is the data side's handle of an open file (data.Held): its lock
// (n.mu), its record as a Layout, its data state and a hold on it.

// Layout returns n's record as n.d reads it. Caller holds n.mu.
func (n *node) Layout() data.Layout { return meta.FileLayout{R: n.rec} }

// Data returns n's data state. Caller holds n.mu.
func (n *node) Data() *data.File { return n.d }

// Lock, Unlock, RLock and RUnlock take and release n.mu.
func (n *node) Lock()    { n.mu.Lock() }
func (n *node) Unlock()  { n.mu.Unlock() }
func (n *node) RLock()   { n.mu.RLock() }
func (n *node) RUnlock() { n.mu.RUnlock() }

// Hold counts one more user of n (see holdNode), unless its last user is
// releasing it.
func (n *node) Hold() bool {
	m := n.v.holdNode(n.ino)
	if m != nil && m != n {
		_ = n.v.releaseNode(m)
	}
	return m == n
}

// Release ends a Hold (releaseNode).
func (n *node) Release() { _ = n.v.releaseNode(n) }

// holdNode returns the node of inode ino, counting one more user (to be
// released with releaseNode), or nil if the inode has none or its last
// user is releasing it.
func (v *Volume) holdNode(ino uint64) *node {
	v.nodesMu.Lock()
	defer v.nodesMu.Unlock()
	n := v.nodes[ino]
	if n == nil || n.opens == 0 {
		return nil
	}
	n.opens++
	return n
}

func (v *Volume) lookupNode(ino uint64) *node {
	v.nodesMu.Lock()
	defer v.nodesMu.Unlock()
	return v.nodes[ino]
}

// openCount returns how many users hold inode ino open (0 when it has no
// node).
func (v *Volume) openCount(ino uint64) int {
	v.nodesMu.Lock()
	defer v.nodesMu.Unlock()
	if n := v.nodes[ino]; n != nil {
		return n.opens
	}
	return 0
}

// loadNode reads the state of regular file ino from the database into a
// new node that is not registered.
func (v *Volume) loadNode(txn *meta.Txn, ino uint64) (*node, error) {
	r, err := ns.ReadInode(txn, ino)
	if err != nil {
		return nil, err
	}
	switch r.Type {
	case snapshot.TypeFile:
	case snapshot.TypeDir:
		return nil, ErrIsDir
	default:
		return nil, ErrInvalid
	}
	d, err := v.data.LoadFile(ino, meta.FileLayout{R: r}, meta.FileRecords{Txn: txn})
	if err != nil {
		return nil, ioErr(err)
	}
	return &node{v: v, ino: ino, rec: r, d: d}, nil
}

// acquireNode returns the node of regular file ino, creating it, and counts
// one more user. Callers must not hold v.mu.
//
// A file not open yet is loaded (loadOpen) by one caller alone, which
// registers its load in v.loading meanwhile; the others wait for it and
// look again (a failed load leaves no node: they load it themselves). Two
// loads of one file would each refresh it from its origin, and the later
// one would drop, data file and block-cache count, what the node of the
// earlier one had made present meanwhile (TestConcurrentFirstOpen).
func (v *Volume) acquireNode(ino uint64) (*node, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	v.nodesMu.Lock()
	for v.loading[ino] != nil {
		wait := v.loading[ino]
		v.nodesMu.Unlock()
		<-wait
		v.nodesMu.Lock()
	}
	if n := v.nodes[ino]; n != nil {
		n.opens++
		v.nodesMu.Unlock()
		return n, nil
	}
	done := make(chan struct{})
	v.loading[ino] = done
	v.nodesMu.Unlock()
	n, err := v.loadOpen(ino)
	v.nodesMu.Lock()
	delete(v.loading, ino)
	if err == nil {
		n.opens = 1
		v.nodes[ino] = n // no other node of ino: only its load installs one
	}
	v.nodesMu.Unlock()
	close(done)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// loadOpen loads regular file ino for its first open: its records
// (loadNode), refreshed from its origin (refreshOrigin). Caller holds v.mu
// shared and ino's entry in v.loading.
func (v *Volume) loadOpen(ino uint64) (*node, error) {
	var n *node
	err := v.db.View(func(txn *meta.Txn) error {
		var err error
		n, err = v.loadNode(txn, ino)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := v.refreshOrigin(context.Background(), n); err != nil {
		return nil, err
	}
	return n, nil
}

// releaseNode drops one user of n; the last one persists its state and
// frees it. An orphan (unlinked while open) is deleted with its data.
func (v *Volume) releaseNode(n *node) error {
	v.nodesMu.Lock()
	n.opens--
	last := n.opens == 0
	v.nodesMu.Unlock()
	if !last {
		return nil
	}
	// The last release persists the node's record and drops the node
	// under v.mu (read), so that a namespace change (v.mu exclusive) sees
	// either the open node or the persisted record, never the node gone
	// and the record not yet written.
	v.mu.RLock()
	n.mu.Lock()
	err := v.persistNode(n)
	orphan, dirty := n.rec.Nlink == 0, n.rec.Dirty
	n.closeFile()
	n.mu.Unlock()
	v.nodesMu.Lock()
	if n.opens == 0 && v.nodes[n.ino] == n {
		delete(v.nodes, n.ino)
	} else {
		orphan = false
	}
	v.nodesMu.Unlock()
	v.mu.RUnlock()
	if orphan {
		v.mu.Lock()
		derr := v.update(func(txn *meta.Txn, d *meta.Delta) error {
			for _, p := range []byte{meta.PrefixInode, meta.PrefixOrphan, meta.PrefixPresence, meta.PrefixInline} {
				if err := txn.Delete(meta.Key64(p, n.ino)); err != nil {
					return err
				}
			}
			return meta.SetFileDirty(txn, d, n.ino, false)
		})
		v.mu.Unlock()
		v.forgetGens(n.ino, dirty)
		v.dropData(n.ino)
		err = errors.Join(err, derr)
	}
	return err
}

// closeFile closes n's data file and origin file. Caller holds n.mu
// exclusively.
func (n *node) closeFile() { n.d.Close() }

// file returns the data file, opening (and with create, creating) it; nil
// if it does not exist and create is false. Caller holds n.mu exclusively.
func (n *node) file(create bool) (*os.File, error) { return n.d.OpenData(create) }

// persistTxn writes n's in-memory changes in txn: the record (marking the
// tree that holds its entry), and n.d's inline bytes and presence. Caller
// holds n.mu and calls persisted after the transaction commits.
func (v *Volume) persistTxn(txn *meta.Txn, d *meta.Delta, n *node) error {
	if n.rec.Nlink == 0 {
		if _, err := txn.Get(meta.Key64(meta.PrefixInode, n.ino)); errors.Is(err, badger.ErrKeyNotFound) {
			return nil // deleted meanwhile: nothing of it is kept
		}
	}
	if n.memDirty {
		if err := v.writeFileRec(txn, d, n.rec, true); err != nil {
			return err
		}
	}
	return n.d.Persist(n.Layout(), meta.FileRecords{Txn: txn})
}

func (n *node) persisted() {
	n.memDirty = false
	n.d.Persisted()
}

// persistNode writes n's in-memory changes to the database. Caller holds
// n.mu exclusively.
func (v *Volume) persistNode(n *node) error {
	if !n.memDirty && !n.d.PresenceDirty() && !n.d.InlineDirty() {
		return nil
	}
	if err := v.update(func(txn *meta.Txn, d *meta.Delta) error { return v.persistTxn(txn, d, n) }); err != nil {
		return fmt.Errorf("persist inode %d: %w", n.ino, err)
	}
	n.persisted()
	return nil
}

// writeFileRec stores file record r with its dirty-file index and, if mark,
// marks the tree holding its entry.
func (v *Volume) writeFileRec(txn *meta.Txn, d *meta.Delta, r *meta.Inode, mark bool) error {
	if r.Nlink == 0 {
		if _, err := txn.Get(meta.Key64(meta.PrefixInode, r.Ino)); errors.Is(err, badger.ErrKeyNotFound) {
			return nil // deleted meanwhile
		}
	}
	if err := txn.Set(meta.Key64(meta.PrefixInode, r.Ino), meta.EncodeInode(r)); err != nil {
		return err
	}
	if err := meta.SetFileDirty(txn, d, r.Ino, len(r.Dirty) > 0 && r.Nlink > 0); err != nil {
		return err
	}
	if !mark || r.Nlink == 0 {
		return nil
	}
	dir := r.Parent
	if r.LinkID != 0 {
		dir = meta.LinkTableDir
	} else if dir == 0 {
		return nil
	}
	return v.setMark(txn, d, dir)
}

// Open opens regular file ino for I/O; every Open is paired with one
// Release. With truncate, the file is emptied (O_TRUNC).
func (v *Volume) Open(ctx context.Context, ino uint64, truncate bool) (Attr, error) {
	n, err := v.acquireNode(ino)
	if err != nil {
		return Attr{}, err
	}
	if truncate {
		if v.opts.ReadOnly {
			_ = v.releaseNode(n)
			return Attr{}, ErrReadOnly
		}
		if err := v.truncateNode(ctx, n, 0); err != nil {
			_ = v.releaseNode(n)
			return Attr{}, err
		}
	}
	n.mu.RLock()
	a := ns.AttrOf(n.rec)
	n.mu.RUnlock()
	return a, nil
}

// Release ends one Open of ino.
func (v *Volume) Release(ctx context.Context, ino uint64) error {
	n := v.lookupNode(ino)
	if n == nil {
		return fmt.Errorf("release of inode %d that is not open: %w", ino, ErrInvalid)
	}
	return v.releaseNode(n)
}

// openNode returns the node of an open file.
func (v *Volume) openNode(ino uint64) (*node, error) {
	n := v.lookupNode(ino)
	if n == nil {
		return nil, fmt.Errorf("I/O on inode %d that is not open: %w", ino, ErrInvalid)
	}
	return n, nil
}

// blockRange returns the first and last block touched by [off, end).
func (v *Volume) blockRange(off, end uint64) (uint64, uint64) {
	return off / v.chunkSize, (end - 1) / v.chunkSize
}

// Read reads into buf from offset off of open file ino. It returns fewer
// bytes only at the end of the file. Remote chunks are fetched (and kept in
// the block cache: data.Fetcher.Read); a chunk that cannot be fetched or
// verified is ErrIO. A read that begins where the last one ended starts
// read-ahead after it (Options.ReadAhead chunks, also data.Fetcher.Read's).
func (v *Volume) Read(ctx context.Context, ino uint64, buf []byte, off uint64) (int, error) {
	n, err := v.openNode(ino)
	if err != nil {
		return 0, err
	}
	cnt, err := v.fetch.Read(ctx, n, buf, off)
	return cnt, ioErr(err)
}

// readLocal reads p at off from the local bytes; bytes not held read as
// zeros. Caller holds n.mu (read or write).
func (n *node) readLocal(p []byte, off uint64) error {
	return n.d.ReadLocal(n.Layout(), p, off)
}

// ioErr makes a failure of the data side's sources ErrIO: a chunk the
// store failed to supply (data.ChunkError, logged by the fetcher), the
// origin file failing to open or read (data.ErrOrigin, naming the origin),
// a data file that does not match its file (data.ErrDataFile), or an
// inline file's missing bytes (data.ErrInlineMissing).
func ioErr(err error) error {
	if ce := (*data.ChunkError)(nil); errors.As(err, &ce) {
		return fmt.Errorf("%w: %w", ErrIO, ce.Err)
	}
	if errors.Is(err, data.ErrOrigin) || errors.Is(err, data.ErrDataFile) || errors.Is(err, data.ErrInlineMissing) {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	return err
}

// Write writes data at offset off of open file ino. It returns when the
// bytes are in the local cache (not yet durable: see Fsync).
func (v *Volume) Write(ctx context.Context, ino uint64, data []byte, off uint64) (int, error) {
	if v.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if len(data) == 0 {
		return 0, nil
	}
	end := off + uint64(len(data))
	if end > MaxFileSize || end < off {
		return 0, ErrFileTooBig
	}
	n, err := v.openNode(ino)
	if err != nil {
		return 0, err
	}
	// A partial write to a remote block needs its old bytes first.
	lk := dataLock{v, n}
	if err := ioErr(v.fetch.LockToWrite(ctx, n, lk, off, end)); err != nil {
		return 0, err
	}
	first, last := v.blockRange(off, end)
	err = v.writeLocked(n, data, off, first, last)
	lk.Unlock()
	if err != nil {
		return 0, err
	}
	return len(data), nil
}

// dirtyBlock makes block b dirty in n.rec; a clean cached copy stops
// counting as cache. Caller holds n.mu exclusively, and Volume.mu (shared
// through lockData, or exclusively), so that no checkpoint freezes between
// the mark and the bytes; and persists.
func (v *Volume) dirtyBlock(n *node, b uint64) {
	n.rec.AddDirty(b)
	n.d.Unpresent(b, n.rec.Size)
	n.memDirty = true
}

// writeLocked writes data at off. Caller holds lockData(n) (Volume.mu
// shared, n.mu exclusively) and has made every partially written remote
// block present.
//
// Inline files change in memory only (persisted with their record at
// close, fsync or checkpoint). For data files, a block's dirty mark is
// in Badger (flushed through the write-behind layer) before the first
// byte a write lands in it. Blocks made dirty elsewhere (AdoptPinned, a
// truncation) are persisted without that flush, so a write into one of
// them soon after can reach the data file before its mark reaches Badger;
// after a crash then, recovery punches those bytes (recoverDataFiles), which
// loses only data no fsync had made durable.
func (v *Volume) writeLocked(n *node, data []byte, off, first, last uint64) error {
	end := off + uint64(len(data))
	if n.rec.Inline && end > v.inlineMax {
		if err := v.migrate(n); err != nil {
			return err
		}
	}
	if v.markModified(n.rec) {
		n.memDirty = true
	}
	now := v.now().UnixNano()
	if n.rec.Inline {
		if !n.rec.IsDirty(0) {
			v.dirtyBlock(n, 0)
		}
	} else {
		fresh := false
		for b := first; b <= last; b++ {
			if !n.rec.IsDirty(b) {
				v.dirtyBlock(n, b)
				fresh = true
			}
		}
		if fresh {
			n.d.Grow(n.rec.Size, end)
			n.rec.Size = max(n.rec.Size, end)
			n.rec.Mtime, n.rec.Ctime = now, now
			if err := v.update(func(txn *meta.Txn, d *meta.Delta) error { return v.persistTxn(txn, d, n) }); err != nil {
				return fmt.Errorf("cache database: %w", err)
			}
			// In Badger, not just committed: reads of holes rely on
			// zeros in the data file, so no byte may land that a crash
			// could leave unrecorded.
			if err := v.db.Flush(); err != nil {
				return err
			}
			n.persisted()
		}
	}
	if err := n.d.Write(n.Layout(), data, off); err != nil {
		return err
	}
	for b := first; b <= last; b++ {
		v.gens.Bump(n.ino, b)
	}
	if end > n.rec.Size {
		n.d.Grow(n.rec.Size, end)
		n.rec.Size = end
		n.memDirty = true
	}
	if n.rec.Mtime != now {
		n.rec.Mtime, n.rec.Ctime = now, now
		n.memDirty = true
	}
	return nil
}

// migrate moves an inline file's bytes to a data file, for good. The data
// file is complete before the record says so. Caller holds n.mu
// exclusively.
func (v *Volume) migrate(n *node) error {
	if err := n.d.MoveInline(); err != nil {
		return err
	}
	n.rec.Inline = false
	n.memDirty = true
	err := v.update(func(txn *meta.Txn, d *meta.Delta) error {
		if err := v.persistTxn(txn, d, n); err != nil {
			return err
		}
		return txn.Delete(meta.Key64(meta.PrefixInline, n.ino))
	})
	if err != nil {
		n.rec.Inline = true
		return fmt.Errorf("cache database: %w", err)
	}
	n.persisted()
	n.d.SetInline(nil, false)
	return nil
}

// truncate sets the size of file ino (SetAttr with a size).
func (v *Volume) truncate(ctx context.Context, ino uint64, size uint64) error {
	if v.opts.ReadOnly {
		return ErrReadOnly
	}
	if size > MaxFileSize {
		return ErrFileTooBig
	}
	n, err := v.acquireNode(ino)
	if err != nil {
		return err
	}
	defer func() { _ = v.releaseNode(n) }()
	return v.truncateNode(ctx, n, size)
}

// truncateNode sets the size of open file n, once the block the new size
// cuts in two is local (data.Fetcher.LockToCut).
func (v *Volume) truncateNode(ctx context.Context, n *node, size uint64) error {
	lk := dataLock{v, n}
	if err := ioErr(v.fetch.LockToCut(ctx, n, lk, size)); err != nil {
		return err
	}
	err := v.truncateLocked(n, size)
	lk.Unlock()
	return err
}

// lockData takes the locks under which an open file's blocks are dirtied
// and its size changes outside a namespace change: the namespace lock
// shared, then the file's. A checkpoint's freeze holds the namespace lock
// exclusively, so no block is dirtied between its capture and the trees
// it builds from the files' records (the cut no write crosses; without
// it, a block dirtied meanwhile failed the checkpoint as not captured).
// unlockData undoes it.
func (v *Volume) lockData(n *node) {
	v.mu.RLock()
	n.mu.Lock()
}

// unlockData releases what lockData took.
func (v *Volume) unlockData(n *node) {
	n.mu.Unlock()
	v.mu.RUnlock()
}

// dataLock is lockData and unlockData of one file as a sync.Locker, the
// lock a data.Fetcher takes before a write or a truncation.
type dataLock struct {
	v *Volume
	n *node
}

func (l dataLock) Lock()   { l.v.lockData(l.n) }
func (l dataLock) Unlock() { l.v.unlockData(l.n) }

// truncateLocked sets the size and persists. Caller holds lockData(n)
// (Volume.mu shared, n.mu exclusively) and has made a remote boundary
// block present.
func (v *Volume) truncateLocked(n *node, size uint64) error {
	bs := v.chunkSize
	if n.rec.Inline && size > v.inlineMax {
		if err := v.migrate(n); err != nil {
			return err
		}
	}
	v.markModified(n.rec)
	n.rec.OriginSize = min(n.rec.OriginSize, size) // the host's bytes past it are gone
	if old := n.rec.Size; size < old {
		keep := (size + bs - 1) / bs // blocks [0, keep) survive
		for _, b := range n.rec.Dirty {
			if b >= keep {
				v.gens.Forget(n.ino, b)
			}
		}
		if err := n.d.Cut(n.Layout(), size); err != nil {
			return err
		}
		n.rec.DropChunksFrom(keep)
		if size%bs != 0 {
			b := size / bs // its tail becomes zeros
			if !n.rec.IsDirty(b) {
				v.dirtyBlock(n, b)
			}
			v.gens.Bump(n.ino, b)
		}
	}
	now := v.now().UnixNano()
	n.d.Grow(n.rec.Size, size)
	n.rec.Size = size
	n.rec.Mtime, n.rec.Ctime = now, now
	n.memDirty = true
	if err := n.d.GrowPinned(n.Layout()); err != nil {
		return err
	}
	if err := v.update(func(txn *meta.Txn, d *meta.Delta) error { return v.persistTxn(txn, d, n) }); err != nil {
		return fmt.Errorf("cache database: %w", err)
	}
	n.persisted()
	return nil
}

// Flush persists the file's in-memory changes (close(2)).
func (v *Volume) Flush(ctx context.Context, ino uint64) error {
	n := v.lookupNode(ino)
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return v.persistNode(n)
}

// Fsync makes the file's data and attributes survive a crash of this
// process or machine (local durability; Sync reaches the blob store).
func (v *Volume) Fsync(ctx context.Context, ino uint64, dataOnly bool) error {
	n := v.lookupNode(ino)
	if n != nil {
		n.mu.Lock()
		err := v.persistNode(n)
		if f := n.d.DataFile(); err == nil && f != nil {
			if serr := f.Sync(); serr != nil {
				err = fmt.Errorf("cache data file: %w", serr)
			}
		}
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
	if err := v.db.Sync(); err != nil {
		return fmt.Errorf("cache database: %w", err)
	}
	return nil
}

// forgetGens forgets the write generations of a deleted file's dirty
// blocks: nothing will upload them.
func (v *Volume) forgetGens(ino uint64, dirty []uint64) {
	for _, b := range dirty {
		v.gens.Forget(ino, b)
	}
}

// dropData forgets the clean blocks of a deleted inode and removes its data
// file once the deletion (committed before the call) is in the cache
// database (data.Sources.DropDeleted).
func (v *Volume) dropData(ino uint64) { v.data.DropDeleted(ino, v.db.AfterFlush) }
