package exec_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/exec"
	"github.com/agentfs/agentfs/exec/exectest"
)

// suiteFixture is a fixture of exec's own backends, which offer all the
// suite checks.
func suiteFixture(newBackend func(t *testing.T, opts exec.Options) (*exec.Backend, string), alive func(t *testing.T, b *exec.Backend, pid int) bool, aliveAfterClose bool) exectest.Fixture[*exec.Job] {
	return exectest.Fixture[*exec.Job]{
		New: func(t *testing.T, opts exec.Options) (exectest.Backend[*exec.Job], string) {
			return newBackend(t, opts)
		},
		Alive: func(t *testing.T, b exectest.Backend[*exec.Job], pid int) bool {
			return alive(t, b.(*exec.Backend), pid)
		},
		Scope: true, Seams: true, Timeouts: true, Close: true, ResultOnCancel: true,
		AliveAfterClose: aliveAfterClose,
	}
}

// newLocal returns a local backend over dir, closed when the test ends.
func newLocal(t *testing.T, dir string, opts exec.Options) *exec.Backend {
	b, err := exec.NewLocal(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}

func localAlive(_ *testing.T, _ *exec.Backend, pid int) bool { return exec.ProcAlive(pid) }

// dockerAlive looks for pid in the backend's container.
func dockerAlive(t *testing.T, b *exec.Backend, pid int) bool {
	t.Helper()
	res, err := b.Exec(exectest.Ctx(t), exec.Request{Argv: []string{"cat", "/proc/" + strconv.Itoa(pid) + "/stat"}})
	if err != nil {
		t.Fatalf("checking pid %d in the container: %v", pid, err)
	}
	if res.ExitCode != 0 {
		return false
	}
	s := string(res.Stdout)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestLocal(t *testing.T) {
	exectest.Run(t, suiteFixture(func(t *testing.T, opts exec.Options) (*exec.Backend, string) {
		dir := t.TempDir()
		return newLocal(t, dir, opts), dir
	}, localAlive, true))
}

func TestDocker(t *testing.T) {
	exectest.Run(t, suiteFixture(func(t *testing.T, opts exec.Options) (*exec.Backend, string) {
		dir := exec.DockerWorkspace(t)
		return exec.NewTestDocker(t, dir, exec.DockerOptions{Options: opts}), dir
	}, dockerAlive, false))
}

// suiteIn runs the suite for the backend kind "local" or "docker" over
// workspaces made by newDir, whose Options prepare completes (the seams of
// the filesystem beneath).
func suiteIn(t *testing.T, kind string, newDir func(t *testing.T) string, prepare func(t *testing.T, dir string, opts *exec.Options)) {
	newBackend := func(t *testing.T, opts exec.Options) (*exec.Backend, string) {
		dir := newDir(t)
		prepare(t, dir, &opts)
		if kind == "docker" {
			return exec.NewTestDocker(t, dir, exec.DockerOptions{Options: opts}), dir
		}
		return newLocal(t, dir, opts), dir
	}
	if kind == "docker" {
		exectest.Run(t, suiteFixture(newBackend, dockerAlive, false))
		return
	}
	exectest.Run(t, suiteFixture(newBackend, localAlive, true))
}

// TestWalkTrackerSwapRace walks a tree whose directory sub is exchanged, as
// fast as can be, with a symlink to a directory outside: the change list
// never names what is outside. (A walk may fail instead, when sub is seen as
// a directory, then as a symlink, then as a directory again.)
func TestWalkTrackerSwapRace(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(dir, "sub", "in"), filepath.Join(outside, "secret")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(dir, "swap")); err != nil {
		t.Fatal(err)
	}
	tr := &exec.WalkTracker{Root: dir}
	ctx := exectest.Ctx(t)
	stop := exectest.SwapLoop(t, filepath.Join(dir, "sub"), filepath.Join(dir, "swap"))
	defer stop()
	leaks, walks, failed := 0, 0, 0
	// At most 4000 walks, none started after 15 s.
	for deadline := time.Now().Add(15 * time.Second); walks < 4000 && time.Now().Before(deadline); walks++ {
		m, err := tr.Begin(ctx, "")
		if err != nil {
			failed++
			continue
		}
		for _, p := range exec.MarkPaths(m) {
			if strings.Contains(p, "secret") {
				leaks++
			}
		}
	}
	t.Logf("%d walks: %d failed, %d listed an entry outside", walks, failed, leaks)
	if leaks > 0 {
		t.Errorf("%d of %d walks listed an entry of the directory outside", leaks, walks)
	}
	if failed > walks/2 {
		t.Errorf("%d of %d walks failed", failed, walks)
	}
}
