package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/internal/binenc"
	"github.com/agentfs/agentfs/snapshot"
)

// node is the in-memory state of a regular file that is open (or in use by
// the engine). While a node exists its rec is the authoritative record of
// the inode; namespace changes read and install it through mop.
//
// A block of the file is in one of these states:
//   - dirty (rec.Dirty): the data file holds its bytes, newer than any chunk;
//   - present (n.present): clean, and the data file holds the bytes of its
//     committed chunk (the block cache);
//   - remote: it has a committed chunk not present locally;
//   - a hole: none of the above; it reads as zeros.
type node struct {
	v   *Volume
	ino uint64

	mu sync.RWMutex
	// guarded by mu:
	rec           *inode
	memDirty      bool            // rec has size/time changes not yet persisted
	present       map[uint64]bool // clean blocks held by the data file
	presenceDirty bool
	f             *os.File // the data file, opened on first need

	lastEnd atomic.Uint64 // end of the last read, for read-ahead

	opens int // guarded by v.nodesMu
}

func (v *Volume) lookupNode(ino uint64) *node {
	v.nodesMu.Lock()
	defer v.nodesMu.Unlock()
	return v.nodes[ino]
}

func (v *Volume) dataPath(ino uint64) string {
	return filepath.Join(v.dataDir, fmt.Sprintf("%02x", ino&0xff), strconv.FormatUint(ino, 10))
}

// acquireNode returns the node of regular file ino, creating it, and counts
// one more user. Callers must not hold v.mu.
func (v *Volume) acquireNode(ino uint64) (*node, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	v.nodesMu.Lock()
	if n := v.nodes[ino]; n != nil {
		n.opens++
		v.nodesMu.Unlock()
		return n, nil
	}
	v.nodesMu.Unlock()
	n := &node{v: v, ino: ino, present: map[uint64]bool{}}
	err := v.db.View(func(txn *badger.Txn) error {
		r, err := readInode(txn, ino)
		if err != nil {
			return err
		}
		if r.Type != snapshot.TypeFile {
			if r.Type == snapshot.TypeDir {
				return ErrIsDir
			}
			return ErrInvalid
		}
		n.rec = r
		it, err := txn.Get(key64(pPresence, ino))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(b []byte) error {
			for _, idx := range decodePresence(b) {
				n.present[idx] = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	v.nodesMu.Lock()
	defer v.nodesMu.Unlock()
	if old := v.nodes[ino]; old != nil { // cannot happen under v.mu.RLock, but be safe
		old.opens++
		return old, nil
	}
	n.opens = 1
	v.nodes[ino] = n
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
	n.mu.Lock()
	err := v.persistNode(n)
	orphan := n.rec.Nlink == 0
	n.closeFile()
	n.mu.Unlock()
	v.nodesMu.Lock()
	if n.opens == 0 && v.nodes[n.ino] == n {
		delete(v.nodes, n.ino)
	} else {
		orphan = false
	}
	v.nodesMu.Unlock()
	if orphan {
		v.mu.Lock()
		derr := v.db.Update(func(txn *badger.Txn) error {
			for _, k := range [][]byte{key64(pInode, n.ino), key64(pOrphan, n.ino), key64(pDirtyF, n.ino), key64(pPresence, n.ino)} {
				if err := txn.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		v.mu.Unlock()
		v.dropData(n.ino)
		err = errors.Join(err, derr)
	}
	return err
}

func (n *node) closeFile() {
	if n.f != nil {
		_ = n.f.Close()
		n.f = nil
	}
}

// file returns the data file, opening (and with create, creating) it.
// Caller holds n.mu (read lock is enough when create is false and the file
// is already open; file upgrades are done under the write lock).
func (n *node) file(create bool) (*os.File, error) {
	if n.f != nil {
		return n.f, nil
	}
	p := n.v.dataPath(n.ino)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(p, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) && create {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, fmt.Errorf("cache data dir: %w", err)
		}
		f, err = os.OpenFile(p, flags, 0o600)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cache data file: %w", err)
	}
	n.f = f
	return f, nil
}

// persistNode writes n's in-memory changes to the database. Caller holds
// n.mu.
func (v *Volume) persistNode(n *node) error {
	if !n.memDirty && !n.presenceDirty {
		return nil
	}
	err := v.db.Update(func(txn *badger.Txn) error {
		if n.memDirty {
			if err := v.writeFileRec(txn, n.rec, true); err != nil {
				return err
			}
		}
		if n.presenceDirty {
			k := key64(pPresence, n.ino)
			if len(n.present) == 0 {
				return txn.Delete(k)
			}
			return txn.Set(k, encodePresence(n.present))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("persist inode %d: %w", n.ino, err)
	}
	n.memDirty, n.presenceDirty = false, false
	return nil
}

// writeFileRec stores file record r with its dirty-file index and, if mark,
// marks the tree holding its entry.
func (v *Volume) writeFileRec(txn *badger.Txn, r *inode, mark bool) error {
	if r.Nlink == 0 {
		if _, err := txn.Get(key64(pInode, r.Ino)); errors.Is(err, badger.ErrKeyNotFound) {
			return nil // deleted meanwhile
		}
	}
	if err := txn.Set(key64(pInode, r.Ino), encodeInode(r)); err != nil {
		return err
	}
	var err error
	if len(r.Dirty) > 0 && r.Nlink > 0 {
		err = txn.Set(key64(pDirtyF, r.Ino), nil)
	} else {
		err = txn.Delete(key64(pDirtyF, r.Ino))
	}
	if err != nil || !mark || r.Nlink == 0 {
		return err
	}
	dir := r.Parent
	if r.LinkID != 0 {
		dir = linkTableDir
	} else if dir == 0 {
		return nil
	}
	return txn.Set(key64(pTreeMark, dir), put64(v.seq.Add(1)))
}

func encodePresence(p map[uint64]bool) []byte {
	idx := make([]uint64, 0, len(p))
	for b := range p {
		idx = append(idx, b)
	}
	slices.Sort(idx)
	var e binenc.Encoder
	for _, b := range idx {
		e.Uvarint(b)
	}
	return e.B
}

func decodePresence(b []byte) []uint64 {
	d := binenc.Decoder{B: b}
	var out []uint64
	for len(d.B) > 0 && d.Err() == nil {
		out = append(out, d.Uvarint())
	}
	return out
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
	a := n.rec.attr()
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
// the block cache); a chunk that cannot be fetched or verified is ErrIO.
func (v *Volume) Read(ctx context.Context, ino uint64, buf []byte, off uint64) (int, error) {
	n, err := v.openNode(ino)
	if err != nil {
		return 0, err
	}
	opened := false
	for {
		n.mu.RLock()
		size := n.rec.Size
		if off >= size || len(buf) == 0 {
			n.mu.RUnlock()
			return 0, nil
		}
		end := min(off+uint64(len(buf)), size)
		first, last := v.blockRange(off, end)
		need, ok := uint64(0), false
		for b := first; b <= last; b++ {
			if v.blockRemote(n, b) {
				need, ok = b, true
				break
			}
		}
		if ok {
			n.mu.RUnlock()
			if err := v.fetchBlock(ctx, n, need); err != nil {
				return 0, err
			}
			continue
		}
		if n.f == nil && !opened && (len(n.present) > 0 || len(n.rec.Dirty) > 0) {
			n.mu.RUnlock()
			n.mu.Lock()
			_, err := n.file(false)
			n.mu.Unlock()
			if err != nil {
				return 0, err
			}
			opened = true
			continue
		}
		cnt := int(end - off)
		err := n.readLocal(buf[:cnt], off)
		n.mu.RUnlock()
		if err != nil {
			return 0, err
		}
		seq := n.lastEnd.Swap(end) == off
		v.blocks.touch(ino)
		if seq && v.opts.ReadAhead > 0 {
			v.readAheadFrom(n, last+1)
		}
		return cnt, nil
	}
}

// blockRemote reports whether block b must be fetched before use. Caller
// holds n.mu.
func (v *Volume) blockRemote(n *node, b uint64) bool {
	if n.present[b] || n.rec.isDirty(b) {
		return false
	}
	_, has := n.rec.chunk(b)
	return has
}

// readLocal reads p at off from the data file; bytes the file lacks read as
// zeros. Caller holds n.mu (read or write).
func (n *node) readLocal(p []byte, off uint64) error {
	if n.f == nil {
		clear(p)
		return nil
	}
	got, err := n.f.ReadAt(p, int64(off))
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cache data file: %w", err)
	}
	clear(p[got:])
	return nil
}

// fetchBlock makes block b of n present: it fetches its chunk (once for
// concurrent callers) and installs it in the data file unless the block
// changed meanwhile.
func (v *Volume) fetchBlock(ctx context.Context, n *node, b uint64) error {
	n.mu.RLock()
	ref, has := n.rec.chunk(b)
	done := n.present[b] || n.rec.isDirty(b)
	n.mu.RUnlock()
	if done || !has {
		return nil
	}
	data, err := v.fetchChunk(ctx, ref)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	cur, has := n.rec.chunk(b)
	if n.present[b] || n.rec.isDirty(b) || !has || cur != ref {
		return nil
	}
	f, err := n.file(true)
	if err != nil {
		return err
	}
	// The block's extent in the file: bytes past the chunk read as zeros.
	start := b * v.chunkSize
	extent := min(v.chunkSize, n.rec.Size-start)
	buf := data
	if uint64(len(buf)) > extent {
		buf = buf[:extent]
	} else if uint64(len(buf)) < extent {
		buf = append(slices.Clip(buf), make([]byte, extent-uint64(len(buf)))...)
	}
	if _, err := f.WriteAt(buf, int64(start)); err != nil {
		return fmt.Errorf("cache data file: %w", err)
	}
	n.present[b] = true
	n.presenceDirty = true
	v.blocks.add(n.ino, int64(len(buf)))
	return nil
}

// fetchChunk reads a chunk from the store, once for concurrent callers.
func (v *Volume) fetchChunk(ctx context.Context, ref snapshot.BlobRef) ([]byte, error) {
	ch := v.fetches.DoChan("chunk:"+ref.String(), func() (any, error) {
		return v.repo.ReadBlob(context.WithoutCancel(ctx), ref)
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			v.log.Error("reading chunk failed", "chunk", ref.Hash.String(), "pack", ref.Pack.String(), "err", res.Err)
			return nil, fmt.Errorf("%w: %w", ErrIO, res.Err)
		}
		return res.Val.([]byte), nil
	}
}

// readAheadFrom fetches up to ReadAhead remote blocks from b on, in the
// background, without waiting for a free slot.
func (v *Volume) readAheadFrom(n *node, b uint64) {
	n.mu.RLock()
	var todo []uint64
	for i := b; i < b+uint64(v.opts.ReadAhead) && i*v.chunkSize < n.rec.Size; i++ {
		if v.blockRemote(n, i) {
			todo = append(todo, i)
		}
	}
	n.mu.RUnlock()
	for _, blk := range todo {
		select {
		case v.readAhead <- struct{}{}:
		default:
			return
		}
		if _, err := v.acquireNode(n.ino); err != nil {
			<-v.readAhead
			return
		}
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			defer func() { <-v.readAhead }()
			defer func() { _ = v.releaseNode(n) }()
			_ = v.fetchBlock(v.ctx, n, blk)
		}()
	}
}

// Write writes data at offset off of open file ino. It returns when the
// bytes are in the local data file (not yet durable: see Fsync).
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
	first, last := v.blockRange(off, end)
	for {
		n.mu.Lock()
		// A partial write to a remote block needs its old bytes first.
		need, ok := uint64(0), false
		for b := first; b <= last; b++ {
			if v.blockRemote(n, b) && !v.covers(off, end, b, n.rec.Size) {
				need, ok = b, true
				break
			}
		}
		if ok {
			n.mu.Unlock()
			if err := v.fetchBlock(ctx, n, need); err != nil {
				return 0, err
			}
			continue
		}
		err := v.writeLocked(n, data, off, first, last)
		n.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return len(data), nil
	}
}

// covers reports whether [off, end) overwrites every byte of block b that
// the file (of size size) holds.
func (v *Volume) covers(off, end, b, size uint64) bool {
	start := b * v.chunkSize
	stop := min(start+v.chunkSize, max(size, start))
	return off <= start && end >= stop
}

// writeLocked marks blocks dirty (persisting the mark before any byte
// lands, so a crash never leaves unrecorded local bytes) and writes. Caller
// holds n.mu.
func (v *Volume) writeLocked(n *node, data []byte, off, first, last uint64) error {
	var fresh []uint64
	for b := first; b <= last; b++ {
		if !n.rec.isDirty(b) {
			fresh = append(fresh, b)
		}
	}
	now := v.now().UnixNano()
	if len(fresh) > 0 {
		r := n.rec.clone()
		for _, b := range fresh {
			r.addDirty(b)
		}
		r.Size = max(r.Size, off+uint64(len(data)))
		r.Mtime, r.Ctime = now, now
		if err := v.db.Update(func(txn *badger.Txn) error { return v.writeFileRec(txn, r, true) }); err != nil {
			return fmt.Errorf("cache database: %w", err)
		}
		n.rec = r
		n.memDirty = false
		for _, b := range fresh {
			if n.present[b] {
				delete(n.present, b)
				n.presenceDirty = true
				v.blocks.add(n.ino, -int64(min(v.chunkSize, r.Size-b*v.chunkSize)))
			}
		}
	}
	f, err := n.file(true)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, int64(off)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return err
		}
		return fmt.Errorf("cache data file: %w", err)
	}
	for b := first; b <= last; b++ {
		v.gens.bump(blockKey{n.ino, b})
	}
	if e := off + uint64(len(data)); e > n.rec.Size {
		n.rec.Size = e
		n.memDirty = true
	}
	if n.rec.Mtime != now {
		n.rec.Mtime, n.rec.Ctime = now, now
		n.memDirty = true
	}
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

func (v *Volume) truncateNode(ctx context.Context, n *node, size uint64) error {
	for {
		n.mu.Lock()
		old := n.rec.Size
		bs := v.chunkSize
		if size < old && size%bs != 0 && v.blockRemote(n, size/bs) {
			n.mu.Unlock()
			if err := v.fetchBlock(ctx, n, size/bs); err != nil {
				return err
			}
			continue
		}
		r := n.rec.clone()
		if size < old {
			keep := (size + bs - 1) / bs // blocks [0, keep) survive
			r.dropChunksFrom(keep)
			if size%bs != 0 {
				r.addDirty(size / bs) // its tail becomes zeros
			}
			for b := range n.present {
				if b >= keep || (size%bs != 0 && b == size/bs) {
					delete(n.present, b)
					n.presenceDirty = true
					v.blocks.add(n.ino, -int64(min(bs, old-b*bs)))
				}
			}
			for _, b := range n.rec.Dirty {
				if b >= keep {
					v.gens.forget(blockKey{n.ino, b})
				}
			}
			if size%bs != 0 {
				v.gens.bump(blockKey{n.ino, size / bs})
			}
			f, err := n.file(false)
			if err != nil {
				n.mu.Unlock()
				return err
			}
			if f != nil {
				if err := f.Truncate(int64(size)); err != nil {
					n.mu.Unlock()
					return fmt.Errorf("cache data file: %w", err)
				}
			}
		}
		now := v.now().UnixNano()
		r.Size = size
		r.Mtime, r.Ctime = now, now
		err := v.db.Update(func(txn *badger.Txn) error {
			if err := v.writeFileRec(txn, r, true); err != nil {
				return err
			}
			if n.presenceDirty {
				n.presenceDirty = false
				return txn.Set(key64(pPresence, n.ino), encodePresence(n.present))
			}
			return nil
		})
		if err == nil {
			n.rec = r
			n.memDirty = false
		}
		n.mu.Unlock()
		if err != nil {
			return fmt.Errorf("cache database: %w", err)
		}
		return nil
	}
}

// Flush persists the file's in-memory attribute changes (close(2)).
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
		if err == nil && n.f != nil {
			if serr := n.f.Sync(); serr != nil {
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

// dropData removes the data file of a deleted inode.
func (v *Volume) dropData(ino uint64) {
	_ = os.Remove(v.dataPath(ino))
	v.blocks.drop(ino)
}
