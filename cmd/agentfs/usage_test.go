package main

import (
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestUsageErrors: every kind of bad usage, of every command, exits with
// exitUsage and says what is wrong; values that would silently mean
// something else (a negative timeout, a zero cache size) are refused.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	// Should a mount not be refused, it must not touch the user's stores.
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "xdg-data"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "xdg-cache"))
	mnt := filepath.Join(dir, "never-mounted")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--timeout", "abc", dir, "--", "true"}, `invalid duration "abc"`},
		{[]string{"exec", "--timeout", "-1s", dir, "--", "true"}, "is negative"},
		{[]string{"exec", "--output-limit", "-5", dir, "--", "true"}, "cannot be negative"},
		{[]string{"exec", "--bogus", dir, "--", "true"}, "unknown flag: --bogus"},
		{[]string{"exec", dir, "true"}, "usage: agentfs exec"},
		{[]string{"run", "--timeout", "abc", "file:///nowhere", "--", "true"}, `invalid duration "abc"`},
		{[]string{"run", dir, "--", "true"}, "not a store URL"},
		{[]string{"sync", "--timeout", "-1s", dir}, "is negative"},
		{[]string{"umount", "--timeout", "-1s", dir}, "is negative"},
		{[]string{"mount", "--cache-size", "0", mnt}, "must be more than 0"},
		{[]string{"mount", "--cache-size", "lots", mnt}, "invalid size"},
		{[]string{"mount", "--checkpoint-interval", "0", mnt}, "--checkpoint-interval 0"},
		{[]string{"serve", "--state-dir", filepath.Join(dir, "state"), "--backend", "docker"}, "--backend docker needs --image"},
		{[]string{"serve", "--state-dir", filepath.Join(dir, "state"), "--backend", "vm"}, "want local or docker"},
		{[]string{"serve", "--state-dir", filepath.Join(dir, "state"), "--memory", "lots"}, "--memory"},
		{[]string{"status"}, "accepts 1 arg(s), received 0"},
		{[]string{"version", "extra"}, "unknown command"},
		{[]string{"stauts", dir}, "did you mean status?"},
	} {
		code, _, errs := runExecCLI(t, "", tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || !strings.Contains(errs, "--help") {
			t.Errorf("%v: exit %d %q, want %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
	// A failure that is no usage error exits 1.
	if code, _, errs := runExecCLI(t, "", "status", dir); code != exitFailure || !strings.Contains(errs, "not an agentfs mount") {
		t.Errorf("status of a plain directory: exit %d %q", code, errs)
	}
}

// TestNoSuchPath: a MOUNTPOINT that does not exist is said to be missing,
// not "not an agentfs mount".
func TestNoSuchPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, cmd := range []string{"sync", "status", "umount"} {
		code, _, errs := runExecCLI(t, "", cmd, missing)
		if code != exitFailure || !strings.Contains(errs, missing+": no such path") || strings.Contains(errs, "not an agentfs mount") {
			t.Errorf("%s of a missing path: exit %d %q", cmd, code, errs)
		}
	}
}

// TestVersion: the version line comes from the build information: module
// version, VCS revision, uncommitted changes, Go version.
func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/agentfs/agentfs", Version: "v0.0.0-20261121200031-518b2cef0ae9+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "518b2cef0ae9a2ed998ea5f2884159fb49db0ca2"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := formatVersion(bi, true)
	for _, want := range []string{"agentfs v0.0.0-20261121200031-518b2cef0ae9+dirty", "commit 518b2cef0ae9a2ed998ea5f2884159fb49db0ca2 with uncommitted changes", "go1.99.1"} {
		if !strings.Contains(got, want) {
			t.Errorf("version %q lacks %q", got, want)
		}
	}
	bi.Main.Version, bi.Settings = "(devel)", nil
	if got := formatVersion(bi, true); !strings.Contains(got, "agentfs (devel) (no VCS information") {
		t.Errorf("version without VCS information: %q", got)
	}
	_, out, _ := runExecCLI(t, "", "version")
	if !strings.HasPrefix(out, "agentfs ") || strings.Contains(out, " dev ") {
		t.Errorf("agentfs version: %q", out)
	}
}
