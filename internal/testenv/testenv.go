// Package testenv decides what a test does when something it needs from the
// machine (MinIO, the GCS emulator, a Docker engine, /dev/fuse, fusermount3)
// is missing: under CI (CI=true) the test fails, elsewhere it is skipped with
// the reason. Tests never skip silently.
package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// InCI reports whether the tests run under CI (the CI environment variable is
// a true value, as CI systems set it).
func InCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Missing reports that the test cannot run because what is unavailable
// (err says why). Under CI it fails the test; otherwise it skips it. It does
// not return.
func Missing(t testing.TB, what string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is required under CI=true but unavailable: %v (run `make setup`)", what, err)
	}
	t.Skipf("%s unavailable: %v (run `make setup`; under CI=true this fails)", what, err)
}

// NeedFUSE checks that this process can serve FUSE mounts: /dev/fuse exists,
// fusermount3 is on PATH, and the test runs as root.
func NeedFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		Missing(t, "/dev/fuse", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		Missing(t, "fusermount3 (apt package fuse3)", err)
	}
	if os.Geteuid() != 0 {
		Missing(t, "root (FUSE tests mount with allow_other)", os.ErrPermission)
	}
}

// CPUTime returns the CPU time (user and system) this process has used so
// far, in nanoseconds: what benchmarks report as cpu-ns/op, steadier than
// wall time on a loaded machine.
func CPUTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
