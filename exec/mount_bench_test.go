package exec_test

import (
	"context"
	"os"
	"testing"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/mountexec"
)

// BenchmarkExecOnMount measures the per-command latency of the local
// backend for a command that writes one small file: in a plain directory
// (the walk tracker over a near-empty tree) and on an agentfs mount, where
// every command ends with the mount's sync barrier and its change list
// comes from the checkpoints before and after it. Compare the two
// sub-benchmarks of one run:
//
//	go test -run XXX -bench ExecOnMount -benchtime 50x ./exec
func BenchmarkExecOnMount(b *testing.B) {
	req := exec.Request{Command: "echo x >> f"}
	run := func(b *testing.B, dir string, opts exec.Options) {
		be, err := exec.NewLocal(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = be.Close() })
		ctx := context.Background()
		for b.Loop() {
			res, err := be.Exec(ctx, req)
			if err != nil || res.ExitCode != 0 || res.Changes.Empty() {
				b.Fatalf("%+v %v", res, err)
			}
		}
	}
	b.Run("plain", func(b *testing.B) { run(b, b.TempDir(), exec.Options{}) })
	b.Run("agentfs", func(b *testing.B) {
		m := fstest.Start(b, fstest.Options{})
		dir, err := os.MkdirTemp(m.Dir, "ws-")
		if err != nil {
			b.Fatal(err)
		}
		s, tr, err := mountexec.Seams(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		run(b, dir, exec.Options{Syncer: s, ChangeTracker: tr})
	})
}
