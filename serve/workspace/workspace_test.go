package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/serve/workspace"
)

// TestCreateAcquireClose: an empty workspace is created unmounted, the
// first Acquire mounts it through a mount server of its own, commands
// and files work through the Handle's backend, and Close syncs and
// unmounts everything: a new manager whose cache was thrown away finds
// the data in the store.
func TestCreateAcquireClose(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m, err := workspace.Open(ctx, e.config())
	if err != nil {
		t.Fatal(err)
	}
	in := create(t, m, workspace.CreateRequest{Name: "w1", Metadata: map[string]string{"owner": "t"}})
	if in.Status != workspace.StatusUnmounted || in.Branch != "w1" || in.HeadCommit != "w1@1" || in.Metadata["owner"] != "t" {
		t.Fatalf("created: %+v", in)
	}
	if _, err := m.Create(ctx, workspace.CreateRequest{Name: "w1"}); !errors.Is(err, workspace.ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	for _, bad := range []string{"", "a/b", ".x", "virtual-x"} {
		if _, err := m.Create(ctx, workspace.CreateRequest{Name: bad}); !errors.Is(err, workspace.ErrInvalidName) {
			t.Errorf("Create(%q): %v, want ErrInvalidName", bad, err)
		}
	}
	if _, err := m.Acquire(ctx, "nope"); !errors.Is(err, workspace.ErrNotFound) {
		t.Fatalf("Acquire(nope): %v", err)
	}

	h := acquire(t, m, "w1")
	if !mounted(t, h.MountPoint) {
		t.Fatalf("%s is not mounted after Acquire", h.MountPoint)
	}
	if pids := e.serverPIDs(); len(pids) != 1 || pids[0] == os.Getpid() {
		t.Fatalf("mount servers: %v (this process %d)", pids, os.Getpid())
	}
	res, err := h.Backend.Exec(ctx, exec.Request{Command: "echo hello > a.txt && mkdir d && echo x > d/b"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec: %+v, %v", res, err)
	}
	if len(res.Changes.Created) == 0 {
		t.Errorf("no changes reported: %+v", res.Changes)
	}
	writeFile(t, h, "c.txt", "written")
	h.Release()
	h.Release() // idempotent

	got, err := m.Get(ctx, "w1")
	if err != nil || got.Status != workspace.StatusMounted {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	list, err := m.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "w1" {
		t.Fatalf("List: %+v, %v", list, err)
	}
	if err := m.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if mounted(t, h.MountPoint) {
		t.Fatalf("%s still mounted after Close", h.MountPoint)
	}
	if pids := e.serverPIDs(); len(pids) != 0 {
		t.Fatalf("mount servers left after Close: %v", pids)
	}
	if _, err := m.Acquire(ctx, "w1"); !errors.Is(err, workspace.ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}

	// A fresh cache: only the store has the data.
	if err := os.RemoveAll(filepath.Join(e.stateDir, "workspaces", "w1", "cache")); err != nil {
		t.Fatal(err)
	}
	m2 := e.open(e.config())
	h = acquire(t, m2, "w1")
	defer h.Release()
	for p, want := range map[string]string{"a.txt": "hello\n", "d/b": "x\n", "c.txt": "written"} {
		if got := readFile(t, h, p); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	got, err = m2.Get(ctx, "w1")
	if err != nil || got.Metadata["owner"] != "t" || !got.Created.Equal(in.Created) {
		t.Fatalf("Get after reopen: %+v, %v", got, err)
	}
}

// TestStateDirChecks: a second manager on the same state directory
// fails, and so does a manager of another store on a state directory
// that holds workspaces.
func TestStateDirChecks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.open(e.config())
	if _, err := workspace.Open(ctx, e.config()); err == nil {
		t.Fatal("a second Open of the same state dir succeeded")
	}
	create(t, m, workspace.CreateRequest{Name: "w"})
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	other := "file://" + filepath.Join(t.TempDir(), "other")
	if out, err := fstest.Run(e.bin, nil, "init", other); err != nil {
		t.Fatalf("agentfs init: %v\n%s", err, out)
	}
	cfg := e.config()
	cfg.StoreURL = other
	if m2, err := workspace.Open(ctx, cfg); !errors.Is(err, workspace.ErrInvalidArgument) {
		if err == nil {
			_ = m2.Close(ctx)
		}
		t.Fatalf("Open of another store's state dir: %v", err)
	}
	e.open(e.config()) // the lock was released
}
