package workspace_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/workspace"
)

// BenchmarkCreateAcquire measures a new workspace to its first Acquire
// (mounted by a server process of its own) on the default store, and to
// the result of a first command; it reports the medians.
func BenchmarkCreateAcquire(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	m := e.open(e.config())
	var acq, first []time.Duration
	for i := 0; b.Loop(); i++ {
		name := "w" + strconv.Itoa(i)
		start := time.Now()
		if _, err := m.Create(ctx, workspace.CreateRequest{Name: name}); err != nil {
			b.Fatal(err)
		}
		h, err := m.Acquire(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		acq = append(acq, time.Since(start))
		if _, err := h.Backend.Exec(ctx, exec.Request{Command: "true"}); err != nil {
			b.Fatal(err)
		}
		first = append(first, time.Since(start))
		h.Release()
	}
	b.ReportMetric(float64(median(acq).Microseconds())/1000, "ms-create-to-acquire-p50")
	b.ReportMetric(float64(median(first).Microseconds())/1000, "ms-create-to-first-exec-p50")
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkHundredIdle creates 100 workspaces, uses each once (a
// command), then lets them go idle, and reports the manager process's
// memory and the mount servers' count and memory before and after the
// idle unmount. Run it with -benchtime=1x.
func BenchmarkHundredIdle(b *testing.B) {
	const n = 100
	e := newEnv(b)
	ctx := context.Background()
	m := e.open(e.config())
	for b.Loop() {
		for i := range n {
			name := "w" + strconv.Itoa(i)
			if _, err := m.Create(ctx, workspace.CreateRequest{Name: name}); err != nil {
				b.Fatal(err)
			}
			h, err := m.Acquire(ctx, name)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := h.Backend.Exec(ctx, exec.Request{Command: "echo x > f"}); err != nil {
				b.Fatal(err)
			}
			h.Release()
		}
		before := e.serverPIDs()
		b.ReportMetric(float64(rssKiB(os.Getpid()))/1024, "MiB-manager-rss-used")
		b.ReportMetric(float64(len(before)), "servers-used")
		b.ReportMetric(float64(sumRSS(before))/1024, "MiB-servers-rss-used")
		e.clock.Advance(time.Hour)
		m.Scan(ctx)
		after := e.serverPIDs()
		b.ReportMetric(float64(rssKiB(os.Getpid()))/1024, "MiB-manager-rss-idle")
		b.ReportMetric(float64(len(after)), "servers-idle")
		b.ReportMetric(float64(sumRSS(after))/1024, "MiB-servers-rss-idle")
		list, err := m.List(ctx)
		if err != nil || len(list) != n {
			b.Fatalf("List: %d, %v", len(list), err)
		}
		for _, in := range list {
			if in.Status != workspace.StatusUnmounted {
				b.Fatalf("%s still mounted", in.Name)
			}
		}
	}
}

func sumRSS(pids []int) int {
	t := 0
	for _, p := range pids {
		t += rssKiB(p)
	}
	return t
}

// rssKiB is process pid's resident set in KiB (0 if it is gone).
func rssKiB(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kib int
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &kib)
			return kib
		}
	}
	return 0
}
