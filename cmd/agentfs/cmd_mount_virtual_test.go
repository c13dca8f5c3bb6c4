package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/fs/fstest"
)

// TestMountVirtualFlags: the virtual-mode flags are checked before
// anything is mounted, with messages that say what to do.
func TestMountVirtualFlags(t *testing.T) {
	var o fstest.Options
	bin, env := fstest.Setup(t, &o)
	work := t.TempDir()
	host := filepath.Join(work, "proj")
	if err := os.MkdirAll(filepath.Join(host, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--base", host}, "--base is the base of a virtual workspace: add --virtual"},
		{[]string{"--name", "x"}, "--name names a virtual workspace: add --virtual"},
		{[]string{"--virtual", "--read-only"}, "a virtual mount is a writable copy-on-write workspace"},
		{[]string{"--virtual", "--base", "snapshot:a", "--branch", "b"}, "--branch and --base both name the base"},
		{[]string{"--virtual", "--base", filepath.Join(work, "missing")}, "no such file or directory"},
		{[]string{"--virtual", "--base", "proj"}, "write ./proj for that directory, or snapshot:proj / branch:proj"},
		{[]string{"--virtual", "--name", "bad/name"}, "only letters, digits"},
		{[]string{"--virtual", "--base", "snapshot:nope"}, `snapshot "nope"`},
	} {
		args := append(append([]string{"mount", "-d"}, c.args...), o.URL, filepath.Join(work, "mnt"))
		out, err := agentfsIn(t, bin, work, env, args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("agentfs %s: %v\n%s\nwant %q", strings.Join(args, " "), err, out, c.want)
			detachOnCleanup(t, bin, env, filepath.Join(work, "mnt"))
		}
	}
	// A mount point inside the base directory would read itself.
	out, err := agentfsIn(t, bin, work, env, "mount", "-d", "--virtual", "--base", host, o.URL, filepath.Join(host, "sub"))
	if err == nil || !strings.Contains(out, "neither may lie inside the other") {
		t.Errorf("a mount point inside the base: %v\n%s", err, out)
		detachOnCleanup(t, bin, env, filepath.Join(host, "sub"))
	}
}

// TestMountVirtualRemount: the workspace of a mount point is found again
// by mounting there with or without --base, keeps its changes, and
// refuses another base.
func TestMountVirtualRemount(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host")
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host}})
	if err := os.WriteFile(filepath.Join(m.Dir, "a.txt"), []byte("a, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := m.Agentfs("status", m.Dir)
	if err != nil || !strings.Contains(out, "virtual:") || !strings.Contains(out, "over "+host) {
		t.Errorf("status of a virtual mount: %v\n%s", err, out)
	}
	m.Unmount(t)
	for _, args := range [][]string{{"--virtual"}, {"--virtual", "--base", host}} {
		m2 := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: t.TempDir(), Dir: m.Dir, Args: args})
		if b, err := os.ReadFile(filepath.Join(m2.Dir, "a.txt")); err != nil || string(b) != "a, edited\n" {
			t.Errorf("a.txt after a remount with %v (fresh cache): %q, %v", args, b, err)
		}
		m2.Unmount(t)
	}
	other := t.TempDir()
	out, err = m.Agentfs("mount", "-d", "--virtual", "--base", other, m.URL, m.Dir)
	if err == nil || !strings.Contains(out, "is over "+host+": mount it without --base, or choose another --name") {
		t.Errorf("a remount over another base: %v\n%s", err, out)
		detachOnCleanup(t, m.Bin, m.Env, m.Dir)
	}
	if b, err := os.ReadFile(filepath.Join(host, "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("host a.txt: %q, %v", b, err)
	}
}
