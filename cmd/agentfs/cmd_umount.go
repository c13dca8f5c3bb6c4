package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
)

func init() { subcommands = append(subcommands, newUmountCmd) }

func newUmountCmd() *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:     "umount MOUNTPOINT",
		Aliases: []string{"unmount"},
		Short:   "Sync a mount to blob storage and unmount it",
		Long: `Sync the mount at MOUNTPOINT (everything written is committed to blob
storage), unmount it and stop its server. It fails, leaving the mount as it
was, if a process still has a file open or its working directory inside it;
the error lists those processes.

--force detaches a busy mount at once: it disappears from the directory tree,
its server keeps serving the processes that still use it and exits after the
last one is gone. A stale mount whose server died is detached either way (its
cache directory keeps every change; mounting it again uploads them).`,
		Example: `  agentfs umount ./workspace
  agentfs umount --force /mnt/ws`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := control.Find(ctx, args[0])
			if errors.Is(err, control.ErrNotRunning) {
				abs, _ := filepath.Abs(args[0])
				if real, rerr := filepath.EvalSymlinks(abs); rerr == nil {
					abs = real
				}
				if mi, merr := afs.MountOf(abs); merr == nil {
					abs = mi.MountPoint
				}
				if uerr := afs.Unmount(abs, force); uerr != nil {
					return fmt.Errorf("%w; detaching it failed: %w", err, uerr)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "detached the stale mount on %s (its server was gone; mount it again to upload what its cache holds)\n", abs)
				return err
			}
			if err != nil {
				return err
			}
			mnt := c.MountPoint()
			if err := c.Unmount(ctx, force); err != nil {
				if errors.Is(err, control.ErrBusy) {
					return fmt.Errorf("%s is busy%s: close what uses it, or use --force to detach it now (nothing was unmounted)", mnt, busyUsers(mnt))
				}
				return fmt.Errorf("unmount %s: %w", mnt, err)
			}
			msg := "synced and unmounted " + mnt
			if force {
				msg = "synced and detached " + mnt + " (its server exits when the last process using it is done)"
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), msg)
			return err
		},
	}
	c.Flags().BoolVarP(&force, "force", "f", false, "detach the mount even if it is busy (lazy unmount)")
	return c
}

// busyUsers names the processes that have their working directory, root or
// an open file inside mnt, from /proc (best effort, for the error message).
func busyUsers(mnt string) string {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return ""
	}
	var users []string
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if procUses(filepath.Join("/proc", p.Name()), mnt) {
			name, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm"))
			users = append(users, fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(string(name))))
		}
		if len(users) >= 10 {
			users = append(users, "...")
			break
		}
	}
	if len(users) == 0 {
		return ""
	}
	slices.Sort(users[:min(len(users), 10)])
	return ": used by pid " + strings.Join(users, ", ")
}

// procUses reports whether the process at /proc/PID uses a path in mnt.
func procUses(proc, mnt string) bool {
	for _, l := range []string{"cwd", "root"} {
		if t, err := os.Readlink(filepath.Join(proc, l)); err == nil && within(t, mnt) {
			return true
		}
	}
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if t, err := os.Readlink(filepath.Join(proc, "fd", fd.Name())); err == nil && within(t, mnt) {
			return true
		}
	}
	return false
}
