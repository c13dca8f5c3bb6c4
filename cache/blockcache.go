package cache

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sys/unix"
)

// blockCache accounts for the clean chunks kept in data files and evicts
// the least recently used files' clean blocks when their total exceeds
// Options.CacheSize. Dirty blocks are never evicted (they are not counted
// here; Status reports them as bytes waiting to upload).
type blockCache struct {
	v    *Volume
	wake chan struct{}

	// evictMu serializes evictions (the evictor's and a reader's, see
	// Volume.Read); it is taken before Volume.mu and node.mu.
	evictMu sync.Mutex

	mu      sync.Mutex
	total   int64                  // guarded by mu
	entries map[uint64]*cacheEntry // guarded by mu
	clock   uint64                 // guarded by mu
}

type cacheEntry struct {
	bytes int64
	used  uint64 // clock value of the last access
}

func newBlockCache(v *Volume) *blockCache {
	return &blockCache{v: v, wake: make(chan struct{}, 1), entries: map[uint64]*cacheEntry{}}
}

// load rebuilds the accounting from the presence records.
func (c *blockCache) load() error {
	bs := int64(c.v.chunkSize)
	return c.v.db.View(func(txn *ktxn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pPresence}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			ino := u64(it.Item().Key()[1:])
			err := it.Item().Value(func(b []byte) error {
				n := int64(len(decodePresence(b))) * bs
				c.entries[ino] = &cacheEntry{bytes: n}
				c.total += n
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// add changes ino's cached bytes by delta and wakes the evictor when the
// cache is over its limit.
func (c *blockCache) add(ino uint64, delta int64) {
	c.mu.Lock()
	e := c.entries[ino]
	if e == nil {
		e = &cacheEntry{}
		c.entries[ino] = e
	}
	e.bytes += delta
	c.clock++
	e.used = c.clock
	c.total += delta
	over := c.total > c.v.opts.CacheSize
	if e.bytes <= 0 {
		c.total -= e.bytes
		delete(c.entries, ino)
	}
	c.mu.Unlock()
	if over {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// touch records an access to ino.
func (c *blockCache) touch(ino uint64) {
	c.mu.Lock()
	if e := c.entries[ino]; e != nil {
		c.clock++
		e.used = c.clock
	}
	c.mu.Unlock()
}

// drop forgets ino (its data file is gone).
func (c *blockCache) drop(ino uint64) {
	c.mu.Lock()
	if e := c.entries[ino]; e != nil {
		c.total -= e.bytes
		delete(c.entries, ino)
	}
	c.mu.Unlock()
}

// used returns the bytes of clean cached blocks.
func (c *blockCache) used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// overHard reports whether the clean cache exceeds its limit by half: a
// reader then evicts itself (Volume.Read) rather than leave it to the
// evictor, which lags behind fast readers on a busy machine.
func (c *blockCache) overHard() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > c.v.opts.CacheSize+c.v.opts.CacheSize/2
}

// evictLoop runs until the volume closes, evicting when woken.
func (c *blockCache) evictLoop() {
	defer c.v.wg.Done()
	for {
		select {
		case <-c.v.ctx.Done():
			return
		case <-c.wake:
		}
		c.evict()
	}
}

// evict frees least recently used files' clean blocks until the cache is
// 10% under its limit. A closed file loses all its clean blocks (its data
// file goes when nothing in it is dirty); an open one, being read, keeps the
// blocks its readers are about to use (see evictOpen), so that reading a
// file larger than the cache keeps the cache within its limit.
func (c *blockCache) evict() {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	target := c.v.opts.CacheSize - c.v.opts.CacheSize/10
	c.mu.Lock()
	type cand struct {
		ino  uint64
		used uint64
	}
	var cands []cand
	for ino, e := range c.entries {
		cands = append(cands, cand{ino, e.used})
	}
	over := c.total > target
	c.mu.Unlock()
	if !over {
		return
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].used < cands[j].used })
	for _, cd := range cands {
		if c.used() <= target || c.v.ctx.Err() != nil {
			return
		}
		var err error
		if n := c.v.holdNode(cd.ino); n != nil {
			err = errors.Join(c.evictOpen(n), c.v.releaseNode(n))
		} else {
			c.v.mu.Lock()
			if c.v.lookupNode(cd.ino) == nil {
				err = c.evictIno(cd.ino)
			}
			c.v.mu.Unlock()
		}
		if err != nil {
			c.v.log.Warn("cache eviction failed", "ino", cd.ino, "err", err)
		}
	}
}

// evictOpen drops the clean blocks of open file n except those its readers
// are about to use: the blocks around the end of the last read and the
// read-ahead window after it, and the block fetched last (a reader between
// its fetch and its read). A reader that still finds a block gone fetches
// it again: readers look at n.present under n.mu, which this holds
// exclusively, so none ever reads a punched block as zeros. The presence
// is persisted before the blocks are punched, so that no crash leaves a
// block recorded present that reads as zeros.
func (c *blockCache) evictOpen(n *node) error {
	v := c.v
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.rec.Inline || len(n.present) == 0 {
		return nil
	}
	bs := v.chunkSize
	cur := n.lastEnd.Load() / bs
	keep := func(b uint64) bool {
		return (b+1 >= cur && b <= cur+uint64(v.opts.ReadAhead)) || b+1 == n.lastFetched
	}
	var drop []uint64
	for b := range n.present {
		if !keep(b) && !n.rec.isDirty(b) {
			drop = append(drop, b)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	for _, b := range drop {
		delete(n.present, b)
	}
	n.presenceDirty = true
	if err := v.persistNode(n); err != nil {
		for _, b := range drop {
			n.present[b] = true
		}
		return err
	}
	f, err := n.file(false)
	if err != nil || f == nil {
		c.add(n.ino, -c.extents(n, drop))
		return err
	}
	for _, b := range drop {
		if err = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(b*bs), int64(bs)); err != nil {
			// Not present any more: a later fetch overwrites its bytes.
			err = fmt.Errorf("punch block %d out of %s: %w", b, f.Name(), err)
			break
		}
	}
	c.add(n.ino, -c.extents(n, drop))
	return err
}

// extents returns the bytes the block cache counts for blocks bs of n (a
// block's extent within the file, as installBlock counts it). Caller holds
// n.mu.
func (c *blockCache) extents(n *node, blocks []uint64) int64 {
	var sum int64
	for _, b := range blocks {
		sum += int64(min(c.v.chunkSize, n.rec.Size-min(n.rec.Size, b*c.v.chunkSize)))
	}
	return sum
}

// evictIno drops the clean blocks of a file that is not open. Caller holds
// v.mu exclusively, so no node can appear meanwhile.
func (c *blockCache) evictIno(ino uint64) error {
	var rec *inode
	var present []uint64
	err := c.v.db.View(func(txn *ktxn) error {
		r, err := readInode(txn, ino)
		if err != nil {
			return err
		}
		rec = r
		it, err := txn.Get(key64(pPresence, ino))
		if err != nil {
			return err
		}
		return it.Value(func(b []byte) error { present = decodePresence(b); return nil })
	})
	if errors.Is(err, badger.ErrKeyNotFound) || errors.Is(err, ErrNotFound) {
		c.drop(ino)
		return nil
	}
	if err != nil {
		return err
	}
	path := c.v.dataPath(ino)
	if rec.Inline {
		err := c.v.db.Update(func(txn *ktxn) error {
			if !rec.isDirty(0) {
				if err := txn.Delete(key64(pInline, ino)); err != nil {
					return err
				}
			}
			return txn.Delete(key64(pPresence, ino))
		})
		if err != nil {
			return err
		}
		c.drop(ino)
		return nil
	}
	// The presence goes first: a crash in between leaves clean bytes of
	// blocks not recorded present (fetched again when read), never a block
	// recorded present that reads as zeros.
	if err := c.v.db.Update(func(txn *ktxn) error { return txn.Delete(key64(pPresence, ino)) }); err != nil {
		return err
	}
	c.drop(ino)
	if len(rec.Dirty) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	} else {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		bs := int64(c.v.chunkSize)
		for _, b := range present {
			if perr := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(b)*bs, bs); perr != nil {
				err = perr
				break
			}
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
