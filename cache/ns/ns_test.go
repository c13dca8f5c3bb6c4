package ns

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// fakeHost is a Host with no lower layer; its open files are the records
// in open (none unless a test adds them).
type fakeHost struct {
	next  uint64
	seq   uint64
	dirty meta.DirtySet
	gone  []uint64
	open  map[uint64]*meta.Inode
}

// fakeFile is an open file of a fakeHost.
type fakeFile struct {
	h   *fakeHost
	ino uint64
}

func (f fakeFile) Record() *meta.Inode   { return f.h.open[f.ino] }
func (f fakeFile) Install(r *meta.Inode) { f.h.open[f.ino] = r }
func (f fakeFile) Unlock()               {}

func (h *fakeHost) LockOpen(ino uint64) OpenFile {
	if h.open[ino] == nil {
		return nil
	}
	return fakeFile{h, ino}
}

func (h *fakeHost) ViewOpen(ino uint64, fn func(*meta.Inode)) bool {
	if r := h.open[ino]; r != nil {
		fn(r)
		return true
	}
	return false
}

func (h *fakeHost) OpenCount(ino uint64) int {
	if h.open[ino] != nil {
		return 1
	}
	return 0
}

func (h *fakeHost) Modified(*meta.Inode)           {}
func (h *fakeHost) AllocIno() (uint64, error)      { h.next++; return h.next, nil }
func (h *fakeHost) Now() int64                     { return 1 }
func (h *fakeHost) Deleted(ino uint64, _ []uint64) { h.gone = append(h.gone, ino) }

func (h *fakeHost) CommitMarked(txn *meta.Txn, d *meta.Delta, dirs map[uint64]bool) error {
	for dir := range dirs {
		h.seq++
		if err := txn.Set(meta.Key64(meta.PrefixTreeMark, dir), meta.Put64(h.seq)); err != nil {
			return err
		}
		d.Mark(dir, h.seq)
	}
	if err := txn.Commit(); err != nil {
		return err
	}
	h.dirty.Apply(d)
	return nil
}

// newNS returns a namespace with an empty loaded root.
func newNS(t *testing.T) (*Namespace, *meta.DB, *fakeHost) {
	t.Helper()
	bdb, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil).WithDetectConflicts(false))
	if err != nil {
		t.Fatal(err)
	}
	db := meta.NewDB(bdb, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = db.Close() })
	h := &fakeHost{next: RootIno, open: map[uint64]*meta.Inode{}}
	root := &meta.Inode{Ino: RootIno, Type: snapshot.TypeDir, Mode: 0o755, Nlink: 2, Loaded: true}
	if err := db.Update(func(txn *meta.Txn) error {
		return txn.Set(meta.Key64(meta.PrefixInode, RootIno), meta.EncodeInode(root))
	}); err != nil {
		t.Fatal(err)
	}
	return New(db, h, snapshot.Hash{}), db, h
}

func check(t *testing.T, db *meta.DB, h *fakeHost, step string) {
	t.Helper()
	if err := CheckInvariants(db); err != nil {
		t.Fatalf("after %s: %v", step, err)
	}
	if err := h.dirty.CheckInvariants(db); err != nil {
		t.Fatalf("after %s: %v", step, err)
	}
}

// TestChangesKeepInvariants runs each kind of change and checks the
// namespace's invariants after it, and what a change returns.
func TestChangesKeepInvariants(t *testing.T) {
	s, db, h := newNS(t)
	var dir, file, other, sub uint64
	steps := []struct {
		name string
		fn   func(c *Change) error
		want error
	}{
		{"mkdir d", func(c *Change) error {
			r, err := c.Create(RootIno, "d", snapshot.TypeDir, 0o755, 0, "", Cred{})
			if err == nil {
				dir = r.Ino
			}
			return err
		}, nil},
		{"create f", func(c *Change) error {
			r, err := c.Create(RootIno, "f", snapshot.TypeFile, 0o644, 0, "", Cred{})
			if err == nil {
				file = r.Ino
			}
			return err
		}, nil},
		{"create f again", func(c *Change) error {
			_, err := c.Create(RootIno, "f", snapshot.TypeFile, 0o644, 0, "", Cred{})
			return err
		}, ErrExists},
		{"link d/g to f", func(c *Change) error { _, err := c.Link(file, dir, "g"); return err }, nil},
		{"create e", func(c *Change) error {
			r, err := c.Create(RootIno, "e", snapshot.TypeFile, 0o644, 0, "", Cred{})
			if err == nil {
				other = r.Ino
			}
			return err
		}, nil},
		{"rename e over f", func(c *Change) error { return c.Rename(RootIno, "e", RootIno, "f", 0) }, nil},
		{"rename d into itself", func(c *Change) error { return c.Rename(RootIno, "d", dir, "x", 0) }, ErrInvalid},
		{"mkdir d/s", func(c *Change) error {
			r, err := c.Create(dir, "s", snapshot.TypeDir, 0o755, 0, "", Cred{})
			if err == nil {
				sub = r.Ino
			}
			return err
		}, nil},
		{"exchange d/s and f", func(c *Change) error { return c.Rename(dir, "s", RootIno, "f", RenameExchange) }, nil},
		{"rmdir d", func(c *Change) error { return c.Remove(RootIno, "d", true) }, ErrNotEmpty},
		{"unlink d/g", func(c *Change) error { return c.Remove(dir, "g", false) }, nil},
		{"unlink d/s (the file e now)", func(c *Change) error { return c.Remove(dir, "s", false) }, nil},
		{"rmdir f (the directory s now)", func(c *Change) error { return c.Remove(RootIno, "f", true) }, nil},
		{"rmdir d", func(c *Change) error { return c.Remove(RootIno, "d", true) }, nil},
	}
	for _, st := range steps {
		if err := s.Change(st.fn); !errors.Is(err, st.want) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		check(t, db, h, st.name)
	}
	if want := []uint64{file, other, sub, dir}; !slices.Equal(h.gone, want) {
		t.Errorf("deleted inodes %v, want %v: each once its last name is gone", h.gone, want)
	}
}

// TestCheckInvariantsFails checks that CheckInvariants reports a broken
// namespace: a directory's Nlink that its subdirectories do not make, and
// a dentry whose inode has no record.
func TestCheckInvariantsFails(t *testing.T) {
	s, db, h := newNS(t)
	var d uint64
	if err := s.Change(func(c *Change) error {
		r, err := c.Create(RootIno, "d", snapshot.TypeDir, 0o755, 0, "", Cred{})
		if err == nil {
			d = r.Ino
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	check(t, db, h, "mkdir")
	set := func(k, v []byte) {
		t.Helper()
		if err := db.Update(func(txn *meta.Txn) error { return txn.Set(k, v) }); err != nil {
			t.Fatal(err)
		}
	}
	root := &meta.Inode{Ino: RootIno, Type: snapshot.TypeDir, Nlink: 2, Loaded: true}
	set(meta.Key64(meta.PrefixInode, RootIno), meta.EncodeInode(root))
	if err := CheckInvariants(db); err == nil || !strings.Contains(err.Error(), "Nlink 2, 1 subdirectories") {
		t.Errorf("root with Nlink 2 and one subdirectory: %v", err)
	}
	root.Nlink = 3
	set(meta.Key64(meta.PrefixInode, RootIno), meta.EncodeInode(root))
	set(meta.DentryKey(RootIno, "ghost"), meta.DentryValue(d+100, snapshot.TypeFile))
	if err := CheckInvariants(db); err == nil || !strings.Contains(err.Error(), "has no record") {
		t.Errorf("a dentry naming no record: %v", err)
	}
}
