package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/testenv"
)

// needDockerImage checks that a Docker engine answers and has the test
// image (a failure under CI=true, a skip elsewhere).
func needDockerImage(t *testing.T) {
	t.Helper()
	if _, err := osexec.LookPath("docker"); err != nil {
		testenv.Missing(t, "docker", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := osexec.CommandContext(ctx, "docker", "image", "inspect", "agentfs-test/busybox:1").CombinedOutput(); err != nil {
		testenv.Missing(t, "Docker engine with image agentfs-test/busybox:1 (scripts/setup-docker.sh)",
			fmt.Errorf("docker image inspect: %w: %s", err, bytes.TrimSpace(out)))
	}
}

// execOnMountBackends are the backends the mount-level exec tests run with
// (docker with the test image of scripts/setup-docker.sh; a missing engine
// fails under CI).
var execOnMountBackends = map[string][]string{
	"local":  {"--backend", "local"},
	"docker": {"--backend", "docker", "--image", "agentfs-test/busybox:1", "--user", "0:0"},
}

// TestExecOnMount: `agentfs exec` on an agentfs mount is a sync barrier
// (with automatic checkpoints off, a fresh mount of the store elsewhere, with
// a fresh cache, sees what the command wrote as soon as exec returns) and
// lists what the command created, modified and deleted from the volume's
// history.
func TestExecOnMount(t *testing.T) {
	for name, flags := range execOnMountBackends {
		t.Run(name, func(t *testing.T) {
			if name == "docker" {
				needDockerImage(t)
			}
			m := fstest.Start(t, fstest.Options{Args: []string{"--checkpoint-interval=-1s"}})
			for _, p := range []string{"keep", "mod", "del", "sub/x", "gone/y"} {
				writeFile(t, filepath.Join(m.Dir, p), []byte("0123456789"))
			}
			m.Sync(t)
			args := append(append([]string{"exec", "--changes"}, flags...), m.Dir, "--",
				"sh", "-c", "echo more >> mod; rm del; rm -r gone; mkdir -p nd; echo new > nd/f; printf 9876543210 > sub/x; echo out")
			out, err := m.Agentfs(args...)
			if err != nil {
				t.Fatalf("agentfs %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			t.Run("ChangeList", func(t *testing.T) {
				var got []string
				for _, l := range strings.Split(out, "\n") {
					if len(l) > 2 && strings.Contains("AMD", l[:1]) && l[1] == ' ' {
						got = append(got, l)
					}
				}
				want := "A nd,A nd/f,M mod,M sub/x,D del,D gone,D gone/y"
				if strings.Join(got, ",") != want {
					t.Errorf("changes %q, want %q\n%s", strings.Join(got, ","), want, out)
				}
			})
			t.Run("SyncBarrier", func(t *testing.T) {
				fresh := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true})
				if b, err := os.ReadFile(filepath.Join(fresh.Dir, "nd", "f")); err != nil || string(b) != "new\n" {
					t.Errorf("nd/f in a fresh mount: %q %v", b, err)
				}
				if b, err := os.ReadFile(filepath.Join(fresh.Dir, "mod")); err != nil || string(b) != "0123456789more\n" {
					t.Errorf("mod in a fresh mount: %q %v", b, err)
				}
				if _, err := os.Stat(filepath.Join(fresh.Dir, "del")); !os.IsNotExist(err) {
					t.Errorf("del in a fresh mount: %v", err)
				}
			})
		})
	}
}

// TestRunCommand: `agentfs run URL -- CMD` mounts the volume in a server of
// its own, runs CMD, syncs, unmounts and exits with CMD's status; the
// store has what CMD wrote and nothing stays mounted.
func TestRunCommand(t *testing.T) {
	o := fstest.Options{}
	bin, env := fstest.Setup(t, &o)
	out, err := fstest.Run(bin, env, "run", o.URL, "--", "sh", "-c", "echo ran > result.txt; pwd; exit 7")
	if exitCode(err) != 7 {
		t.Fatalf("agentfs run: exit %d (%v), want 7\n%s", exitCode(err), err, out)
	}
	if !strings.Contains(out, "agentfs-run-") {
		t.Errorf("the command did not run in the temporary mount point:\n%s", out)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), "agentfs-run-") {
		t.Errorf("a mount is left behind:\n%s", mi)
	}
	fresh := fstest.Start(t, fstest.Options{URL: o.URL, ReadOnly: true})
	if b, err := os.ReadFile(filepath.Join(fresh.Dir, "result.txt")); err != nil || string(b) != "ran\n" {
		t.Errorf("result.txt in a fresh mount: %q %v", b, err)
	}
	if out, err := fstest.Run(bin, env, "run", t.TempDir(), "--", "true"); exitCode(err) != exitExecFailed || !strings.Contains(out, "not a store URL") {
		t.Errorf("run on a directory: exit %d\n%s", exitCode(err), out)
	}
}

// TestRunBranch: `agentfs run --branch B` runs the command on branch B (it
// once mounted the default branch with B's cache directory).
func TestRunBranch(t *testing.T) {
	o := fstest.Options{}
	bin, env := fstest.Setup(t, &o)
	if out, err := fstest.Run(bin, env, "fork", o.URL, "main", "other"); err != nil {
		t.Fatalf("agentfs fork: %v\n%s", err, out)
	}
	if out, err := fstest.Run(bin, env, "run", "--branch", "other", o.URL, "--", "sh", "-c", "echo x > f"); err != nil {
		t.Fatalf("agentfs run --branch other: %v\n%s", err, out)
	}
	if out, err := fstest.Run(bin, env, "run", "--branch", "other", o.URL, "--", "cat", "f"); err != nil || !strings.Contains(out, "x") {
		t.Errorf("f on branch other: %v\n%s", err, out)
	}
	if out, err := fstest.Run(bin, env, "run", o.URL, "--", "test", "!", "-e", "f"); err != nil {
		t.Errorf("f is on branch main too: %v\n%s", err, out)
	}
}
