package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingWorkload is a test workload: one phase of n timed operations
// that each create a file, so that a MountProbe double can count them.
func countingWorkload(n int, onRun func(dir string)) Workload {
	return Workload{
		Name:   "counting",
		Phases: []Phase{{Name: "touch", Op: "one file created"}},
		run: func(e *env) error {
			if onRun != nil {
				onRun(e.dir)
			}
			return e.measure("touch", func(r *recorder) error {
				for i := range n {
					start := time.Now()
					if err := createFile(filepath.Join(e.dir, fmt.Sprint(i)), []byte("0123456789")); err != nil {
						return err
					}
					r.op(start, 10)
				}
				return nil
			})
		},
	}
}

func TestRunInterleavesAndRotates(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	var order []string
	var mu sync.Mutex
	w := countingWorkload(5, func(dir string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, filepath.Dir(dir))
	})
	var progress []Progress
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg := Config{Params: tinyParams(), Workloads: []Workload{w}, Repeats: 3,
		Progress: func(p Progress) { progress = append(progress, p) }, Now: func() time.Time { return fixed }}
	rep, err := Run(context.Background(), cfg, []string{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	real := func(d string) string { r, _ := filepath.EvalSymlinks(d); return r }
	want := []string{real(a), real(b), real(c), real(b), real(c), real(a), real(c), real(a), real(b)}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("run order:\n got %v\nwant %v", order, want)
	}
	if len(progress) != 9 || progress[8].Done != 8 || progress[8].Total != 9 || progress[8].Repeat != 3 {
		t.Errorf("progress: %+v", progress)
	}
	if len(rep.Results) != 3 {
		t.Fatalf("%d results, want one per target", len(rep.Results))
	}
	for i, res := range rep.Results {
		if res.Target != i || res.Repeats != 3 || res.Ops != 15 || res.Bytes != 150 || res.OpsPerSec.N != 3 ||
			res.Latency == nil || res.Latency.N != 15 || res.MiBPerSec == nil || res.Ratio == nil {
			t.Errorf("result %d: %+v", i, res)
		}
	}
	if *rep.Results[0].Ratio != 1 {
		t.Errorf("ratio of the first target = %v", *rep.Results[0].Ratio)
	}
	if r1 := *rep.Results[1].Ratio; r1 != rep.Results[1].OpsPerSec.Median/rep.Results[0].OpsPerSec.Median {
		t.Errorf("ratio of the second target = %v", r1)
	}
	if !rep.Started.Equal(fixed) || rep.Schema != ReportSchema || rep.Machine.CPUs < 1 {
		t.Errorf("report header: %+v", rep)
	}
	for _, d := range []string{a, b, c} {
		if ents, err := os.ReadDir(d); err != nil || len(ents) != 0 {
			t.Errorf("%s not cleaned up: %v %v", d, ents, err)
		}
	}
	if len(rep.Mounts) != 0 {
		t.Errorf("mount results without a probe: %+v", rep.Mounts)
	}
}

// probeDouble is a MountProbe test double for one directory: its counters
// grow with every Sync, so the report's deltas are predictable.
type probeDouble struct {
	dir   string
	mu    sync.Mutex
	syncs int
	stats MountStats
}

func (p *probeDouble) Detect(dir string) (Mount, bool) {
	if dir == p.dir {
		return p, true
	}
	return nil, false
}

func (p *probeDouble) Describe() string { return "agentfs test double" }

// Stats counts 6 more CREATE requests at every call, so a phase between
// two calls served 6.
func (p *probeDouble) Stats(context.Context) (MountStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stats.Requests == nil {
		p.stats.Requests = map[string]int64{}
	}
	p.stats.Requests["CREATE"] += 6
	st := p.stats
	st.Requests = map[string]int64{"CREATE": p.stats.Requests["CREATE"]}
	return st, nil
}

func (p *probeDouble) Sync(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncs++
	p.stats.BlobPuts += 3
	p.stats.BlobGets += 1
	p.stats.BytesUploaded += 2 << 20
	p.stats.CacheHits += 9
	p.stats.CacheMisses += 1
	return nil
}

func TestRunReportsMounts(t *testing.T) {
	plain, mounted := t.TempDir(), t.TempDir()
	real, err := filepath.EvalSymlinks(mounted)
	if err != nil {
		t.Fatal(err)
	}
	probe := &probeDouble{dir: real}
	cfg := Config{Params: tinyParams(), Workloads: []Workload{countingWorkload(3, nil)}, Repeats: 2, Probe: probe}
	rep, err := Run(context.Background(), cfg, []string{plain, mounted})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Targets[1].Agentfs != "agentfs test double" || rep.Targets[0].Agentfs != "" {
		t.Errorf("targets: %+v", rep.Targets)
	}
	if probe.syncs != 4 {
		t.Errorf("%d syncs, want one before and one after each of 2 runs", probe.syncs)
	}
	if len(rep.Mounts) != 1 {
		t.Fatalf("mount results: %+v", rep.Mounts)
	}
	m := rep.Mounts[0]
	// Each run sees the counters of the Sync after it: 3 PUTs, 1 GET,
	// 2 MiB, 9 hits of 10.
	if m.Target != 1 || m.Repeats != 2 || m.BlobPuts.Median != 3 || m.BlobGets.Median != 1 ||
		m.MiBUploaded.Median != 2 || m.CacheHitRatio == nil || m.CacheHitRatio.Median != 0.9 || m.SyncSeconds.N != 2 {
		t.Errorf("mount result: %+v", m)
	}
	// 6 CREATE requests per phase of 3 operations.
	for _, res := range rep.Results {
		if want := map[bool]float64{true: 2}[res.Target == 1]; res.RequestsPerOp["CREATE"] != want {
			t.Errorf("target %d: requests per op %v, want CREATE %v", res.Target, res.RequestsPerOp, want)
		}
	}
	var table strings.Builder
	if err := WriteTable(&table, rep); err != nil || !strings.Contains(table.String(), "counting/touch [2]: 2.00 in all: CREATE 2.00") {
		t.Errorf("table (%v) lacks the requests per op:\n%s", err, table.String())
	}
}

func TestRunRecordsFailures(t *testing.T) {
	good, bad := t.TempDir(), t.TempDir()
	realBad, err := filepath.EvalSymlinks(bad)
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	failing := Workload{
		Name:   "flaky",
		Phases: []Phase{{Name: "p", Op: "op"}},
		run: func(e *env) error {
			if strings.HasPrefix(e.dir, realBad+"/") {
				runs++
				return errors.New("disk on fire")
			}
			return e.measure("p", func(r *recorder) error { r.op(time.Now(), 0); return nil })
		},
	}
	cfg := Config{Params: tinyParams(), Workloads: []Workload{failing, countingWorkload(2, nil)}, Repeats: 2}
	rep, err := Run(context.Background(), cfg, []string{good, bad})
	if !errors.Is(err, ErrFailed) || rep == nil {
		t.Fatalf("Run = %v, %v; want a report and ErrFailed", rep, err)
	}
	if runs != 1 {
		t.Errorf("the failing workload ran %d times in the bad target, want 1", runs)
	}
	if len(rep.Failures) != 1 || rep.Failures[0].Target != 1 || !strings.Contains(rep.Failures[0].Error, "disk on fire") {
		t.Errorf("failures: %+v", rep.Failures)
	}
	// flaky in [1], counting in [1] and [2].
	if len(rep.Results) != 3 {
		t.Errorf("results: %+v", rep.Results)
	}
	if ents, err := os.ReadDir(bad); err != nil || len(ents) != 0 {
		t.Errorf("failed run not cleaned up: %v %v", ents, err)
	}
}

func TestRunRejectsBadTargets(t *testing.T) {
	d := t.TempDir()
	f := filepath.Join(d, "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Params: tinyParams(), Workloads: []Workload{countingWorkload(1, nil)}, Repeats: 1}
	for name, dirs := range map[string][]string{
		"missing":   {filepath.Join(d, "missing")},
		"file":      {f},
		"duplicate": {d, d + "/."},
		"none":      nil,
	} {
		if _, err := Run(context.Background(), cfg, dirs); err == nil {
			t.Errorf("%s: Run accepted %v", name, dirs)
		}
	}
	cfg.Repeats = 0
	if _, err := Run(context.Background(), cfg, []string{d}); err == nil {
		t.Error("zero repeats accepted")
	}
}

func TestRunCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := Config{Params: tinyParams(), Workloads: []Workload{countingWorkload(1, nil)}, Repeats: 1}
	rep, err := Run(ctx, cfg, []string{t.TempDir()})
	if !errors.Is(err, context.Canceled) || rep != nil {
		t.Errorf("Run with a cancelled context = %v, %v", rep, err)
	}
}
