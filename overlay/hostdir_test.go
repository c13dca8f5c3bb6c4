package overlay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache"
)

// TestHostDirOpenReplacedByFIFO: a base file replaced by a FIFO after it
// was listed gives an error at once; opening it does not wait for a writer.
func TestHostDirOpenReplacedByFIFO(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "p"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	hd, err := OpenHostDir(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hd.Close() })
	if _, err := hd.Stat(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(host, "p")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(host, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := hd.Open(context.Background(), "p")
		if err == nil {
			_ = f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, cache.ErrInvalid) {
			t.Errorf("open of a FIFO: %v, want cache.ErrInvalid", err)
		}
	case <-time.After(10 * time.Second):
		// Unblock the open so that the test ends.
		w, err := os.OpenFile(filepath.Join(host, "p"), os.O_WRONLY, 0)
		if err == nil {
			_ = w.Close()
		}
		t.Fatalf("open of a base file replaced by a FIFO blocked until a writer came (then: %v)", <-done)
	}
}

// TestHostDirEntries: the listing the engine reads through to carries each
// entry's origin and, for files, the size its bytes are read up to; a
// directory gone from the host lists as empty.
func TestHostDirEntries(t *testing.T) {
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "d", "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(host, "d", "l")); err != nil {
		t.Fatal(err)
	}
	hd, err := OpenHostDir(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hd.Close() })
	var lower cache.Lower = hd
	got, err := lower.Entries(context.Background(), "d")
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name, origin string
		originSize   uint64
		nlink        uint32
	}
	exp := []want{{"f", "d/f", 5, 1}, {"l", "d/l", 0, 1}, {"sub", "d/sub", 0, 2}}
	if len(got) != len(exp) {
		t.Fatalf("%d entries, want %d: %+v", len(got), len(exp), got)
	}
	for i, w := range exp {
		e := got[i]
		if e.Name != w.name || !e.HasOrigin || e.Origin != w.origin || e.OriginSize != w.originSize || e.Nlink != w.nlink || e.Modified {
			t.Errorf("entry %d: %q origin %v %q size %d nlink %d modified %v; want %+v", i, e.Name, e.HasOrigin, e.Origin, e.OriginSize, e.Nlink, e.Modified, w)
		}
	}
	if err := os.RemoveAll(filepath.Join(host, "d")); err != nil {
		t.Fatal(err)
	}
	if got, err := lower.Entries(context.Background(), "d"); err != nil || len(got) != 0 {
		t.Fatalf("entries of a directory gone from the host: %v, %v; want none", got, err)
	}
}
