package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/snapshot"
)

// historyVolume makes a file:// volume whose main branch holds a few
// files, written through the engine; it returns the URL and the repo.
func historyVolume(t *testing.T) (string, *snapshot.Repo) {
	t.Helper()
	url := "file://" + t.TempDir()
	_, repo := snapshottest.InitVolume(t, url)
	w := snapshottest.OpenWorkspace(t, repo, "main")
	w.WriteFile("src/main.go", []byte("package main\n\nfunc main() {\n\tprintln(\"old line\")\n}\n"))
	w.WriteFile("assets/logo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00binary"))
	w.WriteFile("README.md", []byte("# demo\n"))
	w.Close()
	return url, repo
}

// editVolume changes main: a modified text file, a modified binary file, a
// new file and a removed one.
func editVolume(t *testing.T, repo *snapshot.Repo) {
	t.Helper()
	w := snapshottest.OpenWorkspace(t, repo, "main")
	w.WriteFile("src/main.go", []byte("package main\n\nfunc main() {\n\tprintln(\"new line\")\n}\n"))
	w.WriteFile("assets/logo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00other"))
	w.WriteFile("notes.txt", []byte("added\n"))
	w.Remove("README.md")
	w.Close()
}

func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runCLI(t, time.Minute, args...)
	if err != nil {
		t.Fatalf("agentfs %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func TestSnapshotCLI(t *testing.T) {
	url, repo := historyVolume(t)
	out := mustCLI(t, "snapshot", "save", url, "base", "-m", "before the agent")
	if !strings.Contains(out, "saved snapshot base of main@2: 3 files") {
		t.Fatalf("save: %s", out)
	}
	if _, _, err := runCLI(t, time.Minute, "snapshot", "save", url, "base"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("duplicate save: %v", err)
	}
	if _, _, err := runCLI(t, time.Minute, "snapshot", "save", url, "bad/name"); err == nil || !strings.Contains(err.Error(), "invalid name") {
		t.Fatalf("bad name: %v", err)
	}
	editVolume(t, repo)

	// list --json
	var list []snapshotJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "snapshot", "list", url, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Name != "base" || list[0].Commit != "main@2" || list[0].Files != 3 || list[0].Message != "before the agent" ||
		list[0].UniqueBytes == nil || *list[0].UniqueBytes != 0 {
		t.Fatalf("list: %+v", list)
	}
	if out := mustCLI(t, "snapshot", "list", url); !strings.Contains(out, "base") || !strings.Contains(out, "UNIQUE") {
		t.Fatalf("list table: %s", out)
	}

	// diff, --stat, -p, --json
	out = mustCLI(t, "snapshot", "diff", url, "base", "main")
	for _, want := range []string{"D  README.md  (7 B)", "M  assets/logo.png  [content]", "A  notes.txt  (6 B)", "M  src/main.go  [content]  51 B -> 51 B"} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	if out := mustCLI(t, "snapshot", "diff", url, "base", "main", "--stat"); !strings.Contains(out, "1 added, 2 modified, 1 deleted") {
		t.Errorf("diff --stat:\n%s", out)
	}
	out = mustCLI(t, "snapshot", "diff", url, "base", "main", "-p")
	for _, want := range []string{
		"--- a/src/main.go\n+++ b/src/main.go\n@@ -1,5 +1,5 @@\n package main\n \n func main() {\n-\tprintln(\"old line\")\n+\tprintln(\"new line\")\n }\n",
		"Binary files a/assets/logo.png and b/assets/logo.png differ",
		"--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+added\n",
		"--- a/README.md\n+++ /dev/null\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff -p lacks %q:\n%s", want, out)
		}
	}
	var dj struct {
		Changes []histdiff.Change `json:"changes"`
		Summary histdiff.Summary  `json:"summary"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "snapshot", "diff", url, "base", "main@3", "--json")), &dj); err != nil {
		t.Fatal(err)
	}
	if len(dj.Changes) != 4 || dj.Summary.Added != 1 || dj.Summary.Deleted != 1 || dj.Changes[0].Op != "deleted" || dj.Changes[0].Path != "README.md" {
		t.Fatalf("diff --json: %+v", dj)
	}
	if _, _, err := runCLI(t, time.Minute, "snapshot", "diff", url, "base", "live"); err == nil || !strings.Contains(err.Error(), "MOUNTPOINT") {
		t.Fatalf("diff live: %v", err)
	}

	// restore: refused under a live writer, then done.
	h := snapshot.Holder{ID: "w-1", Host: "worker-7", PID: 99, Mount: "/mnt/ws"}
	l, err := repo.AcquireLease(context.Background(), "main", h, time.Hour, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, time.Minute, "snapshot", "restore", url, "base"); err == nil || !strings.Contains(err.Error(), "worker-7") || !strings.Contains(err.Error(), "/mnt/ws") {
		t.Fatalf("restore under a lease: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, "snapshot", "restore", url, "base")
	if !strings.Contains(out, "restored branch main to base: new head main@4") || !strings.Contains(out, "auto-pre-restore-main-") {
		t.Fatalf("restore: %s", out)
	}
	if out := mustCLI(t, "snapshot", "diff", url, "base", "main"); out != "" {
		t.Fatalf("main differs from base after the restore:\n%s", out)
	}
	list = nil
	if err := json.Unmarshal([]byte(mustCLI(t, "snapshot", "list", url, "--json", "--no-unique")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[1].Kind != snapshot.KindAuto || list[1].Commit != "main@3" || list[1].UniqueBytes != nil {
		t.Fatalf("list after restore: %+v", list)
	}

	// rm
	out = mustCLI(t, "snapshot", "rm", url, "base")
	if !strings.Contains(out, "removed snapshot base") {
		t.Fatalf("rm: %s", out)
	}
	if _, _, err := runCLI(t, time.Minute, "snapshot", "rm", url, "base"); err == nil || !strings.Contains(err.Error(), "no such snapshot") {
		t.Fatalf("rm twice: %v", err)
	}
	// A path outside any mount is neither.
	if _, _, err := runCLI(t, time.Minute, "snapshot", "list", t.TempDir()); err == nil || !strings.Contains(err.Error(), "neither a store URL") {
		t.Fatalf("list of a path: %v", err)
	}
}

func TestParseAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"90m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "1d12h": 36 * time.Hour, "1ms": time.Millisecond} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "x", "-1h", "0", "d", "1y"} {
		if _, err := parseAge(bad); err == nil {
			t.Errorf("parseAge(%q) accepted", bad)
		}
	}
}

func TestExitErrorOfFsck(t *testing.T) {
	url, repo := historyVolume(t)
	if out := mustCLI(t, "fsck", url, "--full"); !strings.Contains(out, "no problems found") {
		t.Fatalf("fsck: %s", out)
	}
	head, err := repo.Head(context.Background(), "main")
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Store().Delete(context.Background(), snapshot.PackKey(head.Root.Tree.Pack)); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, time.Minute, "fsck", url)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("fsck of a damaged volume: %v", err)
	}
	if !strings.Contains(out, "referenced object is missing") || !strings.Contains(out, "  .  (in main@2)") || !strings.Contains(out, "1 problems found") {
		t.Fatalf("fsck output:\n%s", out)
	}
	out, _, err = runCLI(t, time.Minute, "fsck", url, "--json")
	if !errors.As(err, &ee) {
		t.Fatalf("fsck --json: %v", err)
	}
	var rep struct {
		Problems []struct {
			Object   string              `json:"object"`
			Error    string              `json:"error"`
			Affected []snapshot.Affected `json:"affected"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Problems) != 1 || rep.Problems[0].Affected[0].Path != "." {
		t.Fatalf("fsck --json: %v\n%s", err, out)
	}
}
