package commit

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// fakeLive is a Live over the stored records alone: its files are held
// as fakeFiles holds them (updated lists the files whose record a
// reconcile changed), the open ones are listed, and what it was asked to
// do is recorded.
type fakeLive struct {
	*fakeFiles
	repo    *snapshot.Repo
	next    uint64
	users   map[uint64]bool // the files a user holds open
	orphans []uint64
	dropped []uint64
}

func (l *fakeLive) AllocIno() (uint64, error) { l.next++; return l.next, nil }

func (l *fakeLive) Record(ino uint64) (*meta.Inode, bool, error) {
	var r *meta.Inode
	var ok bool
	err := l.db.View(func(txn *meta.Txn) error {
		var err error
		r, ok, err = storedRecord(txn, ino)
		return err
	})
	return r, ok, err
}

func (l *fakeLive) Entries(ctx context.Context, tree snapshot.BlobRef, _ bool, _ string) ([]snapshot.Entry, error) {
	b, err := l.repo.ReadBlob(ctx, tree)
	if err != nil {
		return nil, err
	}
	return snapshot.DecodeTree(b)
}

func (l *fakeLive) Layout(r *meta.Inode) data.Layout { return meta.FileLayout{R: r} }

func (l *fakeLive) Records(txn *meta.Txn) data.Records { return meta.FileRecords{Txn: txn} }

func (l *fakeLive) FetchPinned(context.Context, uint64, *snapshot.Entry, map[uint64]bool) (map[uint64][]byte, error) {
	return nil, errors.New("no file is pinned here")
}

func (l *fakeLive) Orphan(ino uint64) (bool, error) {
	if !l.users[ino] {
		return false, nil
	}
	l.orphans = append(l.orphans, ino)
	return true, nil
}

func (l *fakeLive) DropData(ino uint64) { l.dropped = append(l.dropped, ino) }

// TestReconcile: a switch keeps the inode numbers of the paths that stay,
// updates changed files in place, creates new entries with fresh numbers,
// drops the others (an open file becomes an orphan; a dropped file's
// generations are forgotten), rewrites a marked directory even if its
// tree is the target's, and lists what the kernel must be told.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	repo := testRepo(t)
	up := NewUploader(ctx, repo, 1, time.Now())
	tree := func(entries ...snapshot.Entry) snapshot.BlobRef {
		t.Helper()
		raw, err := snapshot.EncodeTree(entries)
		if err != nil {
			t.Fatal(err)
		}
		return up.Add(snapshot.BlobTree, raw)
	}
	file := func(name string, size uint64) snapshot.Entry {
		return snapshot.Entry{Name: name, Type: snapshot.TypeFile, Mode: 0o644, Nlink: 1, Size: size}
	}
	dirEntry := func(name string, tr snapshot.BlobRef) snapshot.Entry {
		return snapshot.Entry{Name: name, Type: snapshot.TypeDir, Mode: 0o755, Nlink: 2, Tree: tr}
	}
	x := file("x", 1)
	subOld, subNew := tree(x), tree(x, file("y", 2))
	rootNew := tree(file("a", 20), dirEntry("d", subNew), file("new", 3))
	if err := up.Finish(); err != nil {
		t.Fatal(err)
	}

	// Live: / = {a (2), d (3) = {x (4)}, gone (5, open), old (6, dirty)}.
	rec := func(ino, parent uint64, e snapshot.Entry) *meta.Inode {
		r := meta.InodeFromEntry(ino, parent, &e, 0)
		r.Loaded = e.Type == snapshot.TypeDir
		return r
	}
	old := rec(6, 1, file("old", 5))
	old.Dirty = []uint64{0}
	root := rec(1, 0, dirEntry("", snapshot.BlobRef{Offset: 99, Length: 1}))
	put(t, db, 1, map[string]*meta.Inode{"a": rec(2, 1, file("a", 10)), "d": rec(3, 1, dirEntry("d", subOld)),
		"gone": rec(5, 1, file("gone", 1)), "old": old}, root)
	put(t, db, 3, map[string]*meta.Inode{"x": rec(4, 3, x)})
	gens := &Gens{}
	gens.Bump(6, 0)
	var dirty meta.DirtySet
	files, err := data.NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src := &data.Sources{Files: files, Cache: data.NewCache(1<<30, nil, slog.New(slog.DiscardHandler)), BlockSize: testChunk}
	ff := &fakeFiles{db: db, src: src, dirty: &dirty}
	live := &fakeLive{fakeFiles: ff, repo: repo, next: 100, users: map[uint64]bool{5: true}}
	rc := &Reconciler{DB: db, Repo: repo, Live: live, Gens: gens, Dirty: &dirty}

	c := snapshot.Commit{ID: snapshot.CommitID{Branch: "main", Seq: 2},
		Root: snapshot.RootDir{Mode: 0o755, Nlink: 3, Tree: rootNew}}
	inv, err := rc.Reconcile(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	names := map[uint64]map[string]uint64{}
	for _, dir := range []uint64{1, 3} {
		des, err := (&reconcile{Reconciler: rc}).readDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		names[dir] = map[string]uint64{}
		for _, de := range des {
			names[dir][de.Name] = de.Ino
		}
	}
	if n := names[1]; len(n) != 3 || n["a"] != 2 || n["d"] != 3 || n["new"] <= 100 {
		t.Errorf("root after the switch %v; want a (2), d (3) and new (a fresh number)", n)
	}
	if n := names[3]; len(n) != 2 || n["x"] != 4 || n["y"] <= 100 {
		t.Errorf("d after the switch %v; want x (4) and y (a fresh number)", n)
	}
	if !slices.Equal(live.updated, []uint64{2}) || !slices.Equal(live.orphans, []uint64{5}) || !slices.Equal(live.dropped, []uint64{6}) {
		t.Errorf("updated %v, orphaned %v, dropped %v; want a (2), gone (5), old (6)", live.updated, live.orphans, live.dropped)
	}
	if _, ok, _ := live.Record(6); ok || gens.Get(6, 0) != 0 {
		t.Error("the dropped file kept its record or its dirty block's generation")
	}
	if r, _, _ := live.Record(1); r.Tree != rootNew || r.Nlink != 3 {
		t.Errorf("root record: tree %v, nlink %d; want the target's", r.Tree, r.Nlink)
	}
	want := []Invalidation{{Ino: 2}, {Parent: 3, Name: "y"}, {Ino: 3}, {Parent: 1, Name: "new"},
		{Parent: 1, Name: "gone"}, {Parent: 1, Name: "old"}, {Ino: 6}, {Ino: 1}}
	for _, w := range want {
		if !slices.Contains(inv, w) {
			t.Errorf("invalidations %v lack %+v", inv, w)
		}
	}
	if len(inv) != len(want) {
		t.Errorf("invalidations %v; want exactly %v, in any order (an orphan keeps its inode: only its name goes)", inv, want)
	}

	// Again, with nothing changed but the root marked: the root is
	// rewritten from its tree, every entry kept as it is.
	if err := live.Update(func(txn *meta.Txn, d *meta.Delta) error {
		d.Mark(meta.RootIno, 1)
		return txn.Set(meta.Key64(meta.PrefixTreeMark, meta.RootIno), meta.Put64(1))
	}); err != nil {
		t.Fatal(err)
	}
	live.updated = nil
	if inv, err = rc.Reconcile(ctx, c); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inv, []Invalidation{{Ino: meta.RootIno}}) || live.updated != nil {
		t.Errorf("second switch: invalidations %v, files updated %v; want the root's inode alone, none", inv, live.updated)
	}
	if ff.held != 0 {
		t.Errorf("%d holds not released", ff.held)
	}
}
