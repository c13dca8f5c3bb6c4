package serve_test

import (
	"testing"

	"github.com/agentfs/agentfs/serve/api"
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
