package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newRunCmd) }

// runUnmountTimeout bounds the sync and unmount after the command.
const runUnmountTimeout = 10 * time.Minute

func newRunCmd() *cobra.Command {
	var f execFlags
	var branch, cacheDir string
	c := &cobra.Command{
		Use:   "run [flags] URL -- CMD [ARGS...]",
		Short: "Mount a volume, run one command in it, sync and unmount",
		Long: `Mount the volume at URL (branch --branch) on a temporary mount point, run CMD
there as ` + "`agentfs exec`" + ` does (same flags: --backend local|docker, --image,
--timeout, --env, --cwd, ...), sync, unmount, and exit with CMD's exit status
(124 on timeout, 125 when agentfs could not run it or could not sync and
unmount, 130 when interrupted).

The mount is served by a separate server process (` + "`agentfs mount -d`" + `), never
by the process that runs CMD. When agentfs run exits 0, or with CMD's own
status, everything CMD wrote is in the store and reachable from the branch's
head. The mount's cache directory is the one ` + "`agentfs mount`" + ` would use for URL
and branch (--cache-dir to choose), so repeated runs start warm.`,
		Example: `  agentfs run file:///srv/ws -- make test
  agentfs run --branch attempt-2 s3://bucket/ws -- sh -c 'pytest -x > report.txt'
  agentfs run --backend docker --image python:3.12-slim file:///srv/ws -- python -m pytest`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return usageErrorf(cmd, "usage: agentfs run [flags] URL -- CMD [ARGS...]")
			}
			return runRun(cmd, &f, branch, cacheDir, args[0], args[1:])
		},
	}
	addExecFlags(c, &f)
	c.Flags().StringVar(&branch, "branch", snapshot.DefaultBranch, "branch to mount")
	c.Flags().StringVar(&cacheDir, "cache-dir", "", "the mount's local cache `DIR` (default: as agentfs mount)")
	return c
}

func runRun(cmd *cobra.Command, f *execFlags, branch, cacheDir, url string, argv []string) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	stderr := cmd.ErrOrStderr()
	if !isStoreURL(url) {
		return usageErrorf(cmd, "%q is not a store URL (file:///path, s3://bucket/prefix, gs://bucket/prefix); for a directory that is already mounted use `agentfs exec`", url)
	}
	m, err := mountTemp(ctx, url, branch, cacheDir, stderr)
	if err != nil {
		return execFail(cmd, err)
	}
	runErr := runExec(cmd, f, m.mnt, argv)
	// Unmount whatever happened to the command, even after an interrupt.
	if err := m.close(ctx, stderr, "agentfs run"); err != nil {
		var ee *exitError
		if runErr == nil || !errors.As(runErr, &ee) || ee.code == 0 {
			return &exitError{exitExecFailed}
		}
	}
	return runErr
}

// tempMount is a volume mounted on a temporary mount point by a separate
// server process (as `agentfs mount -d` does), for commands that this
// process runs in it: a process must never both serve a mount and fork
// into it.
type tempMount struct {
	mnt      string
	cacheDir string
	client   *control.Client
}

// mountTemp mounts branch of the volume at url on a new temporary mount
// point, with the cache directory `agentfs mount` would use for url and
// branch ("" for cacheDir), and returns once the mount is ready.
func mountTemp(ctx context.Context, url, branch, cacheDir string, stderr io.Writer) (*tempMount, error) {
	mnt, err := os.MkdirTemp("", "agentfs-run-")
	if err != nil {
		return nil, fmt.Errorf("temporary mount point: %w", err)
	}
	mf := mountFlags{cacheDir: cacheDir, branch: branch, branchSet: true, checkpointInterval: 5 * time.Second}
	t, err := resolveMount(ctx, url, mnt, mf, stderr)
	if err == nil {
		if err = startBackground(ctx, t, mf, stderr); err != nil {
			err = fmt.Errorf("mount %s: %w", blobDisplay(url), err)
		}
	}
	if err != nil {
		_ = os.Remove(mnt)
		return nil, err
	}
	c, err := control.Find(ctx, t.mnt)
	if err != nil {
		_ = os.Remove(mnt)
		return nil, err
	}
	return &tempMount{mnt: t.mnt, cacheDir: t.cacheDir, client: c}, nil
}

// close syncs and unmounts the mount (lazily when it is still in use) and
// removes the mount point; it runs even when ctx was cancelled (an
// interrupt), bounded by runUnmountTimeout. A failure is printed, prefixed
// with who, and returned.
func (m *tempMount) close(ctx context.Context, stderr io.Writer, who string) error {
	defer func() { _ = os.Remove(m.mnt) }()
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runUnmountTimeout)
	defer cancel()
	err := m.client.Unmount(uctx, false)
	if errors.Is(err, control.ErrBusy) {
		_, _ = fmt.Fprintf(stderr, "%s: %s is still in use; detaching it lazily\n", who, m.mnt)
		err = m.client.Unmount(uctx, true)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: unmount %s: %v (the cache %s keeps every change; mounting again uploads it)\n", who, m.mnt, err, m.cacheDir)
	}
	return err
}
