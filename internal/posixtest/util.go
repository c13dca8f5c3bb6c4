package posixtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/internal/testenv"
)

// ok fails the test at once when err is not nil.
func ok(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// errnoNames renders errnos as their symbolic names.
func errnoNames(errs []unix.Errno) string {
	names := make([]string, len(errs))
	for i, e := range errs {
		names[i] = unix.ErrnoName(e)
	}
	return strings.Join(names, " or ")
}

// wantErrno reports an error unless err is one of want.
func wantErrno(t testing.TB, what string, err error, want ...unix.Errno) {
	t.Helper()
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	if err == nil {
		t.Errorf("%s: succeeded, want %s", what, errnoNames(want))
		return
	}
	t.Errorf("%s: got %v, want %s", what, err, errnoNames(want))
}

// lstat returns the lstat of path or fails the test.
func lstat(t testing.TB, path string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	ok(t, "lstat "+path, unix.Lstat(path, &st))
	return st
}

// fstat returns the fstat of fd or fails the test.
func fstat(t testing.TB, fd int) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	ok(t, "fstat", unix.Fstat(fd, &st))
	return st
}

// open opens path (close-on-exec) or fails the test. The caller closes the
// descriptor, typically with defer closeQuietly(&fd) plus closeFD where the
// close itself is under test.
func open(t testing.TB, path string, flags int, perm uint32) int {
	t.Helper()
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, perm)
	ok(t, "open "+path, err)
	return fd
}

// closeFD closes *fd, fails the test on error, and marks it closed (-1) so
// that a deferred closeQuietly does not close a reused descriptor number.
func closeFD(t testing.TB, fd *int) {
	t.Helper()
	err := unix.Close(*fd)
	*fd = -1
	ok(t, "close", err)
}

// closeQuietly closes *fd unless it is already closed; for defer.
func closeQuietly(fd *int) {
	if *fd >= 0 {
		_ = unix.Close(*fd)
		*fd = -1
	}
}

// writeFile writes data to path with perm, creating or truncating it.
func writeFile(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	ok(t, "write "+path, os.WriteFile(path, data, perm))
}

// readFile returns the content of path or fails the test.
func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	ok(t, "read "+path, err)
	return b
}

// wantContent fails unless path holds exactly want.
func wantContent(t testing.TB, path string, want []byte) {
	t.Helper()
	got := readFile(t, path)
	if !bytes.Equal(got, want) {
		t.Errorf("%s: content differs: %s", path, describeDiff(got, want))
	}
}

// describeDiff summarises how got differs from want without printing
// megabytes.
func describeDiff(got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d bytes, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			end := min(i+16, len(got))
			return fmt.Sprintf("first difference at byte %d: got %q, want %q", i, got[i:end], want[i:end])
		}
	}
	return "equal"
}

// pwriteAll writes all of b at off.
func pwriteAll(t testing.TB, fd int, b []byte, off int64) {
	t.Helper()
	for len(b) > 0 {
		n, err := unix.Pwrite(fd, b, off)
		ok(t, fmt.Sprintf("pwrite at %d", off), err)
		b = b[n:]
		off += int64(n)
	}
}

// preadFull reads len(b) bytes at off; short reads before EOF are retried.
// It returns how many bytes were read before EOF.
func preadFull(t testing.TB, fd int, b []byte, off int64) int {
	t.Helper()
	total := 0
	for total < len(b) {
		n, err := unix.Pread(fd, b[total:], off+int64(total))
		ok(t, fmt.Sprintf("pread at %d", off+int64(total)), err)
		if n == 0 {
			break
		}
		total += n
	}
	return total
}

// randBytes returns n deterministic pseudo-random bytes for seed.
func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// ts converts a Timespec to nanoseconds since the epoch.
func ts(t unix.Timespec) int64 { return t.Sec*1e9 + t.Nsec }

// pastTime is a fixed time long ago (2001-09-09T01:46:40.123456789Z) that
// checks set with utimensat so that any later update is visible without
// waiting for the clock.
var pastTime = unix.Timespec{Sec: 1_000_000_000, Nsec: 123_456_789}

// setPast sets the atime and mtime of path (not following a symlink) to
// pastTime.
func setPast(t testing.TB, path string) {
	t.Helper()
	ok(t, "utimensat "+path, unix.UtimesNanoAt(unix.AT_FDCWD, path,
		[]unix.Timespec{pastTime, pastTime}, unix.AT_SYMLINK_NOFOLLOW))
}

// tick waits long enough for the kernel's coarse clock (and a FUSE server's
// clock) to advance, so that a ctime set now differs from one set before.
func tick() { time.Sleep(20 * time.Millisecond) }

// umask returns the process umask without changing it (Linux 4.7+).
func umask(t testing.TB) uint32 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	ok(t, "open /proc/self/status", err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "Umask:"); found {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			ok(t, "parse umask", err)
			return uint32(m)
		}
	}
	t.Fatalf("no Umask line in /proc/self/status (err %v)", sc.Err())
	return 0
}

// needRoot reports through testenv.Missing unless the test runs as root.
func needRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root ("+why+")", os.ErrPermission)
	}
}

// mkdirAll creates path and its parents or fails the test.
func mkdirAll(t testing.TB, path string) {
	t.Helper()
	ok(t, "mkdir -p "+path, os.MkdirAll(path, 0o755))
}

// dirent is one raw entry of getdents64.
type dirent struct {
	ino  uint64
	off  int64
	typ  uint8
	name string
}

// getdents reads raw entries from the directory fd until EOF with a buffer of
// bufSize bytes per call, or until limit entries were read (limit <= 0: no
// limit). It keeps "." and "..".
func getdents(t testing.TB, fd int, bufSize, limit int) []dirent {
	t.Helper()
	var out []dirent
	buf := make([]byte, bufSize)
	for {
		n, err := unix.Getdents(fd, buf)
		ok(t, "getdents", err)
		if n == 0 {
			return out
		}
		b := buf[:n]
		for len(b) > 0 {
			// struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name.
			reclen := int(b[16]) | int(b[17])<<8
			d := dirent{
				ino: leUint64(b[0:8]),
				off: int64(leUint64(b[8:16])),
				typ: b[18],
			}
			name := b[19:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			d.name = string(name)
			out = append(out, d)
			b = b[reclen:]
		}
		if limit > 0 && len(out) >= limit {
			return out
		}
	}
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// names returns the names in ds, leaving out "." and "..".
func names(ds []dirent) []string {
	var out []string
	for _, d := range ds {
		if d.name != "." && d.name != ".." {
			out = append(out, d.name)
		}
	}
	return out
}

// listDir returns the names in dir (without "." and "..") or fails.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	fd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&fd)
	return names(getdents(t, fd, 8192, 0))
}

// join is filepath.Join, shorter.
func join(elem ...string) string { return filepath.Join(elem...) }

// dropCaches makes the kernel forget the dentries, inodes and pages it can
// (echo 3 > /proc/sys/vm/drop_caches), so that what a check reads next
// comes from the filesystem itself. Needs root.
func dropCaches(t testing.TB) {
	t.Helper()
	needRoot(t, "dropping the kernel's caches")
	unix.Sync()
	ok(t, "drop caches", os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0))
}
