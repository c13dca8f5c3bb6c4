package workspace_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/serve/workspace"
	"github.com/agentfs/agentfs/snapshot"
)

// TestCreateKindsAndDelete: a workspace from a snapshot, a fork of
// another workspace's head (including what it wrote and did not sync
// yet), virtual workspaces over a snapshot and over a host directory,
// their listing, and Delete of each kind: the mount, the branch and the
// state directory go, the snapshots stay.
func TestCreateKindsAndDelete(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.open(e.config())

	create(t, m, workspace.CreateRequest{Name: "src"})
	src := acquire(t, m, "src")
	writeFile(t, src, "a.txt", "in the snapshot")
	if _, err := src.Control.SaveSnapshot(ctx, "s1", "test"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, src, "b.txt", "after the snapshot")
	src.Release()

	in := create(t, m, workspace.CreateRequest{Name: "fromsnap", From: "snapshot:s1"})
	if in.From != "snapshot:s1" || in.Virtual {
		t.Errorf("fromsnap: %+v", in)
	}
	h := acquire(t, m, "fromsnap")
	if got := readFile(t, h, "a.txt"); got != "in the snapshot" {
		t.Errorf("fromsnap a.txt = %q", got)
	}
	if ok, _ := h.Backend.Exists(ctx, "b.txt"); ok {
		t.Error("fromsnap has b.txt, written after the snapshot")
	}
	writeFile(t, h, "own.txt", "x")
	h.Release()

	create(t, m, workspace.CreateRequest{Name: "fork", From: "src"})
	h = acquire(t, m, "fork")
	if got := readFile(t, h, "b.txt"); got != "after the snapshot" {
		t.Errorf("fork b.txt = %q (the source's latest write)", got)
	}
	h.Release()

	if _, err := m.Create(ctx, workspace.CreateRequest{Name: "x", From: "nope"}); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("from a missing workspace: %v", err)
	}
	if _, err := m.Create(ctx, workspace.CreateRequest{Name: "x", From: "snapshot:nope"}); !errors.Is(err, snapshot.ErrNoRef) {
		t.Errorf("from a missing snapshot: %v", err)
	}
	if _, err := m.Get(ctx, "x"); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("a failed create left a workspace: %v", err)
	}

	create(t, m, workspace.CreateRequest{Name: "v1", Virtual: true, Base: "snapshot:s1"})
	h = acquire(t, m, "v1")
	if !h.Virtual || readFile(t, h, "a.txt") != "in the snapshot" {
		t.Errorf("v1: virtual %v", h.Virtual)
	}
	writeFile(t, h, "a.txt", "changed in v1")
	d, err := h.Control.VirtualDiff(ctx, control.VirtualDiffRequest{})
	if err != nil || len(d.Changes) != 1 {
		t.Errorf("v1 diff: %+v, %v", d, err)
	}
	h.Release()

	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "h.txt"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	create(t, m, workspace.CreateRequest{Name: "v2", Virtual: true, Base: host})
	h = acquire(t, m, "v2")
	if got := readFile(t, h, "h.txt"); got != "host" {
		t.Errorf("v2 h.txt = %q", got)
	}
	writeFile(t, h, "h.txt", "agent")
	h.Release()
	if b, _ := os.ReadFile(filepath.Join(host, "h.txt")); string(b) != "host" {
		t.Errorf("the host directory changed: %q", b)
	}

	for _, bad := range []workspace.CreateRequest{
		{Name: "x", From: "v1"},                           // fork of a virtual workspace
		{Name: "x", Base: "snapshot:s1"},                  // base without virtual
		{Name: "x", Virtual: true},                        // virtual without base
		{Name: "x", Virtual: true, Base: "rel/dir"},       // relative host directory
		{Name: "x", Virtual: true, Base: "s1", From: "a"}, // both
		{Name: "x", DeleteOnExpiry: true},                 // no lifetime
		{Name: "x", Lifetime: -1},
		{Name: "x", Virtual: true, Base: filepath.Dir(e.stateDir)}, // over the state dir
	} {
		if _, err := m.Create(ctx, bad); !errors.Is(err, workspace.ErrInvalidArgument) {
			t.Errorf("Create(%+v): %v, want ErrInvalidArgument", bad, err)
		}
	}

	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range list {
		names = append(names, in.Name)
		if in.Status != workspace.StatusMounted || in.HeadCommit == "" {
			t.Errorf("listed: %+v", in)
		}
	}
	if want := []string{"fork", "fromsnap", "src", "v1", "v2"}; !slices.Equal(names, want) {
		t.Fatalf("List: %v, want %v", names, want)
	}

	// Delete: refused while held, then everything goes but the snapshot.
	h = acquire(t, m, "src")
	if err := m.Delete(ctx, "src"); !errors.Is(err, workspace.ErrBusy) {
		t.Fatalf("Delete while held: %v", err)
	}
	h.Release()
	for _, name := range []string{"src", "fork", "fromsnap", "v1", "v2"} {
		mnt := filepath.Join(e.stateDir, "workspaces", name, "mnt")
		if err := m.Delete(ctx, name); err != nil {
			t.Fatalf("Delete(%s): %v", name, err)
		}
		if _, err := m.Get(ctx, name); !errors.Is(err, workspace.ErrNotFound) {
			t.Errorf("Get(%s) after Delete: %v", name, err)
		}
		if mounted(t, mnt) {
			t.Errorf("%s still mounted after Delete", mnt)
		}
		if _, err := os.Stat(filepath.Dir(mnt)); !os.IsNotExist(err) {
			t.Errorf("state of %s left: %v", name, err)
		}
	}
	if err := m.Delete(ctx, "src"); !errors.Is(err, workspace.ErrNotFound) {
		t.Errorf("second Delete: %v", err)
	}
	if pids := e.serverPIDs(); len(pids) != 0 {
		t.Errorf("mount servers left: %v", pids)
	}
	// The branch is gone (the name is free again, empty) and the snapshot
	// stayed.
	create(t, m, workspace.CreateRequest{Name: "src"})
	h = acquire(t, m, "src")
	if ok, _ := h.Backend.Exists(ctx, "a.txt"); ok {
		t.Error("a new workspace src has the deleted one's files")
	}
	h.Release()
	create(t, m, workspace.CreateRequest{Name: "again", From: "snapshot:s1"})
	h = acquire(t, m, "again")
	if got := readFile(t, h, "a.txt"); got != "in the snapshot" {
		t.Errorf("from the snapshot after its workspace was deleted: %q", got)
	}
	h.Release()
}
