package cache

import (
	"fmt"
	"maps"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/data"
)

// checkInvariants returns what of the engine's cross-part invariants does
// not hold, with the volume's writers held off (the checkpoint, the
// namespace and the mark locks, in the lock order): the dirty set mirrors
// exactly the tree marks and the dirty-file index in the database, the
// block cache's own invariants (data.Cache.CheckInvariants) hold, and so do
// every open file's (data.File.CheckInvariants), whose present blocks are
// those of its presence record unless it has changes not yet persisted. The model
// test calls it after every step, so that a part split off the engine
// keeps the state it shares with the others consistent.
func (v *Volume) checkInvariants() error {
	if err := v.blocks.CheckInvariants(); err != nil {
		return fmt.Errorf("block cache: %w", err)
	}
	v.cpMu.Lock()
	defer v.cpMu.Unlock()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.checkOpenFiles(); err != nil {
		return err
	}
	v.markMu.Lock()
	defer v.markMu.Unlock()
	marks, files := map[uint64]uint64{}, map[uint64]bool{}
	err := v.db.View(func(txn *ktxn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pTreeMark}, PrefetchValues: true})
		for it.Rewind(); it.Valid(); it.Next() {
			dir := u64(it.Item().Key()[1:])
			if err := it.Item().Value(func(b []byte) error { marks[dir] = u64(b); return nil }); err != nil {
				it.Close()
				return err
			}
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte{pDirtyF}})
		for it.Rewind(); it.Valid(); it.Next() {
			files[u64(it.Item().Key()[1:])] = true
		}
		it.Close()
		return nil
	})
	if err != nil {
		return err
	}
	v.dirty.mu.Lock()
	defer v.dirty.mu.Unlock()
	if !maps.Equal(marks, v.dirty.dirs) {
		return fmt.Errorf("dirty set: marked directories %v, the database's tree marks %v", v.dirty.dirs, marks)
	}
	if !maps.Equal(files, v.dirty.files) {
		return fmt.Errorf("dirty set: dirty files %v, the database's index %v", v.dirty.files, files)
	}
	return nil
}

// checkOpenFiles checks the data state of every open file against its
// record and its presence record. Caller holds v.mu exclusively (node.mu
// comes after it in the lock order).
func (v *Volume) checkOpenFiles() error {
	v.nodesMu.Lock()
	nodes := slices.Collect(maps.Values(v.nodes))
	v.nodesMu.Unlock()
	for _, n := range nodes {
		n.mu.RLock()
		err := n.d.CheckInvariants(n.layout())
		if err == nil && !n.d.PresenceDirty() {
			var stored []uint64
			err = v.db.View(func(txn *ktxn) error {
				b, _, err := getValue(txn, key64(pPresence, n.ino))
				stored = data.DecodePresence(b)
				return err
			})
			held := slices.Sorted(maps.Keys(n.d.Present()))
			if err == nil && !slices.Equal(held, stored) {
				err = fmt.Errorf("file %d: present blocks %v, its presence record %v", n.ino, held, stored)
			}
		}
		n.mu.RUnlock()
		if err != nil {
			return fmt.Errorf("open file: %w", err)
		}
	}
	return nil
}
