package ns

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// TestReads checks each read against records made by changes: what it
// returns, its errors, and that an open file's in-memory record is the
// one read.
func TestReads(t *testing.T) {
	s, db, h := newNS(t)
	var dir, file, link uint64
	err := s.Change(func(c *Change) error {
		r, err := c.Create(RootIno, "d", snapshot.TypeDir, 0o750, 0, "", Cred{Uid: 7, Gid: 8})
		if err != nil {
			return err
		}
		dir = r.Ino
		if r, err = c.Create(RootIno, "f", snapshot.TypeFile, 0o640, 0, "", Cred{}); err != nil {
			return err
		}
		file = r.Ino
		if r, err = c.Create(RootIno, "s", snapshot.TypeSymlink, 0o777, 0, "target", Cred{}); err != nil {
			return err
		}
		link = r.Ino
		if err := c.SetXattr(file, "user.b", []byte("2"), 0); err != nil {
			return err
		}
		return c.SetXattr(file, "user.a", []byte("1"), 0)
	})
	if err != nil {
		t.Fatal(err)
	}
	base := baseDir(t, s, db, h, snapshot.BlobRef{Hash: snapshot.Hash{1}}, 2)

	a, err := s.Lookup(RootIno, "d")
	if want := (Attr{Ino: dir, Type: snapshot.TypeDir, Mode: 0o750, Nlink: 2, Uid: 7, Gid: 8, Size: 4096, Blocks: 8,
		Atime: 1, Mtime: 1, Ctime: 1, Parent: RootIno}); err != nil || a != want {
		t.Errorf("Lookup d: %+v, %v; want %+v", a, err, want)
	}
	if a, err := s.GetAttr(link); err != nil || a.Size != 6 || a.StMode() != ModeSymlink|0o777 {
		t.Errorf("GetAttr of a symlink: %+v, %v; want size 6 (its target's), mode %o", a, err, ModeSymlink|0o777)
	}
	for _, c := range []struct {
		parent uint64
		name   string
		want   error
	}{
		{RootIno, "missing", ErrNotFound},
		{file, "x", ErrNotDir},
		{RootIno, strings.Repeat("n", MaxNameLen+1), ErrNameTooLong},
	} {
		if _, err := s.Lookup(c.parent, c.name); !errors.Is(err, c.want) {
			t.Errorf("Lookup %d/%.10s: %v, want %v", c.parent, c.name, err, c.want)
		}
	}
	var nl *NotLoadedError
	if _, err := s.Lookup(base, "x"); !errors.As(err, &nl) || nl.Ino != base {
		t.Errorf("Lookup in a directory not loaded: %v, want it not loaded", err)
	}

	// An open file: its in-memory record is the one read.
	r, err := s.Stored(file)
	if err != nil {
		t.Fatal(err)
	}
	r.Size = 1000
	r.Xattrs = append(r.Xattrs, snapshot.Xattr{Name: "user.c", Value: []byte("3")})
	h.open[file] = r
	if a, err := s.Lookup(RootIno, "f"); err != nil || a.Size != 1000 || a.Blocks != 2 || a.StMode() != ModeRegular|0o640 {
		t.Errorf("Lookup of an open file: %+v, %v; want its in-memory size 1000, 2 blocks", a, err)
	}
	if a, err := s.GetAttr(file); err != nil || a.Size != 1000 {
		t.Errorf("GetAttr of an open file: %+v, %v; want its in-memory size 1000", a, err)
	}
	if names, err := s.ListXattr(file); err != nil || !slices.Equal(names, []string{"user.a", "user.b", "user.c"}) {
		t.Errorf("ListXattr of an open file: %v, %v", names, err)
	}
	v, err := s.GetXattr(file, "user.c")
	if err != nil || string(v) != "3" {
		t.Fatalf("GetXattr of an open file: %q, %v", v, err)
	}
	v[0] = 'x'
	if v, _ := s.GetXattr(file, "user.c"); string(v) != "3" {
		t.Errorf("GetXattr returned the in-memory record's own bytes: after a change to them it reads %q", v)
	}
	delete(h.open, file)
	if names, err := s.ListXattr(file); err != nil || !slices.Equal(names, []string{"user.a", "user.b"}) {
		t.Errorf("ListXattr: %v, %v", names, err)
	}
	if v, err := s.GetXattr(file, "user.a"); err != nil || string(v) != "1" {
		t.Errorf("GetXattr: %q, %v", v, err)
	}
	if _, err := s.GetXattr(file, "user.c"); !errors.Is(err, ErrNoAttr) {
		t.Errorf("GetXattr of an unset attribute: %v", err)
	}
	if _, err := s.GetAttr(9999); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetAttr of no inode: %v", err)
	}

	if target, err := s.Readlink(link); err != nil || target != "target" {
		t.Errorf("Readlink: %q, %v", target, err)
	}
	if _, err := s.Readlink(file); !errors.Is(err, ErrInvalid) {
		t.Errorf("Readlink of a file: %v", err)
	}

	want := []DirEntry{{Name: "base", Ino: base, Type: snapshot.TypeDir}, {Name: "d", Ino: dir, Type: snapshot.TypeDir},
		{Name: "f", Ino: file, Type: snapshot.TypeFile}, {Name: "s", Ino: link, Type: snapshot.TypeSymlink}}
	if es, err := s.ReadDir(RootIno); err != nil || !slices.Equal(es, want) {
		t.Errorf("ReadDir: %v, %v; want %v", es, err, want)
	}
	if _, err := s.ReadDir(file); !errors.Is(err, ErrNotDir) {
		t.Errorf("ReadDir of a file: %v", err)
	}

	if n := s.FreeFiles(); n != MaxFiles {
		t.Errorf("FreeFiles of a volume never checkpointed: %d", n)
	}
	root, err := s.Stored(RootIno)
	if err != nil {
		t.Fatal(err)
	}
	root.SubFiles = 5
	put(t, db, meta.Key64(meta.PrefixInode, RootIno), meta.EncodeInode(root))
	if n := s.FreeFiles(); n != MaxFiles-5 {
		t.Errorf("FreeFiles with 5 files: %d, want %d", n, MaxFiles-5)
	}
}

// TestTypeMode checks that st_mode type bits and entry types convert both
// ways.
func TestTypeMode(t *testing.T) {
	for _, typ := range []snapshot.EntryType{snapshot.TypeFile, snapshot.TypeDir, snapshot.TypeSymlink,
		snapshot.TypeFIFO, snapshot.TypeSocket, snapshot.TypeCharDev, snapshot.TypeBlockDev} {
		m := TypeMode(typ)
		if got, ok := TypeOfMode(m | 0o644); !ok || got != typ {
			t.Errorf("%v: mode %o is %v, %v", typ, m, got, ok)
		}
	}
	if _, ok := TypeOfMode(0o170000); ok {
		t.Error("type bits 0170000 are a type")
	}
}
