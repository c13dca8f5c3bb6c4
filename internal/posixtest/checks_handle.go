package posixtest

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// checkFileHandles (root: open_by_handle_at needs CAP_DAC_READ_SEARCH):
// name_to_handle_at gives handles of a file, a directory and a file in a
// subdirectory that open_by_handle_at opens (same inode, same content),
// also after the kernel dropped its caches (then the filesystem must find
// the inode, and a directory's parent, from the handle alone); a removed
// file's handle is ESTALE.
func checkFileHandles(t *testing.T, dir string) {
	needRoot(t, "open_by_handle_at needs CAP_DAC_READ_SEARCH")
	writeFile(t, join(dir, "f"), []byte("file data"), 0o644)
	mkdirAll(t, join(dir, "d", "e"))
	writeFile(t, join(dir, "d", "e", "g"), []byte("deeper"), 0o644)
	mfd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&mfd)
	type target struct {
		path string
		data []byte // nil for a directory
		h    unix.FileHandle
		ino  uint64
	}
	targets := []*target{
		{path: join(dir, "f"), data: []byte("file data")},
		{path: join(dir, "d", "e")},
		{path: join(dir, "d", "e", "g"), data: []byte("deeper")},
	}
	for _, tg := range targets {
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, tg.path, 0)
		ok(t, "name_to_handle_at "+tg.path, err)
		tg.h, tg.ino = h, lstat(t, tg.path).Ino
	}
	reopen := func(when string) {
		t.Helper()
		for _, tg := range targets {
			flags := unix.O_RDONLY | unix.O_CLOEXEC
			if tg.data == nil {
				flags |= unix.O_DIRECTORY
			}
			fd, err := unix.OpenByHandleAt(mfd, tg.h, flags)
			if err != nil {
				t.Errorf("%s: open_by_handle_at %s: %v", when, tg.path, err)
				continue
			}
			if st := fstat(t, fd); st.Ino != tg.ino {
				t.Errorf("%s: the handle of %s opened inode %d, want %d", when, tg.path, st.Ino, tg.ino)
			}
			if tg.data != nil {
				b := make([]byte, 64)
				n, err := unix.Pread(fd, b, 0)
				if err != nil || !bytes.Equal(b[:n], tg.data) {
					t.Errorf("%s: reading %s through its handle: %q, %v", when, tg.path, b[:n], err)
				}
			}
			_ = unix.Close(fd)
		}
	}
	reopen("with the kernel's caches")
	dropCaches(t)
	reopen("after dropping the kernel's caches")
	ok(t, "unlink", unix.Unlink(targets[0].path))
	dropCaches(t)
	fd, err := unix.OpenByHandleAt(mfd, targets[0].h, unix.O_RDONLY|unix.O_CLOEXEC)
	if err == nil {
		_ = unix.Close(fd)
	}
	wantErrno(t, "open_by_handle_at of a removed file", err, unix.ESTALE)
}
