package exec

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// swapLoop exchanges the names a and b (renameat2 RENAME_EXCHANGE) in a tight
// loop until the returned stop is called; stop returns the number of swaps
// done, and fails the test if none could be.
func swapLoop(t *testing.T, a, b string) (stop func() int) {
	t.Helper()
	var (
		done  atomic.Bool
		swaps atomic.Int64
		wg    sync.WaitGroup
		serr  error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !done.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				serr = err
				return
			}
			swaps.Add(1)
			runtime.Gosched()
		}
	}()
	return func() int {
		done.Store(true)
		wg.Wait()
		if serr != nil {
			t.Fatalf("renameat2(%s, %s, RENAME_EXCHANGE): %v", a, b, serr)
		}
		// Leave the names as they started.
		if swaps.Load()%2 == 1 {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Fatal(err)
			}
		}
		return int(swaps.Load())
	}
}

// Bounds of the swap-race tests: at most raceRuns commands started, and no
// new attempt after raceBudget.
const (
	raceRuns   = 200
	raceBudget = 45 * time.Second
)

// testCwdSwapRace runs commands with Cwd "sub" while another goroutine
// exchanges the directory sub with a symlink to /etc (present on the host and
// in the container) as fast as it can. Each command either runs in sub or is
// refused; none may start outside the workspace.
func testCwdSwapRace(t *testing.T, f fixture) {
	b, dir := f.new(t, Options{ChangeTracker: NoChanges{}})
	ctx := testCtx(t)
	if err := b.Mkdir(ctx, "sub", false); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "swap")); err != nil {
		t.Fatal(err)
	}
	stop := swapLoop(t, filepath.Join(dir, "sub"), filepath.Join(dir, "swap"))
	var inside, refused, checkRefused int
	var escapes []string
	deadline := time.Now().Add(raceBudget)
	runs := 0 // commands past the check
	for runs < raceRuns && time.Now().Before(deadline) {
		res, err := b.Exec(ctx, Request{Command: "pwd -P", Cwd: "sub"})
		switch {
		case err != nil && strings.HasPrefix(err.Error(), `cwd "sub"`):
			checkRefused++ // the check saw the symlink
			continue
		case err != nil:
			stop()
			t.Fatalf("run %d: %v", runs, err)
		}
		runs++
		got := strings.TrimSpace(string(res.Stdout))
		switch {
		case res.ExitCode == 0 && (got == b.WorkDir()+"/sub" || got == b.WorkDir()+"/swap"):
			// In sub, which a later swap may have renamed.
			inside++
		case res.ExitCode == 0:
			escapes = append(escapes, got)
		case res.ExitCode == 126 && strings.Contains(string(res.Stderr), "was replaced"):
			refused++ // entered the directory, saw it was outside, refused
		default:
			t.Errorf("run %d: exit %d, stdout %q, stderr %q", runs, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	swaps := stop()
	t.Logf("%d swaps; %d commands refused by the check; of %d started: %d in the workspace, %d refused, %d escaped",
		swaps, checkRefused, runs, inside, refused, len(escapes))
	if len(escapes) > 0 {
		t.Errorf("%d of %d commands started outside the workspace, e.g. in %q", len(escapes), runs, escapes[0])
	}
	if inside == 0 || swaps == 0 {
		t.Errorf("the race was not exercised: %d runs in the workspace, %d swaps", inside, swaps)
	}
}

// testFileSwapRace does file operations under sub while sub is exchanged with
// a symlink to a directory outside the workspace: none may read or write
// there.
func testFileSwapRace(t *testing.T, f fixture) {
	b, dir := f.new(t, Options{ChangeTracker: NoChanges{}})
	ctx := testCtx(t)
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "f"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteFile(ctx, "sub/f", []byte("inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "swap")); err != nil {
		t.Fatal(err)
	}
	stop := swapLoop(t, filepath.Join(dir, "sub"), filepath.Join(dir, "swap"))
	deadline := time.Now().Add(raceBudget / 3)
	var leaks []string
	for i := 0; i < 10*raceRuns && time.Now().Before(deadline); i++ {
		if data, err := b.ReadFile(ctx, "sub/f"); err == nil && string(data) != "inside" {
			leaks = append(leaks, "read "+string(data))
		}
		_ = b.WriteFile(ctx, "sub/w", []byte("x"))
		_ = b.Mkdir(ctx, "sub/d", false)
		_ = b.Remove(ctx, "sub/d", false)
		if _, err := b.Stat(ctx, "sub/w"); err == nil {
			_ = b.Rename(ctx, "sub/w", "sub/w2")
		}
	}
	stop()
	ents, err := os.ReadDir(outside)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "f" {
			leaks = append(leaks, "wrote "+e.Name())
		}
	}
	if len(leaks) > 0 {
		t.Errorf("file operations reached outside the workspace: %v", leaks)
	}
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
	tr := &WalkTracker{Root: dir}
	ctx := testCtx(t)
	stop := swapLoop(t, filepath.Join(dir, "sub"), filepath.Join(dir, "swap"))
	defer stop()
	leaks, walks, failed := 0, 0, 0
	for deadline := time.Now().Add(raceBudget / 3); walks < 20*raceRuns && time.Now().Before(deadline); walks++ {
		m, err := tr.Begin(ctx, "")
		if err != nil {
			failed++
			continue
		}
		for p := range m.(*walkMark).entries {
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
