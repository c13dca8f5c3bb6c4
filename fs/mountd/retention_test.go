package mountd

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/snapshottest"
	"github.com/agentfs/agentfs/snapshot"
)

// TestAutoGC: a mount's background gc applies the volume's policy, reports
// it, and a second mount of the volume does not run it again within the
// interval.
func TestAutoGC(t *testing.T) {
	url := "file://" + t.TempDir()
	_, repo := snapshottest.InitVolume(t, url)
	// main@1 (init), @2 and @3: the policy below keeps @3 only.
	for i := range 2 {
		w := snapshottest.OpenWorkspace(t, repo, "main")
		w.WriteFile("f.txt", []byte{byte('a' + i)})
		w.Close()
	}
	ctx := context.Background()
	if err := repo.SetRetention(ctx, snapshot.Retention{KeepLast: 1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &autoGC{repo: repo, log: lg, first: 10 * time.Millisecond, every: time.Hour, grace: time.Millisecond, ran: make(chan struct{})}
	m := &backend{autogc: a}
	if run := m.LastAutoGC(); run == nil || !run.Time.IsZero() {
		t.Fatalf("before the first run: %+v", run)
	}
	stop := a.start(ctx)
	select {
	case <-a.ran:
	case <-time.After(time.Minute):
		t.Fatal("the background gc did not run")
	}
	stop()
	run := m.LastAutoGC()
	if run.Error != "" || run.CommitsPruned != 2 || run.Time.IsZero() {
		t.Fatalf("background gc of %s: %+v", url, run)
	}
	if seqs, _ := repo.ListCommits(ctx, "main"); !slices.Equal(seqs, []uint64{3}) {
		t.Fatalf("commits after the background gc: %v", seqs)
	}
	// Another mount of the volume finds the run and waits for the interval.
	b := &autoGC{repo: repo, log: lg, first: time.Millisecond, every: time.Hour}
	if wait := b.due(ctx); wait < 50*time.Minute {
		t.Errorf("a second mount would run again in %v", wait)
	}
	// A fresh volume, with nothing to prune: no gc either.
	_, fresh := snapshottest.InitVolume(t, "file://"+t.TempDir())
	if wait := (&autoGC{repo: fresh, log: lg, every: time.Hour}).due(ctx); wait < 50*time.Minute {
		t.Errorf("a fresh volume would be collected in %v", wait)
	}
	// Nothing ran for a day: a gc sweeps whatever crashed uploads left.
	if err := fresh.Store().Put(ctx, snapshot.VolumeKey, func() []byte {
		cfg := fresh.Config()
		cfg.Created = time.Now().Add(-25 * time.Hour)
		return cfg.Encode()
	}()); err != nil {
		t.Fatal(err)
	}
	old, err := snapshot.Open(ctx, fresh.Store())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if wait := (&autoGC{repo: old, log: lg, every: time.Hour}).due(ctx); wait != 0 {
		t.Errorf("a volume never collected, made a day ago, waits %v", wait)
	}
	if (&backend{}).LastAutoGC() != nil {
		t.Error("a mount without background gc reports one")
	}
}
