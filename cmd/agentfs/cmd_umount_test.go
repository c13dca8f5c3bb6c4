package main

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestUmountStale: umount of a mount whose server was killed detaches it
// but fails, saying that nothing was uploaded and which command uploads
// what its cache holds; that command (a mount with the same cache
// directory) does: a fresh cache sees the fsynced file.
func TestUmountStale(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=-1s"}})
	crashAfterFsync(t, m, "fsynced.txt", "only in the cache")
	out, err := m.Agentfs("umount", m.Dir)
	remount := "agentfs mount -d --cache-dir " + m.CacheDir + " " + m.URL + " " + m.Dir
	if exitCode(err) != exitFailure || !strings.Contains(out, "nothing was uploaded") || !strings.Contains(out, remount) {
		t.Fatalf("umount of a stale mount: %v, want exit 1 and %q\n%s", err, remount, out)
	}
	if on, _ := afs.IsMountPoint(m.Dir); on {
		t.Fatalf("the stale mount is still there")
	}
	again := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: m.CacheDir, Dir: m.Dir})
	again.Unmount(t)
	fresh := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "fresh")})
	if b, err := os.ReadFile(filepath.Join(fresh.Dir, "fsynced.txt")); err != nil || string(b) != "only in the cache" {
		t.Errorf("the fsynced file, from the store: %q, %v", b, err)
	}
}

// TestUmountInsideMount: umount of a path inside a mount is refused,
// naming the mount point, and leaves the mount alone.
func TestUmountInsideMount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	sub := filepath.Join(m.Dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := m.Agentfs("umount", sub)
	if exitCode(err) != exitFailure || !strings.Contains(out, "not its mount point") || !strings.Contains(out, "agentfs umount "+m.Dir) {
		t.Errorf("umount of a directory inside the mount: %v\n%s", err, out)
	}
	if _, err := m.Agentfs("status", m.Dir); err != nil {
		t.Errorf("the mount is gone after a refused umount: %v", err)
	}
	m.Kill(t)
	fstest.WaitDisconnected(m.Dir, 10*time.Second)
	out, err = m.Agentfs("umount", sub)
	if exitCode(err) != exitFailure || !strings.Contains(out, "not its mount point") {
		t.Errorf("umount of a directory inside a stale mount: %v\n%s", err, out)
	}
	if !afs.IsDisconnected(m.Dir) {
		t.Errorf("a refused umount detached the stale mount")
	}
}
