package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/internal/errcode"
	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/snapshot"
)

// TestEverySentinelMapped fails for any sentinel error of fs/control and
// the layers below it that Errors does not list (found by parsing their
// sources), so that a new sentinel cannot lose its identity on the socket.
func TestEverySentinelMapped(t *testing.T) {
	missing, found, err := errcode.Unmapped(Errors, "../..", "fs/...", "cache/...", "snapshot/...", "overlay/...", "blobstore")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range missing {
		t.Errorf("%s is a sentinel error that the control socket does not map: add it to internal/errcode (or control.Errors for fs/control's own)", n)
	}
	if found < 50 {
		t.Fatalf("found only %d sentinels: the source scan is broken", found)
	}
}

// TestErrorsCrossTheSocket checks every entry of Errors: an error wrapping
// its sentinel, failing a call on the server, comes back to the client
// with the same text and matching the same sentinel.
func TestErrorsCrossTheSocket(t *testing.T) {
	b := &fakeBackend{}
	c := serve(t, t.TempDir(), b, nil)
	for _, e := range Errors {
		if got, _ := Errors.Lookup(e.Err); got.Name != e.Name {
			t.Errorf("%s is shadowed by %s, an earlier entry: it never classifies an error", e.Name, got.Name)
			continue
		}
		b.syncErr = fmt.Errorf("sync of /mnt/x: %w", e.Err)
		err := c.Sync(context.Background())
		if !errors.Is(err, e.Err) || err.Error() != b.syncErr.Error() {
			t.Errorf("%s: the client got %q (matches: %v), the server failed with %q", e.Name, err, errors.Is(err, e.Err), b.syncErr)
		}
	}
}

// TestOldNamesDecode checks that an answer of a mount server of an earlier
// version, naming a namespace error as it was named before cache/ns
// (cache.ErrNotFound), comes back matching the same sentinel.
func TestOldNamesDecode(t *testing.T) {
	err := errorReply{Error: "lookup a: no such file or directory", Code: "cache.ErrNotFound"}.err()
	if !errors.Is(err, cache.ErrNotFound) || err.Error() != "lookup a: no such file or directory" {
		t.Errorf("an old server's cache.ErrNotFound came back as %q (matches: %v)", err, errors.Is(err, cache.ErrNotFound))
	}
}

// TestFsckMountAndURLAgree damages a volume and checks its fsck through a
// mount's socket against the same fsck run on the volume itself: the same
// problems, each matching the same sentinel (before, a problem that came
// through the socket had no error, and a failed fsck lost ErrCorrupt and
// ErrMissing).
func TestFsckMountAndURLAgree(t *testing.T) {
	ctx := context.Background()
	_, repo := snapshottest.InitVolume(t, fmt.Sprintf("mem://control-fsck-%d-%d", os.Getpid(), memSeq.Add(1)))
	w := snapshottest.OpenWorkspace(t, repo, "main")
	t.Cleanup(w.Close)
	c := serve(t, t.TempDir(), &volumeBackend{w: w}, nil)
	w.WriteFile("a.txt", []byte("one\n"))
	if _, err := c.Checkpoint(ctx, ""); err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Store().Delete(ctx, snapshot.PackKey(head.Root.Tree.Pack)); err != nil {
		t.Fatal(err)
	}
	local, err := repo.Fsck(ctx, snapshot.FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := c.Fsck(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(local.Problems) == 0 || len(remote.Problems) != len(local.Problems) {
		t.Fatalf("local fsck found %d problems, through the socket %d", len(local.Problems), len(remote.Problems))
	}
	for i, lp := range local.Problems {
		rp := remote.Problems[i]
		for _, sentinel := range []error{snapshot.ErrMissing, snapshot.ErrCorrupt} {
			if errors.Is(lp.Err, sentinel) != errors.Is(rp.Err, sentinel) {
				t.Errorf("problem %s: local %v, through the socket %v (matching %v differs)", lp.Object, lp.Err, rp.Err, sentinel)
			}
		}
		if rp.Object != lp.Object || rp.Err == nil || rp.Err.Error() != lp.Err.Error() {
			t.Errorf("problem %d: local %s: %v, through the socket %s: %v", i, lp.Object, lp.Err, rp.Object, rp.Err)
		}
	}
}
