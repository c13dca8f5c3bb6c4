// Package blobstoretest is the conformance suite of blobstore: one set of
// checks that every driver (mem, file, S3 on MinIO, GCS on its emulator) and
// every composite (a Store under a key prefix, a retrying Store over a
// fault-injecting driver) must pass. Each check is a t.Run subtest.
//
// A new driver is done when Run passes for it:
//
//	func TestConformance(t *testing.T) {
//		blobstoretest.Run(t, func(t *testing.T) *blobstore.Store {
//			s, err := blobstore.Open(ctx, url, blobstore.Options{})
//			...
//			return s // empty, closed by the caller's t.Cleanup
//		})
//	}
//
// This package is for tests only; production code must not import it.
package blobstoretest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
)

// LargeSize is the size of the large objects of the round-trip checks:
// 64 MiB and a few bytes, so that it is not a multiple of any part or chunk
// size.
const LargeSize = 64<<20 + 7

// ListKeys is the number of objects of the listing check: more than two
// pages of 1,000.
const ListKeys = 2500

// Racers is the number of goroutines racing PutIfAbsent on one key.
const Racers = 32

// Run runs every check against stores from newStore. newStore is called once
// per subtest, from that subtest's goroutine, and must return an empty
// Store that stays usable until the subtest ends (register any clean-up with
// t.Cleanup). Subtests run one after another.
func Run(t *testing.T, newStore func(t *testing.T) *blobstore.Store) {
	checks := []struct {
		name string
		fn   func(t *testing.T, s *blobstore.Store)
	}{
		{"RoundTripSmall", testRoundTripSmall},
		{"RoundTripEmpty", testRoundTripEmpty},
		{"RoundTripLarge", testRoundTripLarge},
		{"StreamUnknownSize", testStreamUnknownSize},
		{"Overwrite", testOverwrite},
		{"RangeReads", testRangeReads},
		{"Stat", testStat},
		{"List", testList},
		{"ListPaging", testListPaging},
		{"KeyNames", testKeyNames},
		{"InvalidKeys", testInvalidKeys},
		{"Missing", testMissing},
		{"Delete", testDelete},
		{"PutIfAbsent", testPutIfAbsent},
		{"PutIfAbsentLarge", testPutIfAbsentLarge},
		{"PutIfAbsentRace", testPutIfAbsentRace},
		{"Sub", testSub},
		{"CancelBefore", testCancelBefore},
		{"CancelMidRead", testCancelMidRead},
		{"CancelMidPut", testCancelMidPut},
		{"Metrics", testMetrics},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
			c.fn(t, s)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// dataBlock is the size of the blocks Data and streams are made of.
const dataBlock = 64 << 10

// baseBlock is one block of random bytes, made once: generating every byte
// with a PRNG is slow under the race detector.
var baseBlock = sync.OnceValue(func() []byte {
	b := make([]byte, dataBlock)
	r := rand.NewChaCha8([32]byte{'a', 'g', 'e', 'n', 't', 'f', 's'})
	_, _ = r.Read(b)
	return b
})

// fillBlock writes block number i of the stream identified by seed into p
// (len(p) <= dataBlock): the random base block stamped with the seed and
// the block number, so that no two blocks of a stream are equal and a
// misplaced or repeated block changes the checksum.
func fillBlock(p []byte, seed uint64, i int64) {
	copy(p, baseBlock())
	var stamp [16]byte
	binary.LittleEndian.PutUint64(stamp[:8], seed)
	binary.LittleEndian.PutUint64(stamp[8:], uint64(i))
	for j := range min(len(p), len(stamp)) {
		p[j] ^= stamp[j]
	}
}

// Data returns n bytes determined by seed; different seeds give different
// bytes.
func Data(n int, seed uint64) []byte {
	b := make([]byte, n)
	for i := 0; i*dataBlock < n; i++ {
		fillBlock(b[i*dataBlock:min(n, (i+1)*dataBlock)], seed, int64(i))
	}
	return b
}

// streamReader yields n bytes determined by seed and hides every interface
// but io.Reader, so the store must treat it as a stream of unknown length.
type streamReader struct {
	seed      uint64
	off, size int64
	block     []byte
	sum       io.Writer // receives what was read
}

func newStream(n int64, seed uint64, sum io.Writer) *streamReader {
	return &streamReader{seed: seed ^ 0x5eed, size: n, block: make([]byte, dataBlock), sum: sum}
}

func (s *streamReader) Read(p []byte) (int, error) {
	if s.off == s.size {
		return 0, io.EOF
	}
	i, within := s.off/dataBlock, s.off%dataBlock
	fillBlock(s.block, s.seed, i)
	n := copy(p, s.block[within:min(dataBlock, s.size-i*dataBlock)])
	s.off += int64(n)
	if s.sum != nil {
		_, _ = s.sum.Write(p[:n])
	}
	return n, nil
}

func mustPut(t *testing.T, ctx context.Context, s *blobstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctx, key, data); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(data), err)
	}
}

func mustGet(t *testing.T, ctx context.Context, s *blobstore.Store, key string, want []byte) {
	t.Helper()
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q): got %d bytes (sha256 %x), want %d bytes (sha256 %x)", key, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
}

func testRoundTripSmall(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	for i, n := range []int{1, 2, 100, 4096, 1<<20 + 3} {
		key := fmt.Sprintf("small/%d", n)
		data := Data(n, uint64(i))
		mustPut(t, ctx, s, key, data)
		mustGet(t, ctx, s, key, data)
		a, err := s.Stat(ctx, key)
		if err != nil {
			t.Fatalf("Stat(%q): %v", key, err)
		}
		if a.Size != int64(n) {
			t.Errorf("Stat(%q).Size = %d, want %d", key, a.Size, n)
		}
	}
}

func testRoundTripEmpty(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	mustPut(t, ctx, s, "empty", nil)
	mustGet(t, ctx, s, "empty", nil)
	a, err := s.Stat(ctx, "empty")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != 0 {
		t.Errorf("Stat(empty).Size = %d, want 0", a.Size)
	}
	// An empty streamed put, too.
	if err := s.PutReader(ctx, "empty-stream", newStream(0, 1, nil), -1); err != nil {
		t.Fatalf("PutReader(empty stream): %v", err)
	}
	mustGet(t, ctx, s, "empty-stream", nil)
	p, err := s.List(ctx, "empty", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Objects) != 2 || p.Objects[0].Size != 0 {
		t.Errorf("List(empty) = %+v, want two empty objects", p.Objects)
	}
}

func testRoundTripLarge(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	data := Data(LargeSize, 42)
	want := sha256.Sum256(data)
	// Known size, from a seekable reader (retryable).
	if err := s.PutReader(ctx, "large/known", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("PutReader(large, known size): %v", err)
	}
	// Read it back streaming, and whole.
	r, err := s.NewRangeReader(ctx, "large/known", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, r)
	r.Close()
	if err != nil {
		t.Fatalf("read large: %v", err)
	}
	if n != LargeSize || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("streamed read: %d bytes sha256 %x, want %d bytes sha256 %x", n, h.Sum(nil), LargeSize, want)
	}
	got, err := s.Get(ctx, "large/known")
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != want {
		t.Fatalf("Get(large): %d bytes, checksum mismatch", len(got))
	}
	// A range across the middle of the object.
	part, err := s.GetRange(ctx, "large/known", 9<<20-5, 17<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(part, data[9<<20-5:9<<20-5+17<<20]) {
		t.Fatal("GetRange across parts: wrong bytes")
	}
	a, err := s.Stat(ctx, "large/known")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != LargeSize {
		t.Errorf("Stat(large).Size = %d, want %d", a.Size, LargeSize)
	}
}

// putStream streams n bytes of unknown length to key and returns their
// sha256. A stream cannot be replayed, so Store does not retry it: like any
// caller, this one regenerates the stream and tries again on a transient
// error (which only the fault-injecting composite produces).
func putStream(t *testing.T, ctx context.Context, s *blobstore.Store, key string, n int64, seed uint64) [32]byte {
	t.Helper()
	for attempt := 1; ; attempt++ {
		h := sha256.New()
		err := s.PutReader(ctx, key, newStream(n, seed, h), -1)
		if err == nil {
			var sum [32]byte
			copy(sum[:], h.Sum(nil))
			return sum
		}
		if !blobstore.IsTransient(err) || attempt == 10 {
			t.Fatalf("PutReader(%q, stream of %d bytes, attempt %d): %v", key, n, attempt, err)
		}
	}
}

func testStreamUnknownSize(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	for _, n := range []int64{1, 5<<20 + 1, LargeSize} {
		key := fmt.Sprintf("stream/%d", n)
		want := putStream(t, ctx, s, key, n, uint64(n))
		r, err := s.NewRangeReader(ctx, key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		got, err := io.Copy(h, r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != n || !bytes.Equal(h.Sum(nil), want[:]) {
			t.Fatalf("%s: read %d bytes sha256 %x, want %d bytes sha256 %x", key, got, h.Sum(nil), n, want)
		}
	}
}

func testOverwrite(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	mustPut(t, ctx, s, "k", []byte("first version, longer"))
	mustPut(t, ctx, s, "k", []byte("second"))
	mustGet(t, ctx, s, "k", []byte("second"))
	a, err := s.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != 6 {
		t.Errorf("Size after overwrite = %d, want 6", a.Size)
	}
}

func testRangeReads(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	data := Data(1000, 7)
	mustPut(t, ctx, s, "r", data)
	mustPut(t, ctx, s, "r0", nil)
	cases := []struct {
		key         string
		off, length int64
		want        []byte
	}{
		{"r", 0, -1, data},
		{"r", 0, 0, []byte{}},
		{"r", 0, 1, data[:1]},
		{"r", 0, 1000, data},
		{"r", 0, 5000, data},
		{"r", 10, 100, data[10:110]},
		{"r", 999, 1, data[999:]},
		{"r", 999, -1, data[999:]},
		{"r", 999, 10, data[999:]},
		{"r", 500, 0, []byte{}},
		{"r", 1000, -1, []byte{}},
		{"r", 1000, 5, []byte{}},
		{"r", 1000, 0, []byte{}},
		{"r", 5000, -1, []byte{}},
		{"r", 5000, 10, []byte{}},
		{"r0", 0, -1, []byte{}},
		{"r0", 0, 10, []byte{}},
		{"r0", 1, -1, []byte{}},
	}
	for _, c := range cases {
		got, err := s.GetRange(ctx, c.key, c.off, c.length)
		if err != nil {
			t.Errorf("GetRange(%q, %d, %d): %v", c.key, c.off, c.length, err)
			continue
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("GetRange(%q, %d, %d) = %d bytes, want %d", c.key, c.off, c.length, len(got), len(c.want))
		}
		r, err := s.NewRangeReader(ctx, c.key, c.off, c.length)
		if err != nil {
			t.Errorf("NewRangeReader(%q, %d, %d): %v", c.key, c.off, c.length, err)
			continue
		}
		got, err = io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("NewRangeReader(%q, %d, %d): %d bytes, %v; want %d bytes", c.key, c.off, c.length, len(got), err, len(c.want))
		}
	}
	if _, err := s.GetRange(ctx, "r", -1, 10); err == nil || errors.Is(err, blobstore.ErrNotFound) || blobstore.IsTransient(err) {
		t.Errorf("GetRange with a negative offset: %v, want a permanent error", err)
	}
	if _, err := s.NewRangeReader(ctx, "r", -1, -1); err == nil {
		t.Error("NewRangeReader with a negative offset succeeded")
	}
}

func testStat(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	before := time.Now()
	mustPut(t, ctx, s, "st", []byte("12345"))
	after := time.Now()
	a, err := s.Stat(ctx, "st")
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != 5 {
		t.Errorf("Size = %d, want 5", a.Size)
	}
	// Providers round modification times (S3 to the second) and clocks
	// differ a little; a wrong zone or a zero time is far outside this.
	if a.ModTime.Before(before.Add(-2*time.Minute)) || a.ModTime.After(after.Add(2*time.Minute)) {
		t.Errorf("ModTime = %v, want about %v", a.ModTime, before)
	}
	if a.Version == "" {
		t.Error("Version is empty")
	}
	// Same size, different bytes: the version must change.
	mustPut(t, ctx, s, "st", []byte("54321"))
	b, err := s.Stat(ctx, "st")
	if err != nil {
		t.Fatal(err)
	}
	if b.Version == "" || b.Version == a.Version {
		t.Errorf("Version after rewrite = %q, was %q: want a new one", b.Version, a.Version)
	}
	if b.ModTime.Before(a.ModTime) {
		t.Errorf("ModTime went back after rewrite: %v -> %v", a.ModTime, b.ModTime)
	}
}

// putMany writes keys (with their own key as content) from 16 goroutines.
func putMany(t *testing.T, ctx context.Context, s *blobstore.Store, keys []string) {
	t.Helper()
	ch := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for range 16 {
		wg.Go(func() {
			for k := range ch {
				if err := s.Put(ctx, k, []byte(k)); err != nil {
					errs <- fmt.Errorf("Put(%q): %w", k, err)
				}
			}
		})
	}
	for _, k := range keys {
		ch <- k
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func listAll(t *testing.T, ctx context.Context, s *blobstore.Store, prefix string, pageSize int) []blobstore.ObjectInfo {
	t.Helper()
	var all []blobstore.ObjectInfo
	token := ""
	pages := 0
	for {
		p, err := s.List(ctx, prefix, token, pageSize)
		if err != nil {
			t.Fatalf("List(%q, page %d): %v", prefix, pages, err)
		}
		pages++
		if pageSize > 0 && len(p.Objects) > pageSize {
			t.Fatalf("List(%q) page of %d objects, asked for at most %d", prefix, len(p.Objects), pageSize)
		}
		all = append(all, p.Objects...)
		if p.Next == "" {
			return all
		}
		if pages > 10*ListKeys {
			t.Fatalf("List(%q) does not end", prefix)
		}
		token = p.Next
	}
}

func keysOf(objs []blobstore.ObjectInfo) []string {
	var ks []string
	for _, o := range objs {
		ks = append(ks, o.Key)
	}
	return ks
}

func checkList(t *testing.T, what string, got []blobstore.ObjectInfo, want []string) {
	t.Helper()
	ks := keysOf(got)
	if !slices.IsSorted(ks) {
		t.Errorf("%s: keys not in lexicographic order", what)
	}
	if !slices.Equal(ks, want) {
		t.Fatalf("%s: got %d keys, want %d (first difference at %d)", what, len(ks), len(want), firstDiff(ks, want))
	}
	for _, o := range got {
		if o.Size != int64(len(o.Key)) {
			t.Fatalf("%s: %q has size %d, want %d", what, o.Key, o.Size, len(o.Key))
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testList(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	var keys []string
	for i := range ListKeys {
		// Two directories; numbers written so that lexicographic order
		// differs from numeric order (9 < 10 numerically, "10" < "9").
		dir := "a"
		if i%3 == 0 {
			dir = "b"
		}
		keys = append(keys, fmt.Sprintf("list/%s/%d", dir, i))
	}
	keys = append(keys, "lisu", "lis")
	putMany(t, ctx, s, keys)
	sorted := slices.Clone(keys)
	slices.Sort(sorted)

	checkList(t, "List(\"\")", listAll(t, ctx, s, "", 0), sorted)
	var b12 []string
	for _, k := range sorted {
		if strings.HasPrefix(k, "list/b/12") {
			b12 = append(b12, k)
		}
	}
	checkList(t, "List(list/b/12)", listAll(t, ctx, s, "list/b/12", 0), b12)
	checkList(t, "List(nothing/)", listAll(t, ctx, s, "nothing/", 0), nil)

	var walked []string
	if err := s.Walk(ctx, "list/a/", func(o blobstore.ObjectInfo) error {
		walked = append(walked, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var wantA []string
	for _, k := range sorted {
		if strings.HasPrefix(k, "list/a/") {
			wantA = append(wantA, k)
		}
	}
	if !slices.Equal(walked, wantA) {
		t.Fatalf("Walk(list/a/): %d keys, want %d", len(walked), len(wantA))
	}
	stop := errors.New("stop")
	n := 0
	if err := s.Walk(ctx, "", func(blobstore.ObjectInfo) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	}); !errors.Is(err, stop) {
		t.Fatalf("Walk stopped by its callback returned %v, want the callback's error", err)
	}
}

func testListPaging(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	var keys []string
	for i := range 23 {
		keys = append(keys, fmt.Sprintf("p/%02d", i))
	}
	putMany(t, ctx, s, keys)
	for _, size := range []int{1, 5, 23, 50} {
		checkList(t, fmt.Sprintf("List(p/, pages of %d)", size), listAll(t, ctx, s, "p/", size), keys)
	}
	p, err := s.List(ctx, "p/", "", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Objects) != 5 || p.Next == "" {
		t.Fatalf("first page of 5: %d objects, next %q", len(p.Objects), p.Next)
	}
}

// OddKeys are key names every driver must store and list exactly.
var OddKeys = []string{
	"with space",
	"dir with space/file name.txt",
	"日本語/ファイル",
	"émoji 🙂 ok",
	"ünïcödé/ñ",
	"plus+equals=amp&",
	"percent%20literal",
	"tilde~comma,semi;colon",
	"paren(1)[2]{3}",
	"quote'dq\"",
	"hash#question?",
	"star*dollar$at@",
	"back\\slash",
	"trailing.",
	"..dots",
	"-dash_underscore",
}

func testKeyNames(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	for i, k := range OddKeys {
		data := Data(10+i, uint64(i))
		mustPut(t, ctx, s, k, data)
		mustGet(t, ctx, s, k, data)
		if _, err := s.Stat(ctx, k); err != nil {
			t.Errorf("Stat(%q): %v", k, err)
		}
	}
	got := keysOf(listAll(t, ctx, s, "", 0))
	want := slices.Clone(OddKeys)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("List after odd keys:\n got %q\nwant %q", got, want)
	}
	// Prefix filtering on a non-ASCII prefix.
	got = keysOf(listAll(t, ctx, s, "日本", 0))
	if !slices.Equal(got, []string{"日本語/ファイル"}) {
		t.Errorf("List(日本) = %q", got)
	}
	for _, k := range OddKeys {
		if err := s.Delete(ctx, k); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
	}
	if got := listAll(t, ctx, s, "", 0); len(got) != 0 {
		t.Errorf("List after deleting every key: %q", keysOf(got))
	}
}

func testInvalidKeys(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	for _, k := range []string{"", "/abs", "trailing/", "a//b", "a/./b", "a/../b", "..", "nul\x00byte", string([]byte{0xff, 0xfe}), strings.Repeat("x", 1025)} {
		err := s.Put(ctx, k, []byte("x"))
		var e *blobstore.Error
		if !errors.As(err, &e) || e.Kind != blobstore.KindPermanent {
			t.Errorf("Put(%q) = %v, want a permanent *blobstore.Error", k, err)
		}
		if _, err := s.Get(ctx, k); err == nil {
			t.Errorf("Get(%q) succeeded", k)
		}
	}
}

func testMissing(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	mustPut(t, ctx, s, "present", []byte("x"))
	for _, k := range []string{"absent", "dir/absent", "present/child"} {
		if _, err := s.Get(ctx, k); !errors.Is(err, blobstore.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", k, err)
		}
		if _, err := s.GetRange(ctx, k, 1, 10); !errors.Is(err, blobstore.ErrNotFound) {
			t.Errorf("GetRange(%q) = %v, want ErrNotFound", k, err)
		}
		if _, err := s.GetRange(ctx, k, 0, 0); !errors.Is(err, blobstore.ErrNotFound) {
			t.Errorf("GetRange(%q, 0, 0) = %v, want ErrNotFound", k, err)
		}
		if r, err := s.NewRangeReader(ctx, k, 0, -1); !errors.Is(err, blobstore.ErrNotFound) {
			if r != nil {
				r.Close()
			}
			t.Errorf("NewRangeReader(%q) = %v, want ErrNotFound", k, err)
		}
		_, err := s.Stat(ctx, k)
		if !errors.Is(err, blobstore.ErrNotFound) {
			t.Errorf("Stat(%q) = %v, want ErrNotFound", k, err)
		}
		var e *blobstore.Error
		if !errors.As(err, &e) || e.Key != k || e.Op != "stat" || blobstore.KindOf(err) != blobstore.KindNotFound {
			t.Errorf("Stat(%q) error %#v does not name the op and key", k, e)
		}
		if errors.Is(err, blobstore.ErrExists) || blobstore.IsTransient(err) {
			t.Errorf("Stat(%q) error matches the wrong kinds: %v", k, err)
		}
		if err := s.Delete(ctx, k); err != nil {
			t.Errorf("Delete(%q) of a missing key = %v, want nil", k, err)
		}
	}
}

func testDelete(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	mustPut(t, ctx, s, "d/1", []byte("one"))
	mustPut(t, ctx, s, "d/2", []byte("two"))
	for range 2 { // idempotent
		if err := s.Delete(ctx, "d/1"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	if _, err := s.Get(ctx, "d/1"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	mustGet(t, ctx, s, "d/2", []byte("two"))
	if got := keysOf(listAll(t, ctx, s, "d/", 0)); !slices.Equal(got, []string{"d/2"}) {
		t.Errorf("List after Delete = %q", got)
	}
}

func testPutIfAbsent(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	if err := s.PutIfAbsent(ctx, "once", []byte("first")); err != nil {
		t.Fatalf("PutIfAbsent on a new key: %v", err)
	}
	err := s.PutIfAbsent(ctx, "once", []byte("second"))
	if !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("PutIfAbsent on an existing key = %v, want ErrExists", err)
	}
	if errors.Is(err, blobstore.ErrNotFound) || blobstore.IsTransient(err) || blobstore.KindOf(err) != blobstore.KindExists {
		t.Errorf("ErrExists error has kind %v", blobstore.KindOf(err))
	}
	mustGet(t, ctx, s, "once", []byte("first"))
	// An empty object counts as present.
	if err := s.PutIfAbsent(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "empty", []byte("x")); !errors.Is(err, blobstore.ErrExists) {
		t.Errorf("PutIfAbsent over an empty object = %v, want ErrExists", err)
	}
	// After a delete the key can be created again.
	if err := s.Delete(ctx, "once"); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIfAbsent(ctx, "once", []byte("again")); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	mustGet(t, ctx, s, "once", []byte("again"))
}

func testPutIfAbsentLarge(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	// Larger than one S3 part and one GCS chunk: the conditional create
	// must hold for multipart/resumable uploads too.
	data := Data(20<<20+1, 3)
	if err := s.PutIfAbsent(ctx, "big", data); err != nil {
		t.Fatalf("PutIfAbsent(20 MiB) on a new key: %v", err)
	}
	if err := s.PutIfAbsent(ctx, "big", Data(20<<20+1, 4)); !errors.Is(err, blobstore.ErrExists) {
		t.Fatalf("PutIfAbsent(20 MiB) on an existing key = %v, want ErrExists", err)
	}
	mustGet(t, ctx, s, "big", data)
}

func testPutIfAbsentRace(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	const rounds = 5
	for round := range rounds {
		key := fmt.Sprintf("race/%d", round)
		var (
			start   = make(chan struct{})
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int
			other   []error
			lost    int
		)
		for i := range Racers {
			wg.Go(func() {
				<-start
				err := s.PutIfAbsent(ctx, key, []byte(fmt.Sprintf("racer %02d of round %d", i, round)))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, i)
				case errors.Is(err, blobstore.ErrExists):
					lost++
				default:
					other = append(other, err)
				}
			})
		}
		close(start)
		wg.Wait()
		for _, err := range other {
			t.Errorf("round %d: PutIfAbsent failed with neither success nor ErrExists: %v", round, err)
		}
		if len(winners) != 1 || lost != Racers-1 {
			t.Fatalf("round %d: %d winners %v and %d ErrExists among %d racers, want exactly 1 winner and %d ErrExists", round, len(winners), winners, lost, Racers, Racers-1)
		}
		mustGet(t, ctx, s, key, []byte(fmt.Sprintf("racer %02d of round %d", winners[0], round)))
	}
}

func testSub(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	mustPut(t, ctx, s, "outside", []byte("o"))
	mustPut(t, ctx, s, "subx", []byte("not under sub/"))
	sub := s.Sub("sub")
	if !strings.HasSuffix(sub.URL(), "/sub") {
		t.Errorf("Sub URL = %q, want it to end in /sub", sub.URL())
	}
	mustPut(t, ctx, sub, "k", []byte("in sub"))
	mustGet(t, ctx, s, "sub/k", []byte("in sub"))
	if _, err := sub.Get(ctx, "outside"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("Sub sees a key outside its prefix: %v", err)
	}
	if got := keysOf(listAll(t, ctx, sub, "", 0)); !slices.Equal(got, []string{"k"}) {
		t.Errorf("Sub List = %q, want [k]", got)
	}
	if err := sub.PutIfAbsent(ctx, "k", []byte("x")); !errors.Is(err, blobstore.ErrExists) {
		t.Errorf("Sub PutIfAbsent on existing = %v", err)
	}
	deeper := sub.Sub("/deeper/")
	mustPut(t, ctx, deeper, "d", []byte("deep"))
	mustGet(t, ctx, s, "sub/deeper/d", []byte("deep"))
	var e *blobstore.Error
	_, err := deeper.Stat(ctx, "nope")
	if !errors.As(err, &e) || e.Key != "nope" || !strings.HasSuffix(e.URL, "/sub/deeper") {
		t.Errorf("Sub error names %q %q, want key nope under .../sub/deeper", e.URL, e.Key)
	}
	if err := sub.Close(); err != nil {
		t.Errorf("closing a Sub store: %v", err)
	}
	mustGet(t, ctx, s, "outside", []byte("o")) // the parent still works
}

// isCanceled checks that err reports a cancellation of the caller's context.
func isCanceled(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("%s after cancel = %v, want an error matching context.Canceled", what, err)
	}
	if err != nil && blobstore.KindOf(err) != blobstore.KindCanceled {
		t.Errorf("%s after cancel: kind %v, want canceled", what, blobstore.KindOf(err))
	}
}

func testCancelBefore(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	mustPut(t, ctx, s, "c", []byte("data"))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	start := time.Now()
	_, err := s.Get(cctx, "c")
	isCanceled(t, "Get", err)
	isCanceled(t, "Put", s.Put(cctx, "c2", []byte("x")))
	isCanceled(t, "PutIfAbsent", s.PutIfAbsent(cctx, "c3", []byte("x")))
	_, err = s.Stat(cctx, "c")
	isCanceled(t, "Stat", err)
	_, err = s.List(cctx, "", "", 0)
	isCanceled(t, "List", err)
	isCanceled(t, "Delete", s.Delete(cctx, "c"))
	_, err = s.NewRangeReader(cctx, "c", 0, -1)
	isCanceled(t, "NewRangeReader", err)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("calls with a cancelled context took %v", d)
	}
	// Nothing happened.
	mustGet(t, ctx, s, "c", []byte("data"))
	if _, err := s.Stat(ctx, "c2"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Errorf("Put with a cancelled context wrote the object: %v", err)
	}
}

func testCancelMidRead(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	data := Data(16<<20, 9)
	mustPut(t, ctx, s, "big", data)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r, err := s.NewRangeReader(cctx, "big", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 64<<10)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	start := time.Now()
	_, err = io.Copy(io.Discard, r)
	isCanceled(t, "Read mid-stream", err)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("reading after cancel took %v", d)
	}
}

// cancelingReader cancels its context after limit bytes and then keeps
// producing data (up to a large bound), so only the store's own handling of
// the context can end the upload.
type cancelingReader struct {
	n, limit, bound int64
	cancel          func()
}

func (r *cancelingReader) Read(p []byte) (int, error) {
	if r.n >= r.bound {
		return 0, io.EOF
	}
	if r.n >= r.limit {
		r.cancel()
	}
	p = p[:min(int64(len(p)), r.bound-r.n)]
	clear(p)
	r.n += int64(len(p))
	return len(p), nil
}

func testCancelMidPut(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	for _, tc := range []struct {
		name string
		size int64
	}{{"known-size", 1 << 30}, {"stream", -1}} {
		key := "mid/" + tc.name
		for attempt := 1; ; attempt++ {
			cctx, cancel := context.WithCancel(ctx)
			r := &cancelingReader{limit: 12 << 20, bound: 1 << 30, cancel: cancel}
			start := time.Now()
			err := s.PutReader(cctx, key, r, tc.size)
			cancel()
			if blobstore.IsTransient(err) && r.n < r.limit && attempt < 10 {
				// A stream is not retried by Store; a transient failure
				// before the cancellation (fault-injecting composite
				// only) is retried here with a new stream.
				continue
			}
			isCanceled(t, "PutReader("+tc.name+") mid-stream", err)
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("%s: upload cancelled mid-stream took %v to return", tc.name, d)
			}
			if r.n >= r.bound {
				t.Errorf("%s: the whole 1 GiB was read despite the cancellation", tc.name)
			}
			break
		}
		// No partial object is left behind.
		if _, err := s.Stat(ctx, key); !errors.Is(err, blobstore.ErrNotFound) {
			t.Errorf("%s: after a cancelled put, Stat = %v, want ErrNotFound", tc.name, err)
		}
	}
}

func testMetrics(t *testing.T, s *blobstore.Store) {
	ctx := ctxFor(t)
	m := s.Metrics()
	if m == nil {
		t.Fatal("Metrics() = nil")
	}
	before := m.Snapshot(blobstore.OpPut)
	beforeGet := m.Snapshot(blobstore.OpGet)
	beforeStat := m.Snapshot(blobstore.OpStat)
	mustPut(t, ctx, s, "m", make([]byte, 1000))
	mustGet(t, ctx, s, "m", make([]byte, 1000))
	_, _ = s.Stat(ctx, "nope")
	after := m.Snapshot(blobstore.OpPut)
	if after.Calls != before.Calls+1 || after.Bytes < before.Bytes+1000 || after.Attempts < after.Calls {
		t.Errorf("put metrics: before %+v, after %+v", before, after)
	}
	if g := m.Snapshot(blobstore.OpGet); g.Calls != beforeGet.Calls+1 || g.Bytes != beforeGet.Bytes+1000 {
		t.Errorf("get metrics: before %+v, after %+v", beforeGet, g)
	}
	if st := m.Snapshot(blobstore.OpStat); st.Errors[blobstore.KindNotFound] != beforeStat.Errors[blobstore.KindNotFound]+1 {
		t.Errorf("stat not-found errors: before %v, after %v", beforeStat.Errors, st.Errors)
	}
}
