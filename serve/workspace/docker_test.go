package workspace_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/serve/workspace"
)

// dockerDaemonEnv makes the child of TestMain run runDockerDaemon.
const dockerDaemonEnv = "AGENTFS_TEST_WORKSPACE_DOCKER_DAEMON"

// testImage is the image scripts/setup-docker.sh imports (as exec's tests).
func testImage() string {
	if img := os.Getenv("AGENTFS_TEST_IMAGE"); img != "" {
		return img
	}
	return "agentfs-test/busybox:1"
}

// dockerSpec is a docker backend of the test image, as user 1000:1000.
func dockerSpec() *exec.Spec {
	return &exec.Spec{Type: exec.TypeDocker, Image: testImage(), User: "1000:1000"}
}

// acquireDocker is acquire for a docker workspace: a missing engine or
// image is reported through testenv (a failure under CI).
func acquireDocker(t *testing.T, m *workspace.Manager, name string) *workspace.Handle {
	t.Helper()
	h, err := m.Acquire(context.Background(), name)
	if errors.Is(err, exec.ErrDockerUnavailable) || errors.Is(err, exec.ErrImageMissing) {
		testenv.Missing(t, "docker engine with image "+testImage()+" (bash scripts/setup-docker.sh)", err)
	}
	if err != nil {
		t.Fatalf("Acquire(%s): %v", name, err)
	}
	return h
}

// containers lists the ids of the containers labelled with stateDir,
// running or not, sorted.
func containers(t *testing.T, stateDir string) []string {
	return testservices.DockerContainers(t, workspace.LabelStateDir+"="+stateDir)
}

// TestDockerWorkspace: a workspace created with a docker backend runs its
// commands in one container per mount (as the backend's user, in
// /workspace on the mount, with the mount's change list and sync
// barrier); its files are the container user's; the container goes at
// unmount and comes back at the next mount; a local workspace of the same
// daemon still runs on the host. It logs create→first command for both.
func TestDockerWorkspace(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.open(e.config())

	start := time.Now()
	in := create(t, m, workspace.CreateRequest{Name: "box", Backend: dockerSpec()})
	if in.Backend.Type != exec.TypeDocker || in.Backend.Image != testImage() {
		t.Errorf("Info.Backend = %+v", in.Backend)
	}
	h := acquireDocker(t, m, "box")
	res, err := h.Backend.Exec(ctx, exec.Request{Command: "id -u; pwd; echo hi > made.txt"})
	dockerFirst := time.Since(start)
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "1000\n/workspace\n" {
		t.Fatalf("exec: %v %+v (stderr %q)", err, res, res.Stderr)
	}
	if res.Changes == nil || !slices.Equal(res.Changes.Created, []string{"made.txt"}) {
		t.Errorf("changes: %+v", res.Changes)
	}
	if h.Backend.Kind() != exec.TypeDocker || h.Backend.ContainerID() == "" {
		t.Fatalf("backend %s, container %q", h.Backend.Kind(), h.Backend.ContainerID())
	}
	// A file written through the API belongs to the container's user.
	writeFile(t, h, "api.txt", "x")
	res, err = h.Backend.Exec(ctx, exec.Request{Command: "echo more >> api.txt && stat -c %u api.txt"})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "1000\n" {
		t.Errorf("append to a file written through the API: %v %+v (stderr %q)", err, res, res.Stderr)
	}
	if got := containers(t, e.stateDir); !slices.Equal(got, []string{h.Backend.ContainerID()}) {
		t.Errorf("containers of the state dir: %v, want the workspace's %s", got, h.Backend.ContainerID())
	}

	start = time.Now()
	create(t, m, workspace.CreateRequest{Name: "host"})
	hl := acquire(t, m, "host")
	res, err = hl.Backend.Exec(ctx, exec.Request{Command: "pwd"})
	localFirst := time.Since(start)
	if err != nil || strings.TrimSpace(string(res.Stdout)) != hl.MountPoint {
		t.Errorf("local workspace: %v %+v", err, res)
	}
	hl.Release()
	t.Logf("create→first command: docker %v, local %v", dockerFirst.Round(time.Millisecond), localFirst.Round(time.Millisecond))

	// Idle unmount removes the container; the next use starts another.
	h.Release()
	e.clock.Advance(2 * time.Minute)
	m.Scan(ctx)
	if status(t, m, "box") != workspace.StatusUnmounted {
		t.Fatal("box still mounted after the idle timeout")
	}
	if got := containers(t, e.stateDir); len(got) != 0 {
		t.Errorf("containers after the unmount: %v", got)
	}
	h = acquireDocker(t, m, "box")
	defer h.Release()
	res, err = h.Backend.Exec(ctx, exec.Request{Command: "cat made.txt api.txt"})
	if err != nil || string(res.Stdout) != "hi\nxmore\n" {
		t.Errorf("after the remount: %v %+v", err, res)
	}
}

// TestDockerDefaultAndInvalid: the daemon's default backend applies to
// workspaces created without one (and completes the ones that name docker
// without an image); invalid backends are refused at Create and Open.
func TestDockerDefaultAndInvalid(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Backend = exec.Spec{Type: exec.TypeLocal, Image: testImage(), User: "1000:1000", Memory: 1 << 30}
	m := e.open(cfg)
	if in := create(t, m, workspace.CreateRequest{Name: "plain"}); in.Backend != (exec.Spec{Type: exec.TypeLocal}) {
		t.Errorf("default backend: %+v", in.Backend)
	}
	in := create(t, m, workspace.CreateRequest{Name: "d", Backend: &exec.Spec{Type: exec.TypeDocker, CPUs: 1}})
	want := exec.Spec{Type: exec.TypeDocker, Image: testImage(), User: "1000:1000", Memory: 1 << 30, CPUs: 1}
	if in.Backend != want {
		t.Errorf("docker completed with the daemon's options: %+v, want %+v", in.Backend, want)
	}
	for _, s := range []exec.Spec{{Type: "vm"}, {Type: exec.TypeLocal, Image: "x"}, {Type: exec.TypeDocker, User: "root"}} {
		_, err := m.Create(context.Background(), workspace.CreateRequest{Name: "bad", Backend: &s})
		if !errors.Is(err, workspace.ErrInvalidArgument) {
			t.Errorf("Create with backend %+v: %v, want ErrInvalidArgument", s, err)
		}
	}
	bad := e.config()
	bad.StateDir = t.TempDir()
	bad.Backend = exec.Spec{Type: exec.TypeDocker}
	if _, err := workspace.Open(context.Background(), bad); !errors.Is(err, workspace.ErrInvalidArgument) {
		t.Errorf("Open with docker and no image: %v", err)
	}
}

// runDockerDaemon is the child of TestDockerKill9Recovery: a Manager with
// a docker workspace "box" holding a synced file, and a command running
// in its container. It prints "server PID" (its mount server), "container
// ID", then "ready", and waits to be killed.
func runDockerDaemon(stateDir, bin string) error {
	ctx := context.Background()
	m, err := workspace.Open(ctx, workspace.Config{StateDir: stateDir, Executable: bin})
	if err != nil {
		return err
	}
	if _, err := m.Create(ctx, workspace.CreateRequest{Name: "box", Backend: dockerSpec()}); err != nil {
		return err
	}
	h, err := m.Acquire(ctx, "box")
	if err != nil {
		return err
	}
	res, err := h.Backend.Exec(ctx, exec.Request{Command: "echo synced > synced.txt"})
	if err != nil || res.ExitCode != 0 {
		return fmt.Errorf("exec: %w (%+v)", err, res)
	}
	// Mid-command when killed: it writes on, in the container.
	if _, err := h.Backend.Start(ctx, exec.Request{Command: "while :; do date >> busy.txt; sleep 0.1; done"}); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(h.MountPoint + "/busy.txt"); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	info, err := h.Control.Info(ctx)
	if err != nil {
		return err
	}
	fmt.Println("server", info.PID)
	fmt.Println("container", h.Backend.ContainerID())
	fmt.Println("ready")
	select {}
}

// TestDockerKill9Recovery: after a kill -9 of a daemon in the middle of a
// command in a docker workspace's container, Open removes that container
// (and so the command), whether the workspace's mount server still runs
// (its mount is adopted and gets a fresh container) or died too (its
// stale mount is cleaned up and no container is started); nothing synced
// is lost, and Close leaves no container of the state dir.
func TestDockerKill9Recovery(t *testing.T) {
	for _, serverDies := range []bool{false, true} {
		t.Run(fmt.Sprintf("serverDies=%v", serverDies), func(t *testing.T) { testDockerKill9(t, serverDies) })
	}
}

func testDockerKill9(t *testing.T, serverDies bool) {
	e := newEnv(t)
	ctx := context.Background()
	cmd := osexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), daemonEnv+"="+e.stateDir, binEnv+"="+e.bin, dockerDaemonEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var old string
	var server int
	var lines []string
	sc := bufio.NewScanner(out)
	ready := false
	for !ready && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "container":
			old = f[1]
		case len(f) == 2 && f[0] == "server":
			server, _ = strconv.Atoi(f[1])
		case len(f) == 1 && f[0] == "ready":
			ready = true
		default:
			lines = append(lines, sc.Text())
		}
	}
	if !ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		msg := strings.Join(lines, "\n")
		if strings.Contains(msg, exec.ErrDockerUnavailable.Error()) || strings.Contains(msg, exec.ErrImageMissing.Error()) {
			testenv.Missing(t, "docker engine with image "+testImage()+" (bash scripts/setup-docker.sh)", errors.New(msg))
		}
		t.Fatalf("the daemon did not get ready (%v): %s", sc.Err(), msg)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if serverDies {
		if err := syscall.Kill(server, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if !fstest.WaitExit(server, 10*time.Second) {
			t.Fatal("the mount server did not die")
		}
	}
	if got := containers(t, e.stateDir); !slices.Equal(got, []string{old}) {
		t.Fatalf("containers after the kill: %v, want the killed daemon's %s", got, old)
	}

	cfg := e.config()
	cfg.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	m := e.open(cfg)
	if serverDies {
		if status(t, m, "box") != workspace.StatusUnmounted || mounted(t, filepath.Join(e.stateDir, "workspaces", "box", "mnt")) {
			t.Error("box's stale mount was not cleaned up")
		}
		if got := containers(t, e.stateDir); len(got) != 0 {
			t.Errorf("containers after recovery: %v, want none", got)
		}
	} else if status(t, m, "box") != workspace.StatusMounted {
		t.Error("box's mount was not adopted")
	}
	h := acquireDocker(t, m, "box")
	if got := readFile(t, h, "synced.txt"); got != "synced\n" {
		t.Errorf("synced.txt = %q", got)
	}
	if got := containers(t, e.stateDir); slices.Contains(got, old) || !slices.Equal(got, []string{h.Backend.ContainerID()}) {
		t.Errorf("containers after recovery and a use: %v, want only the new %s (not %s)", got, h.Backend.ContainerID(), old)
	}
	// The command of the killed daemon is gone: busy.txt (on the adopted
	// mount: a dead server's unsynced writes may be lost) stops growing.
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(h.MountPoint, "busy.txt"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if !serverDies {
		before := size()
		time.Sleep(500 * time.Millisecond)
		if after := size(); after != before {
			t.Errorf("busy.txt grows after recovery (%d → %d): the old command still runs", before, after)
		}
	}
	res, err := h.Backend.Exec(ctx, exec.Request{Command: "id -u"})
	if err != nil || string(res.Stdout) != "1000\n" {
		t.Errorf("exec after recovery: %v %+v", err, res)
	}
	h.Release()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := containers(t, e.stateDir); len(got) != 0 {
		t.Errorf("containers after Close: %v", got)
	}
}

// tWriter writes a test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestNewBackendClosedAtUnmount: a backend of Handle.NewBackend runs on
// the workspace's mount with its seams, and an unmount closes it (killing
// its commands and removing its container) even if its caller did not;
// a Handle of a mount that is gone starts none.
func TestNewBackendClosedAtUnmount(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.open(e.config())
	create(t, m, workspace.CreateRequest{Name: "w"})
	h := acquire(t, m, "w")
	if err := os.Chmod(h.MountPoint, 0o777); err != nil {
		t.Fatal(err)
	}
	b, err := h.NewBackend(ctx, *dockerSpec())
	if errors.Is(err, exec.ErrDockerUnavailable) || errors.Is(err, exec.ErrImageMissing) {
		testenv.Missing(t, "docker engine with image "+testImage()+" (bash scripts/setup-docker.sh)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Exec(ctx, exec.Request{Command: "echo x > made.txt; id -u"})
	if err != nil || string(res.Stdout) != "1000\n" || res.Changes == nil || !slices.Equal(res.Changes.Created, []string{"made.txt"}) {
		t.Fatalf("exec: %v %+v", err, res)
	}
	j, err := b.Start(ctx, exec.Request{Command: "sleep 600"})
	if err != nil {
		t.Fatal(err)
	}
	if got := containers(t, e.stateDir); len(got) != 1 {
		t.Errorf("containers: %v, want the request's", got)
	}
	h.Release()
	e.clock.Advance(2 * time.Minute)
	m.Scan(ctx)
	if status(t, m, "w") != workspace.StatusUnmounted {
		t.Fatal("still mounted after the idle timeout")
	}
	if r, _ := j.Wait(ctx); r == nil || r.ExitCode != 137 {
		t.Errorf("the job after the unmount: %+v", r)
	}
	if got := containers(t, e.stateDir); len(got) != 0 {
		t.Errorf("containers after the unmount: %v", got)
	}
	if _, err := h.NewBackend(ctx, *dockerSpec()); !errors.Is(err, workspace.ErrClosed) {
		t.Errorf("NewBackend on an unmounted workspace's Handle: %v", err)
	}
	if err := h.CloseBackend(b); err != nil && !errors.Is(err, exec.ErrClosed) {
		t.Errorf("CloseBackend after the unmount: %v", err)
	}
}
