package serve_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/serve/api"
	sclient "github.com/agentfs/agentfs/serve/client"
	"github.com/agentfs/agentfs/serve/workspace"
)

// testImage is the image scripts/setup-docker.sh imports (as exec's tests).
func testImage() string {
	if img := os.Getenv("AGENTFS_TEST_IMAGE"); img != "" {
		return img
	}
	return "agentfs-test/busybox:1"
}

// stateContainers counts the containers labelled with stateDir.
func stateContainers(t *testing.T, stateDir string) int {
	return len(testservices.DockerContainers(t, workspace.LabelStateDir+"="+stateDir))
}

// TestDockerBackend: a workspace created with a docker backend runs exec,
// streamed exec and jobs in its container (as its user, in /workspace,
// with change lists), sees the files written through the API, reports its
// backend, and its container goes with it; a workspace without a backend
// takes the daemon's default (local here, completed docker options
// included for docker workspaces).
func TestDockerBackend(t *testing.T) {
	d := newDaemonConfig(t, func(c *workspace.Config) {
		c.Backend = exec.Spec{Type: exec.TypeLocal, Image: testImage()}
	}, nil)
	ctx := ctxT(t)
	in, err := d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "box", Backend: &api.Backend{Type: api.BackendDocker, User: "1000:1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if in.Backend != (api.Backend{Type: api.BackendDocker, Image: testImage(), User: "1000:1000"}) {
		t.Errorf("created: backend %+v", in.Backend)
	}
	w := d.admin.Workspace("box")
	if err := w.WriteFile(ctx, "in.txt", []byte("from the API\n")); err != nil {
		t.Fatal(err)
	}
	res, err := w.Exec(ctx, api.ExecRequest{Command: "id -u; pwd; cat in.txt; echo out > out.txt"})
	var e *sclient.Error
	if errors.As(err, &e) && (strings.Contains(e.Message, exec.ErrDockerUnavailable.Error()) || strings.Contains(e.Message, exec.ErrImageMissing.Error())) {
		testenv.Missing(t, "docker engine with image "+testImage()+" (bash scripts/setup-docker.sh)", err)
	}
	if err != nil || res.ExitCode != 0 || res.Stdout != "1000\n/workspace\nfrom the API\n" {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if res.Changes == nil || len(res.Changes.Created) != 1 || res.Changes.Created[0] != "out.txt" {
		t.Errorf("changes %+v", res.Changes)
	}
	if got, err := w.ReadFile(ctx, "out.txt"); err != nil || string(got) != "out\n" {
		t.Errorf("out.txt through the API: %q %v", got, err)
	}

	var events []string
	res, err = w.ExecStream(ctx, api.ExecRequest{Command: "echo one; echo two >&2"}, func(ev api.StreamEvent) {
		events = append(events, ev.Type+":"+ev.Data)
	})
	if err != nil || res.ExitCode != 0 || !strings.Contains(strings.Join(events, ""), "stdout:one\n") || !strings.Contains(strings.Join(events, ""), "stderr:two\n") {
		t.Errorf("stream: %v %+v %q", err, res, events)
	}

	j, err := w.StartJob(ctx, api.ExecRequest{Command: "echo started; echo job > job.txt"})
	if err != nil {
		t.Fatal(err)
	}
	j, err = w.WaitJob(ctx, j.ID, 60)
	if err != nil || j.Running || j.ExitCode == nil || *j.ExitCode != 0 || j.Result == nil || j.Result.Stdout != "started\n" ||
		j.Result.Changes == nil || len(j.Result.Changes.Created) != 1 {
		t.Errorf("job: %v %+v", err, j)
	}
	j, err = w.StartJob(ctx, api.ExecRequest{Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	j, err = w.KillJob(ctx, j.ID)
	if err != nil || j.Running || j.ExitCode == nil || *j.ExitCode != 137 {
		t.Errorf("killed job: %v %+v", err, j)
	}

	if got, err := d.admin.GetWorkspace(ctx, "box"); err != nil || got.Backend.Type != api.BackendDocker {
		t.Errorf("get: %+v %v", got, err)
	}
	if n := stateContainers(t, d.stateDir); n != 1 {
		t.Errorf("%d containers of the daemon, want 1", n)
	}
	// A workspace without a backend takes the daemon's: local.
	in, err = d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "host"})
	if err != nil || in.Backend != (api.Backend{Type: api.BackendLocal}) {
		t.Errorf("default backend: %+v %v", in.Backend, err)
	}
	// Invalid backends are refused.
	for _, b := range []api.Backend{{Type: "vm"}, {Type: api.BackendLocal, Network: true}, {Type: api.BackendDocker, User: "nobody"}} {
		_, err := d.admin.CreateWorkspace(ctx, api.CreateWorkspace{Name: "bad", Backend: &b})
		wantCode(t, "backend "+b.Type, err, "invalid_argument", 400)
	}
	if err := d.admin.DeleteWorkspace(ctx, "box"); err != nil {
		t.Fatal(err)
	}
	if n := stateContainers(t, d.stateDir); n != 0 {
		t.Errorf("%d containers after the delete", n)
	}
}

// TestDockerPerRequest: the admin may run one command (exec or job) with
// a backend of its own, here a container over a local workspace, which is
// removed when the command ends; a workspace token may not choose a
// backend.
func TestDockerPerRequest(t *testing.T) {
	d := newDaemonConfig(t, func(c *workspace.Config) {
		c.Backend = exec.Spec{Image: testImage(), User: "1000:1000"}
	}, nil)
	ctx := ctxT(t)
	w := d.create("host")
	// The workspace's root is the daemon's (root's); the container's user
	// writes in sub.
	if res, err := w.Exec(ctx, api.ExecRequest{Command: "mkdir sub && chown 1000:1000 sub"}); err != nil || res.ExitCode != 0 {
		t.Fatalf("mkdir: %v %+v", err, res)
	}
	docker := &api.Backend{Type: api.BackendDocker}
	start := time.Now()
	res, err := w.Exec(ctx, api.ExecRequest{Command: "id -u; pwd; echo x > made.txt", Cwd: "sub", Backend: docker})
	var e *sclient.Error
	if errors.As(err, &e) && (strings.Contains(e.Message, exec.ErrDockerUnavailable.Error()) || strings.Contains(e.Message, exec.ErrImageMissing.Error())) {
		testenv.Missing(t, "docker engine with image "+testImage()+" (bash scripts/setup-docker.sh)", err)
	}
	if err != nil || res.ExitCode != 0 || res.Stdout != "1000\n/workspace/sub\n" {
		t.Fatalf("exec in a container of its own: %v %+v", err, res)
	}
	if res.Changes == nil || len(res.Changes.Created) != 1 || res.Changes.Created[0] != "sub/made.txt" {
		t.Errorf("changes %+v", res.Changes)
	}
	t.Logf("exec with a container of its own: %v", time.Since(start).Round(time.Millisecond))
	if n := stateContainers(t, d.stateDir); n != 0 {
		t.Errorf("%d containers after the command", n)
	}
	// The workspace's own backend is still local.
	res, err = w.Exec(ctx, api.ExecRequest{Command: "pwd"})
	if err != nil || res.Stdout == "/workspace\n" {
		t.Errorf("the workspace's backend: %v %+v", err, res)
	}

	j, err := w.StartJob(ctx, api.ExecRequest{Command: "sleep 600", Backend: docker})
	if err != nil {
		t.Fatal(err)
	}
	if n := stateContainers(t, d.stateDir); n != 1 {
		t.Errorf("%d containers while the job runs, want 1", n)
	}
	j, err = w.KillJob(ctx, j.ID)
	if err != nil || j.ExitCode == nil || *j.ExitCode != 137 {
		t.Errorf("kill: %v %+v exit %v error %+v", err, j, *j.ExitCode, j.Error)
	}
	if n := stateContainers(t, d.stateDir); n != 0 {
		t.Errorf("%d containers after the job", n)
	}

	tok, err := d.admin.CreateToken(ctx, api.CreateToken{Workspace: "host"})
	if err != nil {
		t.Fatal(err)
	}
	ws := d.admin.WithToken(tok.Token).Workspace("host")
	_, err = ws.Exec(ctx, api.ExecRequest{Command: "id", Backend: &api.Backend{Type: api.BackendLocal}})
	wantCode(t, "a workspace token choosing a backend", err, "forbidden", 403)
	_, err = ws.StartJob(ctx, api.ExecRequest{Command: "id", Backend: docker})
	wantCode(t, "a workspace token choosing a job's backend", err, "forbidden", 403)
	_, err = w.Exec(ctx, api.ExecRequest{Command: "id", Backend: &api.Backend{Type: api.BackendDocker, User: "root"}})
	wantCode(t, "an invalid backend", err, "invalid_argument", 400)
}
