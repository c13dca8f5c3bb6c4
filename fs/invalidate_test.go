package fs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/fs/changefeed"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
)

// requests runs f and returns how many FUSE requests of kind op (an
// fs.OpStats name) the mount c controls served meanwhile.
func requests(t *testing.T, c *control.Client, op string, f func()) int64 {
	t.Helper()
	before := servedCalls(t, c, op)
	f()
	return servedCalls(t, c, op) - before
}

// servedCalls returns how many FUSE requests of kind op (an fs.OpStats
// name) the mount c controls has served so far.
func servedCalls(t *testing.T, c *control.Client, op string) int64 {
	t.Helper()
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range st.FUSE {
		if o.Op == op {
			return o.Calls
		}
	}
	return 0
}

// TestKernelCachingAndInvalidation checks the kernel caching the mount
// asks for (repeated stats, lookups of missing names and reads reach the
// server once) and that the invalidation hook, reached through the control
// socket, makes the kernel ask again.
func TestKernelCachingAndInvalidation(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	c := m.Client(t)
	ctx := context.Background()
	delta := func(op string, f func()) int64 { t.Helper(); return requests(t, c, op, f) }
	p := filepath.Join(m.Dir, "file")
	if err := os.WriteFile(p, []byte("cached content"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	stat := func(path string) error { return syscall.Stat(path, &st) }
	if err := stat(p); err != nil {
		t.Fatal(err)
	}
	ino := st.Ino
	read := func() {
		t.Helper()
		if b, err := os.ReadFile(p); err != nil || string(b) != "cached content" {
			t.Fatalf("read: %q, %v", b, err)
		}
	}
	// The first read fetches the partly written page, and every READ makes
	// the kernel ask for the attributes again (atime) once.
	read()
	if err := stat(p); err != nil {
		t.Fatal(err)
	}

	if n := delta("getattr", func() { _ = stat(p) }); n != 0 {
		t.Errorf("a repeated stat reached the server %d times", n)
	}
	if n := delta("read", read); n != 0 {
		t.Errorf("a repeated read of a cached file reached the server %d times", n)
	}
	// A descriptor open for reading only is closed without a FLUSH; so is
	// one open for writing while nobody reads the change feed (its last
	// RELEASE persists the file); once someone does, a writer's close
	// sends FLUSH, at which the feed reports the file modified.
	if n := delta("flush", read); n != 0 {
		t.Errorf("closing a read-only descriptor sent %d FLUSH requests", n)
	}
	writeClose := func() {
		t.Helper()
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := delta("flush", writeClose); n != 0 {
		t.Errorf("closing a descriptor open for writing, the feed inactive, sent %d FLUSH requests, want 0", n)
	}
	readFeed(t, c, changefeed.Options{})
	if n := delta("flush", writeClose); n != 1 {
		t.Errorf("closing a descriptor open for writing, the feed active, sent %d FLUSH requests, want 1", n)
	}
	if n := delta("flush", read); n != 0 {
		t.Errorf("closing a read-only descriptor, the feed active, sent %d FLUSH requests", n)
	}
	missing := filepath.Join(m.Dir, "missing")
	if err := stat(missing); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("stat missing: %v", err)
	}
	if n := delta("lookup", func() { _ = stat(missing) }); n != 0 {
		t.Errorf("a repeated lookup of a missing name reached the server %d times", n)
	}

	if err := c.Invalidate(ctx, control.Invalidation{Ino: ino}); err != nil {
		t.Fatal(err)
	}
	if n := delta("getattr", func() { _ = stat(p) }); n != 1 {
		t.Errorf("stat after InvalidateInode: %d requests, want 1", n)
	}
	if err := c.Invalidate(ctx, control.Invalidation{Ino: ino}); err != nil {
		t.Fatal(err)
	}
	if n := delta("read", read); n == 0 {
		t.Errorf("read after InvalidateInode did not reach the server")
	}
	if err := c.Invalidate(ctx, control.Invalidation{Parent: cache.RootIno, Name: "missing"}); err != nil {
		t.Fatal(err)
	}
	if n := delta("lookup", func() { _ = stat(missing) }); n != 1 {
		t.Errorf("lookup after InvalidateEntry of a negative entry: %d requests, want 1", n)
	}

	// Listings are cached across opens (FOPEN_CACHE_DIR) until the
	// directory changes or is invalidated.
	list := func() {
		t.Helper()
		if _, err := os.ReadDir(m.Dir); err != nil {
			t.Fatal(err)
		}
	}
	list()
	if n := delta("readdir", list); n != 0 {
		t.Errorf("a repeated listing reached the server %d times", n)
	}
	if err := c.Invalidate(ctx, control.Invalidation{Ino: cache.RootIno}); err != nil {
		t.Fatal(err)
	}
	if n := delta("readdir", list); n != 1 {
		t.Errorf("listing after InvalidateInode of the directory: %d reads of it, want 1", n)
	}

	sub := filepath.Join(m.Dir, "d", "e")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(sub, "f")
	if err := os.WriteFile(deep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := stat(deep); err != nil {
		t.Fatal(err)
	}
	if n := delta("lookup", func() { _ = stat(deep) }); n != 0 {
		t.Errorf("repeated stat of a deep path: %d lookups", n)
	}
	if err := c.Invalidate(ctx, control.Invalidation{All: true}); err != nil {
		t.Fatal(err)
	}
	if n := delta("lookup", func() {
		if err := stat(deep); err != nil {
			t.Fatal(err)
		}
	}); n != 3 {
		t.Errorf("stat of d/e/f after InvalidateAll: %d lookups, want 3", n)
	}
}
