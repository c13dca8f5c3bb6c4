package cache

import (
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
)

// This file is the namespace's half of the block cache: the accounting and
// the eviction policy are data.Cache's; what dropping one file's clean
// blocks means for its records and its open node is here (fileEvictor).

// loadBlockCache rebuilds the block cache's accounting from the presence
// records: each present block counts its extent within its file, as when
// it was installed (a file whose record is gone counts nothing).
func (v *Volume) loadBlockCache() error {
	c := data.NewCache(v.opts.CacheSize, fileEvictor{v})
	err := v.db.View(func(txn *meta.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{meta.PrefixPresence}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			ino := meta.U64(it.Item().Key()[1:])
			var present []uint64
			if err := it.Item().Value(func(b []byte) error { present = data.DecodePresence(b); return nil }); err != nil {
				return err
			}
			r, err := readInode(txn, ino)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			var bytes int64
			for _, b := range present {
				bytes += data.Extent(b, r.Size, v.chunkSize)
			}
			c.Load(ino, bytes)
		}
		return nil
	})
	if err != nil {
		return err
	}
	v.blocks, v.data.Cache = c, c
	return nil
}

// evictLoop runs the block cache's eviction until the volume closes.
func (v *Volume) evictLoop() {
	defer v.wg.Done()
	v.blocks.Run(v.ctx, v.evictFailed)
}

// evict evicts now, in the caller (a reader that outran the evict loop).
func (v *Volume) evict() { v.blocks.Evict(v.ctx, v.evictFailed) }

func (v *Volume) evictFailed(ino uint64, err error) {
	v.log.Warn("cache eviction failed", "ino", ino, "err", err)
}

// fileEvictor drops one file's clean blocks for the block cache.
type fileEvictor struct{ v *Volume }

// EvictFile drops the clean blocks of file ino: of its open node (see
// evictOpen), or of its records and data file when it is not open.
func (e fileEvictor) EvictFile(ino uint64) error {
	v := e.v
	if n := v.holdNode(ino); n != nil {
		return errors.Join(v.evictOpen(n), v.releaseNode(n))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.lookupNode(ino) == nil {
		return v.evictIno(ino)
	}
	return nil
}

// evictOpen drops the clean blocks of open file n except those its readers
// are about to use (data.File.Evict). A reader that still finds a block
// gone fetches it again: readers look at the present blocks under n.mu,
// which this holds exclusively, so none ever reads a punched block as
// zeros. The presence is persisted before the blocks are punched, so that
// no crash leaves a block recorded present that reads as zeros.
func (v *Volume) evictOpen(n *node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pins > 0 {
		return nil // a pinned file's data file is read by the kernel (passthrough.go)
	}
	return n.d.Evict(n.layout(), v.opts.ReadAhead, func() error { return v.persistNode(n) })
}

// evictIno drops the clean blocks of a file that is not open. Caller holds
// v.mu exclusively, so no node can appear meanwhile.
func (v *Volume) evictIno(ino uint64) error {
	var rec *meta.Inode
	var present []uint64
	err := v.db.View(func(txn *meta.Txn) error {
		r, err := readInode(txn, ino)
		if err != nil {
			return err
		}
		rec = r
		it, err := txn.Get(meta.Key64(meta.PrefixPresence, ino))
		if err != nil {
			return err
		}
		return it.Value(func(b []byte) error { present = data.DecodePresence(b); return nil })
	})
	if errors.Is(err, badger.ErrKeyNotFound) || errors.Is(err, ErrNotFound) {
		v.blocks.Drop(ino)
		return nil
	}
	if err != nil {
		return err
	}
	// The presence goes first: a crash in between leaves clean bytes of
	// blocks not recorded present (fetched again when read), never a block
	// recorded present that reads as zeros. An inline file's clean bytes
	// are its inline record.
	err = v.db.Update(func(txn *meta.Txn) error {
		if rec.Inline && !rec.IsDirty(0) {
			if err := txn.Delete(meta.Key64(meta.PrefixInline, ino)); err != nil {
				return err
			}
		}
		return txn.Delete(meta.Key64(meta.PrefixPresence, ino))
	})
	if err != nil {
		return err
	}
	return v.data.EvictClosed(ino, rec.Inline, len(rec.Dirty) > 0, present)
}
