package commit

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
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
	if write == nil || !slices.Equal(cached, []uint64{0}) {
		t.Fatalf("Cover = %v, blocks %v cached; want a write, block 0 cached", write != nil, cached)
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
		var recs map[uint64]*meta.Inode
		err := db.View(func(view *meta.Txn) error {
			var err error
			recs, err = b.DirRecords(view, built)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		ApplyTrees(recs, linkTable, covered, d, func(f func(*meta.Txn) error) {
			if err := f(txn); err != nil {
				t.Fatal(err)
			}
		})
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

// fakeFiles is Files over records in memory (open files) and in a
// database (the others), with data states over one data.Sources.
type fakeFiles struct {
	db      *meta.DB
	src     *data.Sources
	dirty   *meta.DirtySet         // if not nil, Update applies its deltas to it
	open    map[uint64]*meta.Inode // the open files' records
	data    map[uint64]*data.File
	marks   *fakeLock // if not nil, each Update records whether it was free
	updates []bool    // each Update call: whether the mark lock was free
	updated []uint64  // the files whose record SetRecord stored
	held    int       // holds not released
}

func (f *fakeFiles) Hold(ino uint64) (HeldFile, bool, error) {
	if r, ok := f.open[ino]; ok {
		f.held++
		return &fakeHeld{f: f, r: r, d: f.data[ino], open: true}, true, nil
	}
	var r *meta.Inode
	var ok bool
	err := f.db.View(func(txn *meta.Txn) error {
		var err error
		r, ok, err = storedRecord(txn, ino)
		return err
	})
	if err != nil || !ok {
		return nil, false, err
	}
	f.held++
	return &fakeHeld{f: f, r: r, d: data.NewFile(f.src, ino, nil, nil)}, true, nil
}

func (f *fakeFiles) Update(fn func(*meta.Txn, *meta.Delta) error) error {
	if f.marks != nil {
		f.updates = append(f.updates, !f.marks.locked)
	}
	d := &meta.Delta{}
	if err := f.db.Update(func(txn *meta.Txn) error { return fn(txn, d) }); err != nil {
		return err
	}
	if f.dirty != nil {
		f.dirty.Apply(d)
	}
	return nil
}

type fakeHeld struct {
	f    *fakeFiles
	r    *meta.Inode
	d    *data.File
	open bool
}

func (h *fakeHeld) Record() *meta.Inode { return h.r.Clone() }
func (h *fakeHeld) Data() *data.File    { return h.d }
func (h *fakeHeld) Open() bool          { return h.open }
func (h *fakeHeld) Release()            { h.f.held-- }
func (h *fakeHeld) SetRecord(r *meta.Inode, stored bool) {
	if stored {
		h.f.updated = append(h.f.updated, r.Ino)
	}
	if h.open {
		h.f.open[r.Ino] = r
	}
}

func (h *fakeHeld) Refill(map[uint64][]byte) error { return errors.New("no file is pinned here") }

// fakeLock is a mark lock that says whether it is held.
type fakeLock struct {
	mu     sync.Mutex
	locked bool
}

func (l *fakeLock) Lock()   { l.mu.Lock(); l.locked = true }
func (l *fakeLock) Unlock() { l.locked = false; l.mu.Unlock() }

// TestApply: the blocks a commit covers become clean — an open file's in a
// write of its own and in its record in memory, a closed file's in the
// batch — and present, counted by the block cache; a block written since
// its capture stays dirty; a covered directory mark is cleared under the
// mark lock, and the state is written there, last, while the directories'
// records are read before it; every hold is released.
func TestApply(t *testing.T) {
	db := openDB(t)
	c, _ := newCapture(t)
	files, err := data.NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := &data.Sources{Files: files, Cache: data.NewCache(1<<30, nil, slog.New(slog.DiscardHandler)), BlockSize: testChunk}
	open := dirtyFile(t, c.Gens, 7, 1)   // blocks 0 and 1 (short)
	closed := dirtyFile(t, c.Gens, 8, 1) // blocks 0 and 1 (short)
	for _, f := range []*memFile{open, closed} {
		if err := c.Frozen(f); err != nil {
			t.Fatal(err)
		}
	}
	c.Gens.Bump(7, 1) // written since its capture: stays dirty
	dir := &meta.Inode{Ino: 2, Type: snapshot.TypeDir, Nlink: 2, Parent: meta.RootIno, Loaded: true}
	put(t, db, 0, nil, open.r, closed.r, dir)
	if err := db.Update(func(txn *meta.Txn) error {
		d := &meta.Delta{}
		for _, ino := range []uint64{7, 8} {
			if err := meta.SetFileDirty(txn, d, ino, true); err != nil {
				return err
			}
		}
		return txn.Set(meta.Key64(meta.PrefixTreeMark, 2), meta.Put64(3))
	}); err != nil {
		t.Fatal(err)
	}
	var dirty meta.DirtySet
	if _, err := dirty.Load(db); err != nil {
		t.Fatal(err)
	}
	ff := &fakeFiles{db: db, src: src, open: map[uint64]*meta.Inode{7: open.r.Clone()},
		data: map[uint64]*data.File{7: data.NewFile(src, 7, nil, nil)}, marks: &fakeLock{}}
	b, _ := newBuilder(t)
	recordLocked := false // Record called under the mark lock (it may take a file's lock)
	b.Record = func(txn *meta.Txn, ino uint64) (*meta.Inode, bool, error) {
		recordLocked = recordLocked || ff.marks.locked
		return storedRecord(txn, ino)
	}
	a := &Applier{DB: db, Dirty: &dirty, Marks: ff.marks, Files: ff, Capture: c, Builder: b}
	stateLocked := false
	err = a.Apply(map[uint64]Dir{2: {Ref: snapshot.BlobRef{Offset: 2, Length: 1}}}, false, 3, func() func(*meta.Txn) error {
		stateLocked = ff.marks.locked
		return func(txn *meta.Txn) error { return txn.Set([]byte("state"), nil) }
	})
	if err != nil {
		t.Fatal(err)
	}

	if !slices.Equal(ff.updates, []bool{true}) {
		t.Errorf("Update calls (mark lock free?) %v; want one, for the open file, without the mark lock", ff.updates)
	}
	if r := ff.open[7]; !slices.Equal(r.Dirty, []uint64{1}) || len(r.Chunks) != 1 {
		t.Errorf("open file in memory: dirty %v, chunks %v; want block 1 dirty, block 0's chunk", r.Dirty, r.Chunks)
	}
	if !ff.data[7].IsPresent(0) || ff.data[7].IsPresent(1) {
		t.Errorf("open file present %v; want block 0", ff.data[7].Present())
	}
	counted := src.Cache.Counted()
	if counted[7] != testChunk || counted[8] != testChunk+testChunk/2 {
		t.Errorf("the block cache counts %v; want 7: %d (block 0), 8: %d (blocks 0 and 1)", counted, testChunk, testChunk+testChunk/2)
	}
	err = db.View(func(txn *meta.Txn) error {
		for ino, want := range map[uint64][]uint64{7: {1}, 8: nil} {
			r, _, err := storedRecord(txn, ino)
			if err != nil {
				return err
			}
			if !slices.Equal(r.Dirty, want) {
				t.Errorf("stored record of %d: dirty %v, want %v", ino, r.Dirty, want)
			}
		}
		if _, err := txn.Get([]byte("state")); err != nil {
			t.Errorf("state not written: %v", err)
		}
		if _, err := txn.Get(meta.Key64(meta.PrefixTreeMark, 2)); err == nil {
			t.Error("the covered mark of directory 2 stayed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !stateLocked {
		t.Error("the state was written without the mark lock")
	}
	if recordLocked {
		t.Error("a directory's record was read under the mark lock (Builder.Record may take an open file's lock, which comes first)")
	}
	if files := dirty.FileList(); !slices.Equal(files, []uint64{7}) {
		t.Errorf("dirty files %v; want [7]", files)
	}
	if err := dirty.CheckInvariants(db); err != nil {
		t.Error(err)
	}
	if c.Gens.Get(8, 0) != 0 || c.Gens.Get(7, 1) == 0 {
		t.Error("generations: a clean block's kept, or a dirty one's forgotten")
	}
	if ff.held != 0 {
		t.Errorf("%d holds not released", ff.held)
	}
}
