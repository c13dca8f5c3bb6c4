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
// own open volume through the control socket.
//
// Why the server and not the URL the mount reports: the mount may have been
// given credentials this process does not have (its environment, a URL
// whose secret query parameters Info.URL leaves out), and only the server
// can checkpoint the live state that `snapshot save`, `snapshot restore`
// and a diff against "live" need. gc and fsck run in the server process
// then: their memory and CPU are the mount's for as long as they run.
type volTarget struct {
	arg   string
	store *blobstore.Store // URL form
	repo  *snapshot.Repo   // URL form
	mount *control.Client  // MOUNTPOINT form
	info  control.Info     // MOUNTPOINT form
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
		return &volTarget{arg: arg, mount: c, info: info}, nil
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
	return &volTarget{arg: arg, store: store, repo: repo}, nil
}

func (t *volTarget) close() {
	if t.repo != nil {
		t.repo.Close()
		_ = t.store.Close()
	}
}

// URL returns the volume's URL for messages (without credentials).
func (t *volTarget) URL() string {
	if t.mount != nil {
		return t.info.URL
	}
	return t.store.URL()
}

// Ref returns what later commands should name the volume by: the mount
// point for a mount, the URL otherwise.
func (t *volTarget) Ref() string {
	if t.mount != nil {
		return t.info.MountPoint
	}
	return t.store.URL()
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

func (t *volTarget) listSnapshots(ctx context.Context, unique bool, prog func(snapshot.Progress)) ([]snapshot.SnapshotInfo, error) {
	if t.mount != nil {
		return t.mount.ListSnapshots(ctx, unique)
	}
	return t.repo.ListSnapshots(ctx, snapshot.ListOptions{Unique: unique, Progress: prog})
}

func (t *volTarget) deleteSnapshot(ctx context.Context, name string) error {
	if t.mount != nil {
		return t.mount.DeleteSnapshot(ctx, name)
	}
	return t.repo.DeleteSnapshot(ctx, name)
}

// diff compares two references; "live" needs a mount.
func (t *volTarget) diff(ctx context.Context, req control.DiffRequest, fn func(histdiff.Change) error) (control.DiffResult, error) {
	if t.mount != nil {
		return t.mount.Diff(ctx, req, fn)
	}
	for _, ref := range []string{req.A, req.B} {
		if ref == control.Live {
			return control.DiffResult{}, fmt.Errorf(`"live" is a mount's current state: name the MOUNTPOINT instead of the URL %s`, t.URL())
		}
	}
	a, err := t.repo.Resolve(ctx, req.A)
	if err != nil {
		return control.DiffResult{}, err
	}
	b, err := t.repo.Resolve(ctx, req.B)
	if err != nil {
		return control.DiffResult{}, err
	}
	res := control.DiffResult{A: a.Commit, B: b.Commit, AName: a.String(), BName: b.String()}
	return res, histdiff.Diff(ctx, t.repo, a.Tree, b.Tree, histdiff.Options{Dir: req.Dir, Patch: req.Patch, MaxBytes: req.MaxBytes}, fn)
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

func (t *volTarget) fork(ctx context.Context, src, newBranch, msg string) (snapshot.Commit, error) {
	if t.mount != nil {
		return t.mount.Fork(ctx, src, newBranch, msg)
	}
	return t.repo.Fork(ctx, src, newBranch, snapshot.ForkOptions{Message: msg})
}

func (t *volTarget) branches(ctx context.Context) ([]snapshot.BranchInfo, error) {
	if t.mount != nil {
		return t.mount.Branches(ctx)
	}
	return t.repo.Branches(ctx, time.Now())
}

func (t *volTarget) deleteBranch(ctx context.Context, name string, force bool) (int, error) {
	if t.mount != nil {
		if name == t.info.Branch {
			return 0, fmt.Errorf("branch %s is the one the mount on %s serves: unmount it first", name, t.info.MountPoint)
		}
		return t.mount.DeleteBranch(ctx, name, force)
	}
	return t.repo.DeleteBranch(ctx, name, snapshot.DeleteBranchOptions{Force: force})
}

func (t *volTarget) gc(ctx context.Context, req control.GCRequest, prog func(snapshot.Progress)) (snapshot.GCReport, error) {
	if t.mount != nil {
		return t.mount.GC(ctx, req, prog)
	}
	opts := req.Options()
	opts.Progress = prog
	return t.repo.GC(ctx, opts)
}

func (t *volTarget) fsck(ctx context.Context, full bool, prog func(snapshot.Progress)) (snapshot.FsckReport, error) {
	if t.mount != nil {
		return t.mount.Fsck(ctx, full, prog)
	}
	return t.repo.Fsck(ctx, snapshot.FsckOptions{Full: full, Progress: prog})
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
