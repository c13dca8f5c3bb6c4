package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/serve/api"
)

// p50 reports the median of ds as the metric p50-ms.
func p50(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkServe measures the API's overhead on loopback over a real
// daemon (real mounts): exec of true over HTTP against exec.Backend.Exec
// called directly on the same workspace's backend, a 4 KiB write and
// read, and a new workspace's creation to its first command's result.
func BenchmarkServe(b *testing.B) {
	d := newDaemon(b, nil)
	ctx := context.Background()
	w := d.create("bench")
	h, err := d.mgr.Acquire(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer h.Release()
	run := func(b *testing.B, op func() error) {
		ds := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		p50(b, ds)
	}
	b.Run("exec-true-direct", func(b *testing.B) {
		run(b, func() error {
			_, err := h.Backend.Exec(ctx, exec.Request{Argv: []string{"true"}})
			return err
		})
	})
	b.Run("exec-true-http", func(b *testing.B) {
		run(b, func() error {
			_, err := w.Exec(ctx, api.ExecRequest{Argv: []string{"true"}})
			return err
		})
	})
	data := bytes.Repeat([]byte("x"), 4096)
	b.Run("write-4KiB-http", func(b *testing.B) {
		run(b, func() error { return w.WriteFile(ctx, "f4k", data) })
	})
	b.Run("read-4KiB-http", func(b *testing.B) {
		run(b, func() error {
			_, err := w.ReadFile(ctx, "f4k")
			return err
		})
	})
	n := 0
	b.Run("create-to-first-result", func(b *testing.B) {
		run(b, func() error {
			n++
			name := fmt.Sprintf("c%d", n)
			if _, err := d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: name}); err != nil {
				return err
			}
			_, err := d.admin.Workspace(name).Exec(ctx, api.ExecRequest{Command: "echo hi"})
			return err
		})
	})
}
