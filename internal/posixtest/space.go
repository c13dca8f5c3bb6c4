package posixtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// SmallExt4 makes a new ext4 filesystem of size bytes in an image file,
// loop-mounts it on a new directory and returns that directory; it is
// unmounted at cleanup. Checks that fill a filesystem (FreeSpace) run on
// one, and a mount under test keeps its cache directory on one. Needs root
// (reported through testenv.Missing) and mkfs.ext4.
func SmallExt4(t testing.TB, size int64) string {
	t.Helper()
	needRoot(t, "loop-mounting a small ext4 filesystem")
	base := t.TempDir()
	img, dir := filepath.Join(base, "ext4.img"), filepath.Join(base, "fs")
	ok(t, "mkdir", os.Mkdir(dir, 0o755))
	f, err := os.Create(img)
	ok(t, "create "+img, err)
	ok(t, "size "+img, f.Truncate(size))
	ok(t, "close "+img, f.Close())
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", img, err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, dir).CombinedOutput(); err != nil {
		t.Fatalf("mount -o loop %s: %v\n%s", img, err, out)
	}
	t.Cleanup(func() {
		// A process that used the filesystem (a mount server whose cache
		// directory it held) may release its files a moment after it
		// was seen to exit: retry for a while before failing.
		var err error
		var out []byte
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if out, err = exec.Command("umount", dir).CombinedOutput(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// FreeSpace checks that statfs reports what can really be written to dir:
// fallocate of all the free space it reports succeeds or fails with ENOSPC
// (never EFBIG), fallocate of more than that fails with ENOSPC, and the
// space is free again once the files are removed. It may fill dir's
// filesystem for a moment: run it only on a small one (SmallExt4, or a
// mount whose local cache is on one), never on a disk others share.
func FreeSpace(t *testing.T, dir string) {
	var s unix.Statfs_t
	ok(t, "statfs", unix.Statfs(dir, &s))
	avail := int64(s.Bavail) * s.Bsize
	if avail <= 0 || avail > 1<<40 {
		t.Fatalf("statfs of %s reports %d bytes available: not the small filesystem this check needs", dir, avail)
	}
	t.Logf("%s: %d MiB available", dir, avail>>20)
	try := func(name string, n int64) error {
		p := join(dir, name)
		fd := open(t, p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
		defer closeQuietly(&fd)
		err := unix.Fallocate(fd, 0, 0, n)
		closeFD(t, &fd)
		ok(t, "unlink "+p, unix.Unlink(p))
		return err
	}
	if err := try("all", avail); err != nil {
		wantErrno(t, "fallocate of all the free space", err, unix.ENOSPC)
	}
	wantErrno(t, "fallocate of more than the free space", try("more", avail+64<<20), unix.ENOSPC)
	ok(t, "statfs", unix.Statfs(dir, &s))
	if again := int64(s.Bavail) * s.Bsize; again < avail-avail/10 {
		t.Errorf("after removing the files %d bytes are available, %d before", again, avail)
	}
}
