package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteTable writes r as the readable table `agentfs bench` prints on a
// terminal: one line per workload phase and target with the median ops/s
// and MiB/s over repeats, their spread, latency percentiles over every
// operation, and the ratio to the first target.
func WriteTable(w io.Writer, r *Report) error {
	ew := &errWriter{w: w}
	ew.printf("agentfs bench: %d repeat(s), %s; %s\n", r.Repeats, r.Elapsed.Round(1e8), r.Machine)
	ew.printf("figures: median over repeats; spread = (max-min)/median of ops/s; p50/p99 over every operation; ×[1] = ops/s ÷ target [1]'s (higher is faster)\n\n")
	for i, t := range r.Targets {
		ew.printf("  [%d] %s  %s\n", i+1, t.Dir, describeTarget(t))
	}
	colds := map[string]bool{}
	for _, res := range r.Results {
		if res.Cold != "" && !colds[res.Cold] {
			colds[res.Cold] = true
			ew.printf("  cold reads: %s\n", res.Cold)
		}
	}
	ew.printf("\n")
	t := &textTable{left: 3}
	t.add("workload", "phase", "target", "ops/s", "spread", "MiB/s", "p50", "p99", "×[1]")
	lastW, lastP := "", ""
	for _, res := range r.Results {
		wl, ph := res.Workload, res.Phase
		if wl == lastW {
			wl = ""
			if ph == lastP {
				ph = ""
			}
		}
		lastW, lastP = res.Workload, res.Phase
		mib, p50, p99, ratio := "-", "-", "-", "-"
		if res.MiBPerSec != nil {
			mib = fmtNum(res.MiBPerSec.Median)
		}
		if res.Latency != nil {
			p50, p99 = fmtDur(res.Latency.P50), fmtDur(res.Latency.P99)
		}
		if res.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *res.Ratio)
		}
		t.add(wl, ph, fmt.Sprintf("[%d]", res.Target+1), fmtNum(res.OpsPerSec.Median), fmtSpread(res.OpsPerSec), mib, p50, p99, ratio)
	}
	ew.printf("%s", t)
	if len(r.Mounts) > 0 {
		ew.printf("\nagentfs mounts: blob requests, bytes and cache hits from the start of each workload to the end of the sync after it; sync = time of that sync\n\n")
		t := &textTable{left: 2}
		t.add("workload", "target", "PUTs", "GETs", "MiB up", "MiB down", "cache hits", "sync")
		for _, m := range r.Mounts {
			hit := "-"
			if m.CacheHitRatio != nil {
				hit = fmt.Sprintf("%.1f%%", m.CacheHitRatio.Median*100)
			}
			t.add(m.Workload, fmt.Sprintf("[%d]", m.Target+1), fmt.Sprintf("%.0f", m.BlobPuts.Median), fmt.Sprintf("%.0f", m.BlobGets.Median),
				fmtNum(m.MiBUploaded.Median), fmtNum(m.MiBDownloaded.Median), hit, fmtNum(m.SyncSeconds.Median)+"s")
		}
		ew.printf("%s", t)
	}
	writeRequests(ew, r)
	if len(r.Failures) > 0 {
		ew.printf("\nFAILED:\n")
		for _, f := range r.Failures {
			ew.printf("  %s in [%d] %s: %s\n", f.Workload, f.Target+1, r.Targets[f.Target].Dir, f.Error)
		}
	}
	return ew.err
}

func describeTarget(t Target) string {
	var parts []string
	if t.Agentfs != "" {
		parts = append(parts, t.Agentfs)
	}
	if t.FSType != "" {
		parts = append(parts, fmt.Sprintf("(%s from %s on %s)", t.FSType, t.Source, t.MountPoint))
	}
	return strings.Join(parts, " ")
}

// errWriter keeps the first write error so that rendering code can write
// freely and check once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(e, format, args...) // the error is kept in e.err
}

// writeRequests lists, for agentfs mounts, the FUSE requests per operation
// of each phase, the most frequent kind first.
func writeRequests(ew *errWriter, r *Report) {
	header := false
	for _, res := range r.Results {
		if len(res.RequestsPerOp) == 0 {
			continue
		}
		if !header {
			ew.printf("\nFUSE requests per operation (agentfs mounts, over every repeat):\n")
			header = true
		}
		kinds := make([]string, 0, len(res.RequestsPerOp))
		var total float64
		for k, v := range res.RequestsPerOp {
			kinds = append(kinds, k)
			total += v
		}
		sort.Slice(kinds, func(i, j int) bool {
			a, b := res.RequestsPerOp[kinds[i]], res.RequestsPerOp[kinds[j]]
			return a > b || a == b && kinds[i] < kinds[j]
		})
		parts := make([]string, 0, len(kinds))
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s %s", k, fmtNum(res.RequestsPerOp[k])))
		}
		ew.printf("  %s/%s [%d]: %s in all: %s\n", res.Workload, res.Phase, res.Target+1, fmtNum(total), strings.Join(parts, ", "))
	}
}
