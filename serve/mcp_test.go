package serve_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfs/agentfs/serve/api"
)

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func mcpConnect(ctx context.Context, url, token string) (*sdk.ClientSession, error) {
	c := sdk.NewClient(&sdk.Implementation{Name: "serve-test", Version: "1"}, nil)
	return c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}}, nil)
}

// TestMCPEndpoint: the Go SDK's client reaches the tools at /mcp with the
// daemon's tokens: a workspace token selects its workspace, the admin
// names one, a read-only token cannot write, and other workspaces and
// bad tokens are refused.
func TestMCPEndpoint(t *testing.T) {
	d := newDaemon(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d.create("ws")
	d.create("other")
	if err := d.admin.Workspace("ws").WriteFile(ctx, "a.txt", []byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	rw, err := d.admin.CreateToken(ctx, api.CreateToken{Workspace: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := d.admin.CreateToken(ctx, api.CreateToken{Workspace: "ws", ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	call := func(s *sdk.ClientSession, tool string, args map[string]any) (*sdk.CallToolResult, error) {
		return s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
	}
	text := func(r *sdk.CallToolResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}

	admin, err := mcpConnect(ctx, d.hs.URL+"/mcp/ws", adminToken)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	tools, err := admin.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) < 15 {
		t.Fatalf("tools: %d %v", len(tools.Tools), err)
	}
	if r, err := call(admin, "read_file", map[string]any{"path": "a.txt"}); err != nil || r.IsError || !strings.Contains(text(r), "hello") {
		t.Errorf("admin read_file: %v %v", r, err)
	}

	own, err := mcpConnect(ctx, d.hs.URL+"/mcp", rw.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = own.Close() }()
	if r, err := call(own, "execute", map[string]any{"command": "cat a.txt"}); err != nil || r.IsError || !strings.Contains(text(r), "hello") {
		t.Errorf("workspace token execute: %v %v", r, err)
	}

	readOnly, err := mcpConnect(ctx, d.hs.URL+"/mcp", ro.Token)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = readOnly.Close() }()
	if r, err := call(readOnly, "write_file", map[string]any{"path": "b.txt", "content": "x"}); err != nil || !r.IsError || !strings.HasPrefix(text(r), "forbidden") {
		t.Errorf("read-only write_file: %v %v", r, err)
	}

	for _, tc := range []struct{ url, token string }{
		{d.hs.URL + "/mcp/other", rw.Token},
		{d.hs.URL + "/mcp", "wrong"},
		{d.hs.URL + "/mcp", adminToken},
	} {
		if s, err := mcpConnect(ctx, tc.url, tc.token); err == nil {
			_ = s.Close()
			t.Errorf("connect to %s with %q: no error", tc.url, tc.token)
		}
	}
}
