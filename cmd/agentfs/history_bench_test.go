package main

import (
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/internal/snapshottest"
)

// BenchmarkHistory measures issue 7's targets on a workspace of 50,000
// files (500 directories of 100), mounted by a separate server, against
// the same operations on a 100-file workspace measured in the same run
// (the baseline: the ratio shows what the workspace's size costs):
//
//   - save-ms: `snapshot save MOUNTPOINT` after a sync (target ≤ 50 ms);
//   - diff10-ms: a server-side diff of two snapshots differing in 10 files
//     (target ≤ 100 ms);
//   - forkmount-ms: fork a snapshot, mount the fork (a new server process)
//     and list its root (target ≤ 1 s);
//   - gc-ms and gc-maxrss-MiB: `agentfs gc URL` as a process.
//
// Run: go test -run '^$' -bench BenchmarkHistory -benchtime 1x -timeout 30m ./cmd/agentfs/
func BenchmarkHistory(b *testing.B) {
	for _, files := range []int{100, 50_000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) {
			for range b.N {
				benchHistory(b, files)
			}
		})
	}
}

func benchHistory(b *testing.B, files int) {
	ctx := context.Background()
	url := "file://" + filepath.Join(b.TempDir(), "store")
	_, repo := snapshottest.InitVolume(b, url)
	w := snapshottest.OpenWorkspace(b, repo, "main")
	dirs := max(files/100, 1)
	for i := range files {
		w.WriteFile(fmt.Sprintf("d%03d/f%05d.txt", i%dirs, i), []byte(fmt.Sprintf("file %d\n%s", i, "some content of a source file\n")))
	}
	w.Close()
	m := fstest.Start(b, fstest.Options{URL: url})
	c := m.Client(b)
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}

	var saves []time.Duration
	for i := range 5 {
		writeFileB(b, filepath.Join(m.Dir, "d000", "touched.txt"), fmt.Sprint(i))
		if err := c.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := c.SaveSnapshot(ctx, fmt.Sprintf("s%d", i), ""); err != nil {
			b.Fatal(err)
		}
		saves = append(saves, time.Since(t0))
	}
	b.ReportMetric(float64(median(saves).Microseconds())/1000, "save-ms")

	for i := range 10 {
		writeFileB(b, filepath.Join(m.Dir, fmt.Sprintf("d%03d", (i*37)%dirs), fmt.Sprintf("f%05d.txt", (i*37)%dirs+i*dirs)), "changed")
	}
	if _, err := c.SaveSnapshot(ctx, "after", ""); err != nil {
		b.Fatal(err)
	}
	var diffs []time.Duration
	for range 5 {
		n := 0
		t0 := time.Now()
		if _, err := c.Diff(ctx, control.DiffRequest{A: "s4", B: "after"}, func(histdiff.Change) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		diffs = append(diffs, time.Since(t0))
		if n != 10 {
			b.Fatalf("diff found %d changes, want 10", n)
		}
	}
	b.ReportMetric(float64(median(diffs).Microseconds())/1000, "diff10-ms")

	t0 := time.Now()
	if _, err := c.Fork(ctx, "after", "bench-fork", ""); err != nil {
		b.Fatal(err)
	}
	f := fstest.Start(b, fstest.Options{URL: url, Args: []string{"--branch", "bench-fork"}})
	ents, err := os.ReadDir(f.Dir)
	if err != nil || len(ents) != dirs {
		b.Fatalf("ls of the fork: %d entries, %v", len(ents), err)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "forkmount-ms")
	f.Unmount(b)
	m.Unmount(b)

	gcCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(gcCtx, m.Bin, "gc", url, "--keep-last", "1")
	cmd.Env = m.Env
	t0 = time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("gc: %v\n%s", err, out)
	}
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "gc-ms")
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		b.ReportMetric(float64(ru.Maxrss)/1024, "gc-maxrss-MiB")
	}
}

func writeFileB(b *testing.B, p, s string) {
	b.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		b.Fatal(err)
	}
}
