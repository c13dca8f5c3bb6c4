package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/fs/fstest"
)

// virtualHostMount makes a host directory with a small project, mounts a
// virtual workspace over it and makes the changes every virtual CLI test
// starts from: README.md modified, data.bin (binary) modified, notes.txt
// added, docs/guide.md deleted, src renamed to lib.
func virtualHostMount(t *testing.T) (m *fstest.Mount, host string) {
	t.Helper()
	host = filepath.Join(t.TempDir(), "host")
	for p, data := range map[string]string{"README.md": "# project\n", "src/main.go": "package main\n",
		"docs/guide.md": "guide\n", "data.bin": "\x00\x01\x02"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(host, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m = fstest.Start(t, fstest.Options{Args: []string{"--virtual", "--base", host}})
	for p, data := range map[string]string{"README.md": "# project\nmore\n", "notes.txt": "notes\n", "data.bin": "\x00\x01\x02\x03"} {
		if err := os.WriteFile(filepath.Join(m.Dir, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(m.Dir, "docs", "guide.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(m.Dir, "src"), filepath.Join(m.Dir, "lib")); err != nil {
		t.Fatal(err)
	}
	return m, host
}

// wantOutput runs agentfs args in dir (the mount's environment) and
// compares its output with want; want "" only checks that it succeeds.
func wantOutput(t *testing.T, m *fstest.Mount, dir, want string, args ...string) {
	t.Helper()
	out, err := agentfsIn(t, m.Bin, dir, m.Env, args...)
	if err != nil {
		t.Fatalf("agentfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if out != want {
		t.Fatalf("agentfs %s:\n%s\nwant:\n%s", strings.Join(args, " "), out, want)
	}
}

// TestDiff: the formats of `agentfs diff` on a virtual mount of a host
// directory — the default list, --stat, -p, --json — PATHS from the mount's
// root and from a working directory inside it, and the error on a mount
// that is not virtual.
func TestDiff(t *testing.T) {
	m, host := virtualHostMount(t)
	t.Run("List", func(t *testing.T) {
		wantOutput(t, m, "/", `M  README.md  (10 B -> 15 B)
M  data.bin  (3 B -> 4 B)
D  docs/guide.md  (6 B)
R  src/ -> lib/
A  notes.txt  (6 B)
`, "diff", m.Dir)
	})
	t.Run("Stat", func(t *testing.T) {
		wantOutput(t, m, "/", ` README.md     | 1 +
 data.bin      | Bin 3 B -> 4 B
 docs/guide.md | 1 -
 src/ -> lib/  | renamed
 notes.txt     | 1 +
 5 changes, 4 files changed, 2 insertions(+), 1 deletion(-) relative to `+host+"\n", "diff", "--stat", m.Dir)
	})
	t.Run("Patch", func(t *testing.T) {
		wantOutput(t, m, "/", `M  README.md  (10 B -> 15 B)
--- a/README.md
+++ b/README.md
@@ -1 +1,2 @@
 # project
+more
M  data.bin  (3 B -> 4 B)
Binary files a/data.bin and b/data.bin differ
D  docs/guide.md  (6 B)
--- a/docs/guide.md
+++ /dev/null
@@ -1 +0,0 @@
-guide
R  src/ -> lib/
A  notes.txt  (6 B)
--- /dev/null
+++ b/notes.txt
@@ -0,0 +1 @@
+notes
`, "diff", "-p", m.Dir)
	})
	t.Run("JSON", func(t *testing.T) {
		out, err := m.Agentfs("diff", "--json", "-p", m.Dir)
		if err != nil {
			t.Fatalf("diff --json: %v\n%s", err, out)
		}
		var rep struct {
			MountPoint string     `json:"mount_point"`
			Base       string     `json:"base"`
			Changes    []diffJSON `json:"changes"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("diff --json: %v\n%s", err, out)
		}
		if rep.MountPoint != m.Dir || rep.Base != host || len(rep.Changes) != 5 {
			t.Fatalf("diff --json: %s", out)
		}
		readme, del, ren := rep.Changes[0], rep.Changes[2], rep.Changes[3]
		if readme.Op != "modified" || readme.Path != "README.md" || readme.Type != "file" || readme.OldSize != 10 || readme.Size != 15 ||
			readme.Added == nil || *readme.Added != 1 || *readme.Deleted != 0 || !strings.Contains(readme.Patch, "+more\n") {
			t.Errorf("README.md in diff --json: %+v", readme)
		}
		if del.Op != "deleted" || del.OldSize != 6 || del.Size != 0 {
			t.Errorf("docs/guide.md in diff --json: %+v", del)
		}
		if ren.Op != "renamed" || ren.From != "src" || ren.Path != "lib" || ren.Type != "dir" {
			t.Errorf("the rename in diff --json: %+v", ren)
		}
		if !rep.Changes[1].Binary || rep.Changes[1].Added != nil {
			t.Errorf("data.bin in diff --json: %+v", rep.Changes[1])
		}
	})
	t.Run("Paths", func(t *testing.T) {
		wantOutput(t, m, "/", "D  docs/guide.md  (6 B)\nA  notes.txt  (6 B)\n", "diff", m.Dir, "docs", "notes.txt")
		// From inside the mount, paths are relative to the working directory.
		wantOutput(t, m, filepath.Join(m.Dir, "docs"), "D  docs/guide.md  (6 B)\n", "diff", m.Dir, "guide.md")
		// A renamed directory is found by its new or its old name.
		wantOutput(t, m, "/", "R  src/ -> lib/\n", "diff", m.Dir, "src")
		if out, err := m.Agentfs("diff", m.Dir, "/etc/passwd"); err == nil || !strings.Contains(out, "outside the mount") {
			t.Errorf("diff of a path outside the mount: %v\n%s", err, out)
		}
	})
	t.Run("NotVirtual", func(t *testing.T) {
		plain := fstest.Start(t, fstest.Options{Dir: filepath.Join(t.TempDir(), "plain")})
		for _, cmd := range []string{"diff", "commit", "discard"} {
			out, err := plain.Agentfs(cmd, plain.Dir)
			if err == nil || !strings.Contains(out, "is not a virtual mount (mount it with --virtual)") {
				t.Errorf("agentfs %s on a plain mount: %v\n%s", cmd, err, out)
			}
		}
	})
}
