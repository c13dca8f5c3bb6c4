package commit

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// plan runs b.Plan in a read transaction of db.
func plan(t *testing.T, db *meta.DB, b *Builder, marks map[uint64]uint64, files ...uint64) (*Plan, error) {
	t.Helper()
	var p *Plan
	err := db.View(func(txn *meta.Txn) error {
		var err error
		p, err = b.Plan(txn, marks, files)
		return err
	})
	return p, err
}

func TestPlan(t *testing.T) {
	db := openDB(t)
	b, _ := newBuilder(t)
	dir := func(ino, parent uint64) *meta.Inode {
		return &meta.Inode{Ino: ino, Type: snapshot.TypeDir, Nlink: 2, Parent: parent, Loaded: true}
	}
	file := func(ino, parent uint64) *meta.Inode {
		return &meta.Inode{Ino: ino, Type: snapshot.TypeFile, Size: 1, Nlink: 1, Parent: parent, Dirty: []uint64{0}}
	}
	put(t, db, 0, nil, dir(meta.RootIno, 0))

	p, err := plan(t, db, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Order, []uint64{meta.RootIno}) || p.LinkTable || p.Recs[meta.RootIno] == nil {
		t.Errorf("plan of nothing changed: order %v, link table %v; want the root alone, with its record", p.Order, p.LinkTable)
	}

	// 1 ← 2 ← 3 ← file 10 (dirty); 1 ← 4 (marked); file 11 of a link
	// group; file 12 unlinked; 5 marked but deleted; 13 without a record.
	linked := file(11, 0)
	linked.LinkID = 0x77
	unlinked := file(12, 3)
	unlinked.Nlink = 0
	put(t, db, 0, nil, dir(2, 1), dir(3, 2), dir(4, 1), file(10, 3), linked, unlinked)
	p, err = plan(t, db, b, map[uint64]uint64{4: 1, 5: 2}, 10, 11, 12, 13)
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{3, 2, 4, 1}; !slices.Equal(p.Order, want) {
		t.Errorf("order %v; want %v (deepest first, then by inode number)", p.Order, want)
	}
	if got := slices.Sorted(maps.Keys(p.Recs)); !slices.Equal(got, []uint64{1, 2, 3, 4}) {
		t.Errorf("records of %v; want those of the directories in order", got)
	}
	if !p.LinkTable {
		t.Error("a dirty file of a link group does not rebuild the link table")
	}

	orphan := dir(6, 0) // a directory other than the root without a parent
	put(t, db, 0, nil, orphan)
	if _, err := plan(t, db, b, map[uint64]uint64{6: 3}); !errors.Is(err, ErrInconsistent) {
		t.Errorf("plan with a directory without a parent: %v; want ErrInconsistent", err)
	}
}
