// Package fstest runs real agentfs mounts for tests: it builds the agentfs
// binary once per test binary, mounts volumes with `agentfs mount -d` in a
// separate server process (never in the test process: a process that
// serves a mount must not also run commands in it), and tears every mount
// down in t.Cleanup, even when the test fails. A test binary that is killed
// (go test -timeout) runs no cleanup: the mount servers it started watch it
// and unmount and exit when it is gone (see Binary).
//
// It is a test-support library for the _test files of fs/, cmd/agentfs,
// exec/ and bench/. Tests that use it need FUSE; Start reports a missing
// /dev/fuse or fusermount3 through testenv (a failure under CI=true, a skip
// elsewhere).
package fstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/internal/mountproc"
	"github.com/agentfs/agentfs/internal/testenv"
)

var build struct {
	once sync.Once
	path string
	err  error
}

var owner sync.Once

// Binary returns the path of an agentfs binary built from this module's
// ./cmd/agentfs, once per test binary. Builds land in
// $TMPDIR/agentfs-fstest-UID, named by their content hash, so concurrent
// test binaries share identical builds and never overwrite each other's;
// builds older than a day are removed. When the test binary runs with the
// race detector, so does the server, and a mount whose server reported a
// data race fails its test.
//
// Binary also sets mountproc.OwnerEnv to this process's pid in its
// environment: every mount server started from it (by Start, by an
// agentfs command or serve daemon the test runs, by serve's workspace
// manager in the test) inherits it, and syncs, unmounts and exits once
// the test binary has exited, even when it was killed.
func Binary(t testing.TB) string {
	t.Helper()
	owner.Do(func() {
		if err := os.Setenv(mountproc.OwnerEnv, strconv.Itoa(os.Getpid())); err != nil {
			t.Fatalf("setting %s: %v", mountproc.OwnerEnv, err)
		}
	})
	build.once.Do(func() { build.path, build.err = buildBinary() })
	if build.err != nil {
		t.Fatalf("building agentfs: %v", build.err)
	}
	return build.path
}

// startDir is the working directory the test binary started in.
var startDir, _ = os.Getwd()

func buildBinary() (string, error) {
	dir := filepath.Join(os.TempDir(), "agentfs-fstest-"+strconv.Itoa(os.Getuid()))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if old, err := os.ReadDir(dir); err == nil {
		for _, e := range old {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	tmp, err := os.CreateTemp(dir, "build-*")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	defer func() { _ = os.Remove(tmp.Name()) }()
	args := []string{"build", "-o", tmp.Name()}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/agentfs/agentfs/cmd/agentfs")
	cmd := exec.Command("go", args...)
	// From the directory the test binary started in (its package's, inside
	// the module): a test may have moved the process elsewhere (an
	// in-process mount server works in "/").
	cmd.Dir = startDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	b, err := os.ReadFile(tmp.Name())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	final := filepath.Join(dir, "agentfs-"+hex.EncodeToString(sum[:8]))
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", err
	}
	now := time.Now()
	_ = os.Chtimes(final, now, now)
	return final, nil
}

// Options describe a mount for Start.
type Options struct {
	// URL of the store; empty means a new file:// store in a temporary
	// directory, initialized by Start.
	URL string
	// Init runs `agentfs init URL` first (for a URL given above).
	Init bool
	// CacheDir; empty means a new temporary directory.
	CacheDir string
	// Dir is the mount point; empty means a new temporary directory.
	Dir string
	// ReadOnly mounts with --read-only.
	ReadOnly bool
	// Args are extra flags for `agentfs mount`.
	Args []string
	// Encrypted makes Init run `agentfs init --encrypt`; every command of
	// the Mount (its Env) then has the volume's key, TestKey, in
	// AGENTFS_KEY.
	Encrypted bool
}

// TestKey is the key of the volumes that Options.Encrypted makes.
const TestKey = "agentfs fstest key: 32 bytes or more, not secret"

// Mount is a running mount started by Start.
type Mount struct {
	Bin      string // the agentfs binary
	Dir      string // the mount point
	URL      string // the store URL
	CacheDir string // the cache directory
	PID      int    // the server process
	Env      []string

	t       testing.TB
	stopped bool
}

// Setup prepares what Start needs without mounting: the binary, a store
// (initialized) and the directories, filled into o.
func Setup(t testing.TB, o *Options) (bin string, env []string) {
	t.Helper()
	testenv.NeedFUSE(t)
	bin = Binary(t)
	base := t.TempDir()
	// XDG directories of the test's own: the default store and cache
	// directories never touch the user's.
	env = append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(base, "xdg-data"), "XDG_CACHE_HOME="+filepath.Join(base, "xdg-cache"))
	if o.URL == "" {
		o.URL = "file://" + filepath.Join(base, "store")
		o.Init = true
	}
	if o.Encrypted {
		env = append(env, "AGENTFS_KEY="+TestKey)
	}
	if o.Init {
		args := []string{"init", o.URL}
		if o.Encrypted {
			args = []string{"init", "--encrypt", o.URL}
		}
		if out, err := Run(bin, env, args...); err != nil {
			t.Fatalf("agentfs init %s: %v\n%s", o.URL, err, out)
		}
		o.Init = false
	}
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(base, "cache")
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(base, "mnt")
	}
	return bin, env
}

// Start mounts a volume with `agentfs mount -d` and returns once the mount
// is ready. The mount is unmounted in t.Cleanup (forcefully if busy), its
// server stopped (killed if it does not exit), and its log checked for
// data races and panics.
func Start(t testing.TB, o Options) *Mount {
	t.Helper()
	bin, env := Setup(t, &o)
	m := &Mount{Bin: bin, URL: o.URL, CacheDir: o.CacheDir, Dir: o.Dir, Env: env, t: t}
	args := []string{"mount", "-d", "--cache-dir", o.CacheDir}
	if o.ReadOnly {
		args = append(args, "--read-only")
	}
	args = append(append(args, o.Args...), o.URL, o.Dir)
	out, err := Run(bin, env, args...)
	if err != nil {
		t.Fatalf("agentfs %s: %v\n%s\nlog:\n%s", strings.Join(args, " "), err, out, m.Log())
	}
	pid, err := serverPID(out)
	if err != nil {
		t.Fatalf("agentfs mount -d: %v in its output:\n%s", err, out)
	}
	m.PID = pid
	if real, err := filepath.EvalSymlinks(o.Dir); err == nil {
		m.Dir = real
	}
	t.Cleanup(m.cleanup)
	return m
}

var pidRE = regexp.MustCompile(`server pid (\d+)`)

func serverPID(out string) (int, error) {
	mt := pidRE.FindStringSubmatch(out)
	if mt == nil {
		return 0, errors.New("no server pid")
	}
	return strconv.Atoi(mt[1])
}

// Run runs the agentfs binary with args and env (nil: this process's) and
// returns its combined output. It never runs longer than two minutes.
func Run(bin string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = "/"
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Agentfs runs an agentfs subcommand with the mount's environment and
// returns its combined output.
func (m *Mount) Agentfs(args ...string) (string, error) { return Run(m.Bin, m.Env, args...) }

// Log returns the server's log (mount.log in the cache directory).
func (m *Mount) Log() string {
	b, _ := os.ReadFile(filepath.Join(m.CacheDir, "mount.log"))
	return string(b)
}

// Client returns a control client for the mount.
func (m *Mount) Client(t testing.TB) *control.Client {
	t.Helper()
	c, err := control.Find(context.Background(), m.Dir)
	if err != nil {
		t.Fatalf("control.Find(%s): %v", m.Dir, err)
	}
	return c
}

// Sync runs `agentfs sync` on the mount and fails t if it fails.
func (m *Mount) Sync(t testing.TB) {
	t.Helper()
	if out, err := m.Agentfs("sync", m.Dir); err != nil {
		t.Fatalf("agentfs sync: %v\n%s", err, out)
	}
}

// Unmount runs `agentfs umount` and waits for the server to exit; it fails
// t if either fails. Cleanup has nothing left to do afterwards.
func (m *Mount) Unmount(t testing.TB) {
	t.Helper()
	if out, err := m.Agentfs("umount", m.Dir); err != nil {
		t.Fatalf("agentfs umount: %v\n%s\nlog:\n%s", err, out, m.Log())
	}
	if !WaitExit(m.PID, 30*time.Second) {
		t.Fatalf("the mount server (pid %d) did not exit after umount\nlog:\n%s", m.PID, m.Log())
	}
	m.stopped = true
	m.checkLog(t)
}

// Kill sends SIGKILL to the server, as a crash would, and waits for it to
// exit; the mount stays behind, stale.
func (m *Mount) Kill(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(m.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", m.PID, err)
	}
	if !WaitExit(m.PID, 30*time.Second) {
		t.Fatalf("the mount server (pid %d) survived SIGKILL", m.PID)
	}
	m.stopped = true
}

func (m *Mount) cleanup() {
	t := m.t
	if t.Failed() {
		t.Logf("the mount server's log (%s):\n%s", filepath.Join(m.CacheDir, "mount.log"), tail(m.Log(), 200))
	}
	if !m.stopped {
		if alive(m.PID) {
			out, err := m.Agentfs("umount", "--force", m.Dir)
			if err != nil && alive(m.PID) {
				t.Errorf("cleanup: agentfs umount --force %s: %v\n%s", m.Dir, err, out)
			}
		}
		if !WaitExit(m.PID, 30*time.Second) {
			t.Errorf("cleanup: the mount server (pid %d) did not exit; killing it\nlog:\n%s", m.PID, m.Log())
			_ = syscall.Kill(m.PID, syscall.SIGKILL)
			WaitExit(m.PID, 10*time.Second)
		}
		m.checkLog(t)
	}
	if on, _ := afs.IsMountPoint(m.Dir); on {
		if err := afs.Unmount(m.Dir, true); err != nil {
			t.Errorf("cleanup: detach %s: %v", m.Dir, err)
		}
	}
}

// checkLog fails t if the server reported a data race or a panic.
func (m *Mount) checkLog(t testing.TB) {
	log := m.Log()
	for _, bad := range []string{"WARNING: DATA RACE", "panic in a FUSE handler", "fatal error:", "\npanic: "} {
		if strings.Contains(log, bad) {
			t.Errorf("the mount server's log has %q:\n%s", bad, log)
			return
		}
	}
}

// WaitExit waits up to d for process pid to be gone (or a zombie of another
// parent) and reports whether it is.
func WaitExit(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !alive(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitDisconnected waits up to d for the mount on dir to report ENOTCONN,
// as a FUSE mount does once its server's last /dev/fuse descriptor is
// closed. That can lag the server's death as WaitExit sees it: the thread
// group leader turns zombie before the other threads have released the
// shared file table.
func WaitDisconnected(dir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if afs.IsDisconnected(dir) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid names a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
