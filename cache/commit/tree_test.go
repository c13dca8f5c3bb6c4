package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

const testChunk = 4096

// openDB opens a metadata database over a fresh Badger.
func openDB(t *testing.T) *meta.DB {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).WithDetectConflicts(false))
	if err != nil {
		t.Fatal(err)
	}
	k := meta.NewDB(db, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = k.Close() })
	return k
}

// storedRecord is a Builder's Record over stored records alone.
func storedRecord(txn *meta.Txn, ino uint64) (*meta.Inode, bool, error) {
	it, err := txn.Get(meta.Key64(meta.PrefixInode, ino))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("inode %d: %w", ino, err)
	}
	var r *meta.Inode
	err = it.Value(func(b []byte) error {
		var derr error
		r, derr = meta.DecodeInode(b)
		return derr
	})
	return r, err == nil, err
}

// put stores records and, for those with a name, their dentries in dir.
func put(t *testing.T, db *meta.DB, dir uint64, named map[string]*meta.Inode, others ...*meta.Inode) {
	t.Helper()
	err := db.Update(func(txn *meta.Txn) error {
		for name, r := range named {
			if err := txn.Set(meta.DentryKey(dir, name), meta.DentryValue(r.Ino, r.Type)); err != nil {
				return err
			}
			others = append(others, r)
		}
		for _, r := range others {
			if err := txn.Set(meta.Key64(meta.PrefixInode, r.Ino), meta.EncodeInode(r)); err != nil {
				return err
			}
			if r.LinkID != 0 {
				if err := txn.Set(meta.Key64(meta.PrefixLink, r.LinkID), meta.Put64(r.Ino)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// newBuilder returns a Builder over stored records, into a fresh volume.
func newBuilder(t *testing.T) (*Builder, *snapshot.Repo) {
	t.Helper()
	r := testRepo(t)
	return &Builder{Up: NewUploader(context.Background(), r, 2, time.Now()), ChunkSize: testChunk, Record: storedRecord}, r
}

// readTree finishes b's uploads and decodes the tree ref.
func readTree(t *testing.T, b *Builder, r *snapshot.Repo, ref snapshot.BlobRef) []snapshot.Entry {
	t.Helper()
	if err := b.Up.Finish(); err != nil {
		t.Fatal(err)
	}
	entries, err := snapshot.DecodeTree(readBlob(t, r, ref))
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// captured adds block i of file ino to b's uploader and returns its
// reference.
func captured(t *testing.T, b *Builder, ino, i uint64) snapshot.BlobRef {
	t.Helper()
	b.Up.AddBlock(BlockKey{ino, i}, 1, randBytes(t, 64), false)
	ub, _ := b.Up.Block(BlockKey{ino, i})
	return ub.Ref
}

func TestFileEntry(t *testing.T) {
	b, _ := newBuilder(t)
	old0, old2, old3 := snapshot.BlobRef{Offset: 100}, snapshot.BlobRef{Offset: 200}, snapshot.BlobRef{Offset: 300}
	r := &meta.Inode{Ino: 5, Type: snapshot.TypeFile, Size: 3 * testChunk, Nlink: 1,
		Chunks: []snapshot.Chunk{{Index: 0, Ref: old0}, {Index: 2, Ref: old2}, {Index: 3, Ref: old3}},
		Dirty:  []uint64{0, 1, 2, 7}}
	new0 := captured(t, b, 5, 0)
	new1 := captured(t, b, 5, 1)
	b.Up.AddBlock(BlockKey{5, 2}, 1, make([]byte, 64), false) // a hole now
	// Block 7 is past the end: never captured, never asked for.

	e, err := b.FileEntry(r, "f")
	if err != nil {
		t.Fatal(err)
	}
	want := []snapshot.Chunk{{Index: 0, Ref: new0}, {Index: 1, Ref: new1}}
	if e.Name != "f" || e.Size != r.Size || !slices.Equal(e.Chunks, want) {
		t.Errorf("entry %q size %d chunks %v; want f, %d, %v (block 0 replaced, 1 added, 2 a hole, 3 past the end dropped)",
			e.Name, e.Size, e.Chunks, r.Size, want)
	}
	if !slices.Equal(r.Chunks, []snapshot.Chunk{{Index: 0, Ref: old0}, {Index: 2, Ref: old2}, {Index: 3, Ref: old3}}) {
		t.Error("FileEntry changed the record's chunks")
	}

	r.Ino = 6 // a file none of whose dirty blocks was captured
	if _, err := b.FileEntry(r, "f"); !errors.Is(err, ErrInconsistent) {
		t.Errorf("entry of a file whose dirty block was not captured: %v; want ErrInconsistent", err)
	}

	link := &meta.Inode{Ino: 8, Type: snapshot.TypeSymlink, Target: "abc", Nlink: 1}
	if e, err := b.FileEntry(link, "s"); err != nil || e.Size != 3 || e.Target != "abc" || e.Chunks != nil {
		t.Errorf("symlink entry %+v, %v; want its target and size 3", e, err)
	}
}

func TestBuildDir(t *testing.T) {
	db := openDB(t)
	b, repo := newBuilder(t)
	subTree := snapshot.BlobRef{Offset: 1, Length: 2}
	rebuilt := Dir{Ref: snapshot.BlobRef{Offset: 3, Length: 4}, SubFiles: 1, SubBytes: 2, Mod: true}
	dir := &meta.Inode{Ino: 1, Type: snapshot.TypeDir, Nlink: 4, Loaded: true}
	put(t, db, 1, map[string]*meta.Inode{
		"f": {Ino: 2, Type: snapshot.TypeFile, Size: 10, Nlink: 1, Parent: 1, Dirty: []uint64{0}},
		"d": {Ino: 3, Type: snapshot.TypeDir, Nlink: 2, Parent: 1, Tree: subTree, SubFiles: 4, SubBytes: 100},
		"l": {Ino: 4, Type: snapshot.TypeFile, Size: 7, Nlink: 2, LinkID: 9},
		"e": {Ino: 5, Type: snapshot.TypeDir, Nlink: 2, Parent: 1},
	}, dir)
	fref := captured(t, b, 2, 0)
	built := map[uint64]Dir{5: rebuilt}

	var got Dir
	err := db.View(func(txn *meta.Txn) error {
		var err error
		got, err = b.Dir(txn, dir, built)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.SubFiles != 7 || got.SubBytes != 119 || !got.Mod || got.Ref.IsZero() {
		t.Errorf("built %+v; want 7 files (f, d's 4, l, e's 1), 119 bytes, modified, a tree", got)
	}
	entries := readTree(t, b, repo, got.Ref)
	byName := map[string]snapshot.Entry{}
	for _, e := range entries {
		byName[e.Name] = e
	}
	if e := byName["f"]; !slices.Equal(e.Chunks, []snapshot.Chunk{{Index: 0, Ref: fref}}) {
		t.Errorf("f's chunks %v; want its captured block", e.Chunks)
	}
	if e := byName["d"]; e.Tree != subTree || e.SubFiles != 4 {
		t.Errorf("d (not rebuilt) has tree %v, %d files; want its record's", e.Tree, e.SubFiles)
	}
	if e := byName["e"]; e.Tree != rebuilt.Ref || e.SubBytes != 2 {
		t.Errorf("e (rebuilt) has tree %v, %d bytes; want the rebuilt one", e.Tree, e.SubBytes)
	}
	if e := byName["l"]; e.LinkID != 9 || e.Size != 0 {
		t.Errorf("l is %+v; want a bare name of hard-link group 9", e)
	}

	// The same entries again: the stored tree is kept, not added again.
	dir.Tree = got.Ref
	putsBefore, _ := b.Up.Stats()
	err = db.View(func(txn *meta.Txn) error {
		again, err := b.Dir(txn, dir, built)
		if err == nil && again.Ref != got.Ref {
			t.Errorf("unchanged directory got tree %v; want its stored %v", again.Ref, got.Ref)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Up.Finish(); err != nil {
		t.Fatal(err)
	}
	if puts, _ := b.Up.Stats(); puts != putsBefore {
		t.Errorf("an unchanged tree was uploaded again (%d packs, %d before)", puts, putsBefore)
	}

	// A directory not loaded keeps what its record says.
	notLoaded := &meta.Inode{Ino: 3, Type: snapshot.TypeDir, Tree: subTree, SubFiles: 4, SubBytes: 100}
	if d, err := b.Dir(nil, notLoaded, nil); err != nil || d != (Dir{Ref: subTree, SubFiles: 4, SubBytes: 100, Mod: true}) {
		t.Errorf("directory not loaded built as %+v, %v; want its record's tree", d, err)
	}

	// A child directory without a tree (and no origin) is inconsistent.
	put(t, db, 1, map[string]*meta.Inode{"z": {Ino: 6, Type: snapshot.TypeDir, Nlink: 2, Parent: 1}})
	err = db.View(func(txn *meta.Txn) error { _, err := b.Dir(txn, dir, built); return err })
	if !errors.Is(err, ErrInconsistent) {
		t.Errorf("directory with a treeless child: %v; want ErrInconsistent", err)
	}
}

// In a virtual workspace over a host directory, a directory that differs
// in nothing from its origin is stored as the origin alone.
func TestBuildDirReadsThrough(t *testing.T) {
	db := openDB(t)
	b, _ := newBuilder(t)
	b.ReadsThrough = true
	dir := &meta.Inode{Ino: 1, Type: snapshot.TypeDir, Nlink: 2, Loaded: true, HasOrigin: true, Origin: "."}
	put(t, db, 1, map[string]*meta.Inode{
		"f": {Ino: 2, Type: snapshot.TypeFile, Size: 10, Nlink: 1, Parent: 1, HasOrigin: true, Origin: "f", OriginSize: 10},
		"d": {Ino: 3, Type: snapshot.TypeDir, Nlink: 2, Parent: 1, HasOrigin: true, Origin: "d"},
	}, dir)
	build := func() Dir {
		var d Dir
		if err := db.View(func(txn *meta.Txn) error {
			var err error
			d, err = b.Dir(txn, dir, nil)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := build(); d.Mod || !d.Ref.IsZero() || d.SubFiles != 1 {
		t.Errorf("unmodified directory over its origin built as %+v; want no tree, not modified, 1 file", d)
	}
	put(t, db, 1, nil, &meta.Inode{Ino: 2, Type: snapshot.TypeFile, Size: 10, Nlink: 1, Parent: 1, HasOrigin: true, Origin: "f", OriginSize: 10, Mod: true})
	if d := build(); !d.Mod || d.Ref.IsZero() {
		t.Errorf("directory with a modified file built as %+v; want a tree of its own, modified", d)
	}
	if root := b.Root(dir, Dir{Mod: true}); !root.Modified || !root.HasOrigin {
		t.Errorf("root %+v; want modified (reads through), with its origin", root)
	}
	b.ReadsThrough = false
	if root := b.Root(dir, Dir{Mod: true}); root.Modified {
		t.Error("root of a volume without a lower marked modified")
	}
}

func TestLinkTable(t *testing.T) {
	db := openDB(t)
	b, repo := newBuilder(t)
	var ref *snapshot.BlobRef
	view := func() {
		t.Helper()
		if err := db.View(func(txn *meta.Txn) error {
			var err error
			ref, err = b.LinkTable(txn)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	view()
	if ref != nil {
		t.Errorf("link table without groups = %v; want nil", ref)
	}
	put(t, db, 0, nil,
		&meta.Inode{Ino: 10, Type: snapshot.TypeFile, Size: 5, Nlink: 2, LinkID: 0x77, Dirty: []uint64{0}},
		&meta.Inode{Ino: 11, Type: snapshot.TypeFile, Size: 5, Nlink: 0, LinkID: 0x78}) // every name gone
	chunk := captured(t, b, 10, 0)
	view()
	if ref == nil {
		t.Fatal("link table with a group = nil")
	}
	entries := readTree(t, b, repo, *ref)
	if len(entries) != 1 || entries[0].Name != snapshot.LinkName(0x77) || !slices.Equal(entries[0].Chunks, []snapshot.Chunk{{Index: 0, Ref: chunk}}) {
		t.Errorf("link table %+v; want group 77 alone, with its captured block", entries)
	}
}
