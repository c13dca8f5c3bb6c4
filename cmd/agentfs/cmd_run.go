package main

import (
	"context"
	"errors"
	"fmt"
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
				return execFail(cmd, errors.New("usage: agentfs run [flags] URL -- CMD [ARGS...]"))
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
		return execFail(cmd, fmt.Errorf("%q is not a store URL (file:///path, s3://bucket/prefix, gs://bucket/prefix); for a directory that is already mounted use `agentfs exec`", url))
	}
	mnt, err := os.MkdirTemp("", "agentfs-run-")
	if err != nil {
		return execFail(cmd, fmt.Errorf("temporary mount point: %w", err))
	}
	defer func() { _ = os.Remove(mnt) }()
	mf := mountFlags{cacheDir: cacheDir, branch: branch, checkpointInterval: 5 * time.Second}
	t, err := resolveMount(ctx, url, mnt, mf, stderr)
	if err != nil {
		return execFail(cmd, err)
	}
	if err := startBackground(ctx, t, mf, stderr); err != nil {
		return execFail(cmd, fmt.Errorf("mount %s: %w", blobDisplay(url), err))
	}
	c, err := control.Find(ctx, t.mnt)
	if err != nil {
		return execFail(cmd, err)
	}

	runErr := runExec(cmd, f, t.mnt, argv)

	// Unmount whatever happened to the command, even after an interrupt.
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), runUnmountTimeout)
	defer cancel()
	err = c.Unmount(uctx, false)
	if errors.Is(err, control.ErrBusy) {
		_, _ = fmt.Fprintf(stderr, "agentfs run: %s is still in use; detaching it lazily\n", t.mnt)
		err = c.Unmount(uctx, true)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "agentfs run: unmount %s: %v (the cache %s keeps every change; mounting again uploads it)\n", t.mnt, err, t.cacheDir)
		var ee *exitError
		if runErr == nil || !errors.As(runErr, &ee) || ee.code == 0 {
			return &exitError{exitExecFailed}
		}
		return runErr
	}
	return runErr
}
