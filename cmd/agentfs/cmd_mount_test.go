package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/fs/control"
	"github.com/agentfs/agentfs/fs/fstest"
)

// agentfsIn runs the agentfs binary with args in directory dir and env,
// and returns its combined output.
func agentfsIn(t *testing.T, bin, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// serverPIDOf returns the pid of the server of the mount at dir.
func serverPIDOf(t *testing.T, dir string) int {
	t.Helper()
	c, err := control.Find(context.Background(), dir)
	if err != nil {
		t.Fatalf("control.Find(%s): %v", dir, err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.PID
}

// detachOnCleanup makes sure nothing stays mounted on dir and no server of
// ours stays alive, whatever the test did.
func detachOnCleanup(t *testing.T, bin string, env []string, dir string) {
	t.Cleanup(func() {
		c, err := control.Find(context.Background(), dir)
		if err == nil {
			info, _ := c.Info(context.Background())
			if out, err := fstest.Run(bin, env, "umount", "--force", dir); err != nil {
				t.Errorf("cleanup: umount --force %s: %v\n%s", dir, err, out)
			}
			if info.PID > 0 && !fstest.WaitExit(info.PID, 30*time.Second) {
				_ = syscall.Kill(info.PID, syscall.SIGKILL)
			}
		}
		if on, _ := afs.IsMountPoint(dir); on {
			_ = afs.Unmount(dir, true)
		}
	})
}

// TestMountDefaultStore: `agentfs mount -d ws` with no URL uses the
// embedded default store under XDG_DATA_HOME (initializing it), creates
// the mount point, serves in the background; the workspace survives
// umount and a second mount (same derived cache directory).
func TestMountDefaultStore(t *testing.T) {
	var o fstest.Options
	bin, env := fstest.Setup(t, &o)
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	detachOnCleanup(t, bin, env, ws)

	out, err := agentfsIn(t, bin, work, env, "mount", "-d", "ws")
	if err != nil {
		t.Fatalf("agentfs mount -d ws: %v\n%s", err, out)
	}
	if !strings.Contains(out, "mounted file://") || !strings.Contains(out, "/xdg-data/agentfs/default") {
		t.Errorf("mount output does not name the default store: %s", out)
	}
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := serverPIDOf(t, ws)
	checkServerRuntime(t, pid)
	out, err = agentfsIn(t, bin, work, env, "status", "--json", "ws")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	cacheRoot := filepath.Join(envValue(env, "XDG_CACHE_HOME"), "agentfs", "mounts")
	if st.Info.PID != pid || st.Info.MountPoint != ws || st.Volume.Branch != "main" || st.Volume.HeadSeq < 1 ||
		!strings.HasPrefix(st.Volume.CacheDir, cacheRoot) || st.Volume.Lease == nil || st.Volume.Lease.PID != pid {
		t.Errorf("status: %+v", st)
	}
	if out, err := agentfsIn(t, bin, work, env, "umount", "ws"); err != nil || !strings.Contains(out, "unmounted") {
		t.Fatalf("umount: %v\n%s", err, out)
	}
	if !fstest.WaitExit(pid, 30*time.Second) {
		t.Fatalf("server %d still running after umount", pid)
	}
	if on, _ := afs.IsMountPoint(ws); on {
		t.Fatalf("%s still mounted after umount", ws)
	}
	if out, err := agentfsIn(t, bin, work, env, "mount", "-d", "ws"); err != nil {
		t.Fatalf("second mount: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("after remount: %q, %v", b, err)
	}
	if out, err := agentfsIn(t, bin, work, env, "umount", "ws"); err != nil {
		t.Fatalf("umount: %v\n%s", err, out)
	}
}

// TestMountDefaultStoreNeverForLostSecrets: a mount server started with
// --ready-fd but no --secrets-fd (by an agentfs from before the secrets
// pipe, which passed the URL in AGENTFS_MOUNT_URL), or whose secrets pipe
// holds nothing (its parent died before writing, or another process read
// it first), reports why on its readiness pipe and exits, instead of
// mounting the default store for want of a URL.
func TestMountDefaultStoreNeverForLostSecrets(t *testing.T) {
	bin := fstest.Binary(t)
	base := t.TempDir()
	env := append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(base, "xdg-data"), "XDG_CACHE_HOME="+filepath.Join(base, "xdg-cache"),
		"AGENTFS_MOUNT_URL=file://"+filepath.Join(base, "store"))
	for _, c := range []struct {
		name    string
		secrets bool
		want    string
	}{
		{"old parent", false, "started by an older agentfs without --secrets-fd; restart the agentfs process"},
		{"empty secrets", true, "the secrets on fd 4 are truncated: the agentfs process that started this server exited"},
	} {
		mnt := filepath.Join(base, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		detachOnCleanup(t, bin, env, mnt)
		rr, rw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"mount", "--ready-fd=3", mnt}
		extra := []*os.File{rw}
		if c.secrets {
			sr, sw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			_ = sw.Close()
			defer sr.Close()
			args = append(args, "--secrets-fd=4")
			extra = append(extra, sr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.ExtraFiles = env, extra
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = rw.Close()
		msg, _ := bufio.NewReader(rr).ReadString('\n')
		_ = rr.Close()
		if !strings.Contains(msg, c.want) {
			t.Errorf("%s: the server reported %q, want %q", c.name, msg, c.want)
		}
		if msg == "ok\n" {
			continue // mounted: detachOnCleanup unmounts it, and so stops the server
		}
		if err := cmd.Wait(); err == nil {
			t.Errorf("%s: the server exited 0\n%s", c.name, stderr.String())
		}
		if _, err := os.Stat(filepath.Join(base, "xdg-data", "agentfs", "default")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the default store exists (%v)", c.name, err)
		}
	}
}

func envValue(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// checkServerRuntime fails t unless the mount server pid runs with the Go
// runtime setting every mount server gets (mountproc.ServerEnv), read from
// its /proc/PID/environ (as root, which the server's undumpable does not
// stop).
func checkServerRuntime(t *testing.T, pid int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatalf("environment of the mount server: %v", err)
	}
	godebug := envValue(strings.Split(string(b), "\x00"), "GODEBUG")
	if !slices.Contains(strings.Split(godebug, ","), "madvdontneed=0") {
		t.Errorf("mount server %d runs without GODEBUG madvdontneed=0; its GODEBUG: %q", pid, godebug)
	}
}

// TestMountErrors: a URL without a volume says to run agentfs init; a
// second read-write mount of a branch names the holder and suggests
// --read-only, which works; a mount point already mounted is refused.
func TestMountErrors(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	bin, env := m.Bin, m.Env

	empty := "file://" + filepath.Join(t.TempDir(), "empty")
	out, err := fstest.Run(bin, env, "mount", "-d", empty, filepath.Join(t.TempDir(), "x"))
	if err == nil || !strings.Contains(out, "agentfs init") {
		t.Errorf("mount of a store without a volume: %v\n%s", err, out)
	}

	second := filepath.Join(t.TempDir(), "second")
	detachOnCleanup(t, bin, env, second)
	out, err = fstest.Run(bin, env, "mount", "-d", "--cache-dir", filepath.Join(t.TempDir(), "c2"), m.URL, second)
	if err == nil || !strings.Contains(out, fmt.Sprintf("pid %d", m.PID)) || !strings.Contains(out, "--read-only") {
		t.Errorf("second writer: %v\n%s", err, out)
	}
	out, err = fstest.Run(bin, env, "mount", "-d", "--read-only", "--cache-dir", filepath.Join(t.TempDir(), "c3"), m.URL, second)
	if err != nil {
		t.Fatalf("read-only mount next to the writer: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(second, "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write to the read-only mount: %v, want EROFS", err)
	}
	if out, err := fstest.Run(bin, env, "umount", second); err != nil {
		t.Errorf("umount read-only: %v\n%s", err, out)
	}

	out, err = fstest.Run(bin, env, "mount", "-d", "--cache-dir", filepath.Join(t.TempDir(), "c4"), m.URL, m.Dir)
	if err == nil || !strings.Contains(out, "already an agentfs mount") {
		t.Errorf("mount over a live mount: %v\n%s", err, out)
	}
}

// TestMountSIGTERM: the foreground server syncs, unmounts and exits 0 on
// SIGTERM, and what was written is in the store.
func TestMountSIGTERM(t *testing.T) {
	var o fstest.Options
	bin, env := fstest.Setup(t, &o)
	detachOnCleanup(t, bin, env, o.Dir)
	cmd := exec.Command(bin, "mount", "--cache-dir", o.CacheDir, "--checkpoint-interval=-1s", o.URL, o.Dir)
	cmd.Dir, cmd.Env = "/", env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var log []string
	ready := false
	for !ready {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the server exited before it was ready:\n%s", strings.Join(log, "\n"))
			}
			log = append(log, l)
			ready = strings.Contains(l, "agentfs: serving")
		case <-time.After(30 * time.Second):
			t.Fatalf("the server was not ready in 30s:\n%s", strings.Join(log, "\n"))
		}
	}
	checkServerRuntime(t, cmd.Process.Pid) // the foreground mount re-executed itself, same pid
	if err := os.WriteFile(filepath.Join(o.Dir, "term.txt"), []byte("written before SIGTERM"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for l := range lines {
			log = append(log, l)
		}
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("server exit after SIGTERM: %v (want status 0)", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the server did not exit after SIGTERM")
	}
	if on, _ := afs.IsMountPoint(o.Dir); on {
		t.Fatalf("still mounted after SIGTERM")
	}
	check := fstest.Start(t, fstest.Options{URL: o.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "check")})
	if b, err := os.ReadFile(filepath.Join(check.Dir, "term.txt")); err != nil || string(b) != "written before SIGTERM" {
		t.Errorf("file written before SIGTERM, read from the store: %q, %v", b, err)
	}
}

// crashAfterFsync writes data to the file name in m, fsyncs it, kills m's
// server with SIGKILL and waits until the mount is stale.
func crashAfterFsync(t *testing.T, m *fstest.Mount, name, data string) {
	t.Helper()
	f, err := os.Create(filepath.Join(m.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	m.Kill(t)
	if !fstest.WaitDisconnected(m.Dir, 10*time.Second) {
		t.Fatalf("a mount whose server was killed is not disconnected")
	}
}

// TestMountCleansStale: a mount whose server was killed is stale
// (ENOTCONN); the next mount on the same directory detaches it and mounts,
// and umount of a stale mount detaches it too.
func TestMountCleansStale(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	crashAfterFsync(t, m, "synced", "fsynced")
	out, err := fstest.Run(m.Bin, m.Env, "mount", "-d", "--cache-dir", m.CacheDir, m.URL, m.Dir)
	if err != nil || !strings.Contains(out, "cleaned up a stale mount") {
		t.Fatalf("mount over a stale mount: %v\n%s", err, out)
	}
	detachOnCleanup(t, m.Bin, m.Env, m.Dir)
	if b, err := os.ReadFile(filepath.Join(m.Dir, "synced")); err != nil || string(b) != "fsynced" {
		t.Errorf("fsynced file after the crash: %q, %v", b, err)
	}
	pid := serverPIDOf(t, m.Dir)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	fstest.WaitExit(pid, 30*time.Second)
	out, err = fstest.Run(m.Bin, m.Env, "umount", m.Dir)
	if exitCode(err) != exitFailure || !strings.Contains(out, "stale") {
		t.Errorf("umount of a stale mount: %v\n%s", err, out)
	}
	if on, _ := afs.IsMountPoint(m.Dir); on {
		t.Errorf("the stale mount is still there")
	}
}

// TestMountNonEmpty: mounting over a directory that is not empty is
// refused, naming the directory and --nonempty, which mounts over it; the
// files are there again after umount.
func TestMountNonEmpty(t *testing.T) {
	var o fstest.Options
	bin, env := fstest.Setup(t, &o)
	detachOnCleanup(t, bin, env, o.Dir)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "underneath.txt"), []byte("hidden?"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := fstest.Run(bin, env, "mount", "-d", "--cache-dir", o.CacheDir, o.URL, o.Dir)
	if exitCode(err) != exitFailure || !strings.Contains(out, o.Dir+" is not empty") || !strings.Contains(out, "underneath.txt") || !strings.Contains(out, "--nonempty") {
		t.Fatalf("mount over a non-empty directory: %v\n%s", err, out)
	}
	if on, _ := afs.IsMountPoint(o.Dir); on {
		t.Fatalf("a refused mount mounted")
	}
	if out, err := fstest.Run(bin, env, "mount", "-d", "--nonempty", "--cache-dir", o.CacheDir, o.URL, o.Dir); err != nil {
		t.Fatalf("mount --nonempty: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, "underneath.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount does not hide what is underneath: %v", err)
	}
	if out, err := fstest.Run(bin, env, "umount", o.Dir); err != nil {
		t.Fatalf("umount: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(o.Dir, "underneath.txt")); err != nil || string(b) != "hidden?" {
		t.Errorf("after umount: %q, %v", b, err)
	}
}
