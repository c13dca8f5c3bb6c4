package posixtest

import (
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// checkTmpfile: open(2) with O_TMPFILE makes a regular file with no name
// (link count 0, in no listing) that reads and writes like any other;
// linkat of its descriptor gives it a name, with its data, and it stays
// writable through the descriptor; with O_EXCL it can never get a name
// (ENOENT); one never linked leaves nothing behind.
func checkTmpfile(t *testing.T, dir string) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o640)
	ok(t, "open O_TMPFILE", err)
	defer closeQuietly(&fd)
	data := randBytes(9, 100_000)
	pwriteAll(t, fd, data, 0)
	st := fstat(t, fd)
	if st.Nlink != 0 || st.Mode != unix.S_IFREG|(0o640&^umask(t)) || st.Size != int64(len(data)) {
		t.Errorf("O_TMPFILE file: nlink %d mode %#o size %d, want 0, %#o, %d", st.Nlink, st.Mode, st.Size, unix.S_IFREG|(0o640&^umask(t)), len(data))
	}
	if names := listDir(t, dir); len(names) != 0 {
		t.Errorf("an O_TMPFILE file shows in its directory: %v", names)
	}
	named := join(dir, "named")
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	ok(t, "linkat of the O_TMPFILE descriptor", unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, named, unix.AT_SYMLINK_FOLLOW))
	if st := fstat(t, fd); st.Nlink != 1 || st.Ino != lstat(t, named).Ino {
		t.Errorf("after linkat: nlink %d, inode %d, named inode %d", st.Nlink, st.Ino, lstat(t, named).Ino)
	}
	wantContent(t, named, data)
	pwriteAll(t, fd, []byte("more"), int64(len(data)))
	closeFD(t, &fd)
	wantContent(t, named, append(slices.Clone(data), "more"...))

	excl, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	ok(t, "open O_TMPFILE|O_EXCL", err)
	defer closeQuietly(&excl)
	proc = "/proc/self/fd/" + strconv.Itoa(excl)
	wantErrno(t, "linkat of an O_TMPFILE|O_EXCL descriptor", unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, join(dir, "excl"), unix.AT_SYMLINK_FOLLOW), unix.ENOENT)
	pwriteAll(t, excl, []byte("gone"), 0)
	closeFD(t, &excl)
	if names := listDir(t, dir); !slices.Equal(names, []string{"named"}) {
		t.Errorf("after closing an unlinked O_TMPFILE file the directory holds %v, want [named]", names)
	}
}
