package commit

import (
	"slices"
	"testing"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// TestCover: the write Cover returns stores the cleaned record, its
// presence, and takes the file out of the dirty-file index only once no
// block is dirty.
func TestCover(t *testing.T) {
	db := openDB(t)
	c, _ := newCapture(t)
	f := dirtyFile(t, c.Gens, 7, 1) // blocks 0 and 1 (short)
	if err := c.Frozen(f); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(txn *meta.Txn) error { return meta.SetFileDirty(txn, &meta.Delta{}, 7, true) }); err != nil {
		t.Fatal(err)
	}
	// stored reads back what a write left: the record, the presence, and
	// whether the file is in the dirty-file index.
	stored := func(write func(*meta.Txn, *meta.Delta) error) (*meta.Inode, []uint64, bool) {
		t.Helper()
		d := &meta.Delta{}
		if err := db.Update(func(txn *meta.Txn) error { return write(txn, d) }); err != nil {
			t.Fatal(err)
		}
		var r *meta.Inode
		var present []uint64
		dirty := false
		err := db.View(func(txn *meta.Txn) error {
			var ok bool
			var err error
			if r, ok, err = storedRecord(txn, 7); err != nil || !ok {
				t.Fatalf("record after the write: %v, %v", ok, err)
			}
			it, err := txn.Get(meta.Key64(meta.PrefixPresence, 7))
			if err != nil {
				return err
			}
			if err := it.Value(func(b []byte) error { present = data.DecodePresence(b); return nil }); err != nil {
				return err
			}
			_, err = txn.Get(meta.Key64(meta.PrefixDirtyFile, 7))
			dirty = err == nil
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return r, present, dirty
	}

	c.Gens.Bump(7, 1) // written since: stays dirty
	r, present := f.r.Clone(), map[uint64]bool{}
	write, cached := c.Cover(r, present, []uint64{0, 1})
	if write == nil || cached != testChunk {
		t.Fatalf("Cover = %v, %d bytes cached; want a write, block 0 cached", write != nil, cached)
	}
	got, pres, dirty := stored(write)
	if !slices.Equal(got.Dirty, []uint64{1}) || !slices.Equal(pres, []uint64{0}) || !dirty {
		t.Errorf("stored dirty %v, present %v, indexed %v; want block 1 dirty, 0 present, still indexed", got.Dirty, pres, dirty)
	}
	if w, _ := c.Cover(r, present, []uint64{0}); w != nil {
		t.Error("Cover of blocks clean already returned a write")
	}

	if err := c.Frozen(&memFile{r: r, bytes: f.bytes}); err != nil {
		t.Fatal(err)
	}
	write, _ = c.Cover(r, present, []uint64{1})
	if write == nil {
		t.Fatal("Cover of the recaptured block returned no write")
	}
	if got, pres, dirty := stored(write); len(got.Dirty) != 0 || !slices.Equal(pres, []uint64{0, 1}) || dirty {
		t.Errorf("stored dirty %v, present %v, indexed %v; want none dirty, 0 and 1 present, out of the index", got.Dirty, pres, dirty)
	}
}

// TestApplyTrees: the directories built get their trees; a mark the
// commit covers is cleared with it, a newer one stays; a directory
// deleted since is skipped; the link table's mark goes only if rebuilt.
func TestApplyTrees(t *testing.T) {
	db := openDB(t)
	b, _ := newBuilder(t)
	dir := func(ino uint64) *meta.Inode {
		return &meta.Inode{Ino: ino, Type: snapshot.TypeDir, Nlink: 2, Parent: meta.RootIno, Loaded: true}
	}
	put(t, db, 0, nil, dir(2), dir(3))
	marks := map[uint64]uint64{2: 5, 3: 9, meta.LinkTableDir: 4}
	if err := db.Update(func(txn *meta.Txn) error {
		for dir, seq := range marks {
			if err := txn.Set(meta.Key64(meta.PrefixTreeMark, dir), meta.Put64(seq)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	covered := func(dir uint64) bool { return marks[dir] <= 5 } // the freeze saw marks up to 5
	built := map[uint64]Dir{
		2: {Ref: snapshot.BlobRef{Offset: 2, Length: 1}, SubFiles: 3, SubBytes: 30},
		3: {Ref: snapshot.BlobRef{Offset: 3, Length: 1}},
		4: {Ref: snapshot.BlobRef{Offset: 4, Length: 1}}, // deleted since
	}
	apply := func(linkTable bool) *meta.Delta {
		t.Helper()
		d := &meta.Delta{}
		txn := db.NewTransaction(true)
		defer txn.Discard()
		err := db.View(func(view *meta.Txn) error {
			return b.ApplyTrees(view, built, linkTable, covered, d, func(f func(*meta.Txn) error) {
				if err := f(txn); err != nil {
					t.Fatal(err)
				}
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(); err != nil {
			t.Fatal(err)
		}
		return d
	}
	marked := func(dir uint64) bool {
		var ok bool
		_ = db.View(func(txn *meta.Txn) error {
			_, err := txn.Get(meta.Key64(meta.PrefixTreeMark, dir))
			ok = err == nil
			return nil
		})
		return ok
	}

	apply(false)
	err := db.View(func(txn *meta.Txn) error {
		r, _, err := storedRecord(txn, 2)
		if err == nil && (r.Tree != built[2].Ref || r.SubFiles != 3 || r.SubBytes != 30) {
			t.Errorf("directory 2: tree %v, %d files, %d bytes; want the built ones", r.Tree, r.SubFiles, r.SubBytes)
		}
		if _, ok, _ := storedRecord(txn, 4); ok {
			t.Error("a directory deleted since the freeze got a record again")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if marked(2) || !marked(3) || !marked(meta.LinkTableDir) {
		t.Errorf("marks after apply: 2 %v, 3 %v, link table %v; want 2 cleared, 3 (newer) and the link table (not rebuilt) kept",
			marked(2), marked(3), marked(meta.LinkTableDir))
	}
	apply(true)
	if marked(meta.LinkTableDir) {
		t.Error("the link table's covered mark stayed after it was rebuilt")
	}
}
