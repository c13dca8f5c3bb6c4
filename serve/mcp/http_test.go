package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/serve/apierr"
	"github.com/agentfs/agentfs/serve/mcp"
	"github.com/agentfs/agentfs/serve/mcp/mcptest"
	"github.com/agentfs/agentfs/serve/workspace"
)

// daemon is a workspace manager with real mounts, and an MCP handler over
// it whose resolver maps test tokens to workspaces.
type daemon struct {
	m   *workspace.Manager
	url string
	// admitted counts the commands the resolver's Admit let run.
	admitted chan bool
}

func newDaemon(t *testing.T) *daemon {
	t.Helper()
	testenv.NeedFUSE(t)
	bin := fstest.Binary(t)
	base := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(base, "data"))
	m, err := workspace.Open(context.Background(), workspace.Config{StateDir: filepath.Join(base, "state"), Executable: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			t.Errorf("manager Close: %v", err)
		}
	})
	d := &daemon{m: m, admitted: make(chan bool, 1000)}
	tokens := map[string]mcp.Managed{
		"tok-w":  {Manager: m, Name: "w"},
		"tok-ro": {Manager: m, Name: "w", ReadOnly: true},
		"tok-v":  {Manager: m, Name: "v"},
		"tok-busy": {Manager: m, Name: "w", Admit: func(bool) (func(), error) {
			return nil, apierr.New(apierr.Busy, "too many commands")
		}},
	}
	admit := func(job bool) (func(), error) {
		d.admitted <- job
		return func() {}, nil
	}
	resolve := func(r *http.Request) (mcp.Workspace, error) {
		ws, ok := tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		if !ok {
			return nil, apierr.New(apierr.Unauthorized, "unknown token")
		}
		if ws.Admit == nil {
			ws.Admit = admit
		}
		return ws, nil
	}
	srv := httptest.NewServer(mcp.NewHandler(resolve, mcp.Options{}))
	t.Cleanup(srv.Close)
	d.url = srv.URL
	return d
}

// create makes a workspace and returns its mount point (it mounts it).
func (d *daemon) create(t *testing.T, req workspace.CreateRequest) string {
	t.Helper()
	ctx := context.Background()
	if _, err := d.m.Create(ctx, req); err != nil {
		t.Fatal(err)
	}
	h, err := d.m.Acquire(ctx, req.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	return h.MountPoint
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connect connects the Go SDK's client to the handler with a token.
func (d *daemon) connect(t *testing.T, token string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "agentfs-test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: d.url,
		HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
	if err != nil {
		t.Fatalf("connect with %s: %v", token, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestHTTP: the Go SDK's client, over streamable HTTP, lists the tools
// and calls each one on a workspace of a real manager (a real mount served
// by its own process).
func TestHTTP(t *testing.T) {
	d := newDaemon(t)
	mnt := d.create(t, workspace.CreateRequest{Name: "w"})
	mcptest.Run(t, d.connect(t, "tok-w"), mnt)
	var jobs, commands int
	for len(d.admitted) > 0 {
		if <-d.admitted {
			jobs++
		} else {
			commands++
		}
	}
	if jobs < 2 || commands < 3 {
		t.Errorf("Admit saw %d commands and %d jobs", commands, jobs)
	}

	t.Run("Virtual", func(t *testing.T) {
		host := t.TempDir()
		if err := os.WriteFile(filepath.Join(host, "base.txt"), []byte("base\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		vmnt := d.create(t, workspace.CreateRequest{Name: "v", Virtual: true, Base: host})
		mcptest.RunVirtual(t, d.connect(t, "tok-v"), vmnt, host)
	})

	t.Run("ReadOnly", func(t *testing.T) {
		s := d.connect(t, "tok-ro")
		mcptest.Must(t, s, "read_file", map[string]any{"path": "f/a.txt"}, nil)
		mcptest.Must(t, s, "snapshot_list", nil, nil)
		for tool, args := range map[string]map[string]any{
			"write_file":       {"path": "x", "content": "x"},
			"edit_file":        {"path": "f/a.txt", "old_string": "one", "new_string": "1"},
			"execute":          {"command": "true"},
			"background_start": {"command": "true"},
			"snapshot_save":    {"name": "n"},
			"snapshot_restore": {"name": "mcp-s1"},
			"commit":           nil,
			"discard":          nil,
		} {
			mcptest.Fails(t, s, "forbidden", tool, args)
		}
	})

	t.Run("Limits", func(t *testing.T) {
		s := d.connect(t, "tok-busy")
		mcptest.Fails(t, s, "busy", "execute", map[string]any{"command": "true"})
		mcptest.Fails(t, s, "busy", "background_start", map[string]any{"command": "true"})
	})

	t.Run("Unauthorized", func(t *testing.T) {
		req, _ := http.NewRequest("POST", d.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Authorization", "Bearer wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Error apierr.Error }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 401 || body.Error.Code != apierr.Unauthorized {
			t.Errorf("wrong token: %d %+v %v", resp.StatusCode, body, err)
		}
	})

	t.Run("UnknownWorkspace", func(t *testing.T) {
		if err := d.m.Delete(context.Background(), "v"); err != nil {
			t.Fatal(err)
		}
		mcptest.Fails(t, d.connect(t, "tok-v"), "not_found", "list_directory", nil)
	})
}

// BenchmarkHTTPReadFile: one read_file of a 4 KiB file as a JSON-RPC POST
// on loopback, on a plain directory: the cost of the MCP endpoint itself
// (JSON-RPC, schema validation, the tool, the JSON answer).
func BenchmarkHTTPReadFile(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(strings.Repeat("0123456789abcdef\n", 241)), 0o644); err != nil {
		b.Fatal(err)
	}
	be, err := exec.NewLocal(dir, exec.Options{ChangeTracker: exec.NoChanges{}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = be.Close() }()
	srv := httptest.NewServer(mcp.NewHandler(func(*http.Request) (mcp.Workspace, error) {
		return mcp.Fixed{Backend: be}, nil
	}, mcp.Options{}))
	defer srv.Close()
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"f"}}}`
	for b.Loop() {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(call))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != 200 || n < 4096 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
}
