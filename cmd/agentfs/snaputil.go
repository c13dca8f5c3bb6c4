package main

// Helpers shared by the history commands (snapshot, fork, branch, gc,
// fsck): opening the volume a command names, progress lines, sizes and
// durations.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentfs/agentfs/bench"
	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

// volTarget is the volume a history command works on, named by its first
// argument. Today that argument is a store URL; a MOUNTPOINT form (which
// reaches the running mount through its control channel, so that the
// mount flushes first and `live` can be diffed) is planned, and its
// commands will take the same argument.
type volTarget struct {
	arg   string
	store *blobstore.Store
	repo  *snapshot.Repo
}

// isStoreURL tells a store URL from a path.
func isStoreURL(arg string) bool { return strings.Contains(arg, "://") }

// openTarget opens the volume arg names. The caller calls close.
func openTarget(ctx context.Context, arg string) (*volTarget, error) {
	if !isStoreURL(arg) {
		return nil, fmt.Errorf("%q is not a store URL (file:///path, s3://bucket/prefix, gs://bucket/prefix): "+
			"this command does not work on a mount point yet; pass the volume's URL instead (`agentfs status %s` shows it)", arg, arg)
	}
	store, err := blobstore.Open(ctx, arg, blobstore.Options{})
	if err != nil {
		return nil, err
	}
	repo, err := snapshot.Open(ctx, store)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	return &volTarget{arg: arg, store: store, repo: repo}, nil
}

func (t *volTarget) close() {
	t.repo.Close()
	_ = t.store.Close()
}

// URL returns the volume's URL for messages (without credentials).
func (t *volTarget) URL() string { return t.store.URL() }

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
func fmtSize(n int64) string {
	if n < 1024 && n > -1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for (v >= 1024 || v <= -1024) && i < 4 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

// parseAge parses a duration: Go syntax (90m, 36h) plus d (days) and w
// (weeks), e.g. 7d, 2w, 1d12h.
func parseAge(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	var total time.Duration
	for _, unit := range []struct {
		suffix string
		d      time.Duration
	}{{"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour}} {
		if i := strings.Index(rest, unit.suffix); i > 0 {
			n, err := strconv.ParseFloat(rest[:i], 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("invalid duration %q (examples: 12h, 7d, 2w)", s)
			}
			total += time.Duration(n * float64(unit.d))
			rest = rest[i+1:]
		}
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("invalid duration %q (examples: 12h, 7d, 2w)", s)
		}
		total += d
	}
	if total <= 0 {
		return 0, fmt.Errorf("invalid duration %q: must be positive", s)
	}
	return total, nil
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
