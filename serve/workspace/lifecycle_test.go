package workspace_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/workspace"
)

func status(t *testing.T, m *workspace.Manager, name string) workspace.Status {
	t.Helper()
	in, err := m.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	return in.Status
}

// TestIdleUnmount: a workspace idle for IdleTimeout (by the injected
// clock) is synced and unmounted, never while a Handle is held, and the
// next Acquire mounts it again with its data.
func TestIdleUnmount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.open(e.config()) // IdleTimeout: 1 min
	create(t, m, workspace.CreateRequest{Name: "w"})
	h := acquire(t, m, "w")
	writeFile(t, h, "f", "kept")
	h.Release()

	e.clock.Advance(30 * time.Second)
	m.Scan(ctx)
	if status(t, m, "w") != workspace.StatusMounted {
		t.Fatal("unmounted before the idle timeout")
	}
	e.clock.Advance(31 * time.Second)
	m.Scan(ctx)
	if status(t, m, "w") != workspace.StatusUnmounted || mounted(t, h.MountPoint) {
		t.Fatal("still mounted after the idle timeout")
	}
	if pids := e.serverPIDs(); len(pids) != 0 {
		t.Fatalf("mount server still running: %v", pids)
	}

	h = acquire(t, m, "w") // transparent remount
	if got := readFile(t, h, "f"); got != "kept" {
		t.Fatalf("after the remount f = %q", got)
	}
	e.clock.Advance(time.Hour)
	m.Scan(ctx)
	if status(t, m, "w") != workspace.StatusMounted {
		t.Fatal("unmounted while a Handle is held")
	}
	h.Release() // counts as a use
	m.Scan(ctx)
	if status(t, m, "w") != workspace.StatusMounted {
		t.Fatal("unmounted right after a use")
	}
	e.clock.Advance(time.Minute)
	m.Scan(ctx)
	if status(t, m, "w") != workspace.StatusUnmounted {
		t.Fatal("still mounted after the idle timeout")
	}
}

// TestMaxMounted: with MaxMounted 2, mounting a third workspace unmounts
// the least recently used one; when every mounted workspace is held,
// Acquire fails with ErrBusy.
func TestMaxMounted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.config()
	cfg.MaxMounted = 2
	m := e.open(cfg)
	for _, n := range []string{"a", "b", "c"} {
		create(t, m, workspace.CreateRequest{Name: n})
	}
	use := func(name string) {
		h := acquire(t, m, name)
		writeFile(t, h, "f", name)
		h.Release()
		e.clock.Advance(time.Second)
	}
	use("a")
	use("b")
	use("a") // b is now the least recently used
	use("c")
	for n, want := range map[string]workspace.Status{"a": workspace.StatusMounted, "b": workspace.StatusUnmounted, "c": workspace.StatusMounted} {
		if got := status(t, m, n); got != want {
			t.Errorf("%s: %s, want %s", n, got, want)
		}
	}
	ha, hc := acquire(t, m, "a"), acquire(t, m, "c")
	if _, err := m.Acquire(ctx, "b"); !errors.Is(err, workspace.ErrBusy) {
		t.Fatalf("Acquire with every slot held: %v, want ErrBusy", err)
	}
	hc.Release()
	hb := acquire(t, m, "b")
	if got := readFile(t, hb, "f"); got != "b" {
		t.Errorf("b after the remount: %q", got)
	}
	if status(t, m, "c") != workspace.StatusUnmounted || status(t, m, "a") != workspace.StatusMounted {
		t.Error("the wrong workspace was evicted")
	}
	ha.Release()
	hb.Release()
	if n := len(e.serverPIDs()); n != 2 {
		t.Errorf("%d mount servers run, want 2", n)
	}
}

// TestLifetime: when a lifetime ends, OnExpire is told, the commands
// running in the workspace are killed even though a Handle is held, it
// is synced and unmounted, its data stays (a fork reads it) and Acquire
// fails with ErrExpired; with DeleteOnExpiry it is deleted.
func TestLifetime(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var mu sync.Mutex
	var told []string
	cfg := e.config()
	cfg.OnExpire = func(name string) {
		mu.Lock()
		told = append(told, name)
		mu.Unlock()
	}
	m := e.open(cfg)
	in := create(t, m, workspace.CreateRequest{Name: "keep", Lifetime: time.Hour})
	if in.ExpiresAt == nil || !in.ExpiresAt.Equal(e.clock.Now().Add(time.Hour)) {
		t.Fatalf("ExpiresAt: %v", in.ExpiresAt)
	}
	create(t, m, workspace.CreateRequest{Name: "drop", Lifetime: 2 * time.Hour, DeleteOnExpiry: true})
	h := acquire(t, m, "keep")
	writeFile(t, h, "f", "data")
	job, err := h.Backend.Start(ctx, exec.Request{Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	hd := acquire(t, m, "drop")
	hd.Release()

	e.clock.Advance(59 * time.Minute)
	m.Scan(ctx)
	if status(t, m, "keep") != workspace.StatusMounted {
		t.Fatal("ended early")
	}
	e.clock.Advance(2 * time.Minute)
	m.Scan(ctx)
	select {
	case <-job.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the job still runs after the lifetime ended")
	}
	got, err := m.Get(ctx, "keep")
	if err != nil || !got.Expired || got.Status != workspace.StatusUnmounted || mounted(t, h.MountPoint) {
		t.Fatalf("after the lifetime: %+v, %v", got, err)
	}
	h.Release()
	if _, err := m.Acquire(ctx, "keep"); !errors.Is(err, workspace.ErrExpired) {
		t.Fatalf("Acquire after the lifetime: %v", err)
	}
	create(t, m, workspace.CreateRequest{Name: "rescued", From: "keep"})
	hr := acquire(t, m, "rescued")
	if got := readFile(t, hr, "f"); got != "data" {
		t.Errorf("the expired workspace's data: %q", got)
	}
	hr.Release()

	e.clock.Advance(time.Hour)
	m.Scan(ctx)
	if _, err := m.Get(ctx, "drop"); !errors.Is(err, workspace.ErrNotFound) {
		t.Fatalf("drop after its lifetime: %v", err)
	}
	if mounted(t, filepath.Join(e.stateDir, "workspaces", "drop", "mnt")) {
		t.Error("drop still mounted")
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(told, []string{"keep", "drop"}) {
		t.Errorf("OnExpire was told %v", told)
	}
}
