package commit

import (
	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
)

// This file is the record side of a checkpoint's phase D (the facade's
// apply): once the commit is written, the records say what it covers.
// The facade holds the files and the namespace still, and batches the
// writes.

// Cover marks clean, in file record r and its present blocks, the blocks
// of the given ones that the commit covers (Clean), and returns the write
// that stores the outcome — the record, the dirty-file index once no block
// is dirty, the presence record — with the bytes that became cache; a nil
// write if r did not change. The caller holds the file still until the
// write commits, and then calls Forget.
func (c *Capture) Cover(r *meta.Inode, present map[uint64]bool, blocks []uint64) (write func(*meta.Txn, *meta.Delta) error, cached int64) {
	changed, cached := c.Clean(r, present, blocks)
	if !changed {
		return nil, 0
	}
	ino, rec, pres, clean := r.Ino, meta.EncodeInode(r), data.EncodePresence(present), len(r.Dirty) == 0
	return func(t *meta.Txn, d *meta.Delta) error {
		if err := t.Set(meta.Key64(meta.PrefixInode, ino), rec); err != nil {
			return err
		}
		if clean {
			if err := meta.SetFileDirty(t, d, ino, false); err != nil {
				return err
			}
		}
		return t.Set(meta.Key64(meta.PrefixPresence, ino), pres)
	}, cached
}

// ApplyTrees writes through op the records of the directories of dirs
// (the trees this checkpoint built) that still have one (read in txn
// through Record), each with its new tree and totals, and, in the same
// write, clears its tree mark if covered says the commit covers it; then
// the link table's mark, if linkTable (it was rebuilt) and covered. d
// records the marks cleared, for the dirty set once op's writes commit.
func (b *Builder) ApplyTrees(txn *meta.Txn, dirs map[uint64]Dir, linkTable bool, covered func(dir uint64) bool, d *meta.Delta, op func(func(*meta.Txn) error)) error {
	for ino, bd := range dirs {
		r, ok, err := b.Record(txn, ino)
		if err != nil {
			return err
		}
		if !ok {
			continue // deleted since the freeze
		}
		r.Tree, r.SubFiles, r.SubBytes = bd.Ref, bd.SubFiles, bd.SubBytes
		rec, done := meta.EncodeInode(r), covered(ino)
		op(func(t *meta.Txn) error {
			if err := t.Set(meta.Key64(meta.PrefixInode, ino), rec); err != nil {
				return err
			}
			if done {
				return meta.ClearMark(t, d, ino)
			}
			return nil
		})
	}
	if linkTable && covered(meta.LinkTableDir) {
		op(func(t *meta.Txn) error { return meta.ClearMark(t, d, meta.LinkTableDir) })
	}
	return nil
}
