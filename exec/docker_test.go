package exec

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/testenv"
)

// testImage is the image scripts/setup-docker.sh imports from busybox-static.
func testImage() string {
	if img := os.Getenv("AGENTFS_TEST_IMAGE"); img != "" {
		return img
	}
	return "agentfs-test/busybox:1"
}

// testUser is the unprivileged user of the test image.
const testUser = "1000:1000"

// dockerWorkspace returns a fresh workspace directory owned by testUser.
func dockerWorkspace(t testing.TB) string {
	dir := t.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 1000, 1000); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// newDockerBackend starts a docker backend, or reports the engine or the
// image missing through testenv (a failure under CI).
func newDockerBackend(t testing.TB, dir string, opts DockerOptions) *Backend {
	t.Helper()
	if opts.Image == "" {
		opts.Image = testImage()
	}
	if opts.User == "" {
		opts.User = testUser
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := NewDocker(ctx, dir, opts)
	if errors.Is(err, ErrDockerUnavailable) || errors.Is(err, ErrImageMissing) {
		testenv.Missing(t, "docker engine with image "+opts.Image+" (bash scripts/setup-docker.sh)", err)
	}
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

func dockerFixture() fixture {
	return fixture{
		new: func(t *testing.T, opts Options) (*Backend, string) {
			dir := dockerWorkspace(t)
			return newDockerBackend(t, dir, DockerOptions{Options: opts}), dir
		},
		alive: func(t *testing.T, b *Backend, pid int) bool {
			t.Helper()
			res, err := b.Exec(testCtx(t), Request{Argv: []string{"cat", "/proc/" + strconv.Itoa(pid) + "/stat"}})
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
		},
	}
}

func TestDocker(t *testing.T) { testBackend(t, dockerFixture()) }
