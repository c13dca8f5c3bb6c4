package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/bench"
	"github.com/agentfs/agentfs/internal/testenv"
)

// serverEnv makes this test binary act as `agentfs loopback ...` when
// bench.StartLoopback runs it, so the mount is served by a separate
// process, never by the test process.
const serverEnv = "AGENTFS_TEST_LOOPBACK_SERVER"

func init() {
	if os.Getenv(serverEnv) != "1" {
		return
	}
	// os.Args: <test binary> loopback [flags] SRC MNT
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	c := newLoopbackCmd()
	c.SetArgs(os.Args[2:])
	err := c.ExecuteContext(ctx)
	stop()
	if err != nil {
		_, _ = os.Stderr.WriteString("agentfs loopback: " + err.Error() + "\n") // exiting anyway
		os.Exit(1)
	}
	os.Exit(0)
}

// startLoopback mounts src on mnt through a child process and unmounts it
// when the test ends, even on failure.
func startLoopback(t *testing.T, src, mnt string) func() error {
	t.Helper()
	testenv.NeedFUSE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop, err := bench.StartLoopback(ctx, src, mnt, bench.LoopbackOptions{
		Exe: os.Args[0],
		Env: []string{serverEnv + "=1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop the loopback server: %v", err)
		}
	})
	return stop
}

func TestLoopbackBench(t *testing.T) {
	src, mnt, plain := t.TempDir(), t.TempDir(), t.TempDir()
	stop := startLoopback(t, src, mnt)

	// The mount shows the source and writes through to it.
	if err := os.WriteFile(filepath.Join(mnt, "hello"), []byte("via fuse"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(src, "hello")); err != nil || string(got) != "via fuse" {
		t.Fatalf("write through the loopback mount: %q, %v", got, err)
	}

	ws, err := bench.SelectWorkloads([]string{"smallfiles"})
	if err != nil {
		t.Fatal(err)
	}
	p := bench.QuickParams()
	p.Cold = bench.ColdFadvise
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Config{Params: p, Workloads: ws, Repeats: 1}, []string{plain, mnt})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Targets[1].FSType != "fuse.loopback" {
		t.Errorf("mount target seen as %+v, want fstype fuse.loopback", rep.Targets[1])
	}
	if len(rep.Results) != 2*len(ws[0].Phases) {
		t.Fatalf("%d results: %+v", len(rep.Results), rep.Results)
	}
	for _, r := range rep.Results {
		if r.Ops != int64(p.SmallFiles) || r.Ratio == nil || *r.Ratio <= 0 {
			t.Errorf("result %+v", r)
		}
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if real, _ := filepath.EvalSymlinks(mnt); containsField(string(data), real) {
		t.Errorf("%s still mounted after stop", mnt)
	}
	if _, err := os.Stat(filepath.Join(mnt, "hello")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mount point still shows the source after stop: %v", err)
	}
}

func TestLoopbackRefusesMountedMountPoint(t *testing.T) {
	src, mnt := t.TempDir(), t.TempDir()
	startLoopback(t, src, mnt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if stop, err := bench.StartLoopback(ctx, t.TempDir(), mnt, bench.LoopbackOptions{Exe: os.Args[0], Env: []string{serverEnv + "=1"}}); err == nil {
		_ = stop()
		t.Fatal("a second loopback mounted over a live mount point")
	}
}

func TestLoopbackBadSource(t *testing.T) {
	testenv.NeedFUSE(t)
	_, _, err := runCLI(t, 10*time.Second, "loopback", filepath.Join(t.TempDir(), "missing"), t.TempDir())
	if err == nil {
		t.Fatal("loopback of a missing source succeeded")
	}
}

// containsField reports whether mountinfo has a line whose mount point
// (field 5) is p.
func containsField(mountinfo, p string) bool {
	for line := range strings.SplitSeq(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}
