package cache

import (
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
)

// This file is the namespace's half of the block cache: the accounting,
// the eviction policy and loop are data.Cache's, and what of one file's
// local data an eviction drops, and in which order, data.File.Evict's and
// data.Sources.EvictClosed's; which file is open, its locks and where its
// records are is here (fileEvictor).

// loadBlockCache rebuilds the block cache's accounting from the presence
// records (read with data.StoredPresence): each present block counts its
// extent within its file at the file's size (a file whose record is gone
// counts nothing).
func (v *Volume) loadBlockCache() error {
	c := data.NewCache(v.opts.CacheSize, fileEvictor{v}, v.log)
	err := v.db.View(func(txn *meta.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{meta.PrefixPresence}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			ino := meta.U64(it.Item().Key()[1:])
			present, _, err := data.StoredPresence(meta.FileRecords{Txn: txn}, ino)
			if err != nil {
				return err
			}
			r, err := ns.ReadInode(txn, ino)
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

// fileEvictor drops one file's clean blocks for the block cache.
type fileEvictor struct{ v *Volume }

// EvictFile drops the clean blocks of file ino: of its open node (see
// open), or of its records and data file when it is not open (see closed).
func (e fileEvictor) EvictFile(ino uint64) error {
	v := e.v
	if n := v.holdNode(ino); n != nil {
		return errors.Join(e.open(n), v.releaseNode(n))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.lookupNode(ino) == nil {
		return e.closed(ino)
	}
	return nil
}

// open drops the clean blocks of open file n except those its readers
// are about to use (data.File.Evict; none of a file pinned for
// passthrough, whose data file the kernel reads). A reader that still
// finds a block gone fetches it again: readers look at the present blocks
// under n.mu, which this holds exclusively, so none ever reads a punched
// block as zeros. The presence is persisted before the blocks are punched, so that
// no crash leaves a block recorded present that reads as zeros.
func (e fileEvictor) open(n *node) error {
	v := e.v
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.d.Evict(n.Layout(), v.opts.ReadAhead, func() error { return v.persistNode(n) })
}

// closed drops the clean blocks of a file that is not open
// (data.Sources.EvictClosed): its record and presence record are read and
// the records written in one transaction. Caller holds v.mu exclusively,
// so no node appears and no other writer of the file's records runs
// meanwhile (meta.Txn is no snapshot: the lock, not the transaction, keeps
// what is read from changing before the write).
func (e fileEvictor) closed(ino uint64) error {
	v := e.v
	return v.data.EvictClosed(ino, func(fn func(data.Layout, data.RecordsTxn) error) error {
		return v.db.Update(func(txn *meta.Txn) error {
			r, err := ns.ReadInode(txn, ino)
			if errors.Is(err, ErrNotFound) {
				return fn(nil, meta.FileRecords{Txn: txn})
			}
			if err != nil {
				return err
			}
			return fn(meta.FileLayout{R: r}, meta.FileRecords{Txn: txn})
		})
	})
}
