package cache

import (
	"fmt"

	"github.com/agentfs/agentfs/cache/meta"
)

// update runs fn in a read-write transaction and, once it commits, applies
// the dirty-set changes fn recorded. markMu orders it against the
// checkpoint's clearing of marks.
func (v *Volume) update(fn func(txn *meta.Txn, d *meta.Delta) error) error {
	v.markMu.Lock()
	defer v.markMu.Unlock()
	d := &meta.Delta{}
	if err := v.db.Update(func(txn *meta.Txn) error { return fn(txn, d) }); err != nil {
		return err
	}
	v.dirty.Apply(d)
	return nil
}

// setMark writes a tree mark for dir in txn.
func (v *Volume) setMark(txn *meta.Txn, d *meta.Delta, dir uint64) error {
	seq := v.seq.Add(1)
	if err := txn.Set(meta.Key64(meta.PrefixTreeMark, dir), meta.Put64(seq)); err != nil {
		return err
	}
	d.Mark(dir, seq)
	return nil
}

// commitMarked writes a tree mark for each directory of dirs in txn,
// commits it and applies d to the dirty set, under markMu: a namespace
// change's commit (ns.Host.CommitMarked).
func (v *Volume) commitMarked(txn *meta.Txn, d *meta.Delta, dirs map[uint64]bool) error {
	v.markMu.Lock()
	defer v.markMu.Unlock()
	for dir := range dirs {
		if err := v.setMark(txn, d, dir); err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("cache database: %w", err)
	}
	v.dirty.Apply(d)
	return nil
}
