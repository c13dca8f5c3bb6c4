package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/fs/control"
)

func init() { subcommands = append(subcommands, newSyncCmd) }

func newSyncCmd() *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "sync MOUNTPOINT",
		Short: "Wait until everything written to a mount is in blob storage",
		Long: `Commit everything written to the mount at MOUNTPOINT before this command
started, and return once it is in blob storage and reachable from a commit.
While the store fails, the mount keeps retrying and sync keeps waiting (up to
--timeout, if given; a sync that gives up names the store and the last error
the mount saw from it, and exits 1). On a terminal, progress is shown on stderr.`,
		Example: `  agentfs sync ./workspace
  agentfs sync --timeout 5m /mnt/ws`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel func()
				ctx, cancel = contextWithTimeout(ctx, timeout)
				defer cancel()
			}
			c, err := findMount(ctx, args[0])
			if err != nil {
				return err
			}
			start := time.Now()
			var line *statusLine
			if f, ok := cmd.ErrOrStderr().(*os.File); ok && isTerminal(f) {
				line = &statusLine{f: f}
			}
			if line != nil {
				err = c.SyncProgress(ctx, 200*time.Millisecond, func(st control.Status) {
					v := st.Volume
					msg := fmt.Sprintf("syncing %s: %d files (up to %s) and %d directories waiting",
						c.MountPoint(), v.DirtyFiles, humanBytes(v.DirtyBytes), v.DirtyDirs)
					if v.LastError != "" {
						msg += "; retrying: " + v.LastError
					}
					line.set(msg)
				})
				line.clear()
			} else {
				err = c.Sync(ctx)
			}
			if err != nil {
				return syncError(c, "sync", err, timeout)
			}
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "synced %s: %s branch %s at commit %d (%s)\n",
				c.MountPoint(), st.Info.URL, st.Volume.Branch, st.Volume.HeadSeq, time.Since(start).Round(time.Millisecond))
			return err
		},
	}
	c.Flags().Var(timeoutFlag{&timeout}, "timeout", "give up after this long (default 0: wait as long as it takes)")
	return c
}

// syncError explains a sync of c's mount (for op: sync, umount) that
// failed with err: which store it was waiting for, the last error the
// mount saw from it, and that the changes stay in the mount's cache (asked
// of the mount anew: the sync's own context may be over).
func syncError(c *control.Client, op string, err error, timeout time.Duration) error {
	mnt := c.MountPoint()
	what := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		what = fmt.Sprintf("not done after --timeout %v", timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, serr := c.Status(ctx)
	if serr != nil {
		return fmt.Errorf("%s %s: %s (and its status is unavailable: %w)", op, mnt, what, serr)
	}
	last := st.Volume.LastError
	if last == "" {
		last = "none yet"
	}
	return fmt.Errorf("%s %s: %s: waiting for the store %s (branch %s), whose last error was: %s. "+
		"Nothing is lost: the changes stay in the mount's cache %s and the mount keeps retrying; "+
		"`agentfs status %s` shows what waits, `agentfs sync %s` waits again",
		op, mnt, what, st.Info.URL, st.Volume.Branch, last, st.Volume.CacheDir, mnt, mnt)
}

// statusLine is a one-line progress display on a terminal.
type statusLine struct {
	f    *os.File
	last int
}

func (l *statusLine) set(s string) {
	pad := l.last - len(s)
	l.last = len(s)
	if pad < 0 {
		pad = 0
	}
	_, _ = fmt.Fprintf(l.f, "\r%s%*s", s, pad, "")
}

func (l *statusLine) clear() {
	if l.last > 0 {
		_, _ = fmt.Fprintf(l.f, "\r%*s\r", l.last, "")
		l.last = 0
	}
}
