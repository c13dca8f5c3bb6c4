package exec

import (
	"context"
	"errors"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/agentfs/agentfs/internal/testenv"
)

// testImage is the image scripts/setup-docker.sh imports from busybox-static.
func testImage() string {
	if img := os.Getenv("AGENTFS_TEST_IMAGE"); img != "" {
		return img
	}
	return "agentfs-test/busybox:1"
}

// testUser is the unprivileged user of the test image.
const testUser = "1000:1000"

// dockerWorkspace returns a fresh workspace directory owned by testUser.
func dockerWorkspace(t testing.TB) string {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// newDockerBackend starts a docker backend, or reports the engine or the
// image missing through testenv (a failure under CI).
func newDockerBackend(t testing.TB, dir string, opts DockerOptions) *Backend {
	t.Helper()
	if opts.Image == "" {
		opts.Image = testImage()
	}
	if opts.User == "" {
		opts.User = testUser
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := NewDocker(ctx, dir, opts)
	if errors.Is(err, ErrDockerUnavailable) || errors.Is(err, ErrImageMissing) {
		testenv.Missing(t, "docker engine with image "+opts.Image+" (bash scripts/setup-docker.sh)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

// dockerClient returns a client for inspecting what the backend did.
func dockerClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	if _, err := cli.Ping(testCtx(t)); err != nil {
		testenv.Missing(t, "docker engine (bash scripts/setup-docker.sh)", err)
	}
	return cli
}

func TestDockerContainer(t *testing.T) {
	cli := dockerClient(t)
	ctx := testCtx(t)
	dir := dockerWorkspace(t)
	start := time.Now()
	b := newDockerBackend(t, dir, DockerOptions{Memory: 256 << 20, CPUs: 1.5, Labels: map[string]string{"x.test": "yes"}})
	t.Logf("docker backend start (container create + start): %v", time.Since(start))
	id := b.ContainerID()
	ins, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	l := ins.Config.Labels
	if l[LabelBackend] != "1" || l[LabelOwnerPID] != strconv.Itoa(os.Getpid()) || l[LabelWorkspace] != b.Root() || l["x.test"] != "yes" || l[LabelOwnerStart] == "" {
		t.Errorf("labels %v", l)
	}
	hc := ins.HostConfig
	if hc.NetworkMode != "none" || hc.Memory != 256<<20 || hc.NanoCPUs != 1.5e9 || hc.PidsLimit == nil || *hc.PidsLimit != DefaultPidsLimit ||
		hc.Init == nil || !*hc.Init || len(hc.SecurityOpt) != 1 || hc.SecurityOpt[0] != "no-new-privileges" {
		t.Errorf("host config: network %q memory %d cpus %d pids %v init %v secopt %v", hc.NetworkMode, hc.Memory, hc.NanoCPUs, hc.PidsLimit, hc.Init, hc.SecurityOpt)
	}
	if ins.Config.User != testUser || len(ins.Mounts) != 1 || ins.Mounts[0].Destination != ContainerWorkspace || ins.Mounts[0].Source != b.Root() {
		t.Errorf("user %q mounts %+v", ins.Config.User, ins.Mounts)
	}
	if b.WorkDir() != ContainerWorkspace {
		t.Errorf("WorkDir %q", b.WorkDir())
	}
	res := mustExec(t, b, sh("id -u; id -g; ls /sys/class/net; echo x > byexec"))
	if string(res.Stdout) != "1000\n1000\nlo\n" {
		t.Errorf("user and network inside: %q %q", res.Stdout, res.Stderr)
	}
	// Ownership: what commands and file operations create belongs to the
	// container's user (the controller runs as root here).
	if err := b.WriteFile(ctx, "w/by-fileop", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := b.Mkdir(ctx, "made/deep", true); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"byexec", "w", "w/by-fileop", "made", "made/deep"} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if os.Geteuid() == 0 && (st.Uid != 1000 || st.Gid != 1000) {
			t.Errorf("%s owned by %d:%d, want 1000:1000", p, st.Uid, st.Gid)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ContainerInspect(ctx, id); !errdefs.IsNotFound(err) {
		t.Errorf("container after Close: %v, want not found", err)
	}
}

func TestDockerNetworkAndLimits(t *testing.T) {
	dockerClient(t)
	b := newDockerBackend(t, dockerWorkspace(t), DockerOptions{Network: true, Pids: 40})
	res := mustExec(t, b, sh("ls /sys/class/net"))
	if !strings.Contains(string(res.Stdout), "eth0") {
		t.Errorf("Network: true gave interfaces %q", res.Stdout)
	}
	// The pids limit stops a runaway fork loop; the leftovers are killed.
	res = mustExec(t, b, Request{Command: "i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done; echo started $i", Timeout: time.Minute})
	if !strings.Contains(string(res.Stderr), "fork") || res.TimedOut {
		t.Errorf("100 processes under a pids limit of 40: exit %d timedOut %v stderr %.200q", res.ExitCode, res.TimedOut, res.Stderr)
	}
	res = mustExec(t, b, sh("ps -o pid | wc -l"))
	if n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); n > 8 {
		t.Errorf("%d processes left in the container after the fork loop", n)
	}
}

func TestDockerUser(t *testing.T) {
	dockerClient(t)
	ctx := testCtx(t)
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to chown the test workspaces)", os.ErrPermission)
	}
	// Default: the workspace owner.
	dir := t.TempDir()
	must(t, os.Chown(dir, 1234, 2345))
	b, err := NewDocker(ctx, dir, DockerOptions{Image: testImage()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if res := mustExec(t, b, sh("id -u; id -g")); string(res.Stdout) != "1234\n2345\n" {
		t.Errorf("default user: %q", res.Stdout)
	}
	// A root-owned workspace is refused unless root is asked for.
	root := t.TempDir()
	if _, err := NewDocker(ctx, root, DockerOptions{Image: testImage()}); !errors.Is(err, ErrRootUser) {
		t.Errorf("root-owned workspace: %v, want ErrRootUser", err)
	}
	rb, err := NewDocker(ctx, root, DockerOptions{Image: testImage(), User: "0:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rb.Close() })
	if res := mustExec(t, rb, sh("id -u")); string(res.Stdout) != "0\n" {
		t.Errorf("explicit root: %q", res.Stdout)
	}
	for _, u := range []string{"agent", "1000", "1000:x", "-1:0"} {
		if _, err := NewDocker(ctx, dir, DockerOptions{Image: testImage(), User: u}); !errors.Is(err, ErrInvalid) {
			t.Errorf("user %q: %v, want ErrInvalid", u, err)
		}
	}
	if _, err := NewDocker(ctx, dir, DockerOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no image: %v", err)
	}
	if _, err := NewDocker(ctx, dir, DockerOptions{Image: "agentfs-test/no-such-image:0", User: testUser}); !errors.Is(err, ErrImageMissing) {
		t.Errorf("missing image: %v, want ErrImageMissing", err)
	}
}

// staleSetup returns what the stale-container tests share: a Docker client
// (with the test image present), this host's name and the pid of a
// process that has exited (a dead controller).
func staleSetup(t *testing.T) (cli *client.Client, host, deadPID string) {
	t.Helper()
	cli = dockerClient(t)
	if _, err := cli.ImageInspect(testCtx(t), testImage()); err != nil {
		testenv.Missing(t, "docker image "+testImage()+" (bash scripts/setup-docker.sh)", err)
	}
	host, _ = os.Hostname()
	dead := osexec.Command("true")
	must(t, dead.Run())
	return cli, host, strconv.Itoa(dead.Process.Pid)
}

// startSleeper starts a container of the test image that sleeps, with
// labels and name ("": Docker names it), removed when t ends; it returns
// its id.
func startSleeper(t *testing.T, cli *client.Client, name string, labels map[string]string) string {
	t.Helper()
	ctx := testCtx(t)
	c, err := cli.ContainerCreate(ctx, &container.Config{Image: testImage(), Cmd: []string{"sleep", "300"}, Labels: labels}, &container.HostConfig{NetworkMode: "none"}, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	})
	must(t, cli.ContainerStart(ctx, c.ID, container.StartOptions{}))
	return c.ID
}

func TestDockerStaleContainers(t *testing.T) {
	cli, host, deadPID := staleSetup(t)
	ctx := testCtx(t)
	deadStart := "1" // any start time: the pid is gone (or reused, with another start time)
	pid1Start, err := processStartTime(1)
	if err != nil {
		t.Fatal(err)
	}
	suffix, _ := randomHex(4)
	stale := startSleeper(t, cli, "agentfs-test-stale-"+suffix, map[string]string{
		LabelBackend: "1", LabelOwnerHost: host, LabelOwnerPID: deadPID, LabelOwnerStart: deadStart,
	})
	live := startSleeper(t, cli, "agentfs-test-live-"+suffix, map[string]string{
		LabelBackend: "1", LabelOwnerHost: host, LabelOwnerPID: "1", LabelOwnerStart: pid1Start,
	})
	otherHost := startSleeper(t, cli, "agentfs-test-otherhost-"+suffix, map[string]string{
		LabelBackend: "1", LabelOwnerHost: host + "-elsewhere", LabelOwnerPID: deadPID, LabelOwnerStart: deadStart,
	})
	reused := startSleeper(t, cli, "agentfs-test-reused-"+suffix, map[string]string{
		LabelBackend: "1", LabelOwnerHost: host, LabelOwnerPID: "1", LabelOwnerStart: pid1Start + "0",
	})
	newDockerBackend(t, dockerWorkspace(t), DockerOptions{})
	for id, wantGone := range map[string]bool{stale: true, reused: true, live: false, otherHost: false} {
		_, err := cli.ContainerInspect(ctx, id)
		if gone := errdefs.IsNotFound(err); gone != wantGone {
			t.Errorf("container %.12s: gone %v, want %v (%v)", id, gone, wantGone, err)
		}
	}
}

// TestDockerStaleSweepsConcurrent runs sweeps of stale containers at once,
// as backends that start together do: each succeeds, whichever removes a
// container first (the others find its removal in progress, or done).
func TestDockerStaleSweepsConcurrent(t *testing.T) {
	cli, host, deadPID := staleSetup(t)
	ctx := testCtx(t)
	for range 3 {
		startSleeper(t, cli, "", map[string]string{
			LabelBackend: "1", LabelOwnerHost: host, LabelOwnerPID: deadPID, LabelOwnerStart: "1",
		})
	}
	errs := make(chan error, 6)
	for range cap(errs) {
		go func() { errs <- RemoveStaleContainers(ctx, cli) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("concurrent sweep: %v", err)
		}
	}
}
