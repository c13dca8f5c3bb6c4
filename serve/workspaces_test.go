package serve_test

import (
	"testing"
	"time"

	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/workspace"
)

func TestWorkspacesCRUD(t *testing.T) {
	d := newDaemon(t, nil)
	ctx := ctxT(t)
	if h, err := d.admin.Health(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("health %+v %v", h, err)
	}
	w, err := d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "alpha", Metadata: map[string]string{"owner": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "alpha" || w.Metadata["owner"] != "t" || w.Virtual {
		t.Errorf("created %+v", w)
	}
	_, err = d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "alpha"})
	wantCode(t, "create twice", err, "exists", 409)
	_, err = d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "../bad"})
	wantCode(t, "create bad name", err, "invalid_argument", 400)
	_, err = d.admin.GetWorkspace(ctx, "missing")
	wantCode(t, "get missing", err, "not_found", 404)

	// First use mounts it; its files and a fork follow.
	if err := d.admin.Workspace("alpha").WriteFile(ctx, "a.txt", []byte("one")); err != nil {
		t.Fatal(err)
	}
	got, err := d.admin.GetWorkspace(ctx, "alpha")
	if err != nil || got.Status != "mounted" {
		t.Errorf("get after use: %+v %v", got, err)
	}
	if _, err := d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "beta", From: "alpha"}); err != nil {
		t.Fatal(err)
	}
	if data, err := d.admin.Workspace("beta").ReadFile(ctx, "a.txt"); err != nil || string(data) != "one" {
		t.Errorf("fork reads %q %v", data, err)
	}
	list, err := d.admin.ListWorkspaces(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "beta" {
		t.Errorf("list %+v %v", list, err)
	}
	if err := d.admin.DeleteWorkspace(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	_, err = d.admin.GetWorkspace(ctx, "beta")
	wantCode(t, "get deleted", err, "not_found", 404)
	wantCode(t, "delete missing", d.admin.DeleteWorkspace(ctx, "beta"), "not_found", 404)
	_, err = d.admin.Workspace("beta").ReadFile(ctx, "a.txt")
	wantCode(t, "read in deleted", err, "not_found", 404)
}

// TestIdleAndEviction: through the API, an idle workspace is unmounted
// and the next request mounts it again transparently; with --max-mounted
// 1, using a second workspace unmounts the first, and a job keeps its
// workspace mounted.
func TestIdleAndEviction(t *testing.T) {
	d := newDaemonConfig(t, func(c *workspace.Config) {
		c.IdleTimeout = time.Second
		c.ScanInterval = 100 * time.Millisecond
		c.MaxMounted = 1
	}, nil)
	ctx := ctxT(t)
	a, b := d.create("a"), d.create("b")
	if err := a.WriteFile(ctx, "f", []byte("a-data")); err != nil {
		t.Fatal(err)
	}
	status := func(name string) string {
		w, err := d.admin.GetWorkspace(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return w.Status
	}
	deadline := time.Now().Add(30 * time.Second)
	for status("a") != "unmounted" {
		if time.Now().After(deadline) {
			t.Fatal("a is still mounted after its idle timeout")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if data, err := a.ReadFile(ctx, "f"); err != nil || string(data) != "a-data" {
		t.Fatalf("after the idle unmount: %q %v", data, err)
	}
	if status("a") != "mounted" {
		t.Error("a was not mounted again by the read")
	}
	if err := b.WriteFile(ctx, "g", []byte("b-data")); err != nil {
		t.Fatal(err)
	}
	if status("a") != "unmounted" || status("b") != "mounted" {
		t.Errorf("max-mounted 1: a %s, b %s", status("a"), status("b"))
	}
	// A running job pins b: a cannot take its slot.
	j, err := b.StartJob(ctx, api.ExecRequest{Command: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.ReadFile(ctx, "f")
	wantCode(t, "mount while the only slot is pinned", err, "busy", 429)
	if _, err := b.KillJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if data, err := a.ReadFile(ctx, "f"); err != nil || string(data) != "a-data" {
		t.Errorf("a after the job ended: %q %v", data, err)
	}
}
