package serve_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/client"
)

func TestAuthMatrix(t *testing.T) {
	d := newDaemon(t, nil)
	ctx := ctxT(t)
	d.create("mine")
	d.create("other")
	if err := d.admin.Workspace("mine").WriteFile(ctx, "f.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	rw, err := d.admin.CreateToken(ctx, api.CreateToken{Workspace: "mine"})
	if err != nil || !strings.HasPrefix(rw.Token, "afs_") || rw.ReadOnly {
		t.Fatalf("token %+v %v", rw, err)
	}
	ro, err := d.admin.CreateToken(ctx, api.CreateToken{Workspace: "mine", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.admin.CreateToken(ctx, api.CreateToken{Workspace: "nope"})
	wantCode(t, "token of a missing workspace", err, "not_found", 404)

	as := func(tok string) *client.Client { return d.admin.WithToken(tok) }
	read := func(c *client.Client, ws string) error {
		_, err := c.Workspace(ws).ReadFile(ctx, "f.txt")
		return err
	}
	write := func(c *client.Client, ws string) error {
		return c.Workspace(ws).WriteFile(ctx, "g.txt", []byte("x"))
	}
	run := func(c *client.Client, ws string) error {
		_, err := c.Workspace(ws).Exec(ctx, api.ExecRequest{Command: "true"})
		return err
	}
	list := func(c *client.Client, _ string) error {
		_, err := c.ListWorkspaces(ctx)
		return err
	}
	mint := func(c *client.Client, ws string) error {
		_, err := c.CreateToken(ctx, api.CreateToken{Workspace: ws})
		return err
	}
	ops := map[string]func(*client.Client, string) error{"read": read, "write": write, "exec": run, "list": list, "mint": mint}
	for _, tc := range []struct {
		who, token, ws, op string
		code               string // "" for success
	}{
		{"no token", "", "mine", "read", "unauthorized"},
		{"no token", "", "mine", "list", "unauthorized"},
		{"wrong token", "nope", "mine", "read", "unauthorized"},
		{"wrong token", adminToken + "x", "mine", "write", "unauthorized"},
		{"admin", adminToken, "mine", "read", ""},
		{"admin", adminToken, "other", "write", ""},
		{"admin", adminToken, "", "list", ""},
		{"workspace token", rw.Token, "mine", "read", ""},
		{"workspace token", rw.Token, "mine", "write", ""},
		{"workspace token", rw.Token, "mine", "exec", ""},
		{"workspace token", rw.Token, "other", "read", "forbidden"},
		{"workspace token", rw.Token, "other", "exec", "forbidden"},
		{"workspace token", rw.Token, "", "list", "forbidden"},
		{"workspace token", rw.Token, "mine", "mint", "forbidden"},
		{"read-only token", ro.Token, "mine", "read", ""},
		{"read-only token", ro.Token, "mine", "write", "forbidden"},
		{"read-only token", ro.Token, "mine", "exec", "forbidden"},
		{"read-only token", ro.Token, "other", "read", "forbidden"},
	} {
		err := ops[tc.op](as(tc.token), tc.ws)
		what := tc.who + " " + tc.op + " " + tc.ws
		switch tc.code {
		case "":
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case "unauthorized":
			wantCode(t, what, err, tc.code, http.StatusUnauthorized)
		default:
			wantCode(t, what, err, tc.code, http.StatusForbidden)
		}
	}
	// GET /healthz needs no token.
	if _, err := as("").Health(ctx); err != nil {
		t.Errorf("healthz without a token: %v", err)
	}
	// A workspace token sees its own workspace.
	if w, err := as(ro.Token).GetWorkspace(ctx, "mine"); err != nil || w.Name != "mine" {
		t.Errorf("get own workspace: %+v %v", w, err)
	}
	// Revoked tokens stop working, and the store keeps no secret.
	if err := d.admin.RevokeToken(ctx, rw.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "revoked", read(as(rw.Token), "mine"), "unauthorized", 401)
	wantCode(t, "revoke twice", d.admin.RevokeToken(ctx, rw.ID), "not_found", 404)
	toks, err := d.admin.ListTokens(ctx, "mine")
	if err != nil || len(toks) != 1 || toks[0].ID != ro.ID || toks[0].Token != "" {
		t.Errorf("tokens %+v %v", toks, err)
	}
	// Deleting the workspace revokes its tokens.
	if err := d.admin.DeleteWorkspace(ctx, "mine"); err != nil {
		t.Fatal(err)
	}
	if toks, err := d.admin.ListTokens(ctx, ""); err != nil || len(toks) != 0 {
		t.Errorf("tokens after delete %+v %v", toks, err)
	}
}

// TestPathEscapes sends paths that leave the workspace to every route
// that takes a path; the route list is checked against the server's, so
// a new route must be listed here or among those that take no path.
func TestPathEscapes(t *testing.T) {
	d := newDaemon(t, nil)
	w := d.create("ws")
	ctx := ctxT(t)
	if _, err := w.Exec(ctx, api.ExecRequest{Command: "ln -s /etc out && ln -s ../../.. up && mkdir d && echo a > f"}); err != nil {
		t.Fatal(err)
	}
	escapes := []string{"../x", "d/../../x", "/etc/passwd", "out/passwd", "up/etc"}
	probes := map[string]func(ctx context.Context, p string) error{
		"POST /v1/workspaces/{name}/exec": func(ctx context.Context, p string) error {
			_, err := w.Exec(ctx, api.ExecRequest{Command: "true", Cwd: p})
			return err
		},
		"POST /v1/workspaces/{name}/exec/stream": func(ctx context.Context, p string) error {
			_, err := w.ExecStream(ctx, api.ExecRequest{Command: "true", Cwd: p}, nil)
			return err
		},
		"POST /v1/workspaces/{name}/jobs": func(ctx context.Context, p string) error {
			_, err := w.StartJob(ctx, api.ExecRequest{Command: "true", Cwd: p})
			return err
		},
		"GET /v1/workspaces/{name}/files/{path}": func(ctx context.Context, p string) error {
			_, err := w.ReadFile(ctx, p)
			return err
		},
		"PUT /v1/workspaces/{name}/files/{path}": func(ctx context.Context, p string) error {
			return w.WriteFile(ctx, p, []byte("x"))
		},
		"DELETE /v1/workspaces/{name}/files/{path}": func(ctx context.Context, p string) error {
			return w.Remove(ctx, p, true)
		},
		"GET /v1/workspaces/{name}/fs/stat": func(ctx context.Context, p string) error {
			_, err := w.Stat(ctx, p+"/x")
			return err
		},
		"GET /v1/workspaces/{name}/fs/exists": func(ctx context.Context, p string) error {
			_, err := w.Exists(ctx, p+"/x")
			return err
		},
		"GET /v1/workspaces/{name}/fs/list": func(ctx context.Context, p string) error {
			_, err := w.List(ctx, p, true)
			return err
		},
		"POST /v1/workspaces/{name}/fs/mkdir": func(ctx context.Context, p string) error {
			return w.Mkdir(ctx, p+"/new", true)
		},
		"POST /v1/workspaces/{name}/fs/edit": func(ctx context.Context, p string) error {
			_, err := w.Edit(ctx, api.Edit{Path: p, Old: "a", New: "b"})
			return err
		},
		"POST /v1/workspaces/{name}/fs/rename": func(ctx context.Context, p string) error {
			if err := w.Rename(ctx, p, "z"); err == nil || client.Code(err) != "path_escape" {
				return err
			}
			return w.Rename(ctx, "d", p+"/z")
		},
		"POST /v1/workspaces/{name}/fs/copy": func(ctx context.Context, p string) error {
			if err := w.Copy(ctx, p, "z"); err == nil || client.Code(err) != "path_escape" {
				return err
			}
			return w.Copy(ctx, "f", p+"/z")
		},
		"POST /v1/workspaces/{name}/fs/glob": func(ctx context.Context, p string) error {
			_, err := w.Glob(ctx, api.Glob{Pattern: "*", Path: p})
			return err
		},
		"GET /v1/workspaces/{name}/tar/{path}": func(ctx context.Context, p string) error {
			rc, err := w.DownloadTar(ctx, p)
			if err == nil {
				_ = rc.Close()
			}
			return err
		},
		"PUT /v1/workspaces/{name}/tar/{path}": func(ctx context.Context, p string) error {
			_, err := w.UploadTar(ctx, p, strings.NewReader(""))
			return err
		},
		"POST /v1/workspaces/{name}/fs/grep": func(ctx context.Context, p string) error {
			_, err := w.Grep(ctx, api.Grep{Pattern: "x", Path: p})
			return err
		},
	}
	noPath := map[string]bool{
		"GET /healthz": true, "GET /metrics": true, "GET /v1/openapi.json": true,
		"POST /v1/workspaces": true, "GET /v1/workspaces": true, "GET /v1/workspaces/{name}": true,
		"DELETE /v1/workspaces/{name}": true, "POST /v1/tokens": true, "GET /v1/tokens": true,
		"DELETE /v1/tokens/{id}": true, "GET /v1/workspaces/{name}/jobs": true,
		"GET /v1/workspaces/{name}/jobs/{id}": true, "POST /v1/workspaces/{name}/jobs/{id}/wait": true,
		"POST /v1/workspaces/{name}/jobs/{id}/kill": true, "GET /v1/workspaces/{name}/jobs/{id}/output": true,
		// History names snapshots and references, not paths; virtual
		// commit and discard name paths of the overlay's change list only.
		"POST /v1/workspaces/{name}/snapshots": true, "GET /v1/workspaces/{name}/snapshots": true,
		"DELETE /v1/workspaces/{name}/snapshots/{snap}": true, "POST /v1/workspaces/{name}/snapshots/{snap}/restore": true,
		"POST /v1/workspaces/{name}/fork": true, "GET /v1/workspaces/{name}/branches": true,
		"POST /v1/workspaces/{name}/virtual/diff": true, "POST /v1/workspaces/{name}/virtual/commit": true,
		"POST /v1/workspaces/{name}/virtual/discard": true,
	}
	// A diff's path names a directory of the history's trees, where
	// symlinks are not followed: only lexical escapes apply.
	lexical := map[string]func(ctx context.Context, p string) error{
		"POST /v1/workspaces/{name}/diff": func(ctx context.Context, p string) error {
			_, err := w.Diff(ctx, api.Diff{From: "ws", Path: p})
			return err
		},
		// A change feed's path is a filter of the paths it reports: a
		// symlink in it is not followed (it matches nothing).
		"GET /v1/workspaces/{name}/changes": func(ctx context.Context, p string) error {
			s, err := w.Changes(ctx, client.ChangesOptions{Path: p})
			if err == nil {
				_ = s.Close()
			}
			return err
		},
	}
	for _, rt := range d.srv.Routes() {
		if probes[rt] == nil && lexical[rt] == nil && !noPath[rt] {
			t.Errorf("route %s: not in TestPathEscapes (add a probe, or list it as taking no path)", rt)
		}
	}
	for rt, probe := range lexical {
		for _, p := range []string{"../x", "d/../../x", "/etc"} {
			wantCode(t, rt+" "+p, probe(ctx, p), "path_escape", 400)
		}
	}
	for rt, probe := range probes {
		for _, p := range escapes {
			wantCode(t, rt+" "+p, probe(ctx, p), "path_escape", 400)
		}
	}
	// Glob patterns and the raw URL (as curl sends it) are confined too.
	_, err := w.Glob(ctx, api.Glob{Pattern: "../*"})
	wantCode(t, "glob ../*", err, "path_escape", 400)
	req, _ := http.NewRequestWithContext(ctx, "GET", d.hs.URL+"/v1/workspaces/ws/files/..%2F..%2Fetc%2Fpasswd", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("raw ..%%2F URL: status %d", resp.StatusCode)
	}
}
