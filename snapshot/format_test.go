package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/blobstore/faulty"
)

var update = flag.Bool("update", false, "rewrite golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s changed: the on-blob format must not change without a format version bump.\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

func hexDump(b []byte) []byte {
	var s strings.Builder
	for i := 0; i < len(b); i += 32 {
		s.WriteString(hex.EncodeToString(b[i:min(i+32, len(b))]))
		s.WriteByte('\n')
	}
	return []byte(s.String())
}

func fixedRef(seed byte) BlobRef {
	var r BlobRef
	for i := range r.Pack {
		r.Pack[i] = seed + byte(i)
	}
	for i := range r.Hash {
		r.Hash[i] = seed ^ byte(i*7)
	}
	r.Offset, r.Length, r.RawLen = 8+uint64(seed), 100+uint32(seed), 4096
	return r
}

func sampleEntries() []Entry {
	return []Entry{
		{Name: "README.md", Type: TypeFile, Mode: 0o644, Uid: 1000, Gid: 1000, Size: 5000,
			Atime: 1700000000123456789, Mtime: 1700000001000000001, Ctime: 1700000002000000002, Nlink: 1,
			Xattrs: []Xattr{{Name: "user.a", Value: []byte("1")}, {Name: "user.b", Value: []byte{0, 1, 2}}},
			Chunks: []Chunk{{Index: 0, Ref: fixedRef(1)}, {Index: 3, Ref: fixedRef(2)}}},
		{Name: "dev", Type: TypeCharDev, Mode: 0o600, Rdev: 0x0501, Nlink: 1},
		{Name: "fifo", Type: TypeFIFO, Mode: 0o600, Nlink: 1},
		{Name: "hard", Type: TypeFile, LinkID: 0xdeadbeef, Nlink: 2},
		{Name: "link", Type: TypeSymlink, Mode: 0o777, Size: 9, Target: "README.md", Nlink: 1, Mtime: -5},
		{Name: "src", Type: TypeDir, Mode: 0o755 | 0o2000, Nlink: 3, Tree: fixedRef(3), SubFiles: 12, SubBytes: 34567},
		{Name: "v-dir", Type: TypeDir, Mode: 0o755, Nlink: 2, HasOrigin: true, Origin: "src/old"},
		{Name: "v-file", Type: TypeFile, Mode: 0o644, Nlink: 1, Size: 9000, HasOrigin: true, Origin: "v-file",
			OriginSize: 8000, Modified: true, Chunks: []Chunk{{Index: 1, Ref: fixedRef(5)}}},
		{Name: "ünïcode name", Type: TypeFile, Mode: 0o600, Nlink: 1},
	}
}

func TestTreeGoldenAndRoundTrip(t *testing.T) {
	b, err := EncodeTree(sampleEntries())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "tree.hex", hexDump(b))
	got, err := DecodeTree(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleEntries()) {
		t.Fatalf("round trip:\n%+v\n%+v", got, sampleEntries())
	}
	// Unsorted input encodes the same as sorted input.
	rev := sampleEntries()
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	b2, err := EncodeTree(rev)
	if err != nil || !bytes.Equal(b, b2) {
		t.Fatalf("unsorted input encoded differently (%v)", err)
	}
	if e, _ := EncodeTree(nil); !bytes.Equal(e, EmptyTree) {
		t.Fatalf("empty tree = %x, want %x", e, EmptyTree)
	}
}

func TestTreeRejects(t *testing.T) {
	for name, entries := range map[string][]Entry{
		"duplicate": {{Name: "a", Type: TypeFile}, {Name: "a", Type: TypeFile}},
		"slash":     {{Name: "a/b", Type: TypeFile}},
		"dotdot":    {{Name: "..", Type: TypeDir}},
		"empty":     {{Name: "", Type: TypeFile}},
		"long":      {{Name: strings.Repeat("x", 256), Type: TypeFile}},
	} {
		if _, err := EncodeTree(entries); !errors.Is(err, ErrBadName) {
			t.Errorf("%s: err = %v, want ErrBadName", name, err)
		}
	}
	good, _ := EncodeTree(sampleEntries())
	for i := range good {
		if _, err := DecodeTree(good[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d: err = %v, want ErrCorrupt", i, err)
		}
	}
}

func testRepo(t *testing.T) *Repo {
	t.Helper()
	ctx := context.Background()
	s, err := blobstore.Open(ctx, "mem://", blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Init(ctx, s, NewConfig(time.Unix(1700000000, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPackGoldenAndRead(t *testing.T) {
	r := testRepo(t)
	w := r.NewPackWriter()
	w.id = PackID{0xaa, 0xbb}
	data := bytes.Repeat([]byte("agentfs "), 1000)
	ref1 := w.Add(r.EncodeBlob(BlobData, data))
	ref2 := w.Add(r.EncodeBlob(BlobData, []byte{1, 2, 3})) // incompressible: stored raw
	tb, _ := EncodeTree(sampleEntries())
	ref3 := w.Add(r.EncodeBlob(BlobTree, tb))
	raw := w.Finish()
	golden(t, "pack.hex", hexDump(raw))
	entries, err := ParsePack(raw)
	if err != nil || len(entries) != 3 || entries[2].Type != BlobTree {
		t.Fatalf("ParsePack: %v %+v", err, entries)
	}
	ctx := context.Background()
	if err := r.Store().Put(ctx, PackKey(w.id), raw); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ref  BlobRef
		want []byte
	}{{ref1, data}, {ref2, []byte{1, 2, 3}}, {ref3, tb}} {
		got, err := r.ReadBlob(ctx, c.ref)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Fatalf("ReadBlob %v: %v", c.ref, err)
		}
	}
	idx, err := r.ReadPackIndex(ctx, w.id)
	if err != nil || !reflect.DeepEqual(idx, entries) {
		t.Fatalf("ReadPackIndex: %v", err)
	}
	// A flipped byte is ErrCorrupt, never wrong data.
	bad := bytes.Clone(raw)
	bad[ref1.Offset+5] ^= 0xff
	if err := r.Store().Put(ctx, PackKey(w.id), bad); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadBlob(ctx, ref1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped byte: err = %v, want ErrCorrupt", err)
	}
	missing := ref1
	missing.Pack = PackID{9}
	if _, err := r.ReadBlob(ctx, missing); !errors.Is(err, ErrMissing) {
		t.Fatalf("missing pack: err = %v, want ErrMissing", err)
	}
}

// TestHasPack: a pack put is there, one deleted (or never put) is false
// without an error, and a failing store is an error, not "missing".
func TestHasPack(t *testing.T) {
	ctx := context.Background()
	var fd *faulty.Driver
	s, err := blobstore.Open(ctx, "mem://", blobstore.Options{
		Retry:      blobstore.RetryPolicy{MaxAttempts: 1},
		WrapDriver: func(d blobstore.Driver) blobstore.Driver { fd = faulty.New(d, faulty.Options{}); return fd },
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Init(ctx, s, NewConfig(time.Unix(1700000000, 0)))
	if err != nil {
		t.Fatal(err)
	}
	w := r.NewPackWriter()
	w.Add(r.EncodeBlob(BlobData, []byte("agentfs")))
	if err := r.PutPack(ctx, w); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.HasPack(ctx, w.id); !ok || err != nil {
		t.Errorf("HasPack of a pack put = %v, %v; want true, nil", ok, err)
	}
	if ok, err := r.HasPack(ctx, PackID{9}); ok || err != nil {
		t.Errorf("HasPack of a pack never put = %v, %v; want false, nil", ok, err)
	}
	if err := s.Delete(ctx, PackKey(w.id)); err != nil {
		t.Fatal(err)
	}
	if ok, err := r.HasPack(ctx, w.id); ok || err != nil {
		t.Errorf("HasPack of a pack deleted = %v, %v; want false, nil", ok, err)
	}
	fd.SetDown(true)
	if ok, err := r.HasPack(ctx, PackID{9}); ok || !errors.Is(err, faulty.ErrDown) {
		t.Errorf("HasPack with the store down = %v, %v; want false, faulty.ErrDown", ok, err)
	}
}

func TestCommitGoldenAndHead(t *testing.T) {
	c := Commit{
		ID:      CommitID{"main", 7},
		Parent:  &CommitID{"main", 6},
		Root:    RootDir{Mode: 0o755, Nlink: 2, Tree: fixedRef(4), Xattrs: []Xattr{{"user.x", []byte("y")}}, SubFiles: 3, SubBytes: 99},
		Time:    time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Kind:    "checkpoint",
		Message: "hello",
		Host:    "box",
		Writer:  "w1",
	}
	golden(t, "commit.json", EncodeCommit(c))
	got, err := DecodeCommit(EncodeCommit(c))
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %v\n%+v", err, got)
	}
	golden(t, "volume.json", Config{Format: 1, VolumeID: "0123", Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Hash: "sha256", Chunking: "fixed", ChunkSize: DefaultChunkSize, Compression: "zstd", PackSize: DefaultPackSize, Encryption: "none"}.Encode())

	r := testRepo(t)
	ctx := context.Background()
	if _, err := r.Head(ctx, "main"); !errors.Is(err, ErrNoCommits) {
		t.Fatalf("empty branch: %v", err)
	}
	first, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, time.Unix(1, 0), "h", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, time.Unix(1, 0), "h", ""); !errors.Is(err, ErrCommitExists) {
		t.Fatalf("second init: %v", err)
	}
	for i := uint64(2); i <= 20; i++ {
		c := first
		c.ID.Seq = i
		if err := r.WriteCommit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if seq, err := r.HeadSeq(ctx, "main"); err != nil || seq != 20 {
		t.Fatalf("head = %d, %v", seq, err)
	}
	// A stale hint far behind still finds the head (by listing).
	r.writeHint(ctx, CommitID{"main", 1})
	if seq, err := r.HeadSeq(ctx, "main"); err != nil || seq != 20 {
		t.Fatalf("stale hint: head = %d, %v", seq, err)
	}
	if bs, err := r.ListBranches(ctx); err != nil || len(bs) != 1 || bs[0] != "main" {
		t.Fatalf("branches = %v, %v", bs, err)
	}
}

func TestVolumeOpenErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := blobstore.Open(ctx, "mem://", blobstore.Options{})
	if _, err := Open(ctx, s); !errors.Is(err, ErrNoVolume) || !strings.Contains(err.Error(), "agentfs init") {
		t.Fatalf("no volume: %v", err)
	}
	cfg := NewConfig(time.Now())
	cfg.Format = FormatVersion + 1
	if err := s.Put(ctx, VolumeKey, cfg.Encode()); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, s); !errors.Is(err, ErrFormatTooNew) {
		t.Fatalf("newer format: %v", err)
	}
	if _, err := Init(ctx, s, NewConfig(time.Now())); !errors.Is(err, ErrVolumeExists) {
		t.Fatalf("init twice: %v", err)
	}
}

func TestLease(t *testing.T) {
	r := testRepo(t)
	ctx := context.Background()
	now := time.Unix(1000, 0)
	a := Holder{ID: "a", Host: "h1", PID: 1}
	b := Holder{ID: "b", Host: "h2", PID: 2}
	la, err := r.AcquireLease(ctx, "main", a, time.Minute, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.AcquireLease(ctx, "main", b, time.Minute, now.Add(time.Second), nil)
	var held *LeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrLeaseHeld) || held.Holder.ID != "a" {
		t.Fatalf("second writer: %v", err)
	}
	// stale() lets a dead holder's lease be taken at once.
	lb, err := r.AcquireLease(ctx, "main", b, time.Minute, now.Add(time.Second), func(h Holder) bool { return h.ID == "a" })
	if err != nil {
		t.Fatal(err)
	}
	if err := la.Renew(ctx, now.Add(2*time.Second)); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew after takeover: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.AcquireLease(ctx, "main", a, time.Minute, now.Add(3*time.Second), nil); err != nil {
		t.Fatalf("after release: %v", err)
	}
	// Expiry frees the branch too.
	if _, err := r.AcquireLease(ctx, "main", b, time.Minute, now.Add(2*time.Minute), nil); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
}

// TestCompressionProbe: a long blob is compressed only when samples of it
// shrink; one whose samples are incompressible is stored raw without
// compressing it whole, and one that is incompressible at its start but
// not further on is still compressed.
func TestCompressionProbe(t *testing.T) {
	r := testRepo(t)
	random := make([]byte, DefaultChunkSize)
	_, _ = rand.Read(random)
	text := bytes.Repeat([]byte("agentfs keeps code in a bucket\n"), DefaultChunkSize/31)
	mixed := append(slices.Clone(random[:DefaultChunkSize/4]), text[:DefaultChunkSize*3/4]...)
	for _, c := range []struct {
		name  string
		raw   []byte
		worth bool
		codec byte
	}{
		{"random", random, false, codecRaw},
		{"text", text, true, codecZstd},
		{"random-then-text", mixed, true, codecZstd},
		{"short random", random[:probeMin-1], true, codecRaw}, // tried, did not shrink
	} {
		if got := r.worthCompressing(c.raw); got != c.worth {
			t.Errorf("%s: worthCompressing = %v", c.name, got)
		}
		eb := r.EncodeBlob(BlobData, c.raw)
		if eb.Stored[0] != c.codec || (c.codec == codecZstd && len(eb.Stored) > len(c.raw)/2) {
			t.Errorf("%s: codec %d, %d bytes stored for %d", c.name, eb.Stored[0], len(eb.Stored), len(c.raw))
		}
		ref := BlobRef{Length: uint32(len(eb.Stored)), RawLen: eb.RawLen, Hash: eb.Hash}
		if got, err := r.DecodeStored(ref, eb.Stored); err != nil || !bytes.Equal(got, c.raw) {
			t.Errorf("%s: DecodeStored: %v", c.name, err)
		}
	}
}
