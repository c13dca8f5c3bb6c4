package mountd

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/snapshot"
)

// The background gc of a read-write mount: it applies the volume's
// retention policy (snapshot.Repo.Retention) at a low rate, with gc's own
// guarantees (snapshot/gc.go: safe beside live writers; the grace period
// protects uploads not committed yet). Every read-write mount of a volume
// runs one; two gcs at once are safe, only redundant.

// Timing of the background gc: the first look comes autoGCFirst after the
// mount starts, the next ones every autoGCEvery. A look runs a gc when no
// gc applied the volume's policy in the last autoGCEvery
// (snapshot.Repo.LastGC, shared by all the mounts of the volume, so that
// short-lived mounts still get it applied and many mounts do not each run
// it) and either the policy would remove commits (snapshot.Repo.Prunable:
// one listing) or no gc ran for autoGCSweepEvery (since the volume's
// creation if none ever did), to sweep the packs of crashed uploads. So an
// idle volume, or a fresh one (a benchmark's), is not re-marked every hour.
// Waits are stretched by up to autoGCJitter of themselves so that mounts
// started together spread out.
const (
	autoGCFirst      = 2 * time.Minute
	autoGCEvery      = time.Hour
	autoGCSweepEvery = 24 * time.Hour
	autoGCJitter     = 0.25
	// autoGCConcurrency bounds the background gc's requests in flight,
	// below a foreground gc's, to leave the store to the workload.
	autoGCConcurrency = 4
)

// autoGC runs the background gc of one mount. LastAutoGC may be called
// from any goroutine.
type autoGC struct {
	repo         *snapshot.Repo
	log          *slog.Logger
	first, every time.Duration
	grace        time.Duration // 0: snapshot.UploadGrace (tests lower it)
	ran          chan struct{} // tests: receives after each run, if not nil

	mu   sync.Mutex
	last control.AutoGCRun // guarded by mu
}

var _ control.AutoGC = (*backend)(nil)

// LastAutoGC reports the mount's background gc; nil for a mount that runs
// none (read-only).
func (m *backend) LastAutoGC() *control.AutoGCRun {
	if m.autogc == nil {
		return nil
	}
	return m.autogc.lastRun()
}

func (a *autoGC) lastRun() *control.AutoGCRun {
	a.mu.Lock()
	defer a.mu.Unlock()
	run := a.last
	return &run
}

// jittered stretches d by a random part of autoGCJitter.
func jittered(d time.Duration) time.Duration {
	return d + time.Duration(rand.Float64()*autoGCJitter*float64(d))
}

// start runs the loop until the returned stop is called; stop waits for a
// run in progress to end (it is cancelled).
func (a *autoGC) start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait := jittered(a.first)
		for {
			a.mu.Lock()
			a.last.Next = time.Now().Add(wait)
			a.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if next := a.due(ctx); next > 0 {
				wait = next
				continue
			}
			a.runOnce(ctx)
			if a.ran != nil {
				select {
				case a.ran <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
			wait = jittered(a.every)
		}
	}()
	return func() { cancel(); <-done }
}

// due returns how long until the next look, or 0 to run a gc now (see
// autoGCEvery). A record or listing that cannot be read makes it run: gc
// then reports the store's error.
func (a *autoGC) due(ctx context.Context) time.Duration {
	last, ok, err := a.repo.LastGC(ctx)
	if err != nil {
		return 0
	}
	if !ok {
		last = a.repo.Config().Created
	} else if wait := time.Until(last.Add(a.every)); wait > 0 {
		return jittered(wait)
	}
	if time.Since(last) >= autoGCSweepEvery {
		return 0
	}
	p, _, err := a.repo.Retention(ctx)
	if err != nil {
		return 0
	}
	if n, err := a.repo.Prunable(ctx, p, time.Now(), a.grace); err != nil || n > 0 {
		return 0
	}
	return jittered(a.every)
}

// runOnce applies the volume's policy once and records the outcome.
func (a *autoGC) runOnce(ctx context.Context) {
	started := time.Now()
	rep, err := a.repo.GC(ctx, snapshot.GCOptions{VolumePolicy: true, Grace: a.grace, Concurrency: autoGCConcurrency})
	if ctx.Err() != nil {
		return // the mount is stopping
	}
	run := control.AutoGCRun{Time: started, Duration: time.Since(started),
		CommitsPruned: rep.CommitsPruned, PacksSwept: rep.PacksSwept, BytesFreed: rep.BytesFreed}
	if err != nil {
		run.Error = err.Error()
		a.log.Warn("background gc failed; the next run will try again", "err", err)
	} else if rep.CommitsPruned > 0 || rep.PacksSwept > 0 {
		a.log.Info("background gc", "policy", rep.Policy, "commits_removed", rep.CommitsPruned,
			"packs_removed", rep.PacksSwept, "bytes_freed", rep.BytesFreed, "took", run.Duration.Round(time.Millisecond))
	}
	a.mu.Lock()
	a.last = run
	a.mu.Unlock()
}
