package fs_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/fs/fstest"
	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/internal/testservices"
)

// posixExclusions are the checks an agentfs mount does not pass, with the
// reason. Keep it empty unless the engine cannot do something.
var posixExclusions = map[string]string{}

// TestPOSIXFile runs the POSIX suite over a mount of a file:// store.
func TestPOSIXFile(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	posixtest.Run(t, m.Dir, posixtest.Options{Exclude: posixExclusions})
}

// TestPOSIXEncrypted runs the POSIX suite over a mount of an encrypted
// volume (agentfs init --encrypt) on a file:// store, with checkpoints
// every 500ms so that sealed uploads run while the checks do.
func TestPOSIXEncrypted(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Encrypted: true, Args: []string{"--checkpoint-interval=500ms"}})
	posixtest.Run(t, m.Dir, posixtest.Options{Exclude: posixExclusions})
	m.Sync(t)
	if out, err := m.Agentfs("fsck", "--full", m.URL); err != nil {
		t.Fatalf("fsck --full of the encrypted volume: %v\n%s", err, out)
	}
}

// TestPOSIXS3 runs the POSIX suite over a mount of an S3 store (MinIO),
// with checkpoints every 500ms so that uploads run while the checks do.
func TestPOSIXS3(t *testing.T) {
	url := testservices.StartMinIO(t)
	m := fstest.Start(t, fstest.Options{URL: url, Init: true, Args: []string{"--checkpoint-interval=500ms"}})
	posixtest.Run(t, m.Dir, posixtest.Options{Exclude: posixExclusions})
	m.Sync(t)
}

// TestPOSIXReadOnly populates a volume through a read-write mount, unmounts
// it, and runs the read-only checks through a --read-only mount with a
// fresh cache directory (everything is read back from the store).
func TestPOSIXReadOnly(t *testing.T) {
	rw := fstest.Start(t, fstest.Options{})
	if err := posixtest.Populate(rw.Dir); err != nil {
		t.Fatal(err)
	}
	rw.Unmount(t)
	ro := fstest.Start(t, fstest.Options{URL: rw.URL, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "ro")})
	posixtest.Run(t, ro.Dir, posixtest.Options{ReadOnly: true})
}

// TestFreshCacheIdentical writes a workspace, syncs and unmounts it, mounts
// it again with a new cache directory, and compares the two trees: content
// hashes, modes, owners, all times to the nanosecond, link counts and
// hard-link groups, symlink targets and xattrs.
func TestFreshCacheIdentical(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	writeWorkspace(t, m.Dir)
	m.Sync(t)
	before, err := posixtest.ManifestOf(m.Dir, posixtest.ManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Unmount(t)
	m2 := fstest.Start(t, fstest.Options{URL: m.URL, Dir: filepath.Join(t.TempDir(), "again")})
	after, err := posixtest.ManifestOf(m2.Dir, posixtest.ManifestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(before) < 1000 {
		t.Fatalf("the workspace has only %d paths", len(before))
	}
	if d := posixtest.Diff(before, after); len(d) > 0 {
		t.Errorf("the workspace differs after a remount from a fresh cache directory (%d differences):\n%s", len(d), strings.Join(d[:min(len(d), 40)], "\n"))
	}
}

// writeWorkspace fills dir with what agents leave behind: the populated
// tree of posixtest (sizes, modes, sparse and large files, links, a FIFO,
// xattrs, odd names, fixed times), a git repository when git is present,
// files owned by another user when running as root, and renamed and
// deleted paths.
func writeWorkspace(t *testing.T, dir string) {
	t.Helper()
	if err := posixtest.Populate(dir); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src", "pkg", "deep", "er")
	if err := os.MkdirAll(src, 0o750); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		p := filepath.Join(src, "f"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+".go")
		if err := os.WriteFile(p, []byte(strings.Repeat("package er\n", i+1)), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(filepath.Join(dir, "src", "pkg"), filepath.Join(dir, "src", "lib")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "src", "lib", "deep", "er", "fa.go")); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		p := filepath.Join(dir, "owned-by-1234")
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, 1234, 5678); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("git"); err == nil {
		repo := filepath.Join(dir, "repo")
		if err := os.MkdirAll(repo, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if err := os.WriteFile(filepath.Join(repo, "file"+string(rune('a'+i))), []byte(strings.Repeat("line\n", i)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "first"}, {"checkout", "-q", "-b", "topic"}} {
			cmd := exec.Command("git", append([]string{"-c", "user.email=t@agentfs", "-c", "user.name=t"}, args...)...)
			cmd.Dir = repo
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
	}
}

// TestPOSIXFreeSpace runs posixtest.FreeSpace over every writable mount
// kind, each with its cache directory on a small ext4 filesystem: statfs
// reports that filesystem's space (every write lands there first), and a
// fallocate beyond it is ENOSPC.
func TestPOSIXFreeSpace(t *testing.T) {
	for name, o := range writableKinds(t) {
		t.Run(name, func(t *testing.T) {
			small := posixtest.SmallExt4(t, 512<<20)
			o.CacheDir = filepath.Join(small, "cache")
			m := fstest.Start(t, o)
			var mnt, local unix.Statfs_t
			if err := unix.Statfs(m.Dir, &mnt); err != nil {
				t.Fatal(err)
			}
			if err := unix.Statfs(small, &local); err != nil {
				t.Fatal(err)
			}
			got, want := int64(mnt.Bavail)*mnt.Bsize, int64(local.Bavail)*local.Bsize
			if d := got - want; d > 16<<20 || d < -16<<20 {
				t.Errorf("the mount reports %d bytes available, its cache directory's filesystem %d", got, want)
			}
			posixtest.FreeSpace(t, m.Dir)
		})
	}
}

// TestPOSIXAtime runs the atime checks over every writable mount kind with
// each --atime mode (the default, noatime, runs with the whole suite).
func TestPOSIXAtime(t *testing.T) {
	for _, mode := range []string{"relatime", "strictatime"} {
		t.Run(mode, func(t *testing.T) {
			runOverKinds(t, []string{"--atime=" + mode}, "Atime", "AtimeDropCaches")
		})
	}
}

// TestPOSIXDevSuid runs the device and set-user-ID checks over every
// writable mount kind mounted with --dev and --suid (the default, nodev
// and nosuid, runs with the whole suite).
func TestPOSIXDevSuid(t *testing.T) {
	runOverKinds(t, []string{"--dev", "--suid"}, "DeviceOpen", "SetuidExec")
}

// runOverKinds mounts each writable mount kind (file://, virtual over a
// host directory, virtual over a snapshot) with the extra flags args and
// runs the named checks of posixtest.Checks in it.
func runOverKinds(t *testing.T, args []string, checks ...string) {
	for kind, o := range writableKinds(t) {
		t.Run(kind, func(t *testing.T) {
			o.Args = append(o.Args, args...)
			m := fstest.Start(t, o)
			for _, name := range checks {
				t.Run(name, func(t *testing.T) {
					dir, err := os.MkdirTemp(m.Dir, name+"-")
					if err != nil {
						t.Fatal(err)
					}
					posixtest.Checks[name](t, dir)
				})
			}
		})
	}
}

// TestFileHandlesRemount: a file handle survives an unmount and a mount of
// the same cache directory, and is stale (never another file) under a new
// cache directory, which numbers inodes anew.
func TestFileHandlesRemount(t *testing.T) {
	m := fstest.Start(t, fstest.Options{})
	p := filepath.Join(m.Dir, "f")
	if err := os.WriteFile(p, []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Unmount(t)
	open := func(m *fstest.Mount) ([]byte, error) {
		mfd, err := unix.Open(m.Dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = unix.Close(mfd) }()
		fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY)
		if err != nil {
			return nil, err
		}
		defer func() { _ = unix.Close(fd) }()
		b := make([]byte, 16)
		n, err := unix.Read(fd, b)
		return b[:n], err
	}
	again := fstest.Start(t, fstest.Options{URL: m.URL, CacheDir: m.CacheDir, Dir: m.Dir})
	if b, err := open(again); err != nil || string(b) != "kept" {
		t.Errorf("the handle after a remount with the same cache directory: %q, %v", b, err)
	}
	again.Unmount(t)
	fresh := fstest.Start(t, fstest.Options{URL: m.URL, Dir: filepath.Join(t.TempDir(), "fresh")})
	if b, err := open(fresh); !errors.Is(err, unix.ESTALE) {
		t.Errorf("the handle under a new cache directory: %q, %v; want ESTALE", b, err)
	}
}

// writableKinds returns the options of every writable mount kind: a
// file:// volume, a virtual mount over a host directory, and a virtual
// mount over snapshot "base" of a volume holding one file.
func writableKinds(t *testing.T) map[string]fstest.Options {
	plain := fstest.Start(t, fstest.Options{})
	if err := os.WriteFile(filepath.Join(plain.Dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain.Unmount(t)
	if out, err := plain.Agentfs("snapshot", "save", plain.URL, "base"); err != nil {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	return map[string]fstest.Options{
		"File":            {},
		"VirtualHost":     {Args: []string{"--virtual", "--base", t.TempDir()}},
		"VirtualSnapshot": {URL: plain.URL, Args: []string{"--virtual", "--base", "snapshot:base"}},
	}
}
