package data

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// testHeld is an open file for the Fetcher's tests: its lock, record and
// data state.
type testHeld struct {
	sync.RWMutex
	l *testLayout
	d *File
}

func (h *testHeld) Layout() Layout { return h.l }
func (h *testHeld) Data() *File    { return h.d }
func (h *testHeld) Hold() bool     { return true }
func (h *testHeld) Release()       {}

// oneChunk is a chunk source whose every chunk (testLayout's chunks all
// have the zero reference) is "WXYZ"; it counts its reads.
type oneChunk struct {
	mu    sync.Mutex
	reads int
}

func (c *oneChunk) ReadBlob(context.Context, snapshot.BlobRef) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return []byte("WXYZ"), nil
}

// newHeld returns an open file of 4-byte blocks with record l, a fetcher
// of "WXYZ" chunks and its source; the origin, if any, is
// "ABCDEFGHIJKLMNOP".
func newHeld(t *testing.T, l *testLayout) (*testHeld, *Fetcher, *oneChunk) {
	t.Helper()
	src := &origin{Reader: bytes.NewReader([]byte("ABCDEFGHIJKLMNOP"))}
	s := newSources(t, 4, originsFunc(func() (OriginFile, error) { return src, nil }))
	d := NewFile(s, 7, nil, nil)
	t.Cleanup(d.Close)
	c := &oneChunk{}
	return &testHeld{l: l, d: d}, NewFetcher(context.Background(), c, 0, 2, slog.New(slog.DiscardHandler)), c
}

// TestFetcherRead: a read fetches the remote blocks it covers, opens the
// origin for blocks of the lower layer and the data file for local ones,
// stops at the end of the file, and returns with no lock held.
func TestFetcherRead(t *testing.T) {
	ctx := context.Background()
	h, f, c := newHeld(t, &testLayout{size: 10, origin: 10, chunks: map[uint64]bool{0: true, 1: true}})
	p := make([]byte, 16)
	n, err := f.Read(ctx, h, p, 0)
	if err != nil || string(p[:n]) != "WXYZWXYZIJ" {
		t.Fatalf("read %q, %v; want WXYZWXYZIJ (two chunks, the origin's last bytes)", p[:n], err)
	}
	if !h.d.IsPresent(0) || !h.d.IsPresent(1) || !h.d.HasOrigin() || c.reads != 2 {
		t.Fatalf("present %v, origin open %v, %d chunk reads; want blocks 0 and 1, the origin, 2 reads", h.d.Present(), h.d.HasOrigin(), c.reads)
	}
	if n, err := f.Read(ctx, h, p, 6); err != nil || string(p[:n]) != "YZIJ" {
		t.Fatalf("read at 6: %q, %v; want YZIJ", p[:n], err)
	}
	if n, err := f.Read(ctx, h, p, 10); n != 0 || err != nil {
		t.Fatalf("read at the end: %d, %v; want 0", n, err)
	}
	if !h.TryLock() {
		t.Fatal("Read returned with the file's lock held")
	}
	h.Unlock()

	// A present block in a data file that is not open yet.
	h2, f2, _ := newHeld(t, &testLayout{size: 4, chunks: map[uint64]bool{0: true}})
	h2.d = NewFile(h.d.src, 9, []uint64{0}, nil)
	t.Cleanup(h2.d.Close)
	df, err := h.d.src.Files.Open(9, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := df.WriteAt([]byte("abcd"), 0); err != nil {
		t.Fatal(err)
	}
	df.Close()
	if n, err := f2.Read(ctx, h2, p, 0); err != nil || string(p[:n]) != "abcd" {
		t.Fatalf("read of a present block: %q, %v; want abcd from the data file", p[:n], err)
	}
}

// failingChunks is a chunk source that fails.
type failingChunks struct{}

func (failingChunks) ReadBlob(context.Context, snapshot.BlobRef) ([]byte, error) {
	return nil, errors.New("gone")
}

// TestFetcherLockToWrite: before a write, the blocks it covers in part
// that are remote are fetched and those of the lower layer copied up, not
// those it covers whole; a truncation fetches the block it cuts in two;
// each returns with the lock held, or with an error and the lock free.
func TestFetcherLockToWrite(t *testing.T) {
	ctx := context.Background()
	locked := func(t *testing.T, h *testHeld) {
		t.Helper()
		if h.TryLock() {
			t.Fatal("returned without the lock held")
		}
		h.Unlock()
	}
	h, f, c := newHeld(t, &testLayout{size: 10, chunks: map[uint64]bool{0: true, 1: true, 2: true}})
	if err := f.LockToWrite(ctx, h, h, 2, 9); err != nil {
		t.Fatal(err)
	}
	locked(t, h)
	if !h.d.IsPresent(0) || h.d.IsPresent(1) || !h.d.IsPresent(2) || c.reads != 2 {
		t.Fatalf("present %v after %d reads; want blocks 0 and 2 (written in part), not 1 (whole)", h.d.Present(), c.reads)
	}
	if err := f.LockToWrite(ctx, h, h, 4, 10); err != nil { // block 2 up to the end: whole
		t.Fatal(err)
	}
	locked(t, h)

	h, f, c = newHeld(t, &testLayout{size: 10, chunks: map[uint64]bool{0: true, 1: true, 2: true}})
	for _, size := range []uint64{8, 10, 12} { // on a block's edge, the size, beyond
		if err := f.LockToCut(ctx, h, h, size); err != nil {
			t.Fatal(err)
		}
		locked(t, h)
	}
	if c.reads != 0 {
		t.Fatalf("%d chunks fetched for truncations that cut no block in two", c.reads)
	}
	if err := f.LockToCut(ctx, h, h, 5); err != nil {
		t.Fatal(err)
	}
	locked(t, h)
	if !h.d.IsPresent(1) || len(h.d.Present()) != 1 {
		t.Fatalf("present %v after a truncation to 5; want block 1", h.d.Present())
	}

	h, f, _ = newHeld(t, &testLayout{size: 10, origin: 10})
	if err := f.LockToWrite(ctx, h, h, 1, 2); err != nil {
		t.Fatal(err)
	}
	locked(t, h)
	p := make([]byte, 4)
	if err := h.d.ReadLocal(h.l, p, 0); err != nil || !h.d.IsPresent(0) || string(p) != "ABCD" {
		t.Fatalf("block 0 after a write in part: %q, present %v, %v; want it copied up", p, h.d.IsPresent(0), err)
	}

	h, _, _ = newHeld(t, &testLayout{size: 10, chunks: map[uint64]bool{0: true}})
	f = NewFetcher(context.Background(), failingChunks{}, 0, 2, slog.New(slog.DiscardHandler))
	if err := f.LockToWrite(ctx, h, h, 1, 2); err == nil {
		t.Fatal("a chunk that cannot be fetched: no error")
	}
	if !h.TryLock() {
		t.Fatal("returned an error with the lock held")
	}
	h.Unlock()
}

// heldChunks is a chunk source of "WXYZ" chunks whose reads wait until
// release is closed; it counts them.
type heldChunks struct {
	release chan struct{}
	mu      sync.Mutex
	reads   int
}

func (c *heldChunks) ReadBlob(context.Context, snapshot.BlobRef) ([]byte, error) {
	<-c.release
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return []byte("WXYZ"), nil
}

// TestFetcherReadAhead: a read that begins where the file's previous one
// ended (the first read from 0 does) fetches the remote blocks among the
// window blocks after it in the background; a read elsewhere fetches
// none; and no more fetches start than the fetcher's slots, without
// waiting for one.
func TestFetcherReadAhead(t *testing.T) {
	ctx := context.Background()
	h, _, c := newHeld(t, &testLayout{size: 40, chunks: map[uint64]bool{1: true, 2: true, 3: true, 4: true, 7: true, 8: true, 9: true}})
	f := NewFetcher(ctx, c, 2, 8, slog.New(slog.DiscardHandler))
	p := make([]byte, 4)
	read := func(off uint64, want string) {
		t.Helper()
		if n, err := f.Read(ctx, h, p, off); err != nil || string(p[:n]) != want {
			t.Fatalf("read at %d: %q, %v; want %q", off, p[:n], err, want)
		}
		f.Wait()
	}
	read(0, "\x00\x00\x00\x00") // block 0: a hole
	if got := h.d.Present(); len(got) != 2 || !got[1] || !got[2] {
		t.Fatalf("after a read of block 0, present %v; want blocks 1 and 2 (the window)", got)
	}
	read(24, "\x00\x00\x00\x00") // block 6, a hole: not where the last read ended
	if got := h.d.Present(); len(got) != 2 {
		t.Fatalf("after a read elsewhere, present %v; want no more read ahead", got)
	}
	read(28, "WXYZ")
	if got := h.d.Present(); len(got) != 5 || !got[7] || !got[8] || !got[9] {
		t.Fatalf("after a sequential read of block 7, present %v; want it and blocks 8 and 9", got)
	}

	hc := &heldChunks{release: make(chan struct{})}
	h, _, _ = newHeld(t, &testLayout{size: 16, chunks: map[uint64]bool{1: true, 2: true, 3: true}})
	f = NewFetcher(ctx, hc, 3, 1, slog.New(slog.DiscardHandler))
	if n, err := f.Read(ctx, h, p, 0); err != nil || n != 4 {
		t.Fatalf("read at 0: %d, %v", n, err)
	}
	close(hc.release)
	f.Wait()
	if got := h.d.Present(); len(got) != 1 || !got[1] || hc.reads != 1 {
		t.Fatalf("one read-ahead slot: present %v after %d chunk reads; want block 1 alone", got, hc.reads)
	}
}
