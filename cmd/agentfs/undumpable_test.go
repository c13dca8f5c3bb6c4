package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// undumpableChildEnv makes the test binary, run again by
// TestUndumpableHidesEnviron, the process whose environment is read: it
// calls undumpable when the variable says "hide", prints "ready" and
// waits for stdin to close.
const undumpableChildEnv = "AGENTFS_TEST_UNDUMPABLE_CHILD"

func init() {
	mode := os.Getenv(undumpableChildEnv)
	if mode == "" {
		return
	}
	if mode == "hide" {
		if err := undumpable(); err != nil {
			println(err.Error())
			os.Exit(2)
		}
	}
	println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// TestUndumpableHidesEnviron runs a process as an unprivileged user with a
// secret in its environment and reads its /proc/PID/environ as the same
// user: readable while the process is dumpable (the control case: what
// `agentfs serve` and its mount servers were before), refused once it called
// undumpable.
func TestUndumpableHidesEnviron(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run processes as another user")
	}
	const nobody = 65534
	// The test binary's own directory is private to root: run a copy.
	dir, err := os.MkdirTemp("", "undumpable")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "agentfs.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"keep", "hide"} {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), undumpableChildEnv+"="+mode, "AGENTFS_KEY=secret-of-the-test")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(stderr).ReadString('\n')
		if err != nil || line != "ready\n" {
			t.Fatalf("%s: child said %q (%v)", mode, line, err)
		}
		read := exec.Command("cat", "/proc/"+strconv.Itoa(cmd.Process.Pid)+"/environ")
		read.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, readErr := read.CombinedOutput()
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: child: %v", mode, err)
		}
		switch {
		case mode == "keep" && readErr != nil:
			t.Fatalf("the control case failed: the same user could not read a dumpable process's environ: %v: %s", readErr, out)
		case mode == "hide" && readErr == nil:
			t.Errorf("the same user read the environ of a process that called undumpable (%d bytes)", len(out))
		}
	}
}
