package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/snapshot"
)

func TestForkAndBranchCLI(t *testing.T) {
	url, repo := historyVolume(t)
	mustCLI(t, "snapshot", "save", url, "base")
	out := mustCLI(t, "fork", url, "base", "attempt-1")
	if !strings.Contains(out, "forked base (main@2) to branch attempt-1: 3 files") || !strings.Contains(out, "agentfs mount --branch attempt-1") {
		t.Fatalf("fork: %s", out)
	}
	if _, _, err := runCLI(t, time.Minute, "fork", url, "base", "attempt-1"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("fork onto an existing branch: %v", err)
	}
	mustCLI(t, "fork", url, "main@1", "empty")
	// A writer on attempt-1.
	w := snapshottest.OpenWorkspace(t, repo, "attempt-1")
	w.WriteFile("result.txt", []byte("42\n"))
	w.Sync()

	var list []branchJSON
	if err := json.Unmarshal([]byte(mustCLI(t, "branch", "list", url, "--json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0].Name != "attempt-1" || list[0].HeadSeq != 2 || list[0].Writer == nil || list[0].Writer.Mount != "/test/attempt-1" ||
		list[1].Name != "empty" || list[1].Kind != "fork" || list[1].Files != 0 || list[2].Name != "main" || list[2].Writer != nil {
		t.Fatalf("branch list: %+v", list)
	}
	if out := mustCLI(t, "branch", "list", url); !strings.Contains(out, "mounted at /test/attempt-1") {
		t.Fatalf("branch list table: %s", out)
	}
	if _, _, err := runCLI(t, time.Minute, "branch", "rm", url, "main"); err == nil || !strings.Contains(err.Error(), "default branch") {
		t.Fatalf("rm main: %v", err)
	}
	if _, _, err := runCLI(t, time.Minute, "branch", "rm", url, "attempt-1"); err == nil || !strings.Contains(err.Error(), "mounted at /test/attempt-1") {
		t.Fatalf("rm of a held branch: %v", err)
	}
	w.Close()
	out = mustCLI(t, "branch", "rm", url, "attempt-1")
	if !strings.Contains(out, "removed branch attempt-1 (2 commits)") {
		t.Fatalf("rm: %s", out)
	}
	if _, err := repo.HeadSeq(context.Background(), "attempt-1"); err == nil {
		t.Fatal("attempt-1 still has commits")
	}
	// The snapshot it was forked from is intact.
	if out := mustCLI(t, "snapshot", "diff", url, "base", "main"); out != "" {
		t.Fatalf("base vs main: %s", out)
	}
}

func TestGCCLI(t *testing.T) {
	url, repo := historyVolume(t)
	editVolume(t, repo)
	w := snapshottest.OpenWorkspace(t, repo, "main")
	w.WriteFile("notes.txt", []byte("changed again\n"))
	w.Close()
	out := mustCLI(t, "gc", url, "--dry-run", "--keep-last", "1")
	// Commits younger than the grace period's successor rule are kept.
	if !strings.Contains(out, "dry run: nothing was deleted") || !strings.Contains(out, "commits: 4 kept, would delete 0") {
		t.Fatalf("gc --dry-run: %s", out)
	}
	// Ages are compared with a second of slack (store times may be
	// truncated to the second): let the commits age past it.
	time.Sleep(1100 * time.Millisecond)
	var rep snapshot.GCReport
	if err := json.Unmarshal([]byte(mustCLI(t, "gc", url, "--keep-last", "1", "--grace", "1ms", "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.CommitsPruned != 3 || rep.CommitsKept != 1 || rep.PacksSwept == 0 || rep.Clock != "store" {
		t.Fatalf("gc --json: %+v", rep)
	}
	seqs, err := repo.ListCommits(context.Background(), "main")
	if err != nil || len(seqs) != 1 || seqs[0] != 4 {
		t.Fatalf("commits after gc: %v %v", seqs, err)
	}
	if out := mustCLI(t, "fsck", url, "--full"); !strings.Contains(out, "no problems found") {
		t.Fatalf("fsck after gc: %s", out)
	}
	if _, _, err := runCLI(t, time.Minute, "gc", url, "--keep-within", "soon"); err == nil || !strings.Contains(err.Error(), "invalid duration") {
		t.Fatalf("bad --keep-within: %v", err)
	}
}
