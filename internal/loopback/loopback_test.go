package loopback

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testenv"
)

func TestServeMissingSource(t *testing.T) {
	called := false
	err := Serve(context.Background(), filepath.Join(t.TempDir(), "missing"), t.TempDir(), nil, func() { called = true })
	if err == nil || !strings.Contains(err.Error(), "loopback: source ") {
		t.Errorf("Serve of a missing source = %v", err)
	}
	if called {
		t.Error("mounted was called without a mount")
	}
}

// mounted reports whether mnt is a mount point in this process's mount
// table. The test never looks inside the mount it serves.
func mounted(t *testing.T, mnt string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == mnt {
			return true
		}
	}
	return false
}

// serve runs Serve in the background and returns once the mount is live,
// with a channel that gets Serve's result.
func serve(t *testing.T, ctx context.Context) (string, <-chan error) {
	t.Helper()
	testenv.NeedFUSE(t)
	mnt, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	live := make(chan struct{})
	res := make(chan error, 1)
	go func() { res <- Serve(ctx, t.TempDir(), mnt, nil, func() { close(live) }) }()
	select {
	case <-live:
	case err := <-res:
		t.Fatalf("Serve returned before mounting: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not mounted after 10s")
	}
	t.Cleanup(func() {
		if mounted(t, mnt) {
			_ = exec.Command("fusermount3", "-u", "-z", mnt).Run()
		}
	})
	if !mounted(t, mnt) {
		t.Fatalf("%s is not a mount point after mounted was called", mnt)
	}
	return mnt, res
}

// result waits up to 10s for Serve's result after what.
func result(t *testing.T, res <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-res:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("Serve did not return within 10s of %s", what)
		return nil
	}
}

func TestServeUntilDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	mnt, res := serve(t, ctx)
	cancel()
	if err := result(t, res, "cancel"); err != nil {
		t.Fatalf("Serve after cancel = %v", err)
	}
	if mounted(t, mnt) {
		t.Errorf("%s still mounted after Serve returned", mnt)
	}
}

func TestServeUnmountedFromOutside(t *testing.T) {
	mnt, res := serve(t, context.Background())
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v: %s", err, out)
	}
	if err := result(t, res, "an unmount from outside"); err == nil || !strings.Contains(err.Error(), "unmounted from outside") {
		t.Errorf("Serve after an unmount from outside = %v", err)
	}
}
