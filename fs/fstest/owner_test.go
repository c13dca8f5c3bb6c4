package fstest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	afs "github.com/agentfs/agentfs/fs"
	"github.com/agentfs/agentfs/internal/testenv"
)

// ownerHelperEnv makes TestKilledOwnerHelper run; it names the agentfs
// binary to use.
const ownerHelperEnv = "AGENTFS_FSTEST_OWNER_HELPER"

// TestKilledOwnerHelper is the helper process of
// TestKilledOwnerUnmounts, a test binary that is killed: it mounts a
// volume with Start, prints "mounted DIR CACHEDIR PID" and waits to be
// killed.
func TestKilledOwnerHelper(t *testing.T) {
	bin := os.Getenv(ownerHelperEnv)
	if bin == "" {
		t.Skip("the helper process of TestKilledOwnerUnmounts")
	}
	build.once.Do(func() { build.path = bin })
	m := Start(t, Options{})
	fmt.Printf("mounted %s %s %d\n", m.Dir, m.CacheDir, m.PID)
	time.Sleep(2 * time.Minute) // killed long before
}

// TestKilledOwnerUnmounts: when a test binary that started a mount is
// killed (SIGKILL: no cleanup runs, as when go test -timeout kills it),
// the mount server sees its owner gone, unmounts and exits.
func TestKilledOwnerUnmounts(t *testing.T) {
	testenv.NeedFUSE(t)
	bin := Binary(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledOwnerHelper$", "-test.timeout=5m")
	// The helper's temporary directories (its store, cache and mount
	// point) are left behind by the kill: they go with this test's.
	cmd.Env = append(os.Environ(), ownerHelperEnv+"="+bin, "TMPDIR="+t.TempDir())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var dir, cacheDir string
	pid := 0
	sc := bufio.NewScanner(out)
	for pid == 0 && sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 && f[0] == "mounted" {
			dir, cacheDir = f[1], f[2]
			pid, _ = strconv.Atoi(f[3])
		} else {
			t.Logf("helper: %s", sc.Text())
		}
	}
	if pid == 0 {
		t.Fatalf("the helper mounted nothing (%v)", sc.Err())
	}
	// Whatever happens below, nothing stays mounted or running.
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			WaitExit(pid, 10*time.Second)
		}
		if on, _ := afs.IsMountPoint(dir); on {
			_ = afs.Unmount(dir, true)
		}
	})
	if on, err := afs.IsMountPoint(dir); !on {
		t.Fatalf("%s is no mount point before the kill (%v)", dir, err)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	log := func() string {
		b, _ := os.ReadFile(filepath.Join(cacheDir, "mount.log"))
		return string(b)
	}
	if !WaitExit(pid, time.Minute) {
		t.Fatalf("the mount server (pid %d) still runs a minute after its owner was killed; log:\n%s", pid, log())
	}
	t.Logf("the mount server exited %v after its owner was killed", time.Since(killed).Round(time.Millisecond))
	if on, _ := afs.IsMountPoint(dir); on {
		t.Fatalf("%s is still mounted after its server exited; log:\n%s", dir, log())
	}
	if l := log(); !strings.Contains(l, "the owner process exited: syncing and unmounting") || !strings.Contains(l, "volume closed") {
		t.Errorf("the server's log does not show a clean shutdown for its owner's exit:\n%s", l)
	}
}
