package control

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache"
	afs "github.com/agentfs/agentfs/fs"
)

// fakeBackend records calls and answers as told.
type fakeBackend struct {
	syncs     atomic.Int32
	syncErr   error
	unmounts  atomic.Int32
	lastForce atomic.Bool
	unmount   error
	// invalidations is written by the server goroutine, read after the
	// request returned.
	invalidations []Invalidation
}

func (f *fakeBackend) Sync(ctx context.Context) error { f.syncs.Add(1); return f.syncErr }
func (f *fakeBackend) Status(ctx context.Context) (cache.Status, error) {
	return cache.Status{Branch: "main", HeadSeq: 42, DirtyFiles: 3, DirtyBytes: 7 << 20, PinnedFiles: 2, PinnedBytes: 786432}, nil
}
func (f *fakeBackend) Ops() []afs.OpStats {
	return []afs.OpStats{{Op: "lookup", Calls: 5, Errors: 1, Time: time.Millisecond}}
}
func (f *fakeBackend) Invalidate(inv Invalidation) error {
	f.invalidations = append(f.invalidations, inv)
	return nil
}
func (f *fakeBackend) Unmount(ctx context.Context, force bool) error {
	f.unmounts.Add(1)
	f.lastForce.Store(force)
	return f.unmount
}

// serve starts a control server in dir and returns a client for it.
func serve(t *testing.T, dir string, b Backend, m *blobstore.Metrics) *Client {
	t.Helper()
	l, err := Listen(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Info{MountPoint: "/mnt/x", Dev: "0:99", URL: "file:///v", Branch: "main", PID: 7}, b, m, nil)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return Dial(filepath.Join(dir, SocketName))
}

func TestClientServer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := &fakeBackend{}
	store, err := blobstore.Open(ctx, "mem://control-test", blobstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.Close() }()
	if err := store.Put(ctx, "k", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Get(ctx, "missing"); !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatal(err)
	}
	c := serve(t, dir, b, store.Metrics())

	info, err := c.Info(ctx)
	if err != nil || info.MountPoint != "/mnt/x" || info.Dev != "0:99" || info.PID != 7 {
		t.Fatalf("Info: %+v, %v", info, err)
	}
	st, err := c.Status(ctx)
	if err != nil || st.Volume.HeadSeq != 42 || st.Volume.DirtyFiles != 3 || st.Info.URL != "file:///v" || len(st.FUSE) != 1 || st.FUSE[0].Calls != 5 {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	stats, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats.BlobPuts != 1 || stats.BlobGets != 2 || stats.BytesUploaded != 5 || stats.BytesDownloaded != 5 || stats.BlobErrors != 0 {
		t.Errorf("Stats: %+v (a not-found GET is no error)", stats)
	}
	if err := c.Sync(ctx); err != nil || b.syncs.Load() != 1 {
		t.Errorf("Sync: %v, %d calls", err, b.syncs.Load())
	}
	b.syncErr = errors.New("store unreachable")
	if err := c.Sync(ctx); err == nil || !strings.Contains(err.Error(), "store unreachable") {
		t.Errorf("failing Sync: %v", err)
	}
	if err := c.Unmount(ctx, true); err != nil || !b.lastForce.Load() {
		t.Errorf("Unmount(force): %v, force %v", err, b.lastForce.Load())
	}
	for _, inv := range []Invalidation{{All: true}, {Ino: 9}, {Parent: 1, Name: "x"}} {
		if err := c.Invalidate(ctx, inv); err != nil {
			t.Errorf("Invalidate(%+v): %v", inv, err)
		}
	}
	if err := c.Invalidate(ctx, Invalidation{Parent: 1}); err == nil {
		t.Errorf("an invalidation naming nothing was accepted")
	}
	if len(b.invalidations) != 3 || b.invalidations[2].Name != "x" {
		t.Errorf("invalidations: %+v", b.invalidations)
	}
	b.unmount = fmt.Errorf("unmount /mnt/x: %w", ErrBusy)
	err = c.Unmount(ctx, false)
	if !errors.Is(err, ErrBusy) || b.lastForce.Load() {
		t.Errorf("busy Unmount: %v (force %v), want ErrBusy", err, b.lastForce.Load())
	}
}

func TestSyncProgress(t *testing.T) {
	b := &slowBackend{release: make(chan struct{})}
	c := serve(t, t.TempDir(), b, nil)
	calls := 0
	err := c.SyncProgress(context.Background(), 10*time.Millisecond, func(st Status) {
		calls++
		if calls == 3 {
			close(b.release)
		}
	})
	if err != nil || calls < 3 {
		t.Errorf("SyncProgress: %v after %d progress calls", err, calls)
	}
}

type slowBackend struct {
	fakeBackend
	release chan struct{}
}

func (s *slowBackend) Sync(ctx context.Context) error {
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestLongSocketPath: a cache directory deeper than a socket address holds
// still works, on both ends.
func TestLongSocketPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := serve(t, dir, &fakeBackend{}, nil)
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatalf("Info over %s: %v", c.Socket(), err)
	}
	fi, err := os.Stat(filepath.Join(dir, SocketName))
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket file: %v, %v (want a socket with mode 0600)", fi, err)
	}
}

// TestListenReplacesStaleSocket: a socket file left by a killed server is
// replaced; Close removes the file.
func TestListenReplacesStaleSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SocketName)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = l.Close() // the file stays, as after a crash
	if _, err := Dial(path).Info(context.Background()); err == nil {
		t.Fatal("a stale socket answered")
	}
	l2, err := Listen(dir)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("socket file after Close: %v", err)
	}
}

func TestFindNotMount(t *testing.T) {
	_, err := Find(context.Background(), t.TempDir())
	if !errors.Is(err, ErrNotMount) {
		t.Errorf("Find on a plain directory: %v, want ErrNotMount", err)
	}
}
