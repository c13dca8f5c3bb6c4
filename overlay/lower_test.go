package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/snapshot"
)

// statFault is a host directory whose Stat of one path fails with an
// injected error.
type statFault struct {
	*HostDir
	path string
	err  atomic.Pointer[error]
}

func (s *statFault) Stat(ctx context.Context, path string) (snapshot.Entry, error) {
	if e := s.err.Load(); e != nil && path == s.path {
		return snapshot.Entry{}, fmt.Errorf("%s: %w", path, *e)
	}
	return s.HostDir.Stat(ctx, path)
}

// TestLowerStatErrors: opening an unmodified file of the host base stats
// its origin to pick up changes made on the host. An origin gone from the
// host keeps what was listed; any other failure to stat it (no
// permission, an I/O error) fails the open with ErrIO naming the path,
// instead of passing for "gone" and serving stale bytes.
func TestLowerStatErrors(t *testing.T) {
	ctx := context.Background()
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "sub", "file.txt"), []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := newRepo(t)
	branch, hd, err := Prepare(ctx, repo, "ws", Base{HostDir: host}, "testhost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hd.Close() })
	lower := &statFault{HostDir: hd, path: "sub/file.txt"}
	v := openVol(t, repo, branch, "", lower)
	if got := read(t, v, "sub/file.txt"); string(got) != "abc" {
		t.Fatalf("read through = %q", got)
	}
	a := must[cache.Attr](t)(lookupPath(ctx, v, "sub/file.txt"))

	for _, fault := range []error{syscall.EACCES, syscall.EIO} {
		lower.err.Store(&fault)
		_, err := v.Open(ctx, a.Ino, false)
		if err == nil {
			_ = v.Release(ctx, a.Ino)
		}
		if !errors.Is(err, fault) || !errors.Is(err, cache.ErrIO) || !strings.Contains(err.Error(), "sub/file.txt") {
			t.Errorf("open with the host's stat failing with %v: %v; want ErrIO naming sub/file.txt", fault, err)
		}
	}

	gone := cache.ErrNotFound
	lower.err.Store(&gone)
	if got := read(t, v, "sub/file.txt"); string(got) != "abc" {
		t.Fatalf("an origin gone from the host reads %q, want what was listed", got)
	}
}
