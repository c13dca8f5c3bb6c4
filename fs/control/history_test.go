package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/snapshot"
)

// volumeBackend is a Backend whose History is a real engine volume.
type volumeBackend struct {
	fakeBackend
	w *snapshottest.Workspace
}

func (b *volumeBackend) Checkpoint(ctx context.Context, msg string) (snapshot.CommitID, error) {
	return b.w.V.Commit(ctx, "checkpoint", msg)
}

func (b *volumeBackend) SaveSnapshot(ctx context.Context, name, msg string) (snapshot.Snapshot, error) {
	return b.w.V.SaveSnapshot(ctx, name, msg)
}

func (b *volumeBackend) Restore(ctx context.Context, ref, msg string) (snapshot.RestoreResult, error) {
	return b.w.V.Restore(ctx, ref, msg)
}

func (b *volumeBackend) Repo() *snapshot.Repo { return b.w.Repo }

var memSeq atomic.Int64

func TestHistoryRequests(t *testing.T) {
	ctx := context.Background()
	_, repo := snapshottest.InitVolume(t, fmt.Sprintf("mem://control-history-%d-%d", os.Getpid(), memSeq.Add(1)))
	w := snapshottest.OpenWorkspace(t, repo, "main")
	t.Cleanup(w.Close)
	c := serve(t, t.TempDir(), &volumeBackend{w: w}, nil)

	w.WriteFile("a.txt", []byte("one\n"))
	w.WriteFile("dir/b.txt", []byte("two\n"))
	var base snapshot.Snapshot
	t.Run("SaveIsAConsistentPoint", func(t *testing.T) {
		var err error
		if base, err = c.SaveSnapshot(ctx, "base", "before"); err != nil {
			t.Fatal(err)
		}
		if base.Name != "base" || base.Files() != 2 || base.Message != "before" {
			t.Fatalf("saved %+v", base)
		}
	})
	t.Run("ErrorsKeepTheirIdentity", func(t *testing.T) {
		if _, err := c.SaveSnapshot(ctx, "base", ""); !errors.Is(err, snapshot.ErrSnapshotExists) {
			t.Errorf("duplicate: %v", err)
		}
		if _, err := c.SaveSnapshot(ctx, "bad/name", ""); !errors.Is(err, snapshot.ErrBadName) || !strings.Contains(err.Error(), "bad/name") {
			t.Errorf("bad name: %v", err)
		}
		if _, err := c.Diff(ctx, DiffRequest{A: "nothing-here", B: Live}, func(histdiff.Change) error { return nil }); !errors.Is(err, snapshot.ErrNoRef) {
			t.Errorf("unknown ref: %v", err)
		}
	})
	w.WriteFile("a.txt", []byte("one\nmore\n"))
	w.WriteFile("new.txt", []byte("new\n"))
	w.Remove("dir/b.txt")
	t.Run("DiffLive", func(t *testing.T) {
		var lines []string
		res, err := c.Diff(ctx, DiffRequest{A: "base", B: Live, Patch: true}, func(ch histdiff.Change) error {
			lines = append(lines, ch.Line())
			if ch.Path == "a.txt" && !strings.Contains(ch.Patch, "+more") {
				t.Errorf("patch of a.txt: %q", ch.Patch)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"M  a.txt  [content]  4 B -> 9 B", "D  dir/b.txt  (4 B)", "A  new.txt  (4 B)"}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
		if res.A != base.Commit || res.B.Seq <= base.Commit.Seq || !strings.HasPrefix(res.BName, "live (main@") {
			t.Errorf("result %+v", res)
		}
		// Restricted to a directory.
		lines = nil
		if _, err := c.Diff(ctx, DiffRequest{A: "base", B: Live, Dir: "dir"}, func(ch histdiff.Change) error {
			lines = append(lines, ch.Path)
			return nil
		}); err != nil || strings.Join(lines, ",") != "dir/b.txt" {
			t.Errorf("dir diff: %v %v", lines, err)
		}
	})
	t.Run("ListForkBranches", func(t *testing.T) {
		list, err := c.ListSnapshots(ctx, true)
		if err != nil || len(list) != 1 || list[0].Name != "base" || list[0].UniqueBytes < 0 {
			t.Fatalf("list: %+v %v", list, err)
		}
		if _, err := c.Fork(ctx, "base", "attempt", "try"); err != nil {
			t.Fatal(err)
		}
		bs, err := c.Branches(ctx)
		if err != nil || len(bs) != 2 || bs[0].Name != "attempt" {
			t.Fatalf("branches: %+v %v", bs, err)
		}
		if _, err := c.DeleteBranch(ctx, "main", false); !errors.Is(err, snapshot.ErrDefaultBranch) {
			t.Errorf("rm main: %v", err)
		}
		if n, err := c.DeleteBranch(ctx, "attempt", false); err != nil || n != 1 {
			t.Errorf("rm attempt: %d %v", n, err)
		}
		st, err := c.Status(ctx)
		if err != nil || st.Refs == nil || st.Refs.Branches != 1 || st.Refs.Snapshots != 1 {
			t.Errorf("status refs: %+v %v", st.Refs, err)
		}
	})
	t.Run("Restore", func(t *testing.T) {
		res, err := c.Restore(ctx, "base", "")
		if err != nil {
			t.Fatal(err)
		}
		if res.Saved == nil || !strings.HasPrefix(res.Saved.Name, "auto-pre-restore-main-") {
			t.Fatalf("restore: %+v", res)
		}
		if _, err := w.Lookup("new.txt"); err == nil {
			t.Error("new.txt survived the restore")
		}
		n := 0
		if _, err := c.Diff(ctx, DiffRequest{A: "base", B: Live}, func(histdiff.Change) error { n++; return nil }); err != nil || n != 0 {
			t.Errorf("live differs from base after restore: %d changes, %v", n, err)
		}
	})
	t.Run("Retention", func(t *testing.T) {
		ret, err := c.Retention(ctx)
		if err != nil || ret.Stored || ret.Policy != snapshot.DefaultRetention() || ret.LastGC != nil {
			t.Fatalf("default: %+v %v", ret, err)
		}
		want := snapshot.Retention{KeepLast: 5, Daily: 48 * time.Hour}
		if ret, err = c.SetRetention(ctx, RetentionRequest{Policy: want}); err != nil || !ret.Stored || ret.Policy != want {
			t.Fatalf("set: %+v %v", ret, err)
		}
		if st, err := c.Status(ctx); err != nil || st.Retention == nil || st.Retention.Policy != want {
			t.Errorf("status retention: %+v %v", st.Retention, err)
		}
		if _, err = c.SetRetention(ctx, RetentionRequest{Policy: snapshot.Retention{Daily: -1}}); !errors.Is(err, snapshot.ErrBadRetention) {
			t.Errorf("negative rule: %v", err)
		}
		if ret, err = c.SetRetention(ctx, RetentionRequest{Reset: true}); err != nil || ret.Stored {
			t.Errorf("reset: %+v %v", ret, err)
		}
	})
	t.Run("GCAndFsckStream", func(t *testing.T) {
		var progress int
		rep, err := c.Fsck(ctx, true, func(snapshot.Progress) { progress++ })
		if err != nil || !rep.OK() || rep.Snapshots != 2 || rep.BytesVerified == 0 {
			t.Errorf("fsck: %+v %v", rep, err)
		}
		g, err := c.GC(ctx, GCRequest{DryRun: true}, nil)
		if err != nil || !g.DryRun || g.Snapshots != 2 {
			t.Errorf("gc: %+v %v", g, err)
		}
		if g.Policy != snapshot.DefaultRetention().String() {
			t.Errorf("gc without rules applied %q, not the volume's default policy", g.Policy)
		}
		if g, err = c.GC(ctx, GCRequest{DryRun: true, Policy: &snapshot.Retention{KeepLast: 1}}, nil); err != nil || g.Policy != "keep the last 1 per branch" {
			t.Errorf("gc with rules: %+v %v", g, err)
		}
		if err := c.DeleteSnapshot(ctx, "base"); err != nil {
			t.Error(err)
		}
		if err := c.DeleteSnapshot(ctx, "base"); !errors.Is(err, snapshot.ErrNoSnapshot) {
			t.Errorf("second rm: %v", err)
		}
	})
}

func TestHistoryNotServed(t *testing.T) {
	c := serve(t, t.TempDir(), &fakeBackend{}, nil)
	if _, err := c.Checkpoint(context.Background(), ""); !errors.Is(err, ErrNoHistory) {
		t.Errorf("checkpoint on a backend without history: %v", err)
	}
	if _, err := c.GC(context.Background(), GCRequest{}, nil); !errors.Is(err, ErrNoHistory) {
		t.Errorf("gc: %v", err)
	}
	st, err := c.Status(context.Background())
	if err != nil || st.Refs != nil {
		t.Errorf("status: %+v %v", st.Refs, err)
	}
}
