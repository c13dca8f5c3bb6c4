package main

import (
	"context"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/serve/mcp"
	"github.com/agentfs/agentfs/serve/mcp/mcptest"
)

// connectMCP starts `agentfs mcp args...` as a subprocess and connects the
// Go SDK's client to it over stdio. close ends the session (closing the
// subprocess's stdin) and returns its exit error.
func connectMCP(t *testing.T, bin string, env []string, args ...string) (s *sdk.ClientSession, close func() error) {
	t.Helper()
	cmd := osexec.Command(bin, append([]string{"mcp"}, args...)...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "agentfs-test", Version: "1"}, nil)
	s, err := c.Connect(ctx, &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Minute}, nil)
	if err != nil {
		t.Fatalf("agentfs mcp %v: %v\n%s", args, err, stderr.String())
	}
	closed := false
	close = func() error {
		if closed {
			return nil
		}
		closed = true
		err := s.Close()
		if err != nil {
			t.Logf("agentfs mcp stderr:\n%s", stderr.String())
		}
		return err
	}
	t.Cleanup(func() { _ = close() })
	return s, close
}

// TestMCPStdio: the Go SDK's client, connected over stdio to `agentfs mcp
// MOUNTPOINT` on a real mount, lists the tools and calls each one.
func TestMCPStdio(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	s, close := connectMCP(t, m.Bin, m.Env, m.Dir)
	mcptest.Run(t, s, m.Dir)
	if err := close(); err != nil {
		t.Errorf("agentfs mcp exited with %v", err)
	}
}

// TestMCPStdioVirtual: diff, discard and commit over stdio on a virtual
// mount of a host directory.
func TestMCPStdioVirtual(t *testing.T) {
	m, host := virtualHostMount(t)
	s, _ := connectMCP(t, m.Bin, m.Env, m.Dir)
	// Start from a workspace without changes.
	mcptest.Must(t, s, "discard", nil, nil)
	mcptest.RunVirtual(t, s, m.Dir, host)
}

// TestMCPStdioPlainDir: on a directory that is not an agentfs mount, the
// file and command tools work and the history tools fail with unavailable.
func TestMCPStdioPlainDir(t *testing.T) {
	dir := t.TempDir()
	s, _ := connectMCP(t, fstest.Binary(t), os.Environ(), dir)
	mcptest.Must(t, s, "write_file", map[string]any{"path": "a", "content": "x"}, nil)
	var x mcp.ExecuteOutput
	mcptest.Must(t, s, "execute", map[string]any{"command": "cat a"}, &x)
	if x.Output != "x" || x.Changes != nil {
		t.Errorf("execute on a plain directory: %+v", x)
	}
	for _, tool := range []string{"snapshot_list", "diff", "commit", "discard"} {
		mcptest.Fails(t, s, "unavailable", tool, nil)
	}
}

// TestMCPStdioURL: `agentfs mcp URL` mounts the branch in a separate server
// process, serves it, and on disconnect syncs and unmounts: what the tools
// wrote is in the store, and no mount is left.
//
// The volume is encrypted, its key in agentfs mcp's environment: the mount
// server gets it, the commands do not.
func TestMCPStdioURL(t *testing.T) {
	o := fstest.Options{Encrypted: true}
	bin, env := fstest.Setup(t, &o)
	if out, err := fstest.Run(bin, env, "fork", o.URL, "main", "other"); err != nil {
		t.Fatalf("agentfs fork: %v\n%s", err, out)
	}
	s, close := connectMCP(t, bin, env, "--branch", "other", "--cache-dir", o.CacheDir, o.URL)
	mcptest.Must(t, s, "write_file", map[string]any{"path": "w.txt", "content": "written\n"}, nil)
	var x mcp.ExecuteOutput
	mcptest.Must(t, s, "execute", map[string]any{"command": "echo ran > e.txt; pwd; cat /proc/self/stat | cut -d' ' -f4; printenv AGENTFS_KEY || echo unset"}, &x)
	lines := strings.Fields(x.Output)
	if len(lines) != 3 {
		t.Fatalf("execute: %q", x.Output)
	}
	if lines[2] != "unset" {
		t.Errorf("a command of agentfs mcp got the volume's key: %q", x.Output)
	}
	mnt := lines[0]
	if info, err := afs.IsMountPoint(mnt); err != nil || !info {
		t.Fatalf("%s is not a mount point during the session: %v", mnt, err)
	}
	mcptest.Must(t, s, "background_start", map[string]any{"command": "sleep 600"}, nil)
	if err := close(); err != nil {
		t.Fatalf("agentfs mcp exited with %v", err)
	}
	if on, _ := afs.IsMountPoint(mnt); on {
		t.Errorf("%s is still mounted after the session", mnt)
	}
	if _, err := os.Stat(mnt); !os.IsNotExist(err) {
		t.Errorf("the temporary mount point %s is left: %v", mnt, err)
	}
	fresh := fstest.Start(t, fstest.Options{URL: o.URL, Encrypted: true, ReadOnly: true, Args: []string{"--branch", "other"}})
	for p, want := range map[string]string{"w.txt": "written\n", "e.txt": "ran\n"} {
		if b, err := os.ReadFile(filepath.Join(fresh.Dir, p)); err != nil || string(b) != want {
			t.Errorf("%s in a fresh mount of branch other: %q %v", p, b, err)
		}
	}
	main := fstest.Start(t, fstest.Options{URL: o.URL, Encrypted: true, ReadOnly: true})
	if _, err := os.Stat(filepath.Join(main.Dir, "w.txt")); !os.IsNotExist(err) {
		t.Errorf("w.txt is on branch main too: %v", err)
	}
}
