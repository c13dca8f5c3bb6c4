package main

// Helpers shared by the mount lifecycle commands (init, mount, sync, status,
// umount): where the embedded default store and the cache directories
// live, opening a volume, and small formatting helpers.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/fs/control"
)

// mountCacheRoot is where cache directories are made when --cache-dir is
// not given: $XDG_CACHE_HOME/agentfs/mounts, or ~/.cache/agentfs/mounts.
func mountCacheRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache directory: %w (set XDG_CACHE_HOME or HOME, or pass --cache-dir)", err)
	}
	return filepath.Join(base, "agentfs", "mounts"), nil
}

// defaultCacheDir derives the cache directory of a volume and branch: one
// per (store URL, branch), so remounting finds its cache again. The name
// is a hash (URLs hold characters paths should not); info.txt inside says
// what it belongs to.
func defaultCacheDir(url, branch string) (string, error) {
	root, err := mountCacheRoot()
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(blobstore.DisplayURL(url) + "\x00" + branch))
	return filepath.Join(root, hex.EncodeToString(h[:8])), nil
}

// findMount returns a client for the agentfs mount that holds path (its
// mount point or a path inside it), as control.Find does, except that a
// path that does not exist is said to be so (control.Find would call it
// no agentfs mount).
func findMount(ctx context.Context, path string) (*control.Client, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such path: %w", path, err)
	}
	return control.Find(ctx, path)
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// parseByteSize parses a byte count: a number with an optional unit K, M,
// G, T (powers of 1024; KiB/KB/k spellings accepted).
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	mult := int64(1)
	for _, sfx := range []struct {
		s string
		m int64
	}{{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10},
		{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(u, sfx.s) {
			u, mult = strings.TrimSpace(strings.TrimSuffix(u, sfx.s)), sfx.m
			break
		}
	}
	n, err := strconv.ParseFloat(u, 64)
	if err != nil || n < 0 || n*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("invalid size %q (examples: 512M, 10G, 1T)", s)
	}
	return int64(n * float64(mult)), nil
}

// byteSizeFlag is a pflag.Value for a positive byte count given as
// parseByteSize reads it; 0 is refused (the flag's default is what not
// giving it means).
type byteSizeFlag struct{ p *int64 }

func (f byteSizeFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return ""
	}
	return humanBytes(*f.p)
}

func (f byteSizeFlag) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	if n <= 0 {
		return fmt.Errorf("size %q: must be more than 0 (leave the flag out for its default)", s)
	}
	*f.p = n
	return nil
}

func (byteSizeFlag) Type() string { return "size" }

// timeoutFlag is a pflag.Value for a time limit: a Go duration (90s, 10m,
// 1h30m) that is not negative; 0 means no limit.
type timeoutFlag struct{ p *time.Duration }

func (f timeoutFlag) String() string {
	if f.p == nil || *f.p == 0 {
		return "0" // what pflag shows as no default
	}
	return f.p.String()
}

func (f timeoutFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q (examples: 90s, 10m, 1h30m; 0 for no limit)", s)
	}
	if d < 0 {
		return fmt.Errorf("duration %q is negative (0 means no limit)", s)
	}
	*f.p = d
	return nil
}

func (timeoutFlag) Type() string { return "duration" }

// humanBytes formats a byte count with a binary unit.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}

// contextWithTimeout is context.WithTimeout (kept here so the command files
// need not import context for it).
func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}
