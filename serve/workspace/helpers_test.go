package workspace_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/testenv"
	"github.com/agentfs/agentfs/serve/workspace"
)

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a test's daemon environment: its own default store (through
// XDG_DATA_HOME, which the mount servers inherit) and state directory.
type env struct {
	t        testing.TB
	bin      string
	stateDir string
	clock    *clock
}

func newEnv(t testing.TB) *env {
	t.Helper()
	testenv.NeedFUSE(t)
	bin := fstest.Binary(t)
	base := t.TempDir()
	t.Setenv("XDG_DATA_HOME", filepath.Join(base, "data"))
	// A race-enabled mount server sleeps a second at exit by default (to
	// catch races at exit); each unmount would wait for it.
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	e := &env{t: t, bin: bin, stateDir: filepath.Join(base, "state"), clock: newClock()}
	t.Cleanup(e.cleanupMounts)
	return e
}

// config returns the manager configuration of e.
func (e *env) config() workspace.Config {
	return workspace.Config{StateDir: e.stateDir, Executable: e.bin, Now: e.clock.Now, ScanInterval: time.Hour, IdleTimeout: time.Minute}
}

// open opens a manager of e, closed at cleanup.
func (e *env) open(cfg workspace.Config) *workspace.Manager {
	e.t.Helper()
	m, err := workspace.Open(context.Background(), cfg)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.t.Cleanup(func() {
		if err := m.Close(context.Background()); err != nil {
			e.t.Errorf("Close: %v", err)
		}
	})
	return m
}

// mountPoints lists the mount points under e's state directory.
func (e *env) mountPoints() []string {
	ms, _ := filepath.Glob(filepath.Join(e.stateDir, "workspaces", "*", "mnt"))
	return ms
}

// cleanupMounts makes sure nothing stays mounted and no server runs,
// whatever the test did, and fails the test for a mount server that
// reported a data race or panicked (in the logs of the workspaces left).
func (e *env) cleanupMounts() {
	logs, _ := filepath.Glob(filepath.Join(e.stateDir, "workspaces", "*", "cache", "mount.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if strings.Contains(string(b), "WARNING: DATA RACE") || strings.Contains(string(b), "panic:") {
			e.t.Errorf("mount server log %s:\n%s", l, b)
		}
	}
	for _, mnt := range e.mountPoints() {
		if c, err := control.Find(context.Background(), mnt); err == nil {
			info, _ := c.Info(context.Background())
			_ = c.Unmount(context.Background(), true)
			if info.PID > 0 && !fstest.WaitExit(info.PID, 30*time.Second) {
				_ = syscall.Kill(info.PID, syscall.SIGKILL)
			}
		}
		if on, _ := afs.IsMountPoint(mnt); on {
			_ = afs.Unmount(mnt, true)
			e.t.Errorf("cleanup: %s was still mounted", mnt)
		}
	}
}

// serverPIDs returns the pids of processes running e's binary with a
// mount point under e's state directory.
func (e *env) serverPIDs() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), e.stateDir) || !strings.Contains(string(b), "mount\x00") {
			continue
		}
		if pid, err := strconv.Atoi(d.Name()); err == nil && pidRunning(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mounted reports whether mnt is a mount point.
func mounted(t *testing.T, mnt string) bool {
	t.Helper()
	on, err := afs.IsMountPoint(mnt)
	if err != nil && !os.IsNotExist(err) {
		t.Fatalf("IsMountPoint(%s): %v", mnt, err)
	}
	return on
}

func create(t *testing.T, m *workspace.Manager, req workspace.CreateRequest) workspace.Info {
	t.Helper()
	in, err := m.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create(%+v): %v", req, err)
	}
	return in
}

func acquire(t *testing.T, m *workspace.Manager, name string) *workspace.Handle {
	t.Helper()
	h, err := m.Acquire(context.Background(), name)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", name, err)
	}
	return h
}

func writeFile(t *testing.T, h *workspace.Handle, p, data string) {
	t.Helper()
	if err := h.Backend.WriteFile(context.Background(), p, []byte(data)); err != nil {
		t.Fatalf("WriteFile(%s in %s): %v", p, h.Name, err)
	}
}

func readFile(t *testing.T, h *workspace.Handle, p string) string {
	t.Helper()
	b, err := h.Backend.ReadFile(context.Background(), p)
	if err != nil {
		t.Fatalf("ReadFile(%s in %s): %v", p, h.Name, err)
	}
	return string(b)
}
