package ns

import (
	"errors"
	"testing"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// testWriter is a Writer that commits each write at once; after limit
// writes (if limit >= 0) it drops the rest, as a crash would, and then its
// Flush fails.
type testWriter struct {
	db      *meta.DB
	limit   int
	writes  int
	dropped bool
}

var errCrash = errors.New("crash")

func (w *testWriter) op(fn func(*meta.Txn) error) {
	if w.limit >= 0 && w.writes >= w.limit {
		w.dropped = true
		return
	}
	w.writes++
	if err := w.db.Update(fn); err != nil {
		panic(err)
	}
}

func (w *testWriter) Set(k, v []byte) { w.op(func(txn *meta.Txn) error { return txn.Set(k, v) }) }
func (w *testWriter) Delete(k []byte) { w.op(func(txn *meta.Txn) error { return txn.Delete(k) }) }

func (w *testWriter) Flush() error {
	if w.dropped {
		return errCrash
	}
	return nil
}

func put(t *testing.T, db *meta.DB, k, v []byte) {
	t.Helper()
	if err := db.Update(func(txn *meta.Txn) error { return txn.Set(k, v) }); err != nil {
		t.Fatal(err)
	}
}

// baseDir adds directory "base" to the root as a directory of the base
// commit not loaded yet, with tree tree and Nlink nlink, and returns its
// inode.
func baseDir(t *testing.T, s *Namespace, db *meta.DB, h *fakeHost, tree snapshot.BlobRef, nlink uint32) uint64 {
	t.Helper()
	ino, _ := h.AllocIno()
	root, err := s.Stored(RootIno)
	if err != nil {
		t.Fatal(err)
	}
	root.Nlink++
	put(t, db, meta.Key64(meta.PrefixInode, RootIno), meta.EncodeInode(root))
	put(t, db, meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(&meta.Inode{Ino: ino, Type: snapshot.TypeDir, Mode: 0o755, Nlink: nlink, Parent: RootIno, Tree: tree}))
	put(t, db, meta.DentryKey(RootIno, "base"), meta.DentryValue(ino, snapshot.TypeDir))
	return ino
}

// entries are a base directory's: a subdirectory, a file, a symlink and a
// name of hard-link group 0x77.
func testEntries() []snapshot.Entry {
	return []snapshot.Entry{
		{Name: "d", Type: snapshot.TypeDir, Mode: 0o755, Nlink: 2, Tree: snapshot.BlobRef{Hash: snapshot.Hash{9}}},
		{Name: "f", Type: snapshot.TypeFile, Mode: 0o644, Nlink: 1, Size: 3},
		{Name: "l", Type: snapshot.TypeFile, LinkID: 0x77},
		{Name: "s", Type: snapshot.TypeSymlink, Mode: 0o777, Nlink: 1, Target: "f"},
	}
}

// linkGroup adds hard-link group 0x77, one name in the root, and returns
// its inode.
func linkGroup(t *testing.T, db *meta.DB, h *fakeHost) uint64 {
	t.Helper()
	ino, _ := h.AllocIno()
	put(t, db, meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(&meta.Inode{Ino: ino, Type: snapshot.TypeFile, Mode: 0o644, Nlink: 2, LinkID: 0x77}))
	put(t, db, meta.Key64(meta.PrefixLink, 0x77), meta.Put64(ino))
	put(t, db, meta.DentryKey(RootIno, "g"), meta.DentryValue(ino, snapshot.TypeFile))
	return ino
}

// records counts the inode records in db.
func records(t *testing.T, db *meta.DB) int {
	t.Helper()
	n := 0
	if err := db.View(func(txn *meta.Txn) error {
		return scan(txn, meta.PrefixInode, func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkLoaded checks that directory dir holds testEntries, its group's
// name naming inode group, with Nlink nlink.
func checkLoaded(t *testing.T, s *Namespace, db *meta.DB, h *fakeHost, dir, group uint64, nlink uint32) {
	t.Helper()
	check(t, db, h, "load")
	r, err := s.Stored(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Loaded || r.Nlink != nlink {
		t.Errorf("directory after its load: Loaded %v, Nlink %d; want true, %d", r.Loaded, r.Nlink, nlink)
	}
	if r, err := s.ToLoad(dir); r != nil || err != nil {
		t.Errorf("ToLoad of a loaded directory: %v, %v", r, err)
	}
	for _, e := range testEntries() {
		err := s.db.View(func(txn *meta.Txn) error {
			ino, typ, err := GetDentry(txn, dir, e.Name)
			if err != nil {
				return err
			}
			c, err := ReadInode(txn, ino)
			switch {
			case err != nil:
				return err
			case typ != e.Type || c.Type != e.Type:
				t.Errorf("%s: dentry type %v, record type %v, want %v", e.Name, typ, c.Type, e.Type)
			case e.LinkID != 0 && ino != group:
				t.Errorf("%s names inode %d, want the group's %d", e.Name, ino, group)
			case e.LinkID == 0 && (c.Parent != dir || c.Mode != e.Mode || c.Target != e.Target || c.Size != e.Size):
				t.Errorf("%s: record %+v, want it from entry %+v in directory %d", e.Name, c, e, dir)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
	}
}

// TestInstallDir loads a base directory: a record and a dentry per entry,
// a hard-link group's name naming the group's inode, the Loaded flag; a
// directory read through from the lower gets the Nlink of its entries.
func TestInstallDir(t *testing.T) {
	tree := snapshot.BlobRef{Hash: snapshot.Hash{1}}
	for _, countSubdirs := range []bool{false, true} {
		s, db, h := newNS(t)
		group := linkGroup(t, db, h)
		nlink := uint32(3) // the tree's, true to its entries
		if countSubdirs {
			nlink = 5 // the lower's, which has changed
		}
		dir := baseDir(t, s, db, h, tree, nlink)
		if r, err := s.ToLoad(dir); err != nil || r == nil || r.Tree != tree {
			t.Fatalf("ToLoad of a base directory: %+v, %v", r, err)
		}
		if err := s.InstallDir(&testWriter{db: db, limit: -1}, dir, tree, testEntries(), countSubdirs, 64<<10); err != nil {
			t.Fatal(err)
		}
		checkLoaded(t, s, db, h, dir, group, 3) // 2 and subdirectory d
		if n := records(t, db); n != 6 {
			t.Errorf("%d records, want 6 (root, group, base, d, f, s)", n)
		}
	}
}

// TestInstallDirInterrupted: a load that stopped midway (after any
// prefix of its writes), and then possibly the next one too, leaves the
// directory unloaded, and the load after them removes what they left and
// installs the directory as if they had not run, leaving no record
// behind.
func TestInstallDirInterrupted(t *testing.T) {
	tree := snapshot.BlobRef{Hash: snapshot.Hash{1}}
	const writes = 8 // 3 entries with a record and a dentry, 1 group name, the directory
	for first := 1; first < writes; first++ {
		for _, second := range []int{0, 1, 2, 3, 6, 9} { // 0: no second crash; up to 7 stale keys
			s, db, h := newNS(t)
			group := linkGroup(t, db, h)
			dir := baseDir(t, s, db, h, tree, 3)
			for _, limit := range []int{first, second} {
				if limit == 0 {
					continue
				}
				err := s.InstallDir(&testWriter{db: db, limit: limit}, dir, tree, testEntries(), false, 64<<10)
				if errors.Is(err, errCrash) {
					if r, err := s.ToLoad(dir); err != nil || r == nil {
						t.Fatalf("crash after %d, %d writes: ToLoad %+v, %v; want the directory still to load", first, second, r, err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if err := s.InstallDir(&testWriter{db: db, limit: -1}, dir, tree, testEntries(), false, 64<<10); err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, s, db, h, dir, group, 3)
			if n := records(t, db); n != 6 {
				t.Errorf("crash after %d, then %d writes, then a load: %d records, want 6 (root, group, base, d, f, s)", first, second, n)
			}
		}
	}
}

// TestInstallDirNoop: a directory loaded, or whose tree was replaced,
// since its entries were read is left alone; an entry naming a hard-link
// group the link table lacks is snapshot.ErrCorrupt, and nothing is
// written.
func TestInstallDirNoop(t *testing.T) {
	tree := snapshot.BlobRef{Hash: snapshot.Hash{1}}
	s, db, h := newNS(t)
	dir := baseDir(t, s, db, h, tree, 3)
	before := records(t, db)
	w := &testWriter{db: db, limit: -1}
	if err := s.InstallDir(w, dir, snapshot.BlobRef{Hash: snapshot.Hash{2}}, testEntries(), false, 64<<10); err != nil || w.writes != 0 {
		t.Errorf("load of a replaced tree: %v, %d writes; want none", err, w.writes)
	}
	if err := s.InstallDir(w, dir, tree, testEntries(), false, 64<<10); !errors.Is(err, snapshot.ErrCorrupt) || w.writes != 0 {
		t.Errorf("load naming a group the link table lacks: %v, %d writes; want ErrCorrupt and none", err, w.writes)
	}
	linkGroup(t, db, h)
	if err := s.InstallDir(w, dir, tree, testEntries(), false, 64<<10); err != nil {
		t.Fatal(err)
	}
	n, writes := records(t, db), w.writes
	if err := s.InstallDir(w, dir, tree, testEntries(), false, 64<<10); err != nil || w.writes != writes || records(t, db) != n {
		t.Errorf("second load: %v, %d writes; want none", err, w.writes-writes)
	}
	if before+4 != n {
		t.Errorf("%d records after the load, want %d", n, before+4)
	}
	if _, err := s.ToLoad(RootIno + 1000); !errors.Is(err, ErrNotFound) {
		t.Errorf("ToLoad of no inode: %v", err)
	}
	if err := s.Change(func(c *Change) error {
		_, err := c.Create(RootIno, "file", snapshot.TypeFile, 0o644, 0, "", Cred{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	err := db.View(func(txn *meta.Txn) error {
		ino, _, err := GetDentry(txn, RootIno, "file")
		if err != nil {
			return err
		}
		if _, err := s.ToLoad(ino); !errors.Is(err, ErrNotDir) {
			t.Errorf("ToLoad of a file: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
