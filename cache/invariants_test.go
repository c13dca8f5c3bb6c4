package cache

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
)

// checkInvariants returns what of the engine's cross-part invariants does
// not hold, with the volume's writers held off (the checkpoint, the
// namespace and the mark locks, in the lock order): the cache database's
// write-behind layer and read cache agree with Badger
// (meta.DB.CheckInvariants), the dirty set mirrors exactly the tree marks
// and the dirty-file index in the database (meta.DirtySet.CheckInvariants),
// the
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
	if err := v.db.CheckInvariants(); err != nil {
		return err
	}
	return v.dirty.CheckInvariants(v.db)
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
			err = v.db.View(func(txn *meta.Txn) error {
				b, _, err := getValue(txn, meta.Key64(meta.PrefixPresence, n.ino))
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
