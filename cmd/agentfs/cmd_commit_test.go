package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/fs/fstest"
)

// TestCommitHost: committing one path writes it to the host directory and
// leaves the rest pending; a path inside a renamed directory is refused
// with what to do; committing everything makes the host directory the
// workspace.
func TestCommitHost(t *testing.T) {
	m, host := virtualHostMount(t)
	wantOutput(t, m, "/", "wrote 1 change to "+host+":\n  A  notes.txt  (6 B)\n4 changes still pending (agentfs diff "+m.Dir+")\n",
		"commit", m.Dir, "notes.txt", "-m", "notes")
	if b, err := os.ReadFile(filepath.Join(host, "notes.txt")); err != nil || string(b) != "notes\n" {
		t.Fatalf("host notes.txt after its commit: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(host, "README.md")); err != nil || string(b) != "# project\n" {
		t.Fatalf("host README.md, not committed: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "lib", "main.go"), []byte("package lib\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := m.Agentfs("commit", m.Dir, "lib/main.go")
	if err == nil || !strings.Contains(out, "lib/main.go lies in lib/, renamed from src in the workspace: commit lib as well") {
		t.Fatalf("commit of a path in a renamed directory: %v\n%s", err, out)
	}
	wantOutput(t, m, "/", "nothing to commit at those paths (5 changes pending elsewhere)\n", "commit", m.Dir, "no/such/path")
	wantOutput(t, m, "/", `wrote 5 changes to `+host+`:
  M  README.md  (10 B -> 15 B)
  M  data.bin  (3 B -> 4 B)
  D  docs/guide.md  (6 B)
  R  src/ -> lib/
  M  lib/main.go  (13 B -> 12 B)
`, "commit", m.Dir)
	for p, want := range map[string]string{"README.md": "# project\nmore\n", "lib/main.go": "package lib\n", "data.bin": "\x00\x01\x02\x03"} {
		if b, err := os.ReadFile(filepath.Join(host, p)); err != nil || string(b) != want {
			t.Errorf("host %s after the commit: %q, %v", p, b, err)
		}
	}
	for _, p := range []string{"src", "docs/guide.md"} {
		if _, err := os.Lstat(filepath.Join(host, p)); !os.IsNotExist(err) {
			t.Errorf("host %s after the commit: %v", p, err)
		}
	}
	wantOutput(t, m, "/", "", "diff", m.Dir)
}

// TestCommitSnapshot: over a snapshot, commit makes a commit on its branch
// and names it with --snapshot; when the branch changed the same path
// since, commit refuses and says how to force it.
func TestCommitSnapshot(t *testing.T) {
	plain := fstest.Start(t, fstest.Options{})
	for p, data := range map[string]string{"a.txt": "a\n", "b.txt": "b\n"} {
		if err := os.WriteFile(filepath.Join(plain.Dir, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plain.Unmount(t)
	if out, err := plain.Agentfs("snapshot", "save", plain.URL, "v1"); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	m := fstest.Start(t, fstest.Options{URL: plain.URL, Dir: filepath.Join(t.TempDir(), "ws"), Args: []string{"--virtual", "--base", "snapshot:v1"}})
	if err := os.WriteFile(filepath.Join(m.Dir, "a.txt"), []byte("a, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "b.txt"), []byte("b, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := m.Agentfs("commit", m.Dir, "a.txt", "--snapshot", "v2", "-m", "edit a")
	if err != nil || !strings.HasPrefix(out, "committed 1 change to main@") || !strings.Contains(out, "(snapshot v2):\n  M  a.txt  (2 B -> 10 B)\n1 change still pending") {
		t.Fatalf("commit --snapshot: %v\n%s", err, out)
	}
	if out, err := m.Agentfs("snapshot", "list", plain.URL); err != nil || !strings.Contains(out, "v2") || !strings.Contains(out, "edit a") {
		t.Fatalf("snapshot list after commit --snapshot: %v\n%s", err, out)
	}
	// Another writer changes b.txt on main: the workspace's b.txt conflicts.
	other := fstest.Start(t, fstest.Options{URL: plain.URL, Dir: filepath.Join(t.TempDir(), "main")})
	if err := os.WriteFile(filepath.Join(other.Dir, "b.txt"), []byte("b, on main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other.Unmount(t)
	out, err = m.Agentfs("commit", m.Dir)
	if err == nil || !strings.Contains(out, "b.txt") || !strings.Contains(out, "--force") {
		t.Fatalf("a conflicting commit: %v\n%s", err, out)
	}
	if out, err := m.Agentfs("commit", "--force", m.Dir); err != nil || !strings.Contains(out, "M  b.txt") {
		t.Fatalf("commit --force: %v\n%s", err, out)
	}
	check := fstest.Start(t, fstest.Options{URL: plain.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "check")})
	for p, want := range map[string]string{"a.txt": "a, edited\n", "b.txt": "b, edited\n"} {
		if b, err := os.ReadFile(filepath.Join(check.Dir, p)); err != nil || string(b) != want {
			t.Errorf("main's %s after the commits: %q, %v", p, b, err)
		}
	}
}
