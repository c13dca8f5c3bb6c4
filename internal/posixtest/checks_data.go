package posixtest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// checkCreateReadWrite: a new file takes the umask into account, writes land
// at the offsets given (unaligned, across pages), reads past EOF return 0,
// the file offset moves as write(2) says, and inode numbers are stable and
// distinct.
func checkCreateReadWrite(t *testing.T, dir string) {
	p := join(dir, "f")
	fd := open(t, p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o666)
	defer closeQuietly(&fd)

	st := fstat(t, fd)
	if got, want := st.Mode, unix.S_IFREG|(0o666&^umask(t)); got != want {
		t.Errorf("new file mode %#o, want %#o (0666 less the umask)", got, want)
	}
	if st.Size != 0 || st.Nlink != 1 {
		t.Errorf("new file: size %d nlink %d, want 0 and 1", st.Size, st.Nlink)
	}
	if st.Blksize <= 0 {
		t.Errorf("st_blksize %d, want > 0", st.Blksize)
	}
	if uid, gid := uint32(unix.Geteuid()), uint32(unix.Getegid()); st.Uid != uid || st.Gid != gid {
		t.Errorf("new file owned by %d:%d, want the creator %d:%d", st.Uid, st.Gid, uid, gid)
	}

	pwriteAll(t, fd, []byte("hello"), 0)
	pwriteAll(t, fd, []byte("world"), 100)
	pwriteAll(t, fd, []byte("XY"), 2)
	want := make([]byte, 105)
	copy(want, "heXYo")
	copy(want[100:], "world")
	got := make([]byte, 200)
	if n := preadFull(t, fd, got, 0); n != 105 || !bytes.Equal(got[:n], want) {
		t.Errorf("read back %d bytes %q, want %q", n, got[:n], want)
	}
	if n, err := unix.Pread(fd, got, 1000); err != nil || n != 0 {
		t.Errorf("pread past EOF: n=%d err=%v, want 0, nil", n, err)
	}

	// The file offset: write(2) starts at the offset and advances it.
	if off, err := unix.Seek(fd, 50, unix.SEEK_SET); err != nil || off != 50 {
		t.Fatalf("lseek 50: %d, %v", off, err)
	}
	if n, err := unix.Write(fd, []byte("mid")); err != nil || n != 3 {
		t.Fatalf("write at 50: %d, %v", n, err)
	}
	copy(want[50:], "mid")
	if off, err := unix.Seek(fd, 0, unix.SEEK_CUR); err != nil || off != 53 {
		t.Errorf("offset after write: %d, %v; want 53", off, err)
	}
	if off, err := unix.Seek(fd, -5, unix.SEEK_END); err != nil || off != 100 {
		t.Errorf("lseek -5 from end: %d, %v; want 100", off, err)
	}

	// Unaligned data across many pages, read back in odd-sized pieces.
	big := randBytes(1, 1<<20+333)
	pwriteAll(t, fd, big, 4095)
	want = append(want[:min(len(want), 4095)], make([]byte, max(0, 4095-len(want)))...)
	want = append(want, big...)
	st = fstat(t, fd)
	if st.Size != int64(len(want)) {
		t.Errorf("size after big write %d, want %d", st.Size, len(want))
	}
	for _, chunk := range []int{1, 4097, 65537} {
		got := make([]byte, 0, len(want))
		buf := make([]byte, chunk)
		for off := int64(0); ; {
			n, err := unix.Pread(fd, buf, off)
			ok(t, "pread", err)
			if n == 0 {
				break
			}
			got = append(got, buf[:n]...)
			off += int64(n)
			if chunk == 1 && off > 8192 {
				// Reading a megabyte a byte at a time proves nothing more.
				got = append(got, want[off:]...)
				break
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("read in pieces of %d: %s", chunk, describeDiff(got, want))
		}
	}
	closeFD(t, &fd)
	wantContent(t, p, want)

	// Inode numbers: stable across lookups and reopen, distinct per file.
	st1, st2 := lstat(t, p), lstat(t, p)
	if st1.Ino != st2.Ino || st1.Ino != st.Ino || st1.Dev != st.Dev {
		t.Errorf("inode of %s changed between lookups: %d/%d, %d", p, st1.Ino, st2.Ino, st.Ino)
	}
	q := join(dir, "g")
	writeFile(t, q, nil, 0o644)
	if lstat(t, q).Ino == st1.Ino {
		t.Errorf("two files share inode %d", st1.Ino)
	}
	// A file created with mode 0 is still fully usable by its open descriptor.
	z := join(dir, "zero-mode")
	zfd := open(t, z, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0)
	defer closeQuietly(&zfd)
	pwriteAll(t, zfd, []byte("x"), 0)
	if m := lstat(t, z).Mode & 0o7777; m != 0 {
		t.Errorf("file created with mode 0 has mode %#o", m)
	}
}

// checkHoles: unwritten ranges read as zeros, SEEK_DATA/SEEK_HOLE give
// either exact answers or the generic ones (data everywhere, one hole at
// EOF), and st_blocks is plausible for a sparse file.
func checkHoles(t *testing.T, dir string) {
	const (
		dataOff = 1 << 20
		dataLen = 64 << 10
		size    = 4 << 20
	)
	p := join(dir, "sparse")
	fd := open(t, p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
	defer closeQuietly(&fd)
	data := randBytes(2, dataLen)
	pwriteAll(t, fd, data, dataOff)
	ok(t, "ftruncate", unix.Ftruncate(fd, size))
	ok(t, "fsync", unix.Fsync(fd))

	buf := make([]byte, size)
	if n := preadFull(t, fd, buf, 0); n != size {
		t.Fatalf("read %d bytes of a %d-byte sparse file", n, size)
	}
	want := make([]byte, size)
	copy(want[dataOff:], data)
	if !bytes.Equal(buf, want) {
		t.Errorf("sparse file: %s", describeDiff(buf, want))
	}

	st := fstat(t, fd)
	if st.Size != size {
		t.Errorf("size %d, want %d", st.Size, size)
	}
	if used := st.Blocks * 512; used < dataLen || used > size+1<<20 {
		t.Errorf("st_blocks %d (%d bytes) for %d bytes of data in a %d-byte file; want between", st.Blocks, used, dataLen, size)
	}

	// SEEK_DATA from 0 lands at or before the data: exact filesystems say
	// dataOff, the generic implementation 0, chunked ones anything between.
	off, err := unix.Seek(fd, 0, unix.SEEK_DATA)
	switch {
	case err != nil:
		t.Errorf("SEEK_DATA from 0: %v", err)
	case off > dataOff:
		t.Errorf("SEEK_DATA from 0 = %d, beyond the data at %d", off, dataOff)
	}
	off, err = unix.Seek(fd, dataOff, unix.SEEK_HOLE)
	switch {
	case err != nil:
		t.Errorf("SEEK_HOLE from %d: %v", dataOff, err)
	case off < dataOff+dataLen || off > size:
		t.Errorf("SEEK_HOLE from %d = %d, want within [%d, %d]", dataOff, off, dataOff+dataLen, size)
	}
	// In the trailing hole: ENXIO (exact) or the offset itself (generic).
	trail := int64(dataOff + dataLen + 1<<20)
	off, err = unix.Seek(fd, trail, unix.SEEK_DATA)
	if err == nil && off != trail {
		t.Errorf("SEEK_DATA in the trailing hole at %d = %d, want ENXIO or %d", trail, off, trail)
	} else if err != nil {
		wantErrno(t, "SEEK_DATA in the trailing hole", err, unix.ENXIO)
	}
	// At or past EOF: ENXIO for both.
	_, err = unix.Seek(fd, size, unix.SEEK_DATA)
	wantErrno(t, "SEEK_DATA at EOF", err, unix.ENXIO)
	_, err = unix.Seek(fd, size+1, unix.SEEK_HOLE)
	wantErrno(t, "SEEK_HOLE past EOF", err, unix.ENXIO)

	// A file that is all hole.
	q := join(dir, "allhole")
	writeFile(t, q, nil, 0o644)
	ok(t, "truncate", unix.Truncate(q, 1<<20))
	wantContent(t, q, make([]byte, 1<<20))
	if st := lstat(t, q); st.Blocks*512 > 1<<20+1<<16 {
		t.Errorf("an all-hole 1 MiB file uses %d blocks", st.Blocks)
	}
}

// checkTruncate: shrinking drops data for good (growing again reads zeros,
// not the old bytes), growing reads zeros, mtime and ctime change, and the
// errors for negative sizes, directories and read-only descriptors.
func checkTruncate(t *testing.T, dir string) {
	p := join(dir, "f")
	writeFile(t, p, bytes.Repeat([]byte("a"), 100), 0o644)
	fd := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&fd)
	setPast(t, p)
	ok(t, "ftruncate 10", unix.Ftruncate(fd, 10))
	if st := fstat(t, fd); st.Size != 10 || ts(st.Mtim) == ts(pastTime) {
		t.Errorf("after ftruncate 10: size %d, mtime %d (want 10 and a new mtime)", st.Size, ts(st.Mtim))
	}
	ok(t, "ftruncate 50", unix.Ftruncate(fd, 50))
	want := append(bytes.Repeat([]byte("a"), 10), make([]byte, 40)...)
	wantContent(t, p, want)

	ok(t, "truncate 0", unix.Truncate(p, 0))
	wantContent(t, p, nil)
	ok(t, "truncate 3 MiB", unix.Truncate(p, 3<<20))
	pwriteAll(t, fd, []byte("end"), 3<<20)
	want = append(make([]byte, 3<<20), "end"...)
	wantContent(t, p, want)
	// Shrink into the middle of a page that holds data, then grow.
	pwriteAll(t, fd, bytes.Repeat([]byte("z"), 8192), 0)
	ok(t, "ftruncate 4100", unix.Ftruncate(fd, 4100))
	ok(t, "ftruncate 8192", unix.Ftruncate(fd, 8192))
	want = append(bytes.Repeat([]byte("z"), 4100), make([]byte, 8192-4100)...)
	wantContent(t, p, want)

	before := lstat(t, p)
	tick()
	ok(t, "truncate to the same size", unix.Truncate(p, 8192))
	if after := lstat(t, p); ts(after.Ctim) == ts(before.Ctim) || ts(after.Mtim) == ts(before.Mtim) {
		t.Errorf("truncate(2) to the same size left mtime/ctime unchanged (ext4 updates both)")
	}

	wantErrno(t, "truncate -1", unix.Truncate(p, -1), unix.EINVAL)
	wantErrno(t, "truncate a directory", unix.Truncate(dir, 0), unix.EISDIR)
	rfd := open(t, p, unix.O_RDONLY, 0)
	defer closeQuietly(&rfd)
	wantErrno(t, "ftruncate a read-only descriptor", unix.Ftruncate(rfd, 0), unix.EINVAL, unix.EBADF)
	wantErrno(t, "truncate a missing file", unix.Truncate(join(dir, "missing"), 0), unix.ENOENT)
}

// checkAppend: O_APPEND writes land at the current end of file even when
// another descriptor extended it, after lseek, and for pwrite (Linux).
func checkAppend(t *testing.T, dir string) {
	p := join(dir, "log")
	a := open(t, p, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_EXCL, 0o644)
	defer closeQuietly(&a)
	b := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&b)

	write := func(fd int, s string) {
		t.Helper()
		n, err := unix.Write(fd, []byte(s))
		if err != nil || n != len(s) {
			t.Fatalf("write %q: %d, %v", s, n, err)
		}
	}
	write(a, "aa")
	pwriteAll(t, b, []byte("BBBBBB"), 2) // extends through another description
	write(a, "cc")
	_, err := unix.Seek(a, 0, unix.SEEK_SET)
	ok(t, "lseek", err)
	write(a, "dd")
	pwriteAll(t, a, []byte("ee"), 0) // Linux: pwrite on O_APPEND appends
	wantContent(t, p, []byte("aaBBBBBBccddee"))
	if off, err := unix.Seek(a, 0, unix.SEEK_CUR); err != nil || off != 12 {
		// pwrite does not move the offset; the last write(2) left it at 12.
		t.Errorf("offset of the O_APPEND descriptor %d (%v), want 12", off, err)
	}

	// Many appenders at once: no write is lost or torn.
	const writers, each = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			fd, err := unix.Open(p, unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0)
			if err != nil {
				errs <- err
				return
			}
			line := []byte(fmt.Sprintf("writer %d line\n", w))
			for range each {
				if _, err := unix.Write(fd, line); err != nil {
					errs <- err
					break
				}
			}
			if err := unix.Close(fd); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent append: %v", err)
	}
	got := readFile(t, p)
	lines := bytes.Split(bytes.TrimSuffix(got[14:], []byte("\n")), []byte("\n"))
	counts := map[string]int{}
	for _, l := range lines {
		counts[string(l)]++
	}
	for w := range writers {
		if c := counts[fmt.Sprintf("writer %d line", w)]; c != each {
			t.Errorf("writer %d: %d complete lines, want %d (counts %v)", w, c, each, len(counts))
		}
	}
}

// checkOpenExcl: O_CREAT|O_EXCL fails with EEXIST on any existing name,
// including a dangling symlink (not followed), and exactly one of many
// racing creators wins.
func checkOpenExcl(t *testing.T, dir string) {
	p := join(dir, "f")
	fd := open(t, p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	closeFD(t, &fd)
	_, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	wantErrno(t, "O_EXCL on an existing file", err, unix.EEXIST)
	_, err = unix.Open(dir, unix.O_RDONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	wantErrno(t, "O_EXCL on an existing directory", err, unix.EEXIST)

	ok(t, "symlink", unix.Symlink("target-that-does-not-exist", join(dir, "dangling")))
	_, err = unix.Open(join(dir, "dangling"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	wantErrno(t, "O_EXCL on a dangling symlink", err, unix.EEXIST)
	if _, err := unix.Open(join(dir, "target-that-does-not-exist"), unix.O_RDONLY, 0); err == nil {
		t.Errorf("O_EXCL followed the dangling symlink and created its target")
	}
	// Without O_EXCL, O_CREAT through a dangling symlink creates the target.
	fd, err = unix.Open(join(dir, "dangling"), unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	ok(t, "O_CREAT through a dangling symlink", err)
	closeFD(t, &fd)
	if st := lstat(t, join(dir, "target-that-does-not-exist")); st.Mode&unix.S_IFMT != unix.S_IFREG {
		t.Errorf("O_CREAT through a dangling symlink did not create a regular target")
	}

	// A lock-file race: exactly one winner.
	const racers = 8
	for round := range 20 {
		lock := join(dir, fmt.Sprintf("lock%d", round))
		var wg sync.WaitGroup
		results := make(chan error, racers)
		for range racers {
			wg.Go(func() {
				fd, err := unix.Open(lock, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
				if err == nil {
					err = unix.Close(fd) // nil unless the close itself fails
				}
				results <- err
			})
		}
		wg.Wait()
		close(results)
		wins := 0
		for err := range results {
			if err == nil {
				wins++
			} else {
				wantErrno(t, "losing O_EXCL racer", err, unix.EEXIST)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d racers created %s with O_EXCL, want exactly 1", round, wins, lock)
		}
	}
}

// checkOpenTrunc: O_TRUNC empties an existing file in place (same inode,
// mode kept even with O_CREAT and another mode) and updates mtime.
func checkOpenTrunc(t *testing.T, dir string) {
	p := join(dir, "f")
	writeFile(t, p, bytes.Repeat([]byte("x"), 10000), 0o644)
	ok(t, "chmod", unix.Chmod(p, 0o600))
	setPast(t, p)
	before := lstat(t, p)
	fd := open(t, p, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o777)
	defer closeQuietly(&fd)
	st := fstat(t, fd)
	if st.Size != 0 {
		t.Errorf("size after O_TRUNC %d, want 0", st.Size)
	}
	if st.Ino != before.Ino {
		t.Errorf("O_TRUNC replaced the inode (%d -> %d)", before.Ino, st.Ino)
	}
	if st.Mode&0o7777 != 0o600 {
		t.Errorf("O_CREAT|O_TRUNC of an existing file changed its mode to %#o", st.Mode&0o7777)
	}
	if ts(st.Mtim) == ts(pastTime) {
		t.Errorf("O_TRUNC left mtime unchanged")
	}
	n, err := unix.Write(fd, []byte("y"))
	if err != nil || n != 1 {
		t.Fatalf("write: %d, %v", n, err)
	}
	closeFD(t, &fd)
	wantContent(t, p, []byte("y"))
	_, err = unix.Open(join(dir, "missing"), unix.O_WRONLY|unix.O_TRUNC, 0)
	wantErrno(t, "O_TRUNC without O_CREAT on a missing file", err, unix.ENOENT)
}

// checkUnlinkOpen: an unlinked (or renamed-over) file stays fully usable
// through open descriptors, fstat reports nlink 0, and the name is free for
// a new, distinct file. The same for a removed directory.
func checkUnlinkOpen(t *testing.T, dir string) {
	p := join(dir, "f")
	writeFile(t, p, []byte("hello"), 0o644)
	fd := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&fd)
	ino := fstat(t, fd).Ino
	ok(t, "unlink", unix.Unlink(p))
	var st unix.Stat_t
	wantErrno(t, "lstat after unlink", unix.Lstat(p, &st), unix.ENOENT)
	if slicesContains(listDir(t, dir), "f") {
		t.Errorf("readdir still lists the unlinked file")
	}
	st = fstat(t, fd)
	if st.Nlink != 0 || st.Size != 5 {
		t.Errorf("fstat of the unlinked file: nlink %d size %d, want 0 and 5", st.Nlink, st.Size)
	}
	pwriteAll(t, fd, []byte("world"), 5)
	buf := make([]byte, 20)
	if n := preadFull(t, fd, buf, 0); string(buf[:n]) != "helloworld" {
		t.Errorf("read through the unlinked file: %q", buf[:n])
	}
	ok(t, "fchmod the unlinked file", unix.Fchmod(fd, 0o600))
	ok(t, "ftruncate the unlinked file", unix.Ftruncate(fd, 8))
	if st := fstat(t, fd); st.Size != 8 || st.Mode&0o777 != 0o600 {
		t.Errorf("unlinked file after ftruncate/fchmod: size %d mode %#o", st.Size, st.Mode&0o777)
	}
	ok(t, "fsync the unlinked file", unix.Fsync(fd))

	writeFile(t, p, []byte("new"), 0o644)
	if st := lstat(t, p); st.Ino == ino {
		t.Errorf("new file reuses the inode %d of a still-open unlinked file", ino)
	}
	if n := preadFull(t, fd, buf, 0); string(buf[:n]) != "hellowor" {
		t.Errorf("old descriptor reads %q after the name was reused", buf[:n])
	}
	wantContent(t, p, []byte("new"))

	// Renamed over while open.
	q, r := join(dir, "q"), join(dir, "r")
	writeFile(t, q, []byte("old q"), 0o644)
	writeFile(t, r, []byte("r"), 0o644)
	qfd := open(t, q, unix.O_RDONLY, 0)
	defer closeQuietly(&qfd)
	ok(t, "rename r over q", unix.Rename(r, q))
	if st := fstat(t, qfd); st.Nlink != 0 {
		t.Errorf("file renamed over while open: nlink %d, want 0", st.Nlink)
	}
	if n := preadFull(t, qfd, buf, 0); string(buf[:n]) != "old q" {
		t.Errorf("descriptor of the replaced file reads %q", buf[:n])
	}
	wantContent(t, q, []byte("r"))

	// A removed directory that is still open.
	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	dfd := open(t, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&dfd)
	ok(t, "rmdir", unix.Rmdir(d))
	if st := fstat(t, dfd); st.Nlink != 0 {
		t.Errorf("removed directory: nlink %d, want 0", st.Nlink)
	}
	_, err := unix.Openat(dfd, "x", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	wantErrno(t, "create in a removed directory", err, unix.ENOENT)
	_, err = unix.Getdents(dfd, make([]byte, 4096))
	wantErrno(t, "getdents on a removed directory", err, unix.ENOENT)
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkFallocate: mode 0 allocates and extends, KEEP_SIZE does not extend,
// PUNCH_HOLE zeroes a range, and every variant leaves existing data intact.
func checkFallocate(t *testing.T, dir string) {
	p := join(dir, "f")
	fd := open(t, p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
	defer closeQuietly(&fd)
	data := randBytes(3, 3*4096)
	pwriteAll(t, fd, data, 0)
	ok(t, "fallocate mode 0", unix.Fallocate(fd, 0, 8192, 1<<20))
	if st := fstat(t, fd); st.Size != 8192+1<<20 {
		t.Errorf("size after fallocate(0, 8192, 1 MiB) = %d", st.Size)
	}
	want := append(append([]byte(nil), data...), make([]byte, 8192+1<<20-len(data))...)
	wantContent(t, p, want)
	ok(t, "fallocate KEEP_SIZE", unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 4<<20))
	if st := fstat(t, fd); st.Size != 8192+1<<20 {
		t.Errorf("FALLOC_FL_KEEP_SIZE changed the size to %d", st.Size)
	}
	ok(t, "fallocate PUNCH_HOLE", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4096, 4096))
	clear(want[4096:8192])
	wantContent(t, p, want)
	wantErrno(t, "PUNCH_HOLE without KEEP_SIZE", unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE, 0, 4096), unix.EINVAL, unix.EOPNOTSUPP)
	wantErrno(t, "fallocate with length 0", unix.Fallocate(fd, 0, 0, 0), unix.EINVAL)
}

// checkCopyFileRange: copy_file_range within the filesystem copies exactly
// the requested range, to an offset past EOF too (leaving a hole).
func checkCopyFileRange(t *testing.T, dir string) {
	src, dst := join(dir, "src"), join(dir, "dst")
	data := randBytes(4, 3<<20+17)
	writeFile(t, src, data, 0o644)
	sfd := open(t, src, unix.O_RDONLY, 0)
	defer closeQuietly(&sfd)
	dfd := open(t, dst, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	defer closeQuietly(&dfd)
	copyRange := func(roff, woff int64, n int) {
		t.Helper()
		for n > 0 {
			c, err := unix.CopyFileRange(sfd, &roff, dfd, &woff, n, 0)
			ok(t, "copy_file_range", err)
			if c == 0 {
				t.Fatalf("copy_file_range returned 0 with %d bytes left", n)
			}
			n -= c
		}
	}
	copyRange(0, 0, len(data))
	copyRange(100, 5<<20, 1000)
	want := append(append(append([]byte(nil), data...), make([]byte, 5<<20-len(data))...), data[100:1100]...)
	closeFD(t, &dfd)
	wantContent(t, dst, want)
	if off, err := unix.Seek(sfd, 0, unix.SEEK_CUR); err != nil || off != 0 {
		t.Errorf("copy_file_range with explicit offsets moved the source offset to %d (%v)", off, err)
	}
}

// checkLargeFile: offsets beyond 4 GiB work (sparse): a write at 5 GiB and
// one straddling 4 GiB read back, the size is exact, and the file shrinks
// back.
func checkLargeFile(t *testing.T, dir string) {
	const (
		gib   = int64(1) << 30
		tail  = 5 * gib
		cross = 4*gib - 3
	)
	p := join(dir, "big")
	fd := open(t, p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
	defer closeQuietly(&fd)
	pwriteAll(t, fd, []byte("tail-of-5GiB"), tail)
	pwriteAll(t, fd, []byte("straddle"), cross)
	ok(t, "fsync", unix.Fsync(fd))
	st := lstat(t, p)
	if st.Size != tail+12 {
		t.Errorf("size %d, want %d", st.Size, tail+12)
	}
	if st.Blocks*512 > 64<<20 {
		t.Logf("note: a sparse 5 GiB file uses %d MiB on this filesystem", st.Blocks*512>>20)
	}
	buf := make([]byte, 12)
	if n := preadFull(t, fd, buf, tail); n != 12 || string(buf) != "tail-of-5GiB" {
		t.Errorf("read at 5 GiB: %q", buf[:n])
	}
	if n := preadFull(t, fd, buf[:8], cross); n != 8 || string(buf[:8]) != "straddle" {
		t.Errorf("read across 4 GiB: %q", buf[:n])
	}
	zero := make([]byte, 4096)
	if n := preadFull(t, fd, zero, 3*gib); n != 4096 || !bytes.Equal(zero, make([]byte, 4096)) {
		t.Errorf("hole at 3 GiB does not read as zeros")
	}
	if n, err := unix.Pread(fd, buf, tail+12); err != nil || n != 0 {
		t.Errorf("read at EOF: %d, %v", n, err)
	}
	ok(t, "ftruncate to 4 GiB + 1", unix.Ftruncate(fd, 4*gib+1))
	if n := preadFull(t, fd, buf, cross); n != 4 || string(buf[:4]) != "stra" {
		t.Errorf("after shrinking to 4 GiB+1, read at %d: %q", cross, buf[:n])
	}
	ok(t, "ftruncate to 0", unix.Ftruncate(fd, 0))
}

// checkMmap: MAP_SHARED reads see the file, writes through the map reach the
// file after msync and are visible to read(2), writes through write(2) are
// visible in an existing map, MAP_PRIVATE writes stay private, and mtime
// moves after a write through the map.
func checkMmap(t *testing.T, dir string) {
	const size = 3*4096 + 100
	p := join(dir, "f")
	data := randBytes(5, size)
	writeFile(t, p, data, 0o644)
	setPast(t, p)
	fd := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&fd)
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	ok(t, "mmap shared", err)
	defer func() { _ = unix.Munmap(m) }()
	if !bytes.Equal(m, data) {
		t.Errorf("mapped content: %s", describeDiff(m, data))
	}
	copy(m[4090:], "across-a-page")
	copy(m[size-4:], "END!")
	ok(t, "msync", unix.Msync(m, unix.MS_SYNC))
	want := append([]byte(nil), data...)
	copy(want[4090:], "across-a-page")
	copy(want[size-4:], "END!")
	got := make([]byte, size)
	preadFull(t, fd, got, 0)
	if !bytes.Equal(got, want) {
		t.Errorf("read(2) after writing through the map: %s", describeDiff(got, want))
	}
	if st := fstat(t, fd); ts(st.Mtim) == ts(pastTime) {
		t.Errorf("mtime unchanged after a write through a shared map and msync")
	}
	pwriteAll(t, fd, []byte("via-pwrite"), 8000)
	copy(want[8000:], "via-pwrite")
	if !bytes.Equal(m, want) {
		t.Errorf("map after pwrite: %s", describeDiff(m, want))
	}

	priv, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE)
	ok(t, "mmap private", err)
	copy(priv, "private!")
	ok(t, "munmap private", unix.Munmap(priv))
	preadFull(t, fd, got, 0)
	if !bytes.Equal(got, want) {
		t.Errorf("a MAP_PRIVATE write reached the file: %s", describeDiff(got, want))
	}

	// Grow the file and write into the new part through a new map.
	ok(t, "ftruncate", unix.Ftruncate(fd, 5*4096))
	m2, err := unix.Mmap(fd, 0, 5*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	ok(t, "mmap grown", err)
	copy(m2[4*4096:], "grown")
	ok(t, "msync grown", unix.Msync(m2, unix.MS_SYNC))
	ok(t, "munmap grown", unix.Munmap(m2))
	closeFD(t, &fd)
	want = append(want, make([]byte, 5*4096-size)...)
	copy(want[4*4096:], "grown")
	wantContent(t, p, want)

	rfd := open(t, p, unix.O_RDONLY, 0)
	defer closeQuietly(&rfd)
	_, err = unix.Mmap(rfd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	wantErrno(t, "writable shared map of a read-only descriptor", err, unix.EACCES)
	ro, err := unix.Mmap(rfd, 0, 4096, unix.PROT_READ, unix.MAP_SHARED)
	ok(t, "read-only map", err)
	if !bytes.Equal(ro, want[:4096]) {
		t.Errorf("read-only map: %s", describeDiff(ro, want[:4096]))
	}
	ok(t, "munmap", unix.Munmap(ro))
}

// checkFsync: fsync and fdatasync on files (read-write and read-only
// descriptors), fsync on directories, syncfs and sync_file_range all
// succeed, and the data reads back.
func checkFsync(t *testing.T, dir string) {
	p := join(dir, "f")
	fd := open(t, p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
	defer closeQuietly(&fd)
	data := randBytes(6, 200_000)
	pwriteAll(t, fd, data, 0)
	ok(t, "fsync", unix.Fsync(fd))
	pwriteAll(t, fd, []byte("more"), 200_000)
	ok(t, "fdatasync", unix.Fdatasync(fd))
	ok(t, "sync_file_range", unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER))
	ok(t, "syncfs", unix.Syncfs(fd))
	closeFD(t, &fd)
	wantContent(t, p, append(data, "more"...))

	rfd := open(t, p, unix.O_RDONLY, 0)
	defer closeQuietly(&rfd)
	ok(t, "fsync a read-only descriptor", unix.Fsync(rfd))
	dfd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&dfd)
	ok(t, "fsync a directory", unix.Fsync(dfd))
	ok(t, "fdatasync a directory", unix.Fdatasync(dfd))
}
