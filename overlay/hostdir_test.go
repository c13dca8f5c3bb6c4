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
