package commit

import (
	"fmt"
	"sort"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// Plan is what trees a checkpoint rebuilds, in the order it builds them.
type Plan struct {
	// Order lists the directories to rebuild and all their ancestors,
	// deepest first (then by inode number): a directory's rebuilt
	// children come before it. The root alone when nothing changed.
	Order []uint64
	// Recs holds the records of the directories in Order.
	Recs map[uint64]*meta.Inode
	// LinkTable: the link table must be rebuilt.
	LinkTable bool
}

// Plan chooses the trees a checkpoint rebuilds, reading the records in
// txn: the marked directories (marks, from the dirty set), the parents
// of the files with dirty blocks (files), the link table for a dirty
// file of a hard-link group (its names are there), and every ancestor of
// those directories. A directory deleted since its mark, and a file
// without a record, are skipped; a directory other than the root without
// a parent is ErrInconsistent.
func (b *Builder) Plan(txn *meta.Txn, marks map[uint64]uint64, files []uint64) (*Plan, error) {
	todo, err := b.changed(txn, marks, files)
	if err != nil {
		return nil, err
	}
	p := &Plan{LinkTable: todo[meta.LinkTableDir]}
	delete(todo, meta.LinkTableDir)
	if p.Order, p.Recs, err = b.order(txn, todo); err != nil {
		return nil, err
	}
	return p, nil
}

// changed returns the directories whose trees must be rebuilt, besides
// their ancestors: the marked ones, and the parents of the files with
// dirty blocks (meta.LinkTableDir for a file of a hard-link group).
func (b *Builder) changed(txn *meta.Txn, marks map[uint64]uint64, files []uint64) (map[uint64]bool, error) {
	todo := make(map[uint64]bool, len(marks))
	for dir := range marks {
		todo[dir] = true
	}
	for _, ino := range files {
		r, ok, err := b.Record(txn, ino)
		if err != nil {
			return nil, err
		}
		switch {
		case !ok, r.Nlink == 0:
		case r.LinkID != 0:
			todo[meta.LinkTableDir] = true
		case r.Parent != 0:
			todo[r.Parent] = true
		}
	}
	return todo, nil
}

// order returns the directories of todo and all their ancestors, deepest
// first (then by inode number), with their records; the root alone when
// there are none. A directory deleted since its mark is skipped.
func (b *Builder) order(txn *meta.Txn, todo map[uint64]bool) ([]uint64, map[uint64]*meta.Inode, error) {
	depth := map[uint64]int{}
	recs := map[uint64]*meta.Inode{}
	// walk returns the depth of ino, false if it or an ancestor has no
	// record.
	var walk func(ino uint64) (int, bool, error)
	walk = func(ino uint64) (int, bool, error) {
		if d, ok := depth[ino]; ok {
			return d, true, nil
		}
		r, ok, err := b.Record(txn, ino)
		if err != nil || !ok {
			return 0, ok, err
		}
		recs[ino] = r
		d := 0
		if ino != meta.RootIno {
			if r.Parent == 0 {
				return 0, false, fmt.Errorf("directory %d has no parent: %w", ino, ErrInconsistent)
			}
			pd, ok, err := walk(r.Parent)
			if err != nil || !ok {
				return 0, ok, err
			}
			d = pd + 1
		}
		depth[ino] = d
		return d, true, nil
	}
	for ino := range todo {
		if _, _, err := walk(ino); err != nil {
			return nil, nil, err
		}
	}
	order := make([]uint64, 0, len(depth))
	for ino := range depth {
		if recs[ino].Type == snapshot.TypeDir {
			order = append(order, ino)
		}
	}
	if len(order) == 0 {
		r, ok, err := b.Record(txn, meta.RootIno)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return nil, nil, fmt.Errorf("the root directory has no record: %w", ErrInconsistent)
		}
		order, recs[meta.RootIno] = append(order, meta.RootIno), r
	}
	sort.Slice(order, func(i, j int) bool {
		if depth[order[i]] != depth[order[j]] {
			return depth[order[i]] > depth[order[j]]
		}
		return order[i] < order[j]
	})
	return order, recs, nil
}
