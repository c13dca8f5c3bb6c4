package workspace_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/serve/workspace"
)

// Environment of the daemon-like child process of TestKill9Recovery.
const (
	daemonEnv = "AGENTFS_TEST_WORKSPACE_DAEMON" // the state directory
	binEnv    = "AGENTFS_TEST_WORKSPACE_BIN"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(daemonEnv); dir != "" {
		run := runDaemon
		if os.Getenv(dockerDaemonEnv) != "" {
			run = runDockerDaemon
		}
		if err := run(dir, os.Getenv(binEnv)); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runDaemon is the child of TestKill9Recovery: a process holding a
// Manager, with three workspaces: "adopt" and "stale" mounted with
// synced data (plus a write to "adopt" that only its cache holds), "cold"
// never mounted. It prints each mount server's pid, then "ready", and
// waits to be killed, holding a Handle of "adopt".
func runDaemon(stateDir, bin string) error {
	ctx := context.Background()
	m, err := workspace.Open(ctx, workspace.Config{StateDir: stateDir, Executable: bin})
	if err != nil {
		return err
	}
	for _, name := range []string{"adopt", "stale", "cold"} {
		if _, err := m.Create(ctx, workspace.CreateRequest{Name: name}); err != nil {
			return err
		}
	}
	for _, name := range []string{"adopt", "stale"} {
		h, err := m.Acquire(ctx, name)
		if err != nil {
			return err
		}
		if err := h.Backend.WriteFile(ctx, "synced.txt", []byte(name)); err != nil {
			return err
		}
		if err := h.Control.Sync(ctx); err != nil {
			return err
		}
		info, err := h.Control.Info(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("pid %s %d\n", name, info.PID)
		// A command running when the daemon is killed.
		if _, err := h.Backend.Start(ctx, exec.Request{Command: "sleep 600"}); err != nil {
			return err
		}
		if name == "adopt" {
			if err := h.Backend.WriteFile(ctx, "cached.txt", []byte("cache")); err != nil {
				return err
			}
			continue // held until killed
		}
		h.Release()
	}
	fmt.Println("ready")
	select {}
}

// TestKill9Recovery: after a kill -9 of a process holding a Manager
// (and of one of its mount servers), Open adopts the mount server that
// still runs, cleans up the stale mount of the dead one, and loses
// nothing that was synced (nor what the adopted server's cache holds);
// Close then leaves no mount and no server.
func TestKill9Recovery(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cmd := osexec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), daemonEnv+"="+e.stateDir, binEnv+"="+e.bin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	sc := bufio.NewScanner(out)
	ready := false
	for !ready && sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "pid":
			pids[f[1]], _ = strconv.Atoi(f[2])
		case len(f) == 1 && f[0] == "ready":
			ready = true
		default:
			t.Logf("daemon: %s", sc.Text())
		}
	}
	if !ready {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the daemon did not get ready (%v)", sc.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if err := syscall.Kill(pids["stale"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !fstest.WaitExit(pids["stale"], 10*time.Second) {
		t.Fatal("the stale mount's server did not die")
	}

	if len(e.workingThere()) == 0 {
		t.Fatal("no command of the killed daemon runs in its workspaces")
	}
	m := e.open(e.config())
	if pids := e.workingThere(); len(pids) != 0 {
		t.Errorf("commands of the killed daemon still run after recovery: %v", pids)
	}
	for name, want := range map[string]workspace.Status{"adopt": workspace.StatusMounted, "stale": workspace.StatusUnmounted, "cold": workspace.StatusUnmounted} {
		if got := status(t, m, name); got != want {
			t.Errorf("%s after recovery: %s, want %s", name, got, want)
		}
	}
	staleMnt := filepath.Join(e.stateDir, "workspaces", "stale", "mnt")
	if mounted(t, staleMnt) {
		t.Errorf("the stale mount on %s is still there", staleMnt)
	}
	if got := e.serverPIDs(); !slices.Equal(got, []int{pids["adopt"]}) {
		t.Errorf("mount servers after recovery: %v, want the adopted %d", got, pids["adopt"])
	}
	h := acquire(t, m, "adopt")
	info, err := h.Control.Info(ctx)
	if err != nil || info.PID != pids["adopt"] {
		t.Errorf("adopt is served by %d (%v), want the adopted %d", info.PID, err, pids["adopt"])
	}
	if got := readFile(t, h, "synced.txt") + readFile(t, h, "cached.txt"); got != "adoptcache" {
		t.Errorf("adopt's files: %q", got)
	}
	h.Release()
	h = acquire(t, m, "stale")
	if got := readFile(t, h, "synced.txt"); got != "stale" {
		t.Errorf("stale's synced file: %q", got)
	}
	h.Release()

	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, mnt := range e.mountPoints() {
		if mounted(t, mnt) {
			t.Errorf("%s still mounted after Close", mnt)
		}
	}
	if got := e.serverPIDs(); len(got) != 0 {
		t.Errorf("mount servers after Close: %v", got)
	}
	// Nothing was lost: a fresh cache of adopt finds both files in the store.
	if err := os.RemoveAll(filepath.Join(e.stateDir, "workspaces", "adopt", "cache")); err != nil {
		t.Fatal(err)
	}
	m2 := e.open(e.config())
	h = acquire(t, m2, "adopt")
	defer h.Release()
	if got := readFile(t, h, "synced.txt") + readFile(t, h, "cached.txt"); got != "adoptcache" {
		t.Errorf("adopt's files from the store: %q", got)
	}
}

// workingThere returns the processes whose working directory lies under
// e's state directory.
func (e *env) workingThere() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		cwd, err := os.Readlink(filepath.Join("/proc", d.Name(), "cwd"))
		if err != nil || !strings.HasPrefix(cwd, e.stateDir+"/") {
			continue
		}
		if pid, err := strconv.Atoi(d.Name()); err == nil && pidRunning(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// pidRunning reports whether pid runs (not a zombie).
func pidRunning(pid int) bool {
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(st), ')')
	return i > 0 && i+2 < len(st) && st[i+2] != 'Z'
}
