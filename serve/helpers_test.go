package serve_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/serve"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/client"
	"github.com/agentfs/agentfs/serve/workspace"
)

const adminToken = "test-admin-token"

// daemon is a real API server over a real workspace manager, whose
// workspaces are real agentfs mounts served by processes of their own,
// reached over real HTTP (httptest on loopback).
type daemon struct {
	t        testing.TB
	mgr      *workspace.Manager
	srv      *serve.Server
	hs       *httptest.Server
	admin    *client.Client
	stateDir string
}

// newDaemon starts a daemon with its own default store and state
// directory; edit adjusts the server's options. Everything is stopped
// and unmounted when the test ends.
func newDaemon(t testing.TB, edit func(*serve.Options)) *daemon {
	t.Helper()
	return newDaemonConfig(t, nil, edit)
}

// newDaemonConfig is newDaemon with editCfg adjusting the manager's
// configuration too.
func newDaemonConfig(t testing.TB, editCfg func(*workspace.Config), edit func(*serve.Options)) *daemon {
	t.Helper()
	testenv.NeedFUSE(t)
	bin := fstest.Binary(t)
	base := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(base, "data"))
	d := &daemon{t: t, stateDir: filepath.Join(base, "state")}
	var srv *serve.Server
	cfg := workspace.Config{
		StateDir: d.stateDir, Executable: bin, IdleTimeout: time.Hour,
		OnExpire: func(name string) {
			if srv != nil {
				srv.OnExpire(name)
			}
		},
	}
	if editCfg != nil {
		editCfg(&cfg)
	}
	mgr, err := workspace.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("workspace.Open: %v", err)
	}
	opts := serve.Options{Manager: mgr, AdminToken: adminToken, StateDir: d.stateDir}
	if edit != nil {
		edit(&opts)
	}
	srv, err = serve.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	d.mgr, d.srv = mgr, srv
	d.hs = httptest.NewServer(srv.Handler())
	d.admin = client.New(d.hs.URL, adminToken)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		d.hs.Close()
		if err := mgr.Close(ctx); err != nil {
			t.Errorf("Manager.Close: %v", err)
		}
	})
	return d
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// create makes workspace name and returns its client.
func (d *daemon) create(name string) *client.Workspace {
	d.t.Helper()
	if _, err := d.admin.CreateWorkspace(ctxT(d.t), api.CreateWorkspace{Name: name}); err != nil {
		d.t.Fatalf("create %s: %v", name, err)
	}
	return d.admin.Workspace(name)
}

// wantCode fails unless err is an API error with code and status.
func wantCode(t *testing.T, what string, err error, code string, status int) {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %v, want %s (%d)", what, err, code, status)
		return
	}
	if e.Code != code || e.Status != status {
		t.Errorf("%s: %s (%d) %q, want %s (%d)", what, e.Code, e.Status, e.Message, code, status)
	}
}
