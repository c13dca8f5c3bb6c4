package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/snapshot"
)

// TestServeRepo: the URL door answers the same calls with the same
// handlers as a mount, and refuses what needs a mount.
func TestServeRepo(t *testing.T) {
	ctx := context.Background()
	_, repo := snapshottest.InitVolume(t, fmt.Sprintf("mem://control-local-%d-%d", os.Getpid(), memSeq.Add(1)))
	w := snapshottest.OpenWorkspace(t, repo, "main")
	w.WriteFile("a.txt", []byte("one\n"))
	w.Close()
	c, stop := ServeRepo(repo, nil)
	defer stop()

	if _, err := c.SaveSnapshot(ctx, "base", "m"); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSnapshotsProgress(ctx, true, nil)
	if err != nil || len(list) != 1 || list[0].Name != "base" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if _, err := c.Fork(ctx, "base", "exp", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fork(ctx, "base", "exp", ""); !errors.Is(err, snapshot.ErrBranchExists) {
		t.Errorf("second fork: %v", err)
	}
	var changes int
	if _, err := c.Diff(ctx, DiffRequest{A: "base", B: "exp"}, func(histdiff.Change) error { changes++; return nil }); err != nil || changes != 0 {
		t.Errorf("diff base exp: %d changes, %v", changes, err)
	}
	if _, err := c.Diff(ctx, DiffRequest{A: "base", B: Live}, func(histdiff.Change) error { return nil }); err == nil || !strings.Contains(err.Error(), "name the MOUNTPOINT") {
		t.Errorf("diff against live on a URL: %v", err)
	}
	if err := c.Sync(ctx); !errors.Is(err, ErrNotMount) {
		t.Errorf("sync of a URL: %v", err)
	}
	rep, err := c.Fsck(ctx, false, nil)
	if err != nil || !rep.OK() {
		t.Errorf("fsck: %+v, %v", rep, err)
	}
}
