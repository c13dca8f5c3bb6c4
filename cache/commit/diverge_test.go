package commit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/snapshot"
)

// TestDiverge: a commit that lost its number goes to a new branch named
// after the original one and the time, with a suffix while the name is
// taken; a pruned base is logged.
func TestDiverge(t *testing.T) {
	ctx := context.Background()
	r := testRepo(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return at }
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	root := snapshot.RootDir{Mode: 0o755, Nlink: 2, Tree: snapshot.BlobRef{Offset: 1, Length: 1}}
	base := snapshot.Commit{ID: snapshot.CommitID{Branch: "main", Seq: 1}, Root: root, Writer: "other", Time: at}
	lost := snapshot.Commit{ID: snapshot.CommitID{Branch: "main", Seq: 2}, Parent: &base.ID, Root: root, Writer: "me", Time: at, Kind: "checkpoint"}
	for _, c := range []snapshot.Commit{base, {ID: snapshot.CommitID{Branch: "work-conflict-20260102-030405", Seq: 1}, Root: root, Time: at}} {
		if err := r.WriteCommit(ctx, c); err != nil {
			t.Fatal(err)
		}
	}

	nc, err := Diverge(ctx, r, lost, "work", now, log)
	if err != nil {
		t.Fatal(err)
	}
	want := snapshot.CommitID{Branch: "work-conflict-20260102-030405-1", Seq: 1}
	if nc.ID != want || nc.Kind != "diverged" || nc.Parent == nil || *nc.Parent != base.ID || nc.Writer != "me" {
		t.Errorf("diverged commit %v kind %q parent %v writer %q; want %v, diverged, parent %v, writer me", nc.ID, nc.Kind, nc.Parent, nc.Writer, want, base.ID)
	}
	if got, err := r.ReadCommit(ctx, want); err != nil || got.Message != "changes of me that lost a commit race on main" {
		t.Errorf("stored diverged commit %+v, %v", got, err)
	}
	if strings.Contains(logged.String(), "pruned") {
		t.Errorf("a base still there logged as pruned: %s", logged.String())
	}

	// A base that gc pruned meanwhile is logged.
	if err := r.Store().Delete(ctx, snapshot.CommitKey(base.ID)); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Second)
	if _, err := Diverge(ctx, r, lost, "work", now, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logged.String(), "pruned by gc") {
		t.Errorf("a pruned base was not logged: %s", logged.String())
	}
}

func TestStats(t *testing.T) {
	var s Stats
	up := NewUploader(context.Background(), testRepo(t), 1, time.Now())
	start := time.Unix(100, 0)
	s.Checkpoint(start, start.Add(time.Second), up, nil)
	s.Checkpoint(start, start.Add(2*time.Second), up, context.Canceled)
	s.Lease(context.DeadlineExceeded)
	r := s.Report()
	if r.Commits != 1 || r.LastErr != context.Canceled.Error() || r.LastDur != 2*time.Second || !r.Last.Equal(start.Add(2*time.Second)) || r.LeaseErr == "" {
		t.Errorf("report %+v; want 1 commit, the last checkpoint's error and times, a lease error", r)
	}
	s.Checkpoint(start, start.Add(time.Second), up, nil)
	s.Lease(nil)
	if r := s.Report(); r.Commits != 2 || r.LastErr != "" || r.LeaseErr != "" {
		t.Errorf("report after a commit and a renewal %+v; want 2 commits, no errors", r)
	}
}
