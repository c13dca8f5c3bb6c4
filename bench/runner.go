package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config says what Run does. The zero value is not usable: set Params
// (DefaultParams or QuickParams), Workloads and Repeats.
type Config struct {
	Params    Params
	Workloads []Workload
	// Repeats is how many times every workload runs in every target. The
	// order of targets rotates from one repeat to the next, so that no
	// target always runs first (on a cold machine) or last.
	Repeats int
	// Probe recognises agentfs mounts among the targets; nil recognises
	// none, and the report then has no mount figures.
	Probe MountProbe
	// Progress, if not nil, is called before each run of a workload, from
	// the goroutine that calls Run.
	Progress func(Progress)
	// Now is the clock for the report's start time; nil means time.Now.
	Now func() time.Time
}

// Progress says which run of a workload is about to start.
type Progress struct {
	Done, Total      int // runs finished, runs in all
	Repeat, Repeats  int // 1-based repeat number, repeats in all
	Workload, Target string
}

// ErrFailed is matched (errors.Is) by the error Run returns when some
// workloads failed in some targets; the report lists each failure.
var ErrFailed = errors.New("some workloads failed")

// Run runs every workload of cfg in every directory of dirs, cfg.Repeats
// times, and returns the report. Each run works in a new directory inside
// the target, which is removed afterwards. A workload that fails in a
// target is not run again there; the report records the error and Run
// returns the report together with an error matching ErrFailed. Other
// errors (a directory that cannot be used, a cancelled ctx) return a nil
// report.
func Run(ctx context.Context, cfg Config, dirs []string) (*Report, error) {
	if err := cfg.Params.Validate(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if cfg.Repeats < 1 {
		return nil, fmt.Errorf("bench: repeats is %d, must be at least 1", cfg.Repeats)
	}
	if len(cfg.Workloads) == 0 {
		return nil, errors.New("bench: no workloads selected")
	}
	if len(dirs) == 0 {
		return nil, errors.New("bench: no target directories")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	started := now()
	targets, mounts, err := resolveTargets(dirs, cfg.Probe)
	if err != nil {
		return nil, err
	}
	type key struct{ w, t int }
	samples := map[key][][]Sample{}
	mountRuns := map[key][]mountRun{}
	failed := map[key]error{}
	total := cfg.Repeats * len(cfg.Workloads) * len(targets)
	done := 0
	for rep := range cfg.Repeats {
		for wi, w := range cfg.Workloads {
			for k := range targets {
				ti := (k + rep) % len(targets)
				kk := key{wi, ti}
				if cfg.Progress != nil {
					cfg.Progress(Progress{Done: done, Total: total, Repeat: rep + 1, Repeats: cfg.Repeats, Workload: w.Name, Target: targets[ti].Dir})
				}
				done++
				if failed[kk] != nil {
					continue
				}
				s, mr, err := runOnce(ctx, w, targets[ti].Path, mounts[ti], cfg.Params)
				if ctx.Err() != nil {
					return nil, fmt.Errorf("bench: %w", ctx.Err())
				}
				if err != nil {
					failed[kk] = err
					continue
				}
				samples[kk] = append(samples[kk], s)
				if mr != nil {
					mountRuns[kk] = append(mountRuns[kk], *mr)
				}
			}
		}
	}
	r := &Report{
		Schema:    ReportSchema,
		Tool:      "agentfs bench",
		Started:   started.UTC(),
		Elapsed:   now().Sub(started),
		Machine:   ReadMachine(),
		Params:    cfg.Params,
		Repeats:   cfg.Repeats,
		Targets:   targets,
		Workloads: cfg.Workloads,
	}
	for wi, w := range cfg.Workloads {
		for pi, ph := range w.Phases {
			var first float64
			for ti := range targets {
				kk := key{wi, ti}
				if failed[kk] != nil {
					continue
				}
				res := summarizePhase(w.Name, ph, ti, samples[kk], pi)
				if ti == 0 {
					first = res.OpsPerSec.Median
				}
				if first > 0 && ti > 0 {
					v := res.OpsPerSec.Median / first
					res.Ratio = &v
				} else if ti == 0 {
					v := 1.0
					res.Ratio = &v
				}
				r.Results = append(r.Results, res)
			}
		}
		for ti := range targets {
			if runs := mountRuns[key{wi, ti}]; len(runs) > 0 {
				r.Mounts = append(r.Mounts, summarizeMount(w.Name, ti, runs))
			}
		}
	}
	for wi, w := range cfg.Workloads {
		for ti := range targets {
			if err := failed[key{wi, ti}]; err != nil {
				r.Failures = append(r.Failures, Failure{Workload: w.Name, Target: ti, Error: err.Error()})
			}
		}
	}
	if len(r.Failures) > 0 {
		var msgs []string
		for _, f := range r.Failures {
			msgs = append(msgs, fmt.Sprintf("%s in %s: %s", f.Workload, targets[f.Target].Dir, f.Error))
		}
		return r, fmt.Errorf("bench: %w:\n  %s", ErrFailed, strings.Join(msgs, "\n  "))
	}
	return r, nil
}

// resolveTargets checks every directory and recognises agentfs mounts.
func resolveTargets(dirs []string, probe MountProbe) ([]Target, []Mount, error) {
	targets := make([]Target, len(dirs))
	mounts := make([]Mount, len(dirs))
	seen := map[string]string{}
	for i, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: target %s: %w", d, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: target %s: %w (create the directory first)", d, err)
		}
		if !fi.IsDir() {
			return nil, nil, fmt.Errorf("bench: target %s is not a directory", d)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, nil, fmt.Errorf("bench: target %s: %w", d, err)
		}
		if prev, dup := seen[real]; dup {
			return nil, nil, fmt.Errorf("bench: targets %s and %s are the same directory", prev, d)
		}
		seen[real] = d
		t := Target{Dir: d, Path: real}
		if m, err := mountOf(real); err == nil {
			t.FSType, t.MountPoint, t.Source = m.FSType, m.MountPoint, m.Source
		}
		if probe != nil {
			if m, ok := probe.Detect(real); ok {
				mounts[i] = m
				t.Agentfs = m.Describe()
			}
		}
		targets[i] = t
	}
	return targets, mounts, nil
}

// runOnce runs w once in a fresh directory inside target and removes it.
// For an agentfs mount it also measures the mount's counters and the time
// to sync after the workload.
func runOnce(ctx context.Context, w Workload, target string, m Mount, p Params) ([]Sample, *mountRun, error) {
	dir, err := os.MkdirTemp(target, ".agentfs-bench-"+w.Name+"-")
	if err != nil {
		return nil, nil, fmt.Errorf("create a work directory: %w", err)
	}
	var before MountStats
	if m != nil {
		if err := m.Sync(ctx); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("sync before the workload: %w", err), os.RemoveAll(dir))
		}
		if before, err = m.Stats(ctx); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("mount stats: %w", err), os.RemoveAll(dir))
		}
	}
	s, err := runWorkload(ctx, w, dir, p, m)
	if err != nil {
		return nil, nil, errors.Join(err, os.RemoveAll(dir))
	}
	var mr *mountRun
	if m != nil {
		start := time.Now()
		if err := m.Sync(ctx); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("sync after the workload: %w", err), os.RemoveAll(dir))
		}
		took := time.Since(start)
		after, err := m.Stats(ctx)
		if err != nil {
			return nil, nil, errors.Join(fmt.Errorf("mount stats: %w", err), os.RemoveAll(dir))
		}
		mr = &mountRun{delta: after.Sub(before), sync: took}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, nil, fmt.Errorf("remove the work directory: %w", err)
	}
	return s, mr, nil
}

// summarizePhase turns the samples of one phase in one target (one slice
// of phase samples per repeat) into a Result.
func summarizePhase(workload string, ph Phase, target int, runs [][]Sample, pi int) Result {
	res := Result{Workload: workload, Phase: ph.Name, Target: target}
	var ops, mib []float64
	var lat []time.Duration
	var hasBytes bool
	for _, run := range runs {
		s := run[pi]
		sec := s.Elapsed.Seconds()
		if sec <= 0 {
			sec = 1e-9
		}
		ops = append(ops, float64(s.Ops)/sec)
		mib = append(mib, float64(s.Bytes)/(1<<20)/sec)
		hasBytes = hasBytes || s.Bytes > 0
		lat = append(lat, s.Latencies...)
		res.Ops += s.Ops
		res.Bytes += s.Bytes
		if s.Cold != "" {
			res.Cold = s.Cold
		}
		for k, v := range s.Requests {
			if res.RequestsPerOp == nil {
				res.RequestsPerOp = map[string]float64{}
			}
			res.RequestsPerOp[k] += float64(v)
		}
	}
	for k := range res.RequestsPerOp {
		res.RequestsPerOp[k] /= float64(max(res.Ops, 1))
	}
	res.Repeats = len(runs)
	res.OpsPerSec = Summarize(ops)
	if hasBytes {
		sm := Summarize(mib)
		res.MiBPerSec = &sm
	}
	if len(lat) > 0 {
		l := LatencyOf(lat)
		res.Latency = &l
	}
	return res
}

func summarizeMount(workload string, target int, runs []mountRun) MountResult {
	var puts, gets, up, down, hit, sync []float64
	for _, r := range runs {
		d := r.delta
		puts = append(puts, float64(d.BlobPuts))
		gets = append(gets, float64(d.BlobGets))
		up = append(up, float64(d.BytesUploaded)/(1<<20))
		down = append(down, float64(d.BytesDownloaded)/(1<<20))
		if n := d.CacheHits + d.CacheMisses; n > 0 {
			hit = append(hit, float64(d.CacheHits)/float64(n))
		}
		sync = append(sync, r.sync.Seconds())
	}
	mr := MountResult{Workload: workload, Target: target, Repeats: len(runs),
		BlobPuts: Summarize(puts), BlobGets: Summarize(gets), MiBUploaded: Summarize(up),
		MiBDownloaded: Summarize(down), SyncSeconds: Summarize(sync)}
	if len(hit) > 0 {
		h := Summarize(hit)
		mr.CacheHitRatio = &h
	}
	return mr
}
