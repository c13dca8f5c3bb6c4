package fs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/testenv"
)

// testImage is the local image scripts/setup-docker.sh imports (busybox,
// with a user agent 1000:1000); AGENTFS_TEST_IMAGE overrides it.
func testImage() string {
	if img := os.Getenv("AGENTFS_TEST_IMAGE"); img != "" {
		return img
	}
	return "agentfs-test/busybox:1"
}

// needDocker checks that a Docker engine answers and has the test image.
func needDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		testenv.Missing(t, "docker", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "image", "inspect", testImage()).CombinedOutput(); err != nil {
		testenv.Missing(t, "Docker engine with image "+testImage()+" (scripts/setup-docker.sh)", fmt.Errorf("docker image inspect: %w: %s", err, bytes.TrimSpace(out)))
	}
}

// dockerRun runs sh -c script in a container of the test image with the
// mount bind-mounted at /workspace, as user (empty: the image's root).
func dockerRun(t *testing.T, mnt, user, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"run", "--rm", "--network=none", "-v", mnt + ":/workspace"}
	if user != "" {
		args = append(args, "-u", user)
	}
	args = append(args, testImage(), "sh", "-c", script)
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDockerBindMount: a container started with -v MOUNTPOINT:/workspace
// reads and writes the workspace as root and as an unprivileged user (the
// kernel enforcing modes, allow_other letting it in), and after `agentfs
// sync` what it wrote is in the volume, with its owners.
func TestDockerBindMount(t *testing.T) {
	needDocker(t)
	m := fstest.Start(t, fstest.Options{})
	if err := os.WriteFile(filepath.Join(m.Dir, "from-host"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := dockerRun(t, m.Dir, "", `set -e
cat /workspace/from-host
echo root > /workspace/root.txt
mkdir -p /workspace/agent-home
chown 1000:1000 /workspace/agent-home
id -u`)
	if !strings.Contains(out, "host") || !strings.HasSuffix(strings.TrimSpace(out), "0") {
		t.Errorf("root container output: %q", out)
	}
	out = dockerRun(t, m.Dir, "1000:1000", `set -e
echo agent > /workspace/agent-home/a.txt
mkdir /workspace/agent-home/sub
echo nested > /workspace/agent-home/sub/b.txt
ln -s a.txt /workspace/agent-home/link
if (echo x > /workspace/not-mine.txt) 2>/dev/null; then echo WROTE-INTO-ROOT; else echo denied; fi
if (echo x >> /workspace/root.txt) 2>/dev/null; then echo WROTE-ROOT-FILE; else echo denied; fi
cat /workspace/root.txt
id -u`)
	if strings.Contains(out, "WROTE") || strings.Count(out, "denied") != 2 || !strings.Contains(out, "root") || !strings.HasSuffix(strings.TrimSpace(out), "1000") {
		t.Errorf("unprivileged container: modes not enforced or files not visible:\n%s", out)
	}
	m.Sync(t)

	// The volume holds it: mount it again, read-only, from a new cache.
	m2 := fstest.Start(t, fstest.Options{URL: m.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "check")})
	for p, want := range map[string]struct {
		content  string
		uid, gid uint32
	}{
		"root.txt":             {"root\n", 0, 0},
		"agent-home/a.txt":     {"agent\n", 1000, 1000},
		"agent-home/sub/b.txt": {"nested\n", 1000, 1000},
	} {
		b, err := os.ReadFile(filepath.Join(m2.Dir, p))
		var st syscall.Stat_t
		serr := syscall.Lstat(filepath.Join(m2.Dir, p), &st)
		if err != nil || serr != nil || string(b) != want.content || st.Uid != want.uid || st.Gid != want.gid {
			t.Errorf("%s in the volume: %q (%v), uid %d gid %d (%v); want %q owned by %d:%d", p, b, err, st.Uid, st.Gid, serr, want.content, want.uid, want.gid)
		}
	}
	if target, err := os.Readlink(filepath.Join(m2.Dir, "agent-home/link")); err != nil || target != "a.txt" {
		t.Errorf("symlink in the volume: %q, %v", target, err)
	}
	if _, err := os.Lstat(filepath.Join(m2.Dir, "not-mine.txt")); !os.IsNotExist(err) {
		t.Errorf("a file the unprivileged container must not create: %v", err)
	}
}
