package data

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// testLayout is a file's record for File's tests.
type testLayout struct {
	size, origin uint64
	inline       bool
	dirty        map[uint64]bool
	chunks       map[uint64]bool
}

func (l *testLayout) Size() uint64          { return l.size }
func (l *testLayout) Inline() bool          { return l.inline }
func (l *testLayout) IsDirty(b uint64) bool { return l.dirty[b] }
func (l *testLayout) Dirty() bool {
	for _, d := range l.dirty {
		if d {
			return true
		}
	}
	return false
}
func (l *testLayout) Chunk(b uint64) (snapshot.BlobRef, bool) {
	return snapshot.BlobRef{}, l.chunks[b]
}
func (l *testLayout) OriginSize() uint64 { return l.origin }
func (l *testLayout) Origin() string     { return "o" }

// originsFunc is a lower layer that opens every origin with a function.
type originsFunc func() (OriginFile, error)

func (f originsFunc) Open(context.Context, string) (OriginFile, error) { return f() }

// newSources returns the Sources of a volume of block size bs with a fresh
// data directory and block cache, over lower (nil: none).
func newSources(t *testing.T, bs uint64, lower Origins) *Sources {
	t.Helper()
	files, err := NewFiles(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	return &Sources{Files: files, Cache: NewCache(1<<30, nil, discard), Lower: lower, BlockSize: bs}
}

// origin is an origin file of fixed bytes.
type origin struct {
	*bytes.Reader
	closed bool
}

func (o *origin) Close() error { o.closed = true; return nil }

// TestFileSources: each block reads from its source — local bytes for
// dirty and present blocks, the origin for blocks of the lower layer (up to
// the origin's size), zeros for holes — and installing a copied-up or
// fetched block makes it local; the invariants hold throughout and catch a
// present block that is dirty or past the end.
func TestFileSources(t *testing.T) {
	const bs = 4
	ctx := context.Background()
	src := &origin{Reader: bytes.NewReader([]byte("ABCDEFGHIJKLMNOP"))}
	s := newSources(t, bs, originsFunc(func() (OriginFile, error) { return src, nil }))
	l := &testLayout{size: 14, origin: 10, dirty: map[uint64]bool{}, chunks: map[uint64]bool{1: true}}
	d := NewFile(s, 7, nil, nil)
	t.Cleanup(d.Close)
	counted := func() int64 { return s.Cache.Counted()[7] }

	want := []Source{Lower, Remote, Lower, Hole}
	for b, w := range want {
		if got := d.Source(l, uint64(b)); got != w {
			t.Errorf("block %d: source %d, want %d", b, got, w)
		}
	}
	if got := d.RemoteFrom(l, 0, 8); !slices.Equal(got, []uint64{1}) {
		t.Errorf("remote blocks %v, want [1]", got)
	}
	// Block 1 fetched: its chunk's bytes.
	if err := d.Install(l, 1, []byte("efgh")); err != nil {
		t.Fatal(err)
	}
	if err := d.OpenOrigin(ctx, l); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 14)
	if err := d.ReadRange(l, p, 0); err != nil {
		t.Fatal(err)
	}
	// Origin bytes past its size (10) read as zeros, as does the hole.
	if w := "ABCDefghIJ\x00\x00\x00\x00"; string(p) != w {
		t.Fatalf("read %q, want %q", p, w)
	}
	// Copy-up of block 2: only the origin's 2 bytes, then zeros to the
	// block's end.
	before := counted()
	if err := d.CopyUp(ctx, l, 2); err != nil {
		t.Fatalf("copy-up of block 2: %v", err)
	}
	if cp := make([]byte, bs); d.ReadLocal(l, cp, 2*bs) != nil || string(cp) != "IJ\x00\x00" {
		t.Fatalf("copy-up of block 2: %q", cp)
	}
	if added := counted() - before; added != bs {
		t.Fatalf("install of block 2: %d bytes counted; want %d", added, bs)
	}
	l.origin = 0 // the origin is gone: what was copied up stays local
	if err := d.ReadRange(l, p, 0); err != nil {
		t.Fatal(err)
	}
	if w := "\x00\x00\x00\x00efghIJ\x00\x00\x00\x00"; string(p) != w {
		t.Fatalf("after the copy-up %q, want %q", p, w)
	}
	if err := d.CheckInvariants(l); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(func(yield func(uint64) bool) {
		for b := range d.Present() {
			if !yield(b) {
				return
			}
		}
	}); !slices.Equal(got, []uint64{1, 2}) || !d.PresenceDirty() {
		t.Fatalf("present %v (dirty %v), want [1 2], not yet persisted", got, d.PresenceDirty())
	}
	if got := DecodePresence(d.PresenceRecord()); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("presence record %v", got)
	}

	// Broken invariants are reported.
	l.dirty[1] = true
	if err := d.CheckInvariants(l); err == nil || !strings.Contains(err.Error(), "both present and dirty") {
		t.Errorf("present and dirty block: %v", err)
	}
	l.dirty[1] = false
	s.Cache.Add(7, 1)
	if err := d.CheckInvariants(l); err == nil || !strings.Contains(err.Error(), "block cache counts") {
		t.Errorf("block cache counting more than the present blocks: %v", err)
	}
	s.Cache.Add(7, -1)
	l.size = 6
	if err := d.CheckInvariants(l); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("present block past the end: %v", err)
	}
	l.size, before = 14, counted()
	if err := d.Cut(l, 8); err != nil {
		t.Fatal(err)
	}
	l.size = 8
	if freed := before - counted(); freed != bs {
		t.Errorf("cutting to 2 blocks freed %d bytes, want %d", freed, bs)
	}
	if err := d.CheckInvariants(l); err != nil {
		t.Error(err)
	}
	d.Close()
	if !src.closed {
		t.Error("Close left the origin file open")
	}
}

// TestFileOriginError: a failed read of the origin wraps ErrOrigin.
func TestFileOriginError(t *testing.T) {
	boom := errors.New("boom")
	s := newSources(t, 4, originsFunc(func() (OriginFile, error) { return failing{boom}, nil }))
	d := NewFile(s, 1, nil, nil)
	l := &testLayout{size: 4, origin: 4}
	if err := d.OpenOrigin(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if err := d.ReadRange(l, make([]byte, 4), 0); !errors.Is(err, ErrOrigin) || !errors.Is(err, boom) {
		t.Fatalf("read of a failing origin: %v", err)
	}
}

type failing struct{ err error }

func (f failing) ReadAt([]byte, int64) (int, error) { return 0, f.err }
func (f failing) Close() error                      { return nil }

// TestFileEvictable: eviction spares the blocks around the last read's end
// and the read-ahead window after it, the block installed last, and dirty
// blocks.
func TestFileEvictable(t *testing.T) {
	d := NewFile(newSources(t, 4, nil), 3, []uint64{0, 1, 2, 3, 4, 5, 6, 8, 9}, nil)
	t.Cleanup(d.Close)
	l := &testLayout{size: 40, dirty: map[uint64]bool{9: true}}
	if err := d.Install(l, 0, []byte("abcd")); err != nil { // installed last
		t.Fatal(err)
	}
	d.NoteRead(context.Background(), 0, 16) // ends in block 4
	if got := d.Evictable(l, 2); !slices.Equal(got, []uint64{1, 2, 8}) {
		t.Fatalf("evictable %v, want [1 2 8]", got)
	}
	l.inline = true
	if got := d.Evictable(l, 2); got != nil {
		t.Fatalf("inline file: evictable %v, want none", got)
	}
}

// storedMap is the stored records of files for LoadFile's and
// EvictClosed's tests (a RecordsTxn).
type storedMap struct{ inline, presence map[uint64][]byte }

func (m storedMap) SetInline(ino uint64, b []byte) error   { return set(m.inline, ino, b) }
func (m storedMap) SetPresence(ino uint64, b []byte) error { return set(m.presence, ino, b) }

// set stores b as m's record of ino; nil deletes it.
func set(m map[uint64][]byte, ino uint64, b []byte) error {
	if b == nil {
		delete(m, ino)
	} else {
		m[ino] = b
	}
	return nil
}

func (m storedMap) Inline(ino uint64) ([]byte, bool, error) {
	b, ok := m.inline[ino]
	return b, ok, nil
}

func (m storedMap) Presence(ino uint64) ([]byte, bool, error) {
	b, ok := m.presence[ino]
	return b, ok, nil
}

// TestLoadFile: a file loads the blocks its presence record lists, and an
// inline file its inline bytes when block 0 is present or dirty; an
// inline file whose bytes are missing then is ErrInlineMissing.
func TestLoadFile(t *testing.T) {
	s := newSources(t, 4, nil)
	st := storedMap{
		inline:   map[uint64][]byte{2: []byte("ab")},
		presence: map[uint64][]byte{1: EncodePresence(map[uint64]bool{0: true, 2: true}), 2: EncodePresence(map[uint64]bool{0: true})},
	}
	d, err := s.LoadFile(1, &testLayout{size: 12}, st)
	if err != nil || !d.IsPresent(0) || d.IsPresent(1) || !d.IsPresent(2) {
		t.Fatalf("load: %v, present %v", err, d.Present())
	}
	d, err = s.LoadFile(2, &testLayout{size: 2, inline: true}, st)
	if err != nil {
		t.Fatal(err)
	}
	if p := make([]byte, 2); d.ReadLocal(&testLayout{size: 2, inline: true}, p, 0) != nil || string(p) != "ab" {
		t.Fatalf("inline bytes %q, want \"ab\"", p)
	}
	if _, err := s.LoadFile(3, &testLayout{size: 2, inline: true, dirty: map[uint64]bool{0: true}}, st); !errors.Is(err, ErrInlineMissing) {
		t.Fatalf("dirty inline file without its bytes: %v, want ErrInlineMissing", err)
	}
	if _, err := s.LoadFile(3, &testLayout{size: 2, inline: true}, st); err != nil {
		t.Fatalf("clean inline file, nothing present: %v", err)
	}
}

// TestFileAddPresent: blocks a commit made clean become present, counted
// by their extents in the file (the last one short), once each, and the
// presence is persisted.
func TestFileAddPresent(t *testing.T) {
	s := newSources(t, 4, nil)
	d := NewFile(s, 7, nil, nil)
	t.Cleanup(d.Close)
	l := &testLayout{size: 10, chunks: map[uint64]bool{0: true}}
	if err := d.Install(l, 0, []byte("abcd")); err != nil { // the presence changes
		t.Fatal(err)
	}
	d.AddPresent([]uint64{1, 2}, l.size)
	if !d.IsPresent(0) || !d.IsPresent(1) || !d.IsPresent(2) || d.PresenceDirty() {
		t.Fatalf("present %v, presence dirty %v; want blocks 0 to 2, persisted", d.Present(), d.PresenceDirty())
	}
	if n := s.Cache.Counted()[7]; n != 10 {
		t.Fatalf("the block cache counts %d bytes, want 10 (4 + 4 + 2)", n)
	}
	d.AddPresent([]uint64{2}, l.size)
	if n := s.Cache.Counted()[7]; n != 10 {
		t.Fatalf("a block present already counted again: %d bytes, want 10", n)
	}
	if err := d.CheckInvariants(l); err != nil {
		t.Fatal(err)
	}
}

// TestFileReplace: a file whose blocks change under it keeps only the
// present blocks kept; the others and its dirty blocks read as zeros from
// its data file, cut to the new size; with nothing kept its data file goes,
// unless it is pinned; an inline file keeps its bytes only with block 0.
func TestFileReplace(t *testing.T) {
	const bs = 4
	// setup returns a file of 12 bytes with blocks 0 and 1 present and
	// block 2 dirty.
	setup := func(t *testing.T) (*Sources, *File, *testLayout) {
		s := newSources(t, bs, nil)
		d := NewFile(s, 7, nil, nil)
		t.Cleanup(d.Close)
		l := &testLayout{size: 12, dirty: map[uint64]bool{}, chunks: map[uint64]bool{0: true, 1: true}}
		for b, p := range []string{"abcd", "efgh"} {
			if err := d.Install(l, uint64(b), []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		l.dirty[2] = true
		if err := d.Write(l, []byte("ijkl"), 8); err != nil {
			t.Fatal(err)
		}
		return s, d, l
	}
	dataFile := func(t *testing.T, s *Sources) []byte {
		t.Helper()
		f, err := s.Files.Open(7, false)
		if err != nil || f == nil {
			t.Fatalf("data file: %v, %v", f, err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, st.Size())
		if _, err := f.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("some kept", func(t *testing.T) {
		s, d, l := setup(t)
		if err := d.Replace(l, map[uint64]bool{0: true}, 10); err != nil {
			t.Fatal(err)
		}
		if !d.IsPresent(0) || d.IsPresent(1) || !d.PresenceDirty() {
			t.Fatalf("present %v (dirty %v); want block 0, not yet persisted", d.Present(), d.PresenceDirty())
		}
		if n := s.Cache.Counted()[7]; n != 4 {
			t.Fatalf("the block cache counts %d bytes, want 4 (block 0)", n)
		}
		if got := dataFile(t, s); string(got) != "abcd\x00\x00\x00\x00\x00\x00" {
			t.Fatalf("data file %q; want block 0, zeros, 10 bytes", got)
		}
	})
	t.Run("nothing kept", func(t *testing.T) {
		s, d, l := setup(t)
		if err := d.Replace(l, map[uint64]bool{}, 10); err != nil {
			t.Fatal(err)
		}
		if len(d.Present()) != 0 || s.Cache.Counted()[7] != 0 || d.DataFile() != nil {
			t.Fatalf("present %v, counted %d, data file open %v; want none", d.Present(), s.Cache.Counted()[7], d.DataFile() != nil)
		}
		if f, err := s.Files.Open(7, false); f != nil || err != nil {
			t.Fatalf("data file left: %v, %v", f, err)
		}
	})
	t.Run("nothing kept, pinned", func(t *testing.T) {
		s, d, l := setup(t)
		f, err := d.Pin(l, false)
		if err != nil || f == nil {
			t.Fatalf("pin: %v, %v", f, err)
		}
		t.Cleanup(func() { f.Close() })
		if err := d.Replace(l, map[uint64]bool{}, 6); err != nil {
			t.Fatal(err)
		}
		if got := dataFile(t, s); string(got) != "\x00\x00\x00\x00\x00\x00" {
			t.Fatalf("pinned data file %q; want 6 zeros", got)
		}
	})
	t.Run("inline", func(t *testing.T) {
		s := newSources(t, bs, nil)
		l := &testLayout{size: 3, inline: true, chunks: map[uint64]bool{0: true}}
		for _, keep := range []bool{true, false} {
			d := NewFile(s, 8, nil, nil)
			if err := d.Install(l, 0, []byte("abc")); err != nil {
				t.Fatal(err)
			}
			if err := d.Replace(l, map[uint64]bool{0: keep}, 3); err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 3)
			if err := d.ReadLocal(l, p, 0); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]string{true: "abc", false: "\x00\x00\x00"}[keep]; string(p) != want || d.IsPresent(0) != keep {
				t.Errorf("block 0 kept %v: inline bytes %q, present %v; want %q", keep, p, d.IsPresent(0), want)
			}
		}
	})
}

// TestEvictClosed: a closed file's eviction reads its presence record and
// deletes it, with a clean inline file's inline bytes, in the one
// transaction it is given, and only if it committed does the block cache
// stop counting the file and its data file go (all of it, or the present
// blocks punched out if it has dirty ones); a file that is gone or has no
// presence record has nothing written and only its count dropped.
func TestEvictClosed(t *testing.T) {
	s := newSources(t, 4, nil)
	st := storedMap{inline: map[uint64][]byte{}, presence: map[uint64][]byte{}}
	txns := 0
	evict := func(ino uint64, l Layout, fail error) error {
		return s.EvictClosed(ino, func(fn func(Layout, RecordsTxn) error) error {
			txns++
			if err := fn(l, st); err != nil {
				return err
			}
			return fail
		})
	}
	setup := func(ino uint64, present ...uint64) {
		t.Helper()
		p := map[uint64]bool{}
		for _, b := range present {
			p[b] = true
		}
		st.presence[ino] = EncodePresence(p)
		f, err := s.Files.Open(ino, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("abcdefghijkl"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		s.Cache.Load(ino, int64(4*len(present)))
	}
	exists := func(ino uint64) bool {
		f, err := s.Files.Open(ino, false)
		if err != nil {
			t.Fatal(err)
		}
		if f != nil {
			f.Close()
		}
		return f != nil
	}

	setup(1, 0, 2)
	if err := evict(1, &testLayout{size: 12, chunks: map[uint64]bool{0: true, 2: true}}, errors.New("commit failed")); err == nil {
		t.Fatal("a transaction that failed: no error")
	}
	if s.Cache.Bytes(1) != 8 || !exists(1) {
		t.Fatalf("after a failed transaction: counted %d, data file %v; want both kept", s.Cache.Bytes(1), exists(1))
	}
	st.presence[1] = EncodePresence(map[uint64]bool{0: true, 2: true}) // the failed transaction's writes are not committed
	if err := evict(1, &testLayout{size: 12, chunks: map[uint64]bool{0: true, 2: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.presence[1]; ok || s.Cache.Bytes(1) != 0 || exists(1) {
		t.Fatalf("clean file: presence record kept %v, counted %d, data file %v; want none", ok, s.Cache.Bytes(1), exists(1))
	}

	setup(2, 0, 2)
	if err := evict(2, &testLayout{size: 12, dirty: map[uint64]bool{1: true}, chunks: map[uint64]bool{0: true, 2: true}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := s.Files.Open(2, false)
	if err != nil || f == nil {
		t.Fatalf("file with a dirty block: data file %v, %v; want it kept", f, err)
	}
	p := make([]byte, 12)
	_, err = f.ReadAt(p, 0)
	f.Close()
	if err != nil || string(p) != "\x00\x00\x00\x00efgh\x00\x00\x00\x00" {
		t.Fatalf("file with a dirty block: data file %q, %v; want the present blocks punched out, the dirty one kept", p, err)
	}

	st.presence[3], st.inline[3], st.inline[4] = EncodePresence(map[uint64]bool{0: true}), []byte("ab"), []byte("cd")
	st.presence[4] = EncodePresence(map[uint64]bool{})
	if err := evict(3, &testLayout{size: 2, inline: true}, nil); err != nil {
		t.Fatal(err)
	}
	if err := evict(4, &testLayout{size: 2, inline: true, dirty: map[uint64]bool{0: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.inline[3]; ok {
		t.Fatal("clean inline file: its inline bytes kept")
	}
	if _, ok := st.inline[4]; !ok {
		t.Fatal("inline file with block 0 dirty: its inline bytes deleted")
	}

	setup(5, 0)
	delete(st.presence, 5)
	setup(6, 0)
	n := txns
	if err := evict(5, &testLayout{size: 4, chunks: map[uint64]bool{0: true}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := evict(6, nil, nil); err != nil {
		t.Fatal(err)
	}
	if txns != n+2 || s.Cache.Bytes(5) != 0 || s.Cache.Bytes(6) != 0 || !exists(5) || !exists(6) {
		t.Fatalf("no presence record, and a file gone: %d transactions, counted %d and %d, data files %v %v; want one each, nothing counted, the files left", txns-n, s.Cache.Bytes(5), s.Cache.Bytes(6), exists(5), exists(6))
	}
	if _, ok := st.presence[6]; !ok {
		t.Fatal("a file gone: its presence record deleted")
	}
}
