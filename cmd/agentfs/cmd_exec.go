package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/exec"
)

func init() { subcommands = append(subcommands, newExecCmd) }

// Exit statuses of `agentfs exec` itself, as coreutils timeout(1) uses them.
const (
	exitTimedOut    = 124 // the command timed out
	exitExecFailed  = 125 // agentfs could not run the command (or its sync barrier failed)
	exitInterrupted = 130 // agentfs was interrupted (SIGINT/SIGTERM); the command was killed
)

// execMountSeams recognises an agentfs mount at dir and returns its sync
// barrier and change tracker, or (nil, nil, nil) for a plain directory. It
// is nil until the mount's command file sets it (in its init); while nil,
// every DIR is treated as a plain directory.
var execMountSeams func(ctx context.Context, dir string) (exec.Syncer, exec.ChangeTracker, error)

type execFlags struct {
	backendFlags
	timeout     time.Duration
	env         []string
	cwd         string
	outputLimit int64
	deny        bool
	changes     bool
}

// backendFlags are the flags that choose an exec backend and its docker
// options (agentfs exec, run and serve).
type backendFlags struct {
	backend string
	image   string
	user    string
	network bool
	memory  string
	cpus    float64
	pids    int64
}

// dockerFlagNames are the flags of the docker backend's options.
var dockerFlagNames = []string{"image", "user", "network", "memory", "cpus", "pids"}

// addBackendFlags registers the backend flags; what says what they choose
// ("the command's", "the workspaces' default").
func addBackendFlags(c *cobra.Command, f *backendFlags, what string) {
	fl := c.Flags()
	fl.StringVar(&f.backend, "backend", exec.TypeLocal, "where to run "+what+" commands: local (this host) or docker (a container)")
	fl.StringVar(&f.image, "image", "", "image for --backend docker (required there; never pulled)")
	fl.StringVar(&f.user, "user", "", "uid:gid to run as with --backend docker (default: the owner of the workspace directory; root needs 0:0)")
	fl.BoolVar(&f.network, "network", false, "give the docker container a network (default: none)")
	fl.StringVar(&f.memory, "memory", "", "memory limit of the docker container, e.g. 512m, 2g (default: none)")
	fl.Float64Var(&f.cpus, "cpus", 0, "CPU limit of the docker container, e.g. 1.5 (default: none)")
	fl.Int64Var(&f.pids, "pids", 0, fmt.Sprintf("process limit of the docker container (default %d)", exec.DefaultPidsLimit))
}

// spec returns the backend the flags choose, unvalidated (exec.Spec.New
// and the serve manager validate it).
func (f *backendFlags) spec(cmd *cobra.Command) (exec.Spec, error) {
	if f.cpus < 0 || f.pids < 0 {
		return exec.Spec{}, usageErrorf(cmd, "--cpus and --pids cannot be negative (0 means no limit, or the default)")
	}
	s := exec.Spec{Type: f.backend, Image: f.image, User: f.user, Network: f.network, CPUs: f.cpus, Pids: f.pids}
	switch f.backend {
	case exec.TypeLocal, exec.TypeDocker:
	default:
		return s, usageErrorf(cmd, "--backend %q: want local or docker", f.backend)
	}
	if f.memory != "" {
		var err error
		if s.Memory, err = units.RAMInBytes(f.memory); err != nil {
			return s, usageErrorf(cmd, "--memory %q: %w", f.memory, err)
		}
	}
	return s, nil
}

func newExecCmd() *cobra.Command {
	var f execFlags
	c := &cobra.Command{
		Use:   "exec [flags] DIR -- CMD [ARGS...]",
		Short: "Run a command in a workspace directory, on the host or in a Docker container",
		Long: `Run CMD with its working directory in the workspace DIR and exit with its exit
status. Its stdout and stderr are passed through as they come.

With --backend local (the default) CMD runs on this host as the current user,
with agentfs's whole environment plus --env, but for agentfs's own secrets
(AGENTFS_KEY, AGENTFS_PASSPHRASE, AGENTFS_NEW_KEY, AGENTFS_NEW_PASSPHRASE,
AGENTFS_TOKEN), which only --env passes.
With --backend docker it runs in a new container of --image with DIR
bind-mounted at /workspace, as --user (default: the owner of DIR; a DIR owned
by root needs --user 0:0 to run as root), with no network unless --network,
with the image's environment plus --env, and the container is removed
afterwards.

CMD is run as given, without a shell: use -- sh -c '...' for one. Standard
input is passed to CMD (</dev/null to give it none). When CMD
returns, everything it left running (background children included) is
killed. On timeout the whole process tree is killed and agentfs exec exits
with 124; when agentfs itself cannot run CMD it exits with 125; when it is
interrupted it kills CMD and exits with 130. Bad usage (an unknown flag, a bad
flag value) exits with 125 too, as for every agentfs command.

When DIR is an agentfs mount, agentfs exec waits until everything CMD wrote
is in blob storage (a sync) before it exits.`,
		Example: `  agentfs exec ./ws -- make test
  agentfs exec --timeout 10m --env CI=1 --cwd app ./ws -- sh -c 'npm ci && npm test'
  agentfs exec --backend docker --image python:3.12-slim --memory 2g ./ws -- python -m pytest
  agentfs exec --changes ./ws -- sh -c 'echo hi > new.txt'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageErrorf(cmd, "usage: agentfs exec [flags] DIR -- CMD [ARGS...]")
			}
			return runExec(cmd, &f, args[0], args[1:])
		},
	}
	addExecFlags(c, &f)
	return c
}

// addExecFlags registers the options of `agentfs exec` (shared by
// `agentfs run`).
func addExecFlags(c *cobra.Command, f *execFlags) {
	addBackendFlags(c, &f.backendFlags, "the")
	fl := c.Flags()
	fl.Var(timeoutFlag{&f.timeout}, "timeout", "kill the command's process tree after this long and exit 124 (0: no timeout)")
	fl.StringArrayVar(&f.env, "env", nil, "set K=V in the command's environment (repeatable)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory, relative to DIR (must stay inside it)")
	fl.Int64Var(&f.outputLimit, "output-limit", 0, "pass at most N bytes of output (stdout and stderr together), drop the rest (0: no limit)")
	fl.BoolVar(&f.deny, "deny-dangerous", false, "refuse known-dangerous commands (rm -rf /, curl | sh, ...); a safety net, not a sandbox")
	fl.BoolVar(&f.changes, "changes", false, "print the paths the command created (A), modified (M) and deleted (D) to stderr")
}

// execFail prints why agentfs could not run the command and returns the
// exit status for it.
func execFail(cmd *cobra.Command, err error) error {
	_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "agentfs exec:", err)
	return &exitError{exitExecFailed}
}

func runExec(cmd *cobra.Command, f *execFlags, dir string, argv []string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if f.outputLimit < 0 {
		return usageErrorf(cmd, "--output-limit cannot be negative (0 means no limit)")
	}
	spec, err := f.spec(cmd)
	if err != nil {
		return err
	}
	if spec.Docker() && spec.Image == "" {
		return usageErrorf(cmd, "--backend docker needs --image")
	}
	if !spec.Docker() {
		for _, name := range dockerFlagNames {
			if cmd.Flags().Changed(name) {
				return usageErrorf(cmd, "--%s needs --backend docker", name)
			}
		}
	}
	// The command is the user's own: it gets the user's environment, as
	// from a shell (a docker command gets the image's).
	opts := exec.Options{ChangeTracker: exec.NoChanges{}, InheritEnv: true}
	if f.changes {
		opts.ChangeTracker = nil // the default: a walk of DIR
	}
	if f.deny {
		opts.Policy = exec.DenyDangerous()
	}
	if execMountSeams != nil {
		s, t, err := execMountSeams(ctx, dir)
		if err != nil {
			return execFail(cmd, err)
		}
		opts.Syncer = s
		if t != nil && f.changes {
			opts.ChangeTracker = t
		}
	}
	env := map[string]string{}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErrorf(cmd, "--env %q: want K=V", kv)
		}
		env[k] = v
	}

	b, err := spec.New(ctx, dir, opts, nil)
	if err != nil {
		return execFail(cmd, err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			_, _ = fmt.Fprintln(cmd.ErrOrStderr(), "agentfs exec:", err)
		}
	}()

	limit := f.outputLimit
	if limit == 0 {
		limit = -1
	}
	req := exec.Request{
		Argv:          argv,
		Env:           env,
		Cwd:           f.cwd,
		Timeout:       f.timeout,
		OutputLimit:   limit,
		Stdout:        cmd.OutOrStdout(),
		Stderr:        cmd.ErrOrStderr(),
		DiscardOutput: true,
	}
	if f.timeout <= 0 {
		req.Timeout = -1
	}
	req.Stdin = cmd.InOrStdin()
	res, err := b.Exec(ctx, req)
	if res == nil {
		return execFail(cmd, err)
	}
	stderr := cmd.ErrOrStderr()
	if res.Truncated {
		_, _ = fmt.Fprintf(stderr, "agentfs exec: output truncated at %d bytes\n", f.outputLimit)
	}
	if f.changes && res.Changes != nil {
		printChanges(stderr, res.Changes)
	}
	switch {
	case errors.Is(err, context.Canceled):
		_, _ = fmt.Fprintln(stderr, "agentfs exec: interrupted; the command was killed")
		return &exitError{exitInterrupted}
	case err != nil:
		return execFail(cmd, err)
	case res.TimedOut:
		_, _ = fmt.Fprintf(stderr, "agentfs exec: timed out after %v; the command was killed\n", f.timeout)
		return &exitError{exitTimedOut}
	case res.ExitCode != 0:
		return &exitError{res.ExitCode}
	}
	return nil
}

// printChanges writes one "A|M|D path" line per change.
func printChanges(w io.Writer, c *exec.Changes) {
	for _, l := range []struct {
		tag   string
		paths []string
	}{{"A", c.Created}, {"M", c.Modified}, {"D", c.Deleted}} {
		for _, p := range l.paths {
			_, _ = fmt.Fprintf(w, "%s %s\n", l.tag, p)
		}
	}
}
