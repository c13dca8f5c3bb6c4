package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/blobstore"
	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/mountd"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/overlay"
	"github.com/agentfs/agentfs/snapshot"
)

func init() { subcommands = append(subcommands, newUmountCmd) }

func newUmountCmd() *cobra.Command {
	var force bool
	var timeout time.Duration
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
last one is gone. Its sync waits 10s at most: when that is not enough (the
store is unreachable), the mount is detached all the same and umount fails
(exit status 1), saying that the changes are only in the cache directory.

While the store fails, umount keeps waiting for the sync (up to --timeout, if
given: then it fails, names the store and the last error the mount saw from
it, and leaves the mount as it was).

MOUNTPOINT must be the mount point itself, not a path inside the mount.

A stale mount, whose server died, is detached, but umount then fails (exit
status 1): nothing could be uploaded, and its cache directory may hold
changes that are not in the store. Mounting the volume again with that cache
directory uploads them (the message names the command); do not delete the
cache directory before.`,
		Example: `  agentfs umount ./workspace
  agentfs umount --timeout 5m ./workspace
  agentfs umount --force /mnt/ws`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := findMount(ctx, args[0])
			if errors.Is(err, control.ErrNotRunning) {
				return umountStale(args[0], err, force)
			}
			if err != nil {
				return err
			}
			mnt := c.MountPoint()
			if err := isMountPoint(args[0], mnt); err != nil {
				return err
			}
			uctx := ctx
			if timeout > 0 {
				var cancel context.CancelFunc
				uctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			if err := c.Unmount(uctx, force); err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					if on, _ := afs.IsMountPoint(mnt); on {
						return fmt.Errorf("%w (nothing was unmounted)", syncError(c, "umount", err, timeout))
					}
					return syncError(c, "umount", err, timeout)
				}
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
	c.Flags().Var(timeoutFlag{&timeout}, "timeout", "give up waiting for the sync after this long, leaving the mount as it was (default 0: wait as long as it takes)")
	return c
}

// isMountPoint checks that the path a user gave is mnt, the mount point of
// the mount that holds it, and not a path inside the mount.
func isMountPoint(path, mnt string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if abs != mnt {
		return fmt.Errorf("%s is inside the agentfs mount on %s, not its mount point; to unmount that mount: agentfs umount %s (nothing was unmounted)", path, mnt, mnt)
	}
	return nil
}

// umountStale detaches the stale agentfs mount at path (notRunning says
// why it is stale) and fails: its server died before it could upload, so
// the mount's cache directory may hold changes the store has not, and only
// a new mount with that cache directory uploads them.
func umountStale(path string, notRunning error, force bool) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	mi, err := afs.MountOf(abs)
	if err != nil {
		return fmt.Errorf("%w; %w", notRunning, err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	if abs != mi.MountPoint {
		return isMountPoint(path, mi.MountPoint)
	}
	if err := afs.Unmount(mi.MountPoint, force); err != nil {
		return fmt.Errorf("%w; detaching it failed: %w", notRunning, err)
	}
	cacheDir := strings.TrimPrefix(mi.Source, control.SourcePrefix)
	return fmt.Errorf("detached the stale mount on %s, but its server had died, so nothing was uploaded: "+
		"its cache directory %s may hold changes that are not in the store yet.\n"+
		"To upload them, mount the volume again with that cache directory, then unmount it:\n  %s\n  agentfs umount %s\n"+
		"Until then, do not delete %s",
		mi.MountPoint, cacheDir, remountCommand(cacheDir, mi.MountPoint), mi.MountPoint, cacheDir)
}

// remountCommand is the `agentfs mount` command that mounts again what the
// cache directory dir cached, on mnt (from dir's info.txt, which names the
// store without its query or credentials: the command says so).
func remountCommand(dir, mnt string) string {
	store, branch := mountd.ReadCacheInfo(dir)
	cmd := "agentfs mount -d --cache-dir " + dir
	if name, ok := strings.CutPrefix(branch, overlay.BranchName("")); ok {
		cmd += " --virtual --name " + name
	} else if branch != "" && branch != snapshot.DefaultBranch {
		cmd += " --branch " + branch
	}
	def, _ := mountproc.DefaultStoreURL()
	switch {
	case store == "":
		cmd += " STORE_URL"
	case store == blobstore.DisplayURL(def):
		// the default store: no URL
	case strings.HasPrefix(store, "file://"):
		cmd += " " + store
	default:
		cmd += " " + store + "?... (the URL you mounted it with)"
	}
	return cmd + " " + mnt
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
