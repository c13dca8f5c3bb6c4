package exec

import (
	"testing"
	"time"
)

// TestDockerKillRightAfterStart: a job killed the moment Start returns (its
// process may not run yet in the container) still ends killed (137), with
// no error, and promptly.
func TestDockerKillRightAfterStart(t *testing.T) {
	b := newDockerBackend(t, dockerWorkspace(t), DockerOptions{})
	for i := range 20 {
		j, err := b.Start(testCtx(t), Request{Command: "sleep 600"})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		j.Kill()
		res, err := j.Wait(testCtx(t))
		if err != nil || res == nil || res.ExitCode != 137 || time.Since(start) > 5*time.Second {
			t.Fatalf("run %d: kill right after start: %v %+v after %v", i, err, res, time.Since(start))
		}
	}
}
