package snapshot

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/testenv"
)

var goldenKey = UserKey{Key: []byte("agentfs golden test key, 32+ bytes long")}

func keysOf(k UserKey) KeySource { return func(bool) (UserKey, error) { return k, nil } }

func memStore(t *testing.T) *blobstore.Store {
	t.Helper()
	s, err := blobstore.Open(context.Background(), "mem://", blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func encryptedRepo(t *testing.T, s *blobstore.Store, k UserKey) *Repo {
	t.Helper()
	r, err := InitEncrypted(context.Background(), s, NewConfig(time.Unix(1700000000, 0)), k)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// storeObjects returns every object of s by key.
func storeObjects(t *testing.T, s *blobstore.Store) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	err := s.Walk(ctx, "", func(o blobstore.ObjectInfo) error {
		b, err := s.Get(ctx, o.Key)
		out[o.Key] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func unhex(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out, err := hex.DecodeString(strings.ReplaceAll(string(b), "\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEncryptedGolden pins the encrypted formats' encodings (volume.json with its
// wrapped key, a pack with sealed blobs and footer, a sealed commit), built
// with deterministic randomness, and opens a volume made of the golden
// files: volumes sealed with XAES-256-GCM (format 3, testdata/encrypted)
// and the first ones, with XChaCha20-Poly1305 (format 2,
// testdata/encrypted-xchacha), keep opening.
func TestEncryptedGolden(t *testing.T) {
	t.Run("xaes", func(t *testing.T) { testEncryptedGolden(t, EncryptionXAES, "encrypted") })
	t.Run("xchacha", func(t *testing.T) { testEncryptedGolden(t, EncryptionXChaCha, "encrypted-xchacha") })
}

func testEncryptedGolden(t *testing.T, aead, dir string) {
	randReader = mrand.NewChaCha8([32]byte{1})
	defer func() { randReader = rand.Reader }()
	ctx := context.Background()
	s := memStore(t)
	cfg := NewConfig(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg.VolumeID = "0123"
	r, err := initEncrypted(ctx, s, cfg, goldenKey, aead)
	if err != nil {
		t.Fatal(err)
	}
	vj, err := s.Get(ctx, VolumeKey)
	if err != nil {
		t.Fatal(err)
	}
	w := r.NewPackWriter()
	w.id = PackID{0xaa, 0xbb}
	data := bytes.Repeat([]byte("agentfs "), 1000)
	tb, _ := EncodeTree(sampleEntries())
	ref1 := w.Add(r.EncodeBlob(BlobData, data))
	ref2 := w.Add(r.EncodeBlob(BlobTree, tb))
	pack := w.Finish()
	c := Commit{ID: CommitID{"main", 1}, Root: RootDir{Mode: 0o755, Nlink: 2, Tree: ref2}, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Kind: "init"}
	sealed := r.sealObject(CommitKey(c.ID), EncodeCommit(c))
	golden(t, dir+"/volume.json", vj)
	golden(t, dir+"/pack.hex", hexDump(pack))
	golden(t, dir+"/commit.hex", hexDump(sealed))

	s2 := memStore(t)
	gv, err := os.ReadFile(filepath.Join("testdata", dir, "volume.json"))
	if err != nil {
		t.Fatal(err)
	}
	for k, b := range map[string][]byte{VolumeKey: gv, PackKey(w.id): unhex(t, dir+"/pack.hex"), CommitKey(c.ID): unhex(t, dir+"/commit.hex")} {
		if err := s2.Put(ctx, k, b); err != nil {
			t.Fatal(err)
		}
	}
	r2, err := OpenWithKey(ctx, s2, keysOf(goldenKey))
	if err != nil {
		t.Fatal(err)
	}
	if cfg := r2.Config(); cfg.Format != formatOf(aead) || cfg.Encryption != aead || cfg.Key.KDF != "hkdf-sha256" {
		t.Fatalf("config = %+v", cfg)
	}
	got, err := r2.ReadCommit(ctx, c.ID)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("ReadCommit: %v\n%+v", err, got)
	}
	for ref, want := range map[BlobRef][]byte{ref1: data, ref2: tb} {
		if b, err := r2.ReadBlob(ctx, ref); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("ReadBlob %v: %v", ref, err)
		}
	}
	if idx, err := r2.ReadPackIndex(ctx, w.id); err != nil || len(idx) != 2 || idx[1].Type != BlobTree {
		t.Fatalf("ReadPackIndex: %v %+v", err, idx)
	}
	if idx, err := r2.ParsePack(w.id, unhex(t, dir+"/pack.hex")); err != nil || len(idx) != 2 {
		t.Fatalf("ParsePack: %v %+v", err, idx)
	}
}

// TestEncryptedNamesAndBytesLeakNothing: no object of an encrypted volume
// holds the plaintext or the SHA-256 of what it stores, and blobs are still
// deduplicated by their keyed names.
// TestEncryptedFormats: an XAES volume is format 3 and an XChaCha one
// format 2, so an agentfs that reads up to format 2 refuses the XAES one as
// too new ("upgrade agentfs") instead of as corrupt; an AEAD in a format
// older than its own is corrupt.
func TestEncryptedFormats(t *testing.T) {
	ctx := context.Background()
	for aead, want := range map[string]int{EncryptionXAES: FormatXAES, EncryptionXChaCha: FormatEncrypted} {
		r, err := initEncrypted(ctx, memStore(t), NewConfig(time.Now()), goldenKey, aead)
		if err != nil {
			t.Fatal(err)
		}
		cfg := r.Config()
		if cfg.Format != want {
			t.Errorf("%s volume: format %d, want %d", aead, cfg.Format, want)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s volume: %v", aead, err)
		}
		cfg.Format = want - 1
		if err := cfg.Validate(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s in format %d: %v, want ErrCorrupt", aead, want-1, err)
		}
	}
}

func TestEncryptedNamesAndBytesLeakNothing(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	r := encryptedRepo(t, s, goldenKey)
	data := []byte(strings.Repeat("top secret source code; ", 100))
	tr, err := EncodeTree([]Entry{{Name: "secret-file-name.go", Type: TypeFile, Mode: 0o644, Nlink: 1, Size: uint64(len(data))}})
	if err != nil {
		t.Fatal(err)
	}
	w := r.NewPackWriter()
	a, b := r.EncodeBlob(BlobData, data), r.EncodeBlob(BlobData, data)
	if a.Hash != b.Hash || a.Hash == HashOf(data) || bytes.Equal(a.Stored, b.Stored) {
		t.Fatalf("keyed names: same content must have one name (not its SHA-256), sealed under fresh nonces")
	}
	w.Add(a)
	tref := w.Add(r.EncodeBlob(BlobTree, tr))
	if err := r.PutPack(ctx, w); err != nil {
		t.Fatal(err)
	}
	c := Commit{ID: CommitID{"main", 1}, Root: RootDir{Mode: 0o755, Nlink: 2, Tree: tref}, Time: time.Unix(1, 0), Host: "host-name-x", Message: "message-x"}
	if err := r.WriteCommit(ctx, c); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	for k, b := range storeObjects(t, s) {
		for _, leak := range [][]byte{[]byte("top secret"), []byte("secret-file-name"), []byte("host-name-x"), []byte("message-x"), sum[:], []byte(hex.EncodeToString(sum[:]))} {
			if bytes.Contains(b, leak) {
				t.Errorf("%s holds %q in clear", k, leak)
			}
		}
	}
}

// TestEncryptedTamper: a changed byte, or an object moved to another key,
// reads as ErrCorrupt (EIO at the mount, a finding in fsck), never as data.
func TestEncryptedTamper(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	r := encryptedRepo(t, s, goldenKey)
	mkPack := func(content string) (PackID, BlobRef) {
		w := r.NewPackWriter()
		ref := w.Add(r.EncodeBlob(BlobData, []byte(content)))
		if err := r.PutPack(ctx, w); err != nil {
			t.Fatal(err)
		}
		return w.ID(), ref
	}
	p1, ref1 := mkPack("first blob")
	p2, _ := mkPack("second blob")
	first, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, time.Unix(1, 0), "h", "")
	if err != nil {
		t.Fatal(err)
	}
	second := first
	second.ID.Seq, second.Message = 2, "second"
	if err := r.WriteCommit(ctx, second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SaveSnapshot(ctx, "s1", CommitID{Branch: "main", Seq: 1}, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SaveSnapshot(ctx, "s2", CommitID{Branch: "main", Seq: 2}, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	orig := storeObjects(t, s)
	put := func(k string, b []byte) {
		t.Helper()
		if err := s.Put(ctx, k, b); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(k string, i int) {
		b := bytes.Clone(orig[k])
		b[i%len(b)] ^= 1
		put(k, b)
	}
	wantCorrupt := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", what, err)
		}
	}

	flip(PackKey(p1), int(ref1.Offset)+30)
	_, err = r.ReadBlob(ctx, ref1)
	wantCorrupt("flipped blob byte", err)
	put(PackKey(p1), orig[PackKey(p1)])
	if _, err := r.ReadBlob(ctx, ref1); err != nil {
		t.Fatalf("restored pack: %v", err)
	}

	put(PackKey(p1), orig[PackKey(p2)]) // a whole pack under another name: its footer does not open
	_, err = r.ReadPackIndex(ctx, p1)
	wantCorrupt("pack moved to another id", err)
	put(PackKey(p1), orig[PackKey(p1)])

	c1, c2 := CommitKey(first.ID), CommitKey(second.ID)
	for i := range []int{0, 10, len(orig[c2]) - 1} {
		flip(c2, i)
		_, err = r.ReadCommit(ctx, second.ID)
		wantCorrupt("flipped commit byte", err)
	}
	put(c2, orig[c1]) // commit 1 in place of commit 2
	_, err = r.ReadCommit(ctx, second.ID)
	wantCorrupt("commit swapped", err)
	put(c2, orig[c2])

	put(SnapshotKey("s2"), orig[SnapshotKey("s1")])
	_, err = r.GetSnapshot(ctx, "s2")
	wantCorrupt("snapshot swapped", err)
	put(SnapshotKey("s2"), orig[SnapshotKey("s2")])

	// A tampered head hint is only a hint: the head is still found.
	flip(HeadKey("main"), 3)
	if seq, err := r.HeadSeq(ctx, "main"); err != nil || seq != 2 {
		t.Fatalf("tampered head hint: %d, %v", seq, err)
	}

	// A tampered lease protects nothing (like an unreadable one).
	now := time.Unix(1000, 0)
	if _, err := r.AcquireLease(ctx, "main", Holder{ID: "a"}, time.Hour, now, nil); err != nil {
		t.Fatal(err)
	}
	lk := leaseKey("main", 1)
	orig = storeObjects(t, s)
	flip(lk, 5)
	if _, err := r.AcquireLease(ctx, "main", Holder{ID: "b"}, time.Hour, now, nil); err != nil {
		t.Fatalf("tampered lease: %v", err)
	}

	// fsck names the tampered commit.
	flip(c2, 7)
	rep, err := r.Fsck(ctx, FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || strings.Contains(p.Object, c2) || strings.Contains(p.Err.Error(), c2)
	}
	if !found {
		t.Fatalf("fsck did not name %s: %+v", c2, rep.Problems)
	}
}

// TestEncryptedKeyErrors: no key, a wrong key, or the wrong kind of key is
// a *KeyError naming the volume and what to pass; a plain volume never asks.
func TestEncryptedKeyErrors(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	encryptedRepo(t, s, goldenKey)
	_, err := Open(ctx, s)
	var ke *KeyError
	if !errors.Is(err, ErrKeyRequired) || !errors.As(err, &ke) || !strings.Contains(err.Error(), s.URL()) || !strings.Contains(err.Error(), "--key-file") {
		t.Fatalf("no key: %v", err)
	}
	_, err = OpenWithKey(ctx, s, func(bool) (UserKey, error) { return UserKey{}, errors.New("AGENTFS_KEY is not set") })
	if !errors.Is(err, ErrKeyRequired) || !strings.Contains(err.Error(), "AGENTFS_KEY is not set") {
		t.Fatalf("key source error: %v", err)
	}
	wrong := UserKey{Key: bytes.Repeat([]byte("w"), 32)}
	if _, err := OpenWithKey(ctx, s, keysOf(wrong)); !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), s.URL()) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := OpenWithKey(ctx, s, keysOf(UserKey{Passphrase: goldenKey.Key})); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("a passphrase for a key volume: %v", err)
	}
	if _, err := InitEncrypted(ctx, memStore(t), NewConfig(time.Now()), UserKey{Key: []byte("short")}); err == nil || !strings.Contains(err.Error(), "AGENTFS_PASSPHRASE") {
		t.Fatalf("short key: %v", err)
	}
	plain := memStore(t)
	if _, err := Init(ctx, plain, NewConfig(time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenWithKey(ctx, plain, func(bool) (UserKey, error) { t.Fatal("asked for a key of a plain volume"); return UserKey{}, nil }); err != nil {
		t.Fatal(err)
	}
}

// TestRotateKey: rotation rewrites volume.json only; the old key stops
// opening the volume, the new one (here a passphrase) opens it with all
// its data.
func TestRotateKey(t *testing.T) {
	ctx := context.Background()
	s := memStore(t)
	r := encryptedRepo(t, s, goldenKey)
	c, err := r.CreateBranchEmpty(ctx, "main", 0o755, 0, 0, time.Unix(1, 0), "h", "")
	if err != nil {
		t.Fatal(err)
	}
	before := storeObjects(t, s)
	pass := UserKey{Passphrase: []byte("correct horse battery staple")}
	if err := r.RotateKey(ctx, pass); err != nil {
		t.Fatal(err)
	}
	after := storeObjects(t, s)
	for k, b := range before {
		if changed := !bytes.Equal(after[k], b); changed != (k == VolumeKey) {
			t.Errorf("%s: changed = %v", k, changed)
		}
	}
	if len(after) != len(before) {
		t.Errorf("objects: %d before, %d after", len(before), len(after))
	}
	if _, err := OpenWithKey(ctx, s, keysOf(goldenKey)); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("old key after rotation: %v", err)
	}
	var asked bool
	r2, err := OpenWithKey(ctx, s, func(p bool) (UserKey, error) { asked = p; return pass, nil })
	if err != nil || !asked {
		t.Fatalf("new passphrase: %v (asked for a passphrase: %v)", err, asked)
	}
	defer r2.Close()
	if cfg := r2.Config(); cfg.Key.KDF != "argon2id" || cfg.Key.Time != DefaultArgon.Time || cfg.Key.MemoryKiB != DefaultArgon.MemoryKiB {
		t.Fatalf("passphrase wrap = %+v", cfg.Key)
	}
	if got, err := r2.ReadCommit(ctx, c.ID); err != nil || got.ID != c.ID {
		t.Fatalf("read after rotation: %v", err)
	}
	if err := testRepo(t).RotateKey(ctx, pass); err == nil {
		t.Fatal("rotating the key of a plain volume succeeded")
	}
}

// TestEncodeBlobForms: blobs that compress, that do not (stored raw) and
// the empty blob encode to a stored form that decodes back, on a plain
// volume and under each AEAD; sealed in place, a stored blob is exactly
// the codec byte and payload plus the nonce and tag.
func TestEncodeBlobForms(t *testing.T) {
	random := make([]byte, 1<<20+3)
	_, _ = rand.Read(random)
	text := bytes.Repeat([]byte("package main // agentfs\n"), 40000)
	ctx := context.Background()
	for _, aead := range []string{EncryptionNone, EncryptionXAES, EncryptionXChaCha} {
		s := memStore(t)
		var r *Repo
		var err error
		if aead == EncryptionNone {
			r, err = Init(ctx, s, NewConfig(time.Unix(1, 0)))
		} else {
			r, err = initEncrypted(ctx, s, NewConfig(time.Unix(1, 0)), goldenKey, aead)
		}
		if err != nil {
			t.Fatal(err)
		}
		for name, raw := range map[string][]byte{"random": random, "text": text, "empty": {}} {
			eb := r.EncodeBlob(BlobData, raw)
			plain := eb.Stored
			if aead != EncryptionNone {
				if plain, err = r.seal.open(name, eb.Stored, blobAD(eb.Hash)); err != nil {
					t.Fatalf("%s/%s: %v", aead, name, err)
				}
				if len(eb.Stored) != len(plain)+sealOverhead {
					t.Errorf("%s/%s: stored %d bytes for %d", aead, name, len(eb.Stored), len(plain))
				}
			}
			if wantRaw := name != "text"; (plain[0] == codecRaw) != wantRaw || (wantRaw && !bytes.Equal(plain[1:], raw)) {
				t.Errorf("%s/%s: codec %d, %d bytes", aead, name, plain[0], len(plain))
			}
			ref := BlobRef{Length: uint32(len(eb.Stored)), RawLen: eb.RawLen, Hash: eb.Hash}
			if got, err := r.DecodeStored(ref, eb.Stored); err != nil || !bytes.Equal(got, raw) {
				t.Errorf("%s/%s: DecodeStored: %v", aead, name, err)
			}
		}
		r.Close()
	}
}

// fuzzRepos returns an encrypted volume of each AEAD, in memory.
func fuzzRepos(f *testing.F) []*Repo {
	var out []*Repo
	for _, aead := range []string{EncryptionXAES, EncryptionXChaCha} {
		s, _ := blobstore.Open(context.Background(), "mem://", blobstore.Options{})
		r, err := initEncrypted(context.Background(), s, NewConfig(time.Unix(1, 0)), goldenKey, aead)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// FuzzOpenSealedBlob: no forged bytes open as a blob or an object, under
// either AEAD; the seeds are a real sealed blob of each.
func FuzzOpenSealedBlob(f *testing.F) {
	repos := fuzzRepos(f)
	for _, r := range repos {
		f.Add(r.EncodeBlob(BlobData, []byte("hello")).Stored)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range repos {
			h := r.HashOf([]byte("hello"))
			ref := BlobRef{Length: uint32(len(data)), RawLen: 5, Hash: h}
			if b, err := r.DecodeStored(ref, data); err == nil && string(b) != "hello" {
				t.Fatalf("%s: accepted forged blob %q", r.cfg.Encryption, b)
			}
			if _, err := r.openObject("commits/main/0000000000000001", data); err == nil {
				t.Fatalf("%s: accepted a forged object", r.cfg.Encryption)
			}
		}
	})
}

// FuzzParseEncryptedPack: no forged footer parses, under either AEAD.
func FuzzParseEncryptedPack(f *testing.F) {
	repos := fuzzRepos(f)
	for _, r := range repos {
		w := r.NewPackWriter()
		w.id = PackID{1}
		w.Add(r.EncodeBlob(BlobData, []byte("x")))
		f.Add(w.Finish())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range repos {
			entries, err := r.ParsePack(PackID{1}, data)
			if err == nil && len(entries) != 1 {
				t.Fatalf("%s: accepted a forged footer: %+v", r.cfg.Encryption, entries)
			}
		}
	})
}

// BenchmarkEncodeBlob: the CPU cost of turning a 4 MiB chunk into its
// stored form (name, compression, and sealing when encrypted), for
// incompressible and for compressible data, plain against encrypted.
func BenchmarkEncodeBlob(b *testing.B) {
	random := make([]byte, DefaultChunkSize)
	_, _ = rand.Read(random)
	text := bytes.Repeat([]byte("func main() { fmt.Println(\"hello, agentfs\") }\n"), DefaultChunkSize/48)
	for _, enc := range []bool{false, true} {
		s, _ := blobstore.Open(context.Background(), "mem://", blobstore.Options{})
		var r *Repo
		var err error
		if enc {
			r, err = InitEncrypted(context.Background(), s, NewConfig(time.Unix(1, 0)), goldenKey)
		} else {
			r, err = Init(context.Background(), s, NewConfig(time.Unix(1, 0)))
		}
		if err != nil {
			b.Fatal(err)
		}
		for name, data := range map[string][]byte{"random": random, "text": text} {
			b.Run(fmt.Sprintf("%s/encrypted=%v", name, enc), func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				c0 := testenv.CPUTime()
				for b.Loop() {
					r.EncodeBlob(BlobData, data)
				}
				b.ReportMetric(float64(testenv.CPUTime()-c0)/float64(b.N), "cpu-ns/op") // steadier than wall time on a loaded machine
			})
		}
	}
}

// TestHashOfConcurrent: an encrypted volume's blob names, computed from
// pooled HMAC states by many goroutines at once, are the HMAC-SHA256 of
// the bytes under the name key, whatever state a goroutine reuses.
func TestHashOfConcurrent(t *testing.T) {
	r, err := InitEncrypted(context.Background(), memStore(t), NewConfig(time.Now()), goldenKey)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				b := []byte(fmt.Sprintf("blob %d of goroutine %d", i, g))
				m := hmac.New(sha256.New, r.seal.nameKey)
				m.Write(b)
				if got := r.HashOf(b); !bytes.Equal(got[:], m.Sum(nil)) {
					t.Errorf("HashOf(%q) = %x, want the HMAC %x", b, got, m.Sum(nil))
					return
				}
			}
		})
	}
	wg.Wait()
}
