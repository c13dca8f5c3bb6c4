package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/blobstore/faulty"
	"github.com/agentfs/agentfs/snapshot"
)

// openFaulty opens the volume at url, initialized, through a faulty driver
// of options fo over the store's own, with the store's retry policy rp, a
// fresh cache directory and the checkpoint interval every (-1: none); it
// is closed at the end of the test.
func openFaulty(t *testing.T, url string, fo faulty.Options, rp blobstore.RetryPolicy, every time.Duration) (*Volume, *faulty.Driver) {
	t.Helper()
	ctx := context.Background()
	var fd *faulty.Driver
	s, err := blobstore.Open(ctx, url, blobstore.Options{
		Retry: rp,
		WrapDriver: func(d blobstore.Driver) blobstore.Driver {
			fd = faulty.New(d, fo)
			return fd
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := snapshot.Open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Open(ctx, Options{Repo: r, CacheDir: t.TempDir(), CheckpointInterval: every, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close(ctx) })
	return v, fd
}

// TestStoreFaults: the store fails a fifth of its requests, then is down
// for a while. The engine keeps serving cached reads and accepting writes,
// Status shows the backlog, and once the store is back every byte reaches
// it — nothing is lost.
func TestStoreFaults(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096; c.PackSize = 1 << 20 })
	ctx := context.Background()
	v, fd := openFaulty(t, url, faulty.Options{FailRate: 0.2, LostReplyRate: 0.05, Seed: 7},
		blobstore.RetryPolicy{MaxAttempts: 10, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}, 10*time.Millisecond)

	want := map[string][]byte{}
	put := func(name string, size int) {
		data := bytes.Repeat([]byte(name), size/len(name)+1)[:size]
		writeFile(t, v, RootIno, name, data)
		want[name] = data
	}
	for i := range 20 {
		put(fmt.Sprintf("flaky-%02d", i), 1000*i+10)
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatalf("sync with a flaky store: %v", err)
	}

	fd.SetDown(true)
	for i := range 20 {
		put(fmt.Sprintf("down-%02d", i), 3000*i+10)
	}
	// Cached reads still work while the store is down.
	for name, data := range want {
		a := must[Attr](t)(v.Lookup(ctx, RootIno, name))
		if got := readFile(t, v, a.Ino); !bytes.Equal(got, data) {
			t.Fatalf("%s while down: content differs", name)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := v.Sync(sctx)
	cancel()
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sync while down: %v, want a deadline error", err)
	}
	st := must[Status](t)(v.Status(ctx))
	if st.DirtyFiles == 0 || st.LastError == "" {
		t.Fatalf("status while down shows no backlog: %+v", st)
	}

	fd.SetDown(false)
	if err := v.Sync(ctx); err != nil {
		t.Fatalf("sync after the store came back: %v", err)
	}
	if st := must[Status](t)(v.Status(ctx)); st.DirtyFiles != 0 || st.DirtyDirs != 0 {
		t.Fatalf("backlog after recovery: %+v", st)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}
	w := openVolume(t, url, "")
	for name, data := range want {
		a := must[Attr](t)(w.Lookup(ctx, RootIno, name))
		if got := readFile(t, w, a.Ino); !bytes.Equal(got, data) {
			t.Fatalf("%s from a fresh cache: content differs", name)
		}
	}
	if fd.Stats().Injected == 0 {
		t.Fatal("no fault was injected")
	}
}

// TestCorruptChunk: a chunk whose bytes do not match its hash is an I/O
// error, never wrong data.
func TestCorruptChunk(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir
	initVolume(t, url)
	v := openVolume(t, url, "")
	ctx := context.Background()
	data := bytes.Repeat([]byte("precious "), 1000)
	writeFile(t, v, RootIno, "f", data)
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Flip one byte in the middle of every pack.
	packs, _ := filepath.Glob(filepath.Join(dir, "packs", "*", "*.pack"))
	for _, p := range packs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/3] ^= 0x55
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w := openVolume(t, url, "")
	a, err := w.Lookup(ctx, RootIno, "f")
	if err != nil {
		if errors.Is(err, ErrIO) {
			return // the root tree itself was hit
		}
		t.Fatal(err)
	}
	if _, err := w.Open(ctx, a.Ino, false); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Release(ctx, a.Ino) }()
	buf := make([]byte, len(data))
	n, err := w.Read(ctx, a.Ino, buf, 0)
	if !errors.Is(err, ErrIO) {
		t.Fatalf("read of a corrupt chunk: n=%d err=%v, want ErrIO", n, err)
	}
}

// TestDivergedWriter: when another writer committed to the branch while
// this cache held unsaved changes, the changes are committed to a new
// branch — nothing is dropped — and Status says so.
func TestDivergedWriter(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	dirA := t.TempDir()
	a := openVolume(t, url, dirA)
	writeFile(t, a, RootIno, "from-a", []byte("a"))
	if err := a.Fsync(ctx, RootIno, false); err != nil {
		t.Fatal(err)
	}
	// A crashes before syncing: its lease stays until it expires. Close
	// the database without a final commit by simulating a crash: release
	// the lease, skip the checkpoint.
	a.opts.ReadOnly = true // Close skips the final commit
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	b := openVolume(t, url, "")
	writeFile(t, b, RootIno, "from-b", []byte("b"))
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	a2 := openVolume(t, url, dirA)
	if err := a2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := must[Status](t)(a2.Status(ctx))
	if st.DivergedFrom != "main" || st.Branch == "main" {
		t.Fatalf("status after a lost race: %+v", st)
	}
	if _, err := a2.Lookup(ctx, RootIno, "from-a"); err != nil {
		t.Fatalf("diverged writer lost its file: %v", err)
	}
	// main has B's change, the new branch has A's.
	m := openVolume(t, url, "", func(o *Options) { o.ReadOnly = true })
	if _, err := m.Lookup(ctx, RootIno, "from-b"); err != nil {
		t.Fatalf("main lost B's file: %v", err)
	}
	if _, err := m.Lookup(ctx, RootIno, "from-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("main has A's file: %v", err)
	}
	c := openVolume(t, url, "", func(o *Options) { o.ReadOnly = true; o.Branch = st.Branch })
	if _, err := c.Lookup(ctx, RootIno, "from-a"); err != nil {
		t.Fatalf("branch %s lacks A's file: %v", st.Branch, err)
	}
}

// TestStoreOutOfSpace: the file:// store's disk is full (every put fails
// with ENOSPC, as the file driver gets it). A sync fails with
// blobstore.ErrNoSpace (the store's kind, not "unknown"), Status's last
// error says the store is out of space and what the disk said, and once
// there is room again the next sync commits everything.
func TestStoreOutOfSpace(t *testing.T) {
	dir := t.TempDir()
	url := "file://" + dir
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096; c.PackSize = 1 << 20 })
	ctx := context.Background()
	v, fd := openFaulty(t, url, faulty.Options{}, blobstore.RetryPolicy{}, -1)

	data := bytes.Repeat([]byte("full"), 3000)
	writeFile(t, v, RootIno, "f", data)
	fd.SetPutError(&os.PathError{Op: "write", Path: filepath.Join(dir, "packs", "x"), Err: syscall.ENOSPC})
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := v.Sync(sctx)
	cancel()
	if !errors.Is(err, blobstore.ErrNoSpace) || blobstore.KindOf(err) != blobstore.KindNoSpace {
		t.Fatalf("sync to a full store: %v (kind %v), want blobstore.ErrNoSpace", err, blobstore.KindOf(err))
	}
	st := must[Status](t)(v.Status(ctx))
	if !strings.Contains(st.LastError, "out of space") || !strings.Contains(st.LastError, "no space left on device") || strings.Contains(st.LastError, "unknown") {
		t.Errorf("last error %q: want the store's kind (out of space) and the disk's words (no space left on device)", st.LastError)
	}
	if st.DirtyFiles == 0 {
		t.Errorf("status of a store out of space shows no backlog: %+v", st)
	}

	fd.SetPutError(nil)
	if err := v.Sync(ctx); err != nil {
		t.Fatalf("sync once the store has room: %v", err)
	}
	if st := must[Status](t)(v.Status(ctx)); st.LastError != "" || st.DirtyFiles != 0 {
		t.Errorf("status after the sync: last error %q, %d dirty files", st.LastError, st.DirtyFiles)
	}
	w := openVolume(t, url, "")
	if got := readFile(t, w, must[Attr](t)(w.Lookup(ctx, RootIno, "f")).Ino); !bytes.Equal(got, data) {
		t.Error("the file read from a fresh cache differs")
	}
}
