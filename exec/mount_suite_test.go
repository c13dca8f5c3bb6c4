package exec_test

import (
	"context"
	"os"
	"testing"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/mountexec"
)

// TestSuiteOnAgentfsMount runs the backends' conformance suite over an
// agentfs mount served by a separate process, with the mount's sync barrier
// and its checkpoint-based change tracker: each workspace is a fresh
// directory of the one mount.
func TestSuiteOnAgentfsMount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	newDir := func(t *testing.T) string {
		dir, err := os.MkdirTemp(m.Dir, "ws-")
		if err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			// The docker suite runs as 1000:1000.
			if err := os.Chown(dir, 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	prepare := func(t *testing.T, dir string, opts *exec.Options) {
		s, tr, err := mountexec.Seams(context.Background(), dir)
		if err != nil || s == nil || tr == nil {
			t.Fatalf("seams of %s: %v, %v, %v", dir, s, tr, err)
		}
		if opts.Syncer == nil {
			opts.Syncer = s
		}
		if opts.ChangeTracker == nil {
			opts.ChangeTracker = tr
		}
	}
	for _, kind := range []string{"local", "docker"} {
		t.Run(kind, func(t *testing.T) { suiteIn(t, kind, newDir, prepare) })
	}
}
