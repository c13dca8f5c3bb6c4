package main

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/fstest"
)

// holdCwd starts a process whose working directory is dir (so dir's mount
// is busy) and returns it; it is killed in t.Cleanup.
func holdCwd(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	return cmd
}

// TestUmountBusy: umount of a mount in use fails clearly, names the
// process and leaves the mount working; once the process is gone umount
// works. --force detaches a busy mount at once and the server exits when
// its last user is gone.
func TestUmountBusy(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	sleeper := holdCwd(t, m.Dir)
	out, err := m.Agentfs("umount", m.Dir)
	if err == nil || !strings.Contains(out, "is busy") || !strings.Contains(out, strconv.Itoa(sleeper.Process.Pid)) || !strings.Contains(out, "--force") {
		t.Fatalf("umount of a busy mount: %v\n%s", err, out)
	}
	if on, _ := afs.IsMountPoint(m.Dir); !on {
		t.Fatalf("a failed umount unmounted")
	}
	if _, err := m.Agentfs("status", m.Dir); err != nil {
		t.Fatalf("status after a failed umount: %v", err)
	}
	_ = sleeper.Process.Kill()
	_, _ = sleeper.Process.Wait()
	m.Unmount(t)

	m2 := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: m.CacheDir, Dir: m.Dir})
	sleeper = holdCwd(t, m2.Dir)
	out, err = m2.Agentfs("umount", "--force", m2.Dir)
	if err != nil || !strings.Contains(out, "detached") {
		t.Fatalf("umount --force of a busy mount: %v\n%s", err, out)
	}
	if on, _ := afs.IsMountPoint(m2.Dir); on {
		t.Errorf("still in the mount table after umount --force")
	}
	time.Sleep(200 * time.Millisecond)
	if fstest.WaitExit(m2.PID, 0) {
		t.Errorf("the server exited while a process still used the detached mount")
	}
	_ = sleeper.Process.Kill()
	_, _ = sleeper.Process.Wait()
	if !fstest.WaitExit(m2.PID, 30*time.Second) {
		t.Errorf("the server did not exit after the last user of the detached mount left")
		_ = syscall.Kill(m2.PID, syscall.SIGKILL)
	}
}
