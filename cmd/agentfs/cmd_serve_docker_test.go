package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/serve/api"
	"github.com/agentfs/agentfs/serve/workspace"
)

// serveContainers lists the ids of the containers labelled with a
// daemon's state directory.
func serveContainers(t *testing.T, stateDir string) []string {
	return testservices.DockerContainers(t, workspace.LabelStateDir+"="+stateDir)
}

// TestServeDockerKill9: `agentfs serve --backend docker` runs the
// commands of workspaces created without a backend in their container;
// after a kill -9 of the daemon in the middle of a job there, the next
// daemon removes that container (the job's process is gone from the
// host), runs commands in a fresh one, and what a finished command wrote
// is there.
func TestServeDockerKill9(t *testing.T) {
	testenv.NeedFUSE(t)
	img := os.Getenv("AGENTFS_TEST_IMAGE")
	if img == "" {
		img = "agentfs-test/busybox:1"
	}
	base := t.TempDir()
	stateDir := filepath.Join(base, "state")
	flags := []string{"--backend", "docker", "--image", img, "--user", "1000:1000"}
	cmd, c := startServe(t, base, flags...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	in, err := c.CreateWorkspace(ctx, api.CreateWorkspace{Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if in.Backend != (api.Backend{Type: api.BackendDocker, Image: img, User: "1000:1000"}) {
		t.Errorf("backend %+v", in.Backend)
	}
	w := c.Workspace("w")
	res, err := w.Exec(ctx, api.ExecRequest{Command: "id -u; pwd; echo synced > a.txt"})
	if err != nil && strings.Contains(err.Error(), "docker") {
		testenv.Missing(t, "docker engine with image "+img+" (bash scripts/setup-docker.sh)", err)
	}
	if err != nil || res.Stdout != "1000\n/workspace\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := w.StartJob(ctx, api.ExecRequest{Command: "sleep 303"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	old := serveContainers(t, stateDir)
	if len(old) != 1 {
		t.Fatalf("containers of the daemon: %v, want 1", old)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, c2 := startServe(t, base, flags...)
	if got := serveContainers(t, stateDir); slices.Contains(got, old[0]) {
		t.Errorf("the killed daemon's container %s is still there: %v", old[0], got)
	}
	if left := waitNoProcess(t, "sleep 303", 30*time.Second); left != "" {
		t.Errorf("the job of the killed daemon still runs 30 s after the next daemon removed its container:\n%s", left)
	}
	res, err = c2.Workspace("w").Exec(ctx, api.ExecRequest{Command: "cat a.txt; id -u"})
	if err != nil || res.Stdout != "synced\n1000\n" {
		t.Errorf("after kill -9 and restart: %+v %v", res, err)
	}
}

// waitNoProcess waits until no process's command line matches pattern
// (pgrep -f) and returns "" or, at the deadline, the ps lines (state and
// wait channel included) of those still there. Removing a container kills
// its processes, but on a loaded machine they can take a moment to exit
// after the container is gone from the engine's list.
func waitNoProcess(t *testing.T, pattern string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, _ := exec.Command("pgrep", "-f", pattern).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			return ""
		}
		if time.Now().After(deadline) {
			ps, _ := exec.Command("ps", "-o", "pid,ppid,stat,wchan:32,cmd", "-p", strings.Join(pids, ",")).CombinedOutput()
			return string(ps)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
