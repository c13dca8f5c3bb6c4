package main

// Helpers shared by the history commands (snapshot, fork, branch, gc,
// fsck): opening the volume a command names, progress lines, sizes and
// durations.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/bench"
	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/histdiff"
	"github.com/agentfs/agentfs/snapshot"
)

// volTarget is the volume a history command works on, named by its first
// argument: a store URL, which the command opens itself, or a MOUNTPOINT
// (any path inside an agentfs mount), whose server does the work with its
// own open volume through the control socket. Either way the command makes
// its calls through c, a control client: of the mount's server, or of one
// that serves the opened volume in this process (control.ServeRepo), so
// that one handler answers a call on both.
//
// Why the server and not the URL the mount reports: the mount may have been
// given credentials this process does not have (its environment, a URL
// whose secret query parameters Info.URL leaves out), and only the server
// can checkpoint the live state that `snapshot save`, `snapshot restore`
// and a diff against "live" need. gc and fsck run in the server process
// then: their memory and CPU are the mount's for as long as they run.
type volTarget struct {
	arg   string
	c     *control.Client  // the mount's server, or the in-process one
	info  control.Info     // the server's
	mount *control.Client  // MOUNTPOINT form (c), else nil
	store *blobstore.Store // URL form
	repo  *snapshot.Repo   // URL form
	stop  func()           // URL form: stops the in-process server
}

// isStoreURL tells a store URL from a path.
func isStoreURL(arg string) bool { return strings.Contains(arg, "://") }

// openTarget opens the volume arg names, with keys for an encrypted one
// (a mount has its own). The caller calls close.
func openTarget(ctx context.Context, arg string, keys snapshot.KeySource) (*volTarget, error) {
	if !isStoreURL(arg) {
		c, err := findMount(ctx, arg)
		if errors.Is(err, control.ErrNotMount) {
			return nil, fmt.Errorf("%q is neither a store URL (file:///path, s3://bucket/prefix, gs://bucket/prefix) nor inside an agentfs mount: %w", arg, err)
		}
		if err != nil {
			return nil, err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("agentfs mount on %s: %w", c.MountPoint(), err)
		}
		return &volTarget{arg: arg, c: c, mount: c, info: info}, nil
	}
	store, err := blobstore.Open(ctx, arg, blobstore.Options{})
	if err != nil {
		return nil, err
	}
	repo, err := snapshot.OpenWithKey(ctx, store, keys)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	c, stop := control.ServeRepo(repo, nil)
	return &volTarget{arg: arg, c: c, info: control.Info{URL: store.URL()}, store: store, repo: repo, stop: stop}, nil
}

func (t *volTarget) close() {
	if t.repo != nil {
		t.stop()
		t.repo.Close()
		_ = t.store.Close()
	}
}

// URL returns the volume's URL for messages (without credentials).
func (t *volTarget) URL() string { return t.info.URL }

// Ref returns what later commands should name the volume by: the mount
// point for a mount, the URL otherwise.
func (t *volTarget) Ref() string {
	if t.mount != nil {
		return t.info.MountPoint
	}
	return t.info.URL
}

// saveSnapshot saves a snapshot: on a mount, of everything written to it
// before the call (branch must be "" or the mount's); on a URL, of
// branch's head.
func (t *volTarget) saveSnapshot(ctx context.Context, name, msg, branch string) (snapshot.Snapshot, error) {
	if t.mount != nil {
		if branch != "" && branch != t.info.Branch {
			return snapshot.Snapshot{}, fmt.Errorf("--branch %s: the mount on %s serves branch %s, and a snapshot of a mount is of its live state; "+
				"name the volume's URL (%s) to save the head of another branch", branch, t.info.MountPoint, t.info.Branch, t.info.URL)
		}
		return t.mount.SaveSnapshot(ctx, name, msg)
	}
	if branch == "" {
		branch = snapshot.DefaultBranch
	}
	return t.repo.SaveSnapshot(ctx, name, snapshot.CommitID{Branch: branch}, snapshot.SaveOptions{Message: msg})
}

// restore restores branch (a mount: itself, live) to ref.
func (t *volTarget) restore(ctx context.Context, ref, branch, msg string) (snapshot.RestoreResult, error) {
	if t.mount != nil {
		if branch != "" && branch != t.info.Branch {
			return snapshot.RestoreResult{}, fmt.Errorf("--branch %s: the mount on %s serves branch %s and restores only itself; "+
				"name the volume's URL (%s) to restore another branch", branch, t.info.MountPoint, t.info.Branch, t.info.URL)
		}
		return t.mount.Restore(ctx, ref, msg)
	}
	if branch == "" {
		branch = snapshot.DefaultBranch
	}
	return t.repo.Restore(ctx, ref, branch, snapshot.RestoreOptions{Message: msg})
}

// deleteBranch removes a branch; a mount's own cannot be.
func (t *volTarget) deleteBranch(ctx context.Context, name string, force bool) (int, error) {
	if t.mount != nil && name == t.info.Branch {
		return 0, fmt.Errorf("branch %s is the one the mount on %s serves: unmount it first", name, t.info.MountPoint)
	}
	return t.c.DeleteBranch(ctx, name, force)
}

// progressLine returns a progress callback drawing on stderr when stderr is
// a terminal (nil otherwise), and a function that erases the line.
func progressLine(cmd *cobra.Command, what string) (func(snapshot.Progress), func()) {
	f, ok := cmd.ErrOrStderr().(*os.File)
	if !ok || !bench.IsTerminal(f) {
		return nil, func() {}
	}
	line := bench.NewProgressLine(f)
	var last time.Time
	return func(p snapshot.Progress) {
			if time.Since(last) < 100*time.Millisecond {
				return
			}
			last = time.Now()
			s := fmt.Sprintf("%s: %s %d", what, p.Phase, p.Done)
			if p.Total > 0 {
				s += fmt.Sprintf("/%d", p.Total)
			}
			if p.Items > 0 {
				s += fmt.Sprintf(" (%d)", p.Items)
			}
			line.Set(s)
		}, func() {
			line.Clear()
		}
}

// fmtSize formats a byte count with a binary unit.
func fmtSize(n int64) string { return histdiff.FmtSize(n) }

// parseAge parses a duration: Go syntax (90m, 36h) plus d (days) and w
// (weeks), e.g. 7d, 2w, 1d12h.
func parseAge(s string) (time.Duration, error) {
	d, err := snapshot.ParseAge(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("invalid duration %q: must be positive", s)
	}
	return d, nil
}

// ageFlag is a pflag.Value for parseAge durations.
type ageFlag struct{ p *time.Duration }

func (f ageFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return ""
	}
	return f.p.String()
}

func (f ageFlag) Set(s string) error {
	d, err := parseAge(s)
	if err != nil {
		return err
	}
	*f.p = d
	return nil
}

func (ageFlag) Type() string { return "duration" }

// fmtTime formats a time for tables: local time, to the second.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// errWriter prints to w and keeps the first write error; later prints are
// dropped. Err returns that error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (e *errWriter) println(args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintln(e.w, args...)
	}
}

// Err returns the first write error.
func (e *errWriter) Err() error { return e.err }
