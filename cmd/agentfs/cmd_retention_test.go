package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/snapshot"
)

func TestRetentionCLI(t *testing.T) {
	url, _ := historyVolume(t)
	out := mustCLI(t, "retention", "show", url)
	for _, want := range []string{"policy: keep every commit of the last 1h; the newest per hour for 1d, per day for 1w (the default)\n",
		"rules:  --keep-within 1h --hourly 1d --daily 1w\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out = mustCLI(t, "retention", "set", url, "--keep-last", "2", "--daily", "30d")
	if !strings.Contains(out, "policy: keep the last 2 per branch; the newest per day for 30d\n") || strings.Contains(out, "default") {
		t.Errorf("set: %s", out)
	}
	var ret control.Retention
	if err := json.Unmarshal([]byte(mustCLI(t, "retention", "show", url, "--json")), &ret); err != nil {
		t.Fatal(err)
	}
	if !ret.Stored || ret.Policy != (snapshot.Retention{KeepLast: 2, Daily: 30 * 24 * time.Hour}) {
		t.Errorf("show --json: %+v", ret)
	}
	for _, bad := range [][]string{{}, {"--keep-all", "--daily", "1d"}, {"--default", "--keep-last", "1"}, {"--daily", "0"}, {"--keep-last", "-1"}} {
		if _, _, err := runCLI(t, time.Minute, append([]string{"retention", "set", url}, bad...)...); err == nil {
			t.Errorf("retention set %v accepted", bad)
		}
	}
	if out := mustCLI(t, "retention", "set", url, "--keep-all"); !strings.Contains(out, "policy: keep every commit\n") || !strings.Contains(out, "rules:  --keep-all\n") {
		t.Errorf("--keep-all: %s", out)
	}
	if out := mustCLI(t, "retention", "set", url, "--default"); !strings.Contains(out, "(the default)") {
		t.Errorf("--default: %s", out)
	}
}

// TestGCAppliesVolumePolicy: without rules, gc applies the volume's
// policy; --dry-run lists what it would remove.
func TestGCAppliesVolumePolicy(t *testing.T) {
	url, repo := historyVolume(t)
	editVolume(t, repo)
	w := snapshottest.OpenWorkspace(t, repo, "main")
	w.WriteFile("notes.txt", []byte("changed\n"))
	w.Close()
	ctx := context.Background()
	mustCLI(t, "retention", "set", url, "--keep-last", "1")
	time.Sleep(1100 * time.Millisecond) // older than gc's one second of clock slack
	out := mustCLI(t, "gc", url, "--dry-run", "--grace", "1ms")
	for _, want := range []string{"dry run: nothing was deleted\n", "policy: keep the last 1 per branch (1 branches, 0 snapshots)\n",
		"commits: 1 kept, would delete 3\n", "  main: 1-3\n", " would be freed)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if seqs, _ := repo.ListCommits(ctx, "main"); len(seqs) != 4 {
		t.Fatalf("dry run removed commits: %v", seqs)
	}
	// Rules on the command line replace the policy for the run.
	if out := mustCLI(t, "gc", url, "--keep-all", "--grace", "1ms"); !strings.Contains(out, "commits: 4 kept, deleted 0\n") {
		t.Errorf("gc --keep-all: %s", out)
	}
	out = mustCLI(t, "gc", url, "--grace", "1ms")
	if seqs, _ := repo.ListCommits(ctx, "main"); !slices.Equal(seqs, []uint64{4}) || !strings.Contains(out, "deleted 3") {
		t.Fatalf("gc: commits %v\n%s", seqs, out)
	}
	if _, ok, err := repo.LastGC(ctx); !ok || err != nil {
		t.Errorf("no record of the gc that applied the policy: %v", err)
	}
	if out := mustCLI(t, "fsck", url, "--full"); !strings.Contains(out, "no problems found") {
		t.Errorf("fsck after gc: %s", out)
	}
}

// TestRetentionThroughMount sets and shows the policy through a mount's
// server, and status shows it with the mount's background gc.
func TestRetentionThroughMount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	if out := mustAgentfs(t, m, "retention", "show", m.Dir); !strings.Contains(out, "(the default)") || !strings.Contains(out, "mount:  first background gc in ") {
		t.Errorf("show: %s", out)
	}
	mustAgentfs(t, m, "retention", "set", m.Dir, "--keep-last", "3")
	out := mustAgentfs(t, m, "status", m.Dir)
	for _, want := range []string{"retention:    keep the last 3 per branch\n", "gc:           first background gc in "} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if out := mustAgentfs(t, m, "retention", "show", m.URL); !strings.Contains(out, "policy: keep the last 3 per branch\n") {
		t.Errorf("show on the URL after a set through the mount: %s", out)
	}
}
