package posixtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// PopulatedDir is the directory Populate creates inside the directory it is
// given; ReadOnlyChecks look for it there.
const PopulatedDir = "posixtest-populated"

// Populated tree geometry, shared by Populate and the read-only checks.
const (
	popBigDirEntries = 1000
	popLargeSize     = 9<<20 + 12345 // spans several 4 MiB chunks
	popSparseSize    = 16 << 20
	popSeedLarge     = 101
	popSeedBinary    = 102
)

// popSparseData lists where the populated sparse file holds data.
var popSparseData = []struct {
	off  int64
	data string
}{{0, "head"}, {4<<20 - 2, "straddles 4 MiB"}, {popSparseSize - 4, "tail"}}

// Populate writes a known tree into dir/PopulatedDir (which must not exist)
// for the read-only variant: regular files of several sizes (one of 9 MiB,
// a sparse one of 16 MiB), modes including setuid and sticky, nested and
// empty directories, a directory of 1000 entries, symlinks (relative,
// dangling, absolute), a hard-link pair, a FIFO, user xattrs and odd names,
// with fixed atimes and mtimes in nanoseconds. It writes the same tree every
// time, so that ReadOnlyChecks can rebuild it on local disk and compare.
// It needs no privileges and reports the first error.
func Populate(dir string) error {
	root := filepath.Join(dir, PopulatedDir)
	if err := os.Mkdir(root, 0o755); err != nil {
		return fmt.Errorf("populate: %w", err)
	}
	at := func(p string) string { return filepath.Join(root, p) }
	type step func() error
	writeMode := func(p string, data []byte, mode os.FileMode) step {
		return func() error {
			if err := os.WriteFile(at(p), data, 0o600); err != nil {
				return err
			}
			return os.Chmod(at(p), mode)
		}
	}
	steps := []step{
		writeMode("small.txt", []byte("hello, read-only world\n"), 0o644),
		writeMode("empty", nil, 0o644),
		writeMode("binary.bin", randBytes(popSeedBinary, 100_000), 0o644),
		writeMode("large.bin", randBytes(popSeedLarge, popLargeSize), 0o644),
		writeMode("exec.sh", []byte("#!/bin/sh\necho hi\n"), 0o755),
		writeMode("readonly.txt", []byte("ro"), 0o444),
		writeMode("setuid", []byte("suid"), 0o4755),
		writeMode("private", []byte("mine"), 0o600),
		writeMode("odd name\n", []byte("odd"), 0o644),
		writeMode("caf\u00e9", []byte("nfc"), 0o644),
		func() error {
			f, err := os.OpenFile(at("sparse.bin"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			for _, d := range popSparseData {
				if _, err := f.WriteAt([]byte(d.data), d.off); err != nil {
					f.Close()
					return err
				}
			}
			return f.Close()
		},
		func() error { return os.MkdirAll(at("dir/sub/deeper"), 0o755) },
		writeMode("dir/sub/deeper/file", []byte("deep"), 0o644),
		writeMode("dir/sub/file", []byte("sub"), 0o644),
		func() error { return os.Mkdir(at("empty-dir"), 0o755) },
		func() error { return os.Mkdir(at("sticky"), 0o755) },
		func() error { return os.Chmod(at("sticky"), 0o1777) },
		func() error { return os.Mkdir(at("big-dir"), 0o755) },
		func() error {
			for i := range popBigDirEntries {
				if err := os.WriteFile(at(fmt.Sprintf("big-dir/entry-%04d", i)), []byte(fmt.Sprintln(i)), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { return os.Symlink("small.txt", at("link-to-small")) },
		func() error { return os.Symlink("dir/sub", at("link-to-dir")) },
		func() error { return os.Symlink("../../small.txt", at("dir/sub/link-up")) },
		func() error { return os.Symlink("missing", at("dangling")) },
		func() error { return os.Symlink("/nonexistent/absolute", at("absolute")) },
		func() error { return os.Link(at("small.txt"), at("dir/hard-link-to-small")) },
		func() error { return unix.Mkfifo(at("fifo"), 0o644) },
		func() error { return os.Chmod(at("fifo"), 0o644) },
		func() error { return unix.Setxattr(at("small.txt"), "user.color", []byte("blue"), 0) },
		func() error { return unix.Setxattr(at("binary.bin"), "user.blob", randBytes(7, 1000), 0) },
		func() error { return unix.Setxattr(at("dir"), "user.dir", []byte("1"), 0) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("populate %s (step %d): %w", root, i, err)
		}
	}
	var paths []string
	if err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		paths = append(paths, p)
		return err
	}); err != nil {
		return fmt.Errorf("populate: %w", err)
	}
	slices.Reverse(paths) // children first, so directory times stick
	for i, p := range paths {
		times := []unix.Timespec{
			{Sec: 1_300_000_000 + int64(i)*11, Nsec: int64(i*7919+17) % 1_000_000_000},
			{Sec: 1_300_000_000 + int64(i)*13, Nsec: int64(i*104729+5) % 1_000_000_000},
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, times, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("populate: utimensat %s: %w", p, err)
		}
	}
	return nil
}

// ReadOnlyChecks maps the name of every read-only check to its function.
// Each is given mnt, a directory that holds the tree Populate wrote (in
// PopulatedDir) as the variant under test presents it, mounted read-only;
// it verifies the tree and that every kind of write fails with EROFS, and
// leaves the tree untouched. Callers must not modify the map.
var ReadOnlyChecks = map[string]func(t *testing.T, mnt string){
	"ROTree":        checkROTree,
	"ROReads":       checkROReads,
	"ROWritesFail":  checkROWritesFail,
	"ROLocks":       checkROLocks,
	"ROStatfsFlags": checkROStatfs,
	"ROFileHandles": checkROFileHandles,
}

// checkROFileHandles (root: open_by_handle_at needs CAP_DAC_READ_SEARCH):
// handles of a file and a directory of the tree open them again, also
// after the kernel dropped its caches.
func checkROFileHandles(t *testing.T, mnt string) {
	needRoot(t, "open_by_handle_at needs CAP_DAC_READ_SEARCH")
	root := join(mnt, PopulatedDir)
	mfd := open(t, mnt, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&mfd)
	paths := []string{join(root, "small.txt"), join(root, "empty-dir")}
	handles := make([]unix.FileHandle, len(paths))
	for i, p := range paths {
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, p, 0)
		ok(t, "name_to_handle_at "+p, err)
		handles[i] = h
	}
	want := readFile(t, paths[0])
	dropCaches(t)
	for i, p := range paths {
		fd, err := unix.OpenByHandleAt(mfd, handles[i], unix.O_RDONLY|unix.O_CLOEXEC)
		if err != nil {
			t.Errorf("after dropping the kernel's caches: open_by_handle_at %s: %v", p, err)
			continue
		}
		if st := fstat(t, fd); st.Ino != lstat(t, p).Ino {
			t.Errorf("the handle of %s opened inode %d, want %d", p, st.Ino, lstat(t, p).Ino)
		}
		if i == 0 {
			b := make([]byte, len(want)+1)
			if n := preadFull(t, fd, b, 0); !bytes.Equal(b[:n], want) {
				t.Errorf("reading %s through its handle: %s", p, describeDiff(b[:n], want))
			}
		}
		_ = unix.Close(fd)
	}
}

// checkROTree: the tree is attribute-for-attribute what Populate writes
// (compared with a fresh Populate on local disk; atime and ctime aside).
func checkROTree(t *testing.T, mnt string) {
	ref := t.TempDir()
	ok(t, "populate the reference", Populate(ref))
	wantNoDiff(t, "populated tree", manifest(t, join(ref, PopulatedDir)), manifest(t, join(mnt, PopulatedDir)), IgnoreAtime, IgnoreCtime)
}

// checkROReads: reads at offsets (large and sparse files), mmap, symlink
// traversal, xattrs and a 1000-entry readdir return what Populate wrote.
func checkROReads(t *testing.T, mnt string) {
	root := join(mnt, PopulatedDir)
	large := randBytes(popSeedLarge, popLargeSize)
	fd := open(t, join(root, "large.bin"), unix.O_RDONLY, 0)
	defer closeQuietly(&fd)
	for _, off := range []int64{0, 1, 4<<20 - 7, 4 << 20, 8<<20 + 3, popLargeSize - 100} {
		buf := make([]byte, 5000)
		n := preadFull(t, fd, buf, off)
		if want := large[off:min(off+5000, popLargeSize)]; !bytes.Equal(buf[:n], want) {
			t.Errorf("large.bin at %d: %s", off, describeDiff(buf[:n], want))
		}
	}
	m, err := unix.Mmap(fd, 0, popLargeSize, unix.PROT_READ, unix.MAP_SHARED)
	ok(t, "mmap", err)
	if !bytes.Equal(m, large) {
		t.Errorf("mmap of large.bin: %s", describeDiff(m, large))
	}
	ok(t, "munmap", unix.Munmap(m))

	sparse := make([]byte, popSparseSize)
	for _, d := range popSparseData {
		copy(sparse[d.off:], d.data)
	}
	wantContent(t, join(root, "sparse.bin"), sparse)
	wantContent(t, join(root, "link-to-small"), []byte("hello, read-only world\n"))
	wantContent(t, join(root, "link-to-dir", "link-up"), []byte("hello, read-only world\n"))
	wantContent(t, join(root, "dir", "hard-link-to-small"), []byte("hello, read-only world\n"))
	if v, err := getxattr(join(root, "small.txt"), "user.color"); err != nil || string(v) != "blue" {
		t.Errorf("user.color: %q, %v", v, err)
	}
	if got := xattrNames(t, join(root, "dir")); !slices.Equal(got, []string{"user.dir"}) {
		t.Errorf("xattrs of dir: %q", got)
	}
	names := listDir(t, join(root, "big-dir"))
	slices.Sort(names)
	want := make([]string, popBigDirEntries)
	for i := range want {
		want[i] = fmt.Sprintf("entry-%04d", i)
	}
	if !slices.Equal(names, want) {
		t.Errorf("big-dir lists %d entries, want each of entry-0000..entry-%04d once", len(names), popBigDirEntries-1)
	}
	// The FIFO opens for reading without blocking and reads EOF.
	ffd := open(t, join(root, "fifo"), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	defer closeQuietly(&ffd)
	if n, err := unix.Read(ffd, make([]byte, 8)); n != 0 || err != nil {
		t.Errorf("read of a FIFO with no writer: %d, %v; want EOF", n, err)
	}
}

// checkROWritesFail: every kind of modification fails with EROFS, and the
// tree is unchanged afterwards.
func checkROWritesFail(t *testing.T, mnt string) {
	root := join(mnt, PopulatedDir)
	before := manifest(t, root)
	at := func(p string) string { return join(root, p) }
	openErr := func(p string, flags int) error {
		fd, err := unix.Open(p, flags|unix.O_CLOEXEC, 0o644)
		if err == nil {
			err = unix.Close(fd) // the open should have failed; report success
		}
		return err
	}
	small := at("small.txt")
	ops := []struct {
		name string
		err  error
	}{
		{"open O_WRONLY", openErr(small, unix.O_WRONLY)},
		{"open O_RDWR", openErr(small, unix.O_RDWR)},
		{"open O_RDONLY|O_TRUNC", openErr(small, unix.O_RDONLY|unix.O_TRUNC)},
		{"create", openErr(at("new-file"), unix.O_WRONLY|unix.O_CREAT)},
		{"open O_TMPFILE", openErr(root, unix.O_TMPFILE|unix.O_RDWR)},
		{"mkdir", unix.Mkdir(at("new-dir"), 0o755)},
		{"rmdir", unix.Rmdir(at("empty-dir"))},
		{"unlink", unix.Unlink(small)},
		{"rename", unix.Rename(small, at("renamed"))},
		{"rename exchange", unix.Renameat2(unix.AT_FDCWD, small, unix.AT_FDCWD, at("empty"), unix.RENAME_EXCHANGE)},
		{"link", unix.Link(small, at("new-link"))},
		{"symlink", unix.Symlink("small.txt", at("new-symlink"))},
		{"mkfifo", unix.Mkfifo(at("new-fifo"), 0o644)},
		{"chmod", unix.Chmod(small, 0o600)},
		{"chown to self", unix.Chown(small, unix.Geteuid(), unix.Getegid())},
		{"utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, small, nil, 0)},
		{"truncate", unix.Truncate(small, 0)},
		{"setxattr", unix.Setxattr(small, "user.new", []byte("x"), 0)},
		{"removexattr", unix.Removexattr(small, "user.color")},
	}
	for _, op := range ops {
		wantErrno(t, op.name, op.err, unix.EROFS)
	}
	rfd := open(t, small, unix.O_RDONLY, 0)
	defer closeQuietly(&rfd)
	_, err := unix.Write(rfd, []byte("x"))
	wantErrno(t, "write to a read-only descriptor", err, unix.EBADF)
	_, err = unix.Mmap(rfd, 0, 16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	wantErrno(t, "writable shared map", err, unix.EACCES)
	wantNoDiff(t, "tree after failed writes", before, manifest(t, root))
}

// checkROLocks: read-only descriptors take flock locks of both kinds and
// fcntl read locks; fcntl write locks need a writable descriptor (EBADF).
func checkROLocks(t *testing.T, mnt string) {
	p := join(mnt, PopulatedDir, "small.txt")
	a := open(t, p, unix.O_RDONLY, 0)
	defer closeQuietly(&a)
	b := open(t, p, unix.O_RDONLY, 0)
	defer closeQuietly(&b)
	ok(t, "LOCK_SH", unix.Flock(a, unix.LOCK_SH|unix.LOCK_NB))
	ok(t, "second LOCK_SH", unix.Flock(b, unix.LOCK_SH|unix.LOCK_NB))
	ok(t, "LOCK_UN", unix.Flock(b, unix.LOCK_UN))
	ok(t, "LOCK_EX on a read-only descriptor", unix.Flock(a, unix.LOCK_EX|unix.LOCK_NB))
	wantErrno(t, "conflicting LOCK_EX", unix.Flock(b, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	ok(t, "LOCK_UN", unix.Flock(a, unix.LOCK_UN))
	rd := lk(unix.F_RDLCK, 0, 0)
	ok(t, "F_SETLK read lock", unix.FcntlFlock(uintptr(a), unix.F_SETLK, &rd))
	wr := lk(unix.F_WRLCK, 0, 0)
	err := unix.FcntlFlock(uintptr(a), unix.F_SETLK, &wr)
	if !errors.Is(err, unix.EBADF) {
		t.Errorf("F_SETLK write lock on a read-only descriptor: %v, want EBADF", err)
	}
}

// checkROStatfs: statfs reports ST_RDONLY and sane numbers.
func checkROStatfs(t *testing.T, mnt string) {
	var s unix.Statfs_t
	ok(t, "statfs", unix.Statfs(join(mnt, PopulatedDir), &s))
	if s.Flags&unix.ST_RDONLY == 0 {
		t.Errorf("statfs flags %#x lack ST_RDONLY", s.Flags)
	}
	if s.Bsize <= 0 || s.Blocks == 0 || s.Namelen != 255 {
		t.Errorf("implausible statfs: %+v", s)
	}
}
