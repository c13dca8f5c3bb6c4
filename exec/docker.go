package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// Labels put on every container a docker backend creates. Stale containers
// (same host, owner process gone) are removed when the next docker backend
// starts.
const (
	LabelBackend    = "agentfs.backend"     // "1"
	LabelOwnerHost  = "agentfs.owner.host"  // hostname of the controller
	LabelOwnerPID   = "agentfs.owner.pid"   // pid of the controller
	LabelOwnerStart = "agentfs.owner.start" // start time of that pid (clock ticks since boot)
	LabelWorkspace  = "agentfs.workspace"   // host path of the workspace
)

// ContainerWorkspace is where the workspace is bind-mounted in the
// container, and the commands' default working directory.
const ContainerWorkspace = "/workspace"

// DefaultPidsLimit is the container's pids limit when DockerOptions.Pids is
// 0: enough for builds and test runners, and a stop to fork bombs.
const DefaultPidsLimit = 4096

// Errors of the docker backend.
var (
	// ErrDockerUnavailable: no Docker engine answered.
	ErrDockerUnavailable = errors.New("docker engine unavailable")
	// ErrImageMissing: the image is not present in the engine (the
	// backend never pulls).
	ErrImageMissing = errors.New("docker image not present")
	// ErrRootUser: the workspace is owned by root and no User was given;
	// the backend never runs commands as root unless asked.
	ErrRootUser = errors.New("refusing to run as root by default")
)

// DockerOptions configure NewDocker.
type DockerOptions struct {
	Options
	// Image is the image to run (required). It must contain /bin/sh (with
	// cd -P and test -ef, as dash, bash and busybox have) and the usual
	// grep and kill (busybox's will do), which the backend uses to enter
	// the working directory, run commands and kill their process trees.
	// It is never pulled.
	Image string
	// User is "uid:gid" (numeric) for the container and every command.
	// "" means the owner of the workspace directory, unless that is root,
	// which gives ErrRootUser: pass "0:0" to run as root on purpose.
	User string
	// Memory is the memory limit in bytes; 0 means none.
	Memory int64
	// CPUs is the CPU limit (1.5 = one and a half cores); 0 means none.
	CPUs float64
	// Pids is the limit on processes in the container; 0 means
	// DefaultPidsLimit, a negative value none.
	Pids int64
	// Network gives the container the engine's default (bridge) network;
	// by default it has none (loopback only).
	Network bool
	// Labels are added to the container's labels.
	Labels map[string]string
	// Client, when set, is the Docker client to use (the backend does not
	// close it); nil means one from the environment (DOCKER_HOST, ...) with
	// API version negotiation.
	Client *client.Client
}

// NewDocker starts a container for the workspace dir (bind-mounted at
// /workspace) and returns a backend that runs each command in it with
// docker exec. The container is started once and reused; it runs a shell
// that sleeps, under the engine's init (docker-init) so orphans are reaped,
// with no network unless asked, no-new-privileges, the given limits, and the
// agentfs labels; Close removes it. Before creating it, NewDocker removes the
// containers that earlier controllers on this host left behind when they
// died.
//
// File operations act on the host directory; when the controller runs as
// root they give what they create to User, so commands can change it.
func NewDocker(ctx context.Context, dir string, opts DockerOptions) (*Backend, error) {
	if opts.Image == "" {
		return nil, fmt.Errorf("docker backend: %w: no image given", ErrInvalid)
	}
	var d *dockerDriver
	b, err := newBackend("docker", dir, opts.Options, func(hostRoot string) (driver, error) {
		var err error
		d, err = startDocker(ctx, hostRoot, &opts)
		return d, err
	})
	if err != nil {
		return nil, err
	}
	if d.uid != 0 && os.Geteuid() == 0 {
		b.s.owner = &owner{uid: d.uid, gid: d.gid}
	}
	return b, nil
}

// ContainerID is the docker backend's container id, "" for other backends.
func (b *Backend) ContainerID() string {
	if d, ok := b.s.drv.(*dockerDriver); ok {
		return d.id
	}
	return ""
}

type dockerDriver struct {
	cli       *client.Client
	ownClient bool
	id        string
	user      string
	uid, gid  int
}

// startDocker connects, cleans up stale containers, and creates and starts
// the container.
func startDocker(ctx context.Context, hostRoot string, opts *DockerOptions) (_ *dockerDriver, err error) {
	d := &dockerDriver{cli: opts.Client}
	if d.cli == nil {
		d.cli, err = client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDockerUnavailable, err)
		}
		d.ownClient = true
	}
	defer func() {
		if err != nil && d.ownClient {
			_ = d.cli.Close()
		}
	}()
	if _, err := d.cli.Ping(ctx); err != nil {
		return nil, fmt.Errorf("%w at %s: %w (start dockerd, or see scripts/setup-docker.sh)", ErrDockerUnavailable, d.cli.DaemonHost(), err)
	}
	d.cli.NegotiateAPIVersion(ctx)
	if _, err := d.cli.ImageInspect(ctx, opts.Image); err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%w: %s (the backend never pulls: docker pull or docker import it first)", ErrImageMissing, opts.Image)
		}
		return nil, fmt.Errorf("docker image %s: %w", opts.Image, err)
	}
	if err := RemoveStaleContainers(ctx, d.cli); err != nil {
		return nil, err
	}

	d.user = opts.User
	if d.user == "" {
		fi, err := os.Stat(hostRoot)
		if err != nil {
			return nil, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil, fmt.Errorf("workspace %s: %w: cannot read its owner; give User", hostRoot, ErrInvalid)
		}
		if st.Uid == 0 {
			return nil, fmt.Errorf("%w: workspace %s is owned by root; give a user (User \"uid:gid\", agentfs exec --user), \"0:0\" to run as root, or chown the workspace", ErrRootUser, hostRoot)
		}
		d.user = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	}
	d.uid, d.gid, err = parseUser(d.user)
	if err != nil {
		return nil, err
	}

	host, _ := os.Hostname()
	start, err := processStartTime(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("reading this process's start time: %w", err)
	}
	labels := map[string]string{}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	labels[LabelBackend] = "1"
	labels[LabelOwnerHost] = host
	labels[LabelOwnerPID] = strconv.Itoa(os.Getpid())
	labels[LabelOwnerStart] = start
	labels[LabelWorkspace] = hostRoot

	pids := opts.Pids
	switch {
	case pids == 0:
		pids = DefaultPidsLimit
	case pids < 0:
		pids = 0
	}
	network := "none"
	if opts.Network {
		network = "default"
	}
	init := true
	cfg := &container.Config{
		Image:      opts.Image,
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{keepAliveScript},
		User:       d.user,
		WorkingDir: ContainerWorkspace,
		Env:        envList(opts.Env),
		Labels:     labels,
	}
	hostCfg := &container.HostConfig{
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: hostRoot, Target: ContainerWorkspace}},
		NetworkMode: container.NetworkMode(network),
		Init:        &init,
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			Memory:    opts.Memory,
			NanoCPUs:  int64(opts.CPUs * 1e9),
			PidsLimit: &pids,
		},
	}
	suffix, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("agentfs-%d-%s", os.Getpid(), suffix)
	created, err := d.cli.ContainerCreate(ctx, cfg, hostCfg, nil, nil, name)
	if err != nil {
		return nil, fmt.Errorf("creating the container from %s: %w", opts.Image, err)
	}
	d.id = created.ID
	if err := d.cli.ContainerStart(ctx, d.id, container.StartOptions{}); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		rerr := d.cli.ContainerRemove(rctx, d.id, container.RemoveOptions{Force: true})
		return nil, errors.Join(fmt.Errorf("starting container %s: %w", name, err), rerr)
	}
	return d, nil
}

// parseUser parses "uid:gid".
func parseUser(u string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(u, ":")
	if ok {
		uid, err = strconv.Atoi(us)
		if err == nil {
			gid, err = strconv.Atoi(gs)
		}
	}
	if !ok || err != nil || uid < 0 || gid < 0 {
		return 0, 0, fmt.Errorf("docker user %q: %w: want numeric uid:gid", u, ErrInvalid)
	}
	return uid, gid, nil
}

// RemoveStaleContainers removes the containers that docker backends on this
// host left behind: those labelled agentfs.backend=1 and this hostname whose
// owner process (pid and start time) no longer runs. Containers of live
// controllers, and of other hosts sharing the engine, are left alone.
// NewDocker calls it; operators may too.
func RemoveStaleContainers(ctx context.Context, cli *client.Client) error {
	_, err := removeContainers(ctx, cli, nil, ownerAlive)
	return err
}

// RemoveContainers removes (killing what runs in them) the containers of
// docker backends on this host that carry every label of labels (NewDocker's
// DockerOptions.Labels), whether their owner runs or not, and returns how
// many it removed. It connects to the engine from the environment, as
// NewDocker does; an engine that does not answer gives ErrDockerUnavailable.
// A controller that owns labels it alone uses (agentfs serve: its state
// directory) calls it when it starts, to clean up after a predecessor
// killed with kill -9.
func RemoveContainers(ctx context.Context, labels map[string]string) (int, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrDockerUnavailable, err)
	}
	defer func() { _ = cli.Close() }()
	if _, err := cli.Ping(ctx); err != nil {
		return 0, fmt.Errorf("%w at %s: %w", ErrDockerUnavailable, cli.DaemonHost(), err)
	}
	return removeContainers(ctx, cli, labels, func(map[string]string) bool { return false })
}

// removeContainers removes the agentfs containers of this host that carry
// labels and for which keep is false, and returns how many it removed.
func removeContainers(ctx context.Context, cli *client.Client, labels map[string]string, keep func(labels map[string]string) bool) (int, error) {
	host, _ := os.Hostname()
	args := filters.NewArgs(
		filters.Arg("label", LabelBackend+"=1"),
		filters.Arg("label", LabelOwnerHost+"="+host),
	)
	for k, v := range labels {
		args.Add("label", k+"="+v)
	}
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		return 0, fmt.Errorf("listing agentfs containers: %w", err)
	}
	var errs []error
	n := 0
	for _, c := range list {
		if keep(c.Labels) {
			continue
		}
		err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		switch {
		case err == nil:
			n++
		case errdefs.IsConflict(err):
			// A forced removal conflicts only with one in progress: another
			// sweep (a backend starting at the same time) removes it.
		case !errdefs.IsNotFound(err):
			errs = append(errs, fmt.Errorf("removing container %s: %w", c.ID, err))
		}
	}
	return n, errors.Join(errs...)
}

// ownerAlive reports whether the controller named by a container's labels
// still runs.
func ownerAlive(labels map[string]string) bool {
	pid, err := strconv.Atoi(labels[LabelOwnerPID])
	if err != nil || pid <= 0 {
		return false
	}
	start, err := processStartTime(pid)
	return err == nil && start == labels[LabelOwnerStart]
}

func (d *dockerDriver) workdir(rel string) string { return path.Join(ContainerWorkspace, rel) }

func (d *dockerDriver) close(ctx context.Context) error {
	err := d.cli.ContainerRemove(ctx, d.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && errdefs.IsNotFound(err) {
		err = nil
	}
	if err != nil {
		err = fmt.Errorf("removing container %s: %w", d.id, err)
	}
	if d.ownClient {
		err = errors.Join(err, d.cli.Close())
	}
	return err
}

// Timing of the docker backend's waits.
const (
	// execPoll is how often a running exec is inspected, to notice a main
	// process that exited while something else holds its output open.
	execPoll = 500 * time.Millisecond
	// dockerDrainGrace is how long the output stream may stay open after
	// the exec's main process exited or its tree was killed.
	dockerDrainGrace = 2 * time.Second
	// killSettle is how long an exec may still be reported running after
	// its process tree was killed.
	killSettle = 10 * time.Second
)

func (d *dockerDriver) start(ctx context.Context, spec *procSpec) (proc, error) {
	env := envList(spec.env)
	env = append(env, envTag+"="+spec.tag)
	// The engine starts the wrapper at the workspace's mount point, which
	// no rename can swap; the wrapper enters the command's directory and
	// checks where it landed (see wrapperScript).
	cmd := append([]string{"/bin/sh", "-c", wrapperScript, "agentfs", d.workdir(spec.dir), d.workdir(spec.scope), ContainerWorkspace}, spec.argv...)
	created, err := d.cli.ContainerExecCreate(ctx, d.id, container.ExecOptions{
		User:         d.user,
		AttachStdin:  spec.stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
		Env:          env,
		WorkingDir:   ContainerWorkspace,
		Cmd:          cmd,
	})
	if err != nil {
		return nil, fmt.Errorf("docker exec in %s: %w", d.id, err)
	}
	hj, err := d.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("docker exec in %s: %w", d.id, err)
	}
	p := &dockerProc{d: d, execID: created.ID, tag: spec.tag, hj: &hj, streamDone: make(chan struct{}), killed: make(chan struct{})}
	go func() {
		_, err := stdcopy.StdCopy(spec.stdout, spec.stderr, hj.Reader)
		p.streamErr = err
		close(p.streamDone)
	}()
	if spec.stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, spec.stdin)
			_ = hj.CloseWrite()
		}()
	}
	return p, nil
}

// dockerProc is one docker exec.
type dockerProc struct {
	d          *dockerDriver
	execID     string
	tag        string
	hj         *types.HijackedResponse
	streamDone chan struct{} // closed when the output stream ended
	streamErr  error         // set before streamDone is closed
	killOnce   sync.Once
	killed     chan struct{} // closed once a kill has run
}

func (p *dockerProc) wait() (int, error) {
	var errs []error
	poll := time.NewTicker(execPoll)
	defer poll.Stop()
	var drainDeadline <-chan time.Time
	killed := p.killed
stream:
	for {
		select {
		case <-p.streamDone:
			break stream
		case <-killed:
			killed = nil
			drainDeadline = time.After(dockerDrainGrace)
		case <-poll.C:
			if drainDeadline != nil {
				continue
			}
			ins, err := p.d.cli.ContainerExecInspect(context.Background(), p.execID)
			if err == nil && !ins.Running {
				// The main process is gone but the stream is still open:
				// something it left holds the output. Kill it.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := p.kill(ctx); err != nil {
					errs = append(errs, err)
				}
				cancel()
			}
		case <-drainDeadline:
			errs = append(errs, errors.New("output stream still open after the process tree was killed (a process escaped the kill); its output is dropped"))
			p.hj.Close()
			<-p.streamDone
			break stream
		}
	}
	p.hj.Close()
	if p.streamErr != nil && drainDeadline == nil {
		errs = append(errs, fmt.Errorf("reading the output of exec %s: %w", p.execID, p.streamErr))
	}
	code, err := p.exitCode()
	if err != nil {
		errs = append(errs, err)
	}
	return code, errors.Join(errs...)
}

// exitCode inspects the exec until the engine has recorded its end: the
// stream can end a moment before that, or long before when the command
// closed its output and goes on (a timeout or cancel then kills it). Once
// the tree was killed, it waits at most killSettle more.
func (p *dockerProc) exitCode() (int, error) {
	delay := time.Millisecond
	killed := p.killed
	var deadline <-chan time.Time
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ins, err := p.d.cli.ContainerExecInspect(ctx, p.execID)
		cancel()
		if err != nil {
			return -1, fmt.Errorf("inspecting exec %s: %w", p.execID, err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		select {
		case <-time.After(delay):
		case <-killed:
			killed, deadline = nil, time.After(killSettle)
		case <-deadline:
			return -1, fmt.Errorf("exec %s still runs %v after its process tree was killed", p.execID, killSettle)
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// waitStarted returns once the engine has started the exec's process (it
// has a pid), or has ended it, for at most killSettle.
func (p *dockerProc) waitStarted(ctx context.Context) error {
	deadline := time.Now().Add(killSettle)
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		ins, err := p.d.cli.ContainerExecInspect(ctx, p.execID)
		if err != nil {
			return fmt.Errorf("inspecting exec %s: %w", p.execID, err)
		}
		if ins.Pid != 0 || time.Now().After(deadline) {
			return nil
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// kill runs the sweep script in a second exec, as the commands' user (see
// dockerscripts.go), which kills the exec's session and every process
// carrying its tag. It returns once the script has finished.
func (p *dockerProc) kill(ctx context.Context) error {
	defer p.killOnce.Do(func() { close(p.killed) })
	// The engine starts the exec's process a moment after the attach
	// returns: a sweep before that finds nothing, and the command would
	// run on.
	if err := p.waitStarted(ctx); err != nil {
		return err
	}
	created, err := p.d.cli.ContainerExecCreate(ctx, p.d.id, container.ExecOptions{
		User:         p.d.user,
		AttachStdout: true,
		AttachStderr: true,
		Cmd:          []string{"/bin/sh", "-c", killScript, "agentfs-kill", p.tag},
	})
	if err != nil {
		return fmt.Errorf("docker exec (kill) in %s: %w", p.d.id, err)
	}
	hj, err := p.d.cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return fmt.Errorf("docker exec (kill) in %s: %w", p.d.id, err)
	}
	var out strings.Builder
	_, err = stdcopy.StdCopy(&out, &out, hj.Reader)
	hj.Close()
	if err != nil {
		return fmt.Errorf("docker exec (kill) in %s: %w", p.d.id, err)
	}
	ins, err := p.d.cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return fmt.Errorf("docker exec (kill) in %s: %w", p.d.id, err)
	}
	if ins.ExitCode != 0 {
		return fmt.Errorf("killing the process tree in %s: exit %d: %s", p.d.id, ins.ExitCode, strings.TrimSpace(out.String()))
	}
	return nil
}
