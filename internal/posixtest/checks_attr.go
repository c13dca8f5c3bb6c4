package posixtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// checkChmod: every permission bit, including setuid, setgid and sticky,
// round-trips on files and directories through chmod and fchmod; chmod
// follows symlinks; it changes ctime but not mtime.
func checkChmod(t *testing.T, dir string) {
	f := join(dir, "f")
	writeFile(t, f, []byte("x"), 0o644)
	for _, m := range []uint32{0, 0o644, 0o755, 0o777, 0o4755, 0o2755, 0o1755, 0o7777, 0o4000, 0o111} {
		ok(t, fmt.Sprintf("chmod %#o", m), unix.Chmod(f, m))
		if got := lstat(t, f).Mode; got != unix.S_IFREG|m {
			t.Errorf("chmod %#o: mode %#o", m, got)
		}
	}
	ok(t, "chmod", unix.Chmod(f, 0o644)) // readable again, also without root
	fd := open(t, f, unix.O_RDONLY, 0)
	defer closeQuietly(&fd)
	ok(t, "fchmod", unix.Fchmod(fd, 0o640))
	if got := fstat(t, fd).Mode & 0o7777; got != 0o640 {
		t.Errorf("fchmod 0640: mode %#o", got)
	}
	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	for _, m := range []uint32{0o700, 0o1777, 0o2755, 0o7777, 0o555} {
		ok(t, fmt.Sprintf("chmod dir %#o", m), unix.Chmod(d, m))
		if got := lstat(t, d).Mode; got != unix.S_IFDIR|m {
			t.Errorf("chmod dir %#o: mode %#o", m, got)
		}
	}
	ok(t, "chmod dir back", unix.Chmod(d, 0o755))

	l := join(dir, "l")
	ok(t, "symlink", unix.Symlink("f", l))
	ok(t, "chmod through a symlink", unix.Chmod(l, 0o600))
	if m := lstat(t, f).Mode & 0o7777; m != 0o600 {
		t.Errorf("chmod through a symlink: target mode %#o, want 0600", m)
	}
	if m := lstat(t, l).Mode; m != unix.S_IFLNK|0o777 {
		t.Errorf("chmod through a symlink changed the link's mode to %#o", m)
	}

	setPast(t, f)
	before := lstat(t, f)
	tick()
	ok(t, "chmod", unix.Chmod(f, 0o644))
	after := lstat(t, f)
	if ts(after.Ctim) == ts(before.Ctim) {
		t.Errorf("chmod left ctime unchanged")
	}
	if ts(after.Mtim) != ts(pastTime) || ts(after.Atim) != ts(pastTime) {
		t.Errorf("chmod changed mtime or atime")
	}
}

// checkChown (root): ownership round-trips through chown, fchown and lchown;
// -1 leaves a field alone; lchown acts on the link; chown of a regular file
// clears setuid and (with group-execute) setgid, as the kernel does, but
// not on directories; ctime changes.
func checkChown(t *testing.T, dir string) {
	needRoot(t, "chown to arbitrary owners")
	f := join(dir, "f")
	writeFile(t, f, []byte("x"), 0o644)
	before := lstat(t, f)
	tick()
	ok(t, "chown", unix.Chown(f, 1234, 5678))
	st := lstat(t, f)
	if st.Uid != 1234 || st.Gid != 5678 {
		t.Errorf("chown 1234:5678 gave %d:%d", st.Uid, st.Gid)
	}
	if ts(st.Ctim) == ts(before.Ctim) {
		t.Errorf("chown left ctime unchanged")
	}
	ok(t, "chown -1:42", unix.Chown(f, -1, 42))
	if st := lstat(t, f); st.Uid != 1234 || st.Gid != 42 {
		t.Errorf("chown -1:42 gave %d:%d, want 1234:42", st.Uid, st.Gid)
	}
	fd := open(t, f, unix.O_RDONLY, 0)
	defer closeQuietly(&fd)
	ok(t, "fchown", unix.Fchown(fd, 7, -1))
	if st := fstat(t, fd); st.Uid != 7 || st.Gid != 42 {
		t.Errorf("fchown 7:-1 gave %d:%d, want 7:42", st.Uid, st.Gid)
	}

	l := join(dir, "l")
	ok(t, "symlink", unix.Symlink("f", l))
	ok(t, "lchown", unix.Lchown(l, 99, 98))
	if st := lstat(t, l); st.Uid != 99 || st.Gid != 98 {
		t.Errorf("lchown gave the link %d:%d, want 99:98", st.Uid, st.Gid)
	}
	if st := lstat(t, f); st.Uid != 7 {
		t.Errorf("lchown changed the target's owner to %d", st.Uid)
	}
	ok(t, "chown through a symlink", unix.Chown(l, 11, 12))
	if st := lstat(t, f); st.Uid != 11 || st.Gid != 12 {
		t.Errorf("chown through a symlink gave the target %d:%d, want 11:12", st.Uid, st.Gid)
	}

	for _, c := range []struct{ before, after uint32 }{
		{0o6755, 0o755},  // group-executable: both bits go
		{0o6745, 0o2745}, // not group-executable: setgid means mandatory locking and stays
		{0o4700, 0o700},
	} {
		ok(t, "chmod", unix.Chmod(f, c.before))
		ok(t, "chown", unix.Chown(f, 1000, 1000))
		if m := lstat(t, f).Mode & 0o7777; m != c.after {
			t.Errorf("chown of a %#o file left mode %#o, want %#o", c.before, m, c.after)
		}
	}
	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	ok(t, "chmod", unix.Chmod(d, 0o6755))
	ok(t, "chown dir", unix.Chown(d, 1000, 1000))
	if m := lstat(t, d).Mode & 0o7777; m != 0o6755 {
		t.Errorf("chown of a %#o directory left mode %#o, want it unchanged", 0o6755, m)
	}
}

// checkSetgidDir (root): in a setgid directory, new files take the
// directory's group and new subdirectories take the group and the setgid
// bit.
func checkSetgidDir(t *testing.T, dir string) {
	needRoot(t, "chown a directory to another group")
	d := join(dir, "shared")
	ok(t, "mkdir", unix.Mkdir(d, 0o775))
	ok(t, "chown", unix.Chown(d, -1, 4242))
	ok(t, "chmod", unix.Chmod(d, 0o2775))
	f := join(d, "f")
	writeFile(t, f, nil, 0o644)
	if st := lstat(t, f); st.Gid != 4242 || st.Mode&0o7777 != 0o644&^umask(t) {
		t.Errorf("file in a setgid directory: gid %d mode %#o, want 4242 and %#o", st.Gid, st.Mode&0o7777, 0o644&^umask(t))
	}
	sub := join(d, "sub")
	ok(t, "mkdir", unix.Mkdir(sub, 0o755))
	if st := lstat(t, sub); st.Gid != 4242 || st.Mode&0o7777 != 0o2000|(0o755&^umask(t)) {
		t.Errorf("directory in a setgid directory: gid %d mode %#o, want 4242 and %#o", st.Gid, st.Mode&0o7777, 0o2000|(0o755&^umask(t)))
	}
	ok(t, "symlink", unix.Symlink("f", join(d, "l")))
	if st := lstat(t, join(d, "l")); st.Gid != 4242 {
		t.Errorf("symlink in a setgid directory: gid %d, want 4242", st.Gid)
	}
}

// utimensFd sets the times of an open descriptor (futimens).
func utimensFd(fd int, times *[2]unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(times)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// checkUtimens: utimensat stores atime and mtime to the nanosecond,
// including the epoch, times before 1970 and after 2106; UTIME_OMIT keeps a
// time, UTIME_NOW and NULL take the current time; ctime moves; symlinks,
// directories and open (even unlinked) files take times too.
func checkUtimens(t *testing.T, dir string) {
	f := join(dir, "f")
	writeFile(t, f, []byte("x"), 0o644)
	set := func(path string, atime, mtime unix.Timespec, flags int) {
		t.Helper()
		ok(t, "utimensat "+path, unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{atime, mtime}, flags))
	}
	wantTimes := func(label, path string, atime, mtime int64) {
		t.Helper()
		st := lstat(t, path)
		if ts(st.Atim) != atime || ts(st.Mtim) != mtime {
			t.Errorf("%s: atime %d mtime %d, want %d and %d", label, ts(st.Atim), ts(st.Mtim), atime, mtime)
		}
	}
	cases := []struct {
		name         string
		atime, mtime unix.Timespec
	}{
		{"ordinary", unix.Timespec{Sec: 1_234_567_890, Nsec: 123_456_789}, unix.Timespec{Sec: 1_500_000_000, Nsec: 999_999_999}},
		{"epoch and before 1970", unix.Timespec{Sec: 0, Nsec: 0}, unix.Timespec{Sec: -1_000_000_000, Nsec: 5}},
		{"after 2106", unix.Timespec{Sec: 5_000_000_000, Nsec: 1}, unix.Timespec{Sec: 4_294_967_296, Nsec: 500}},
	}
	for _, c := range cases {
		set(f, c.atime, c.mtime, 0)
		wantTimes(c.name, f, ts(c.atime), ts(c.mtime))
	}

	a0 := unix.Timespec{Sec: 1_600_000_000, Nsec: 1}
	m0 := unix.Timespec{Sec: 1_600_000_001, Nsec: 2}
	set(f, a0, m0, 0)
	before := lstat(t, f)
	tick()
	m1 := unix.Timespec{Sec: 1_700_000_000, Nsec: 3}
	set(f, unix.Timespec{Nsec: unix.UTIME_OMIT}, m1, 0)
	wantTimes("UTIME_OMIT atime", f, ts(a0), ts(m1))
	if after := lstat(t, f); ts(after.Ctim) == ts(before.Ctim) {
		t.Errorf("utimensat left ctime unchanged")
	}
	set(f, a0, unix.Timespec{Nsec: unix.UTIME_OMIT}, 0)
	wantTimes("UTIME_OMIT mtime", f, ts(a0), ts(m1))

	lo := time.Now().Add(-time.Second).UnixNano()
	set(f, unix.Timespec{Nsec: unix.UTIME_OMIT}, unix.Timespec{Nsec: unix.UTIME_NOW}, 0)
	hi := time.Now().Add(time.Second).UnixNano()
	if st := lstat(t, f); ts(st.Atim) != ts(a0) || ts(st.Mtim) < lo || ts(st.Mtim) > hi {
		t.Errorf("UTIME_NOW mtime: atime %d mtime %d, want %d and now (%d..%d)", ts(st.Atim), ts(st.Mtim), ts(a0), lo, hi)
	}
	lo = time.Now().Add(-time.Second).UnixNano()
	ok(t, "utimensat NULL", unix.UtimesNanoAt(unix.AT_FDCWD, f, nil, 0))
	hi = time.Now().Add(time.Second).UnixNano()
	if st := lstat(t, f); ts(st.Atim) < lo || ts(st.Atim) > hi || ts(st.Mtim) < lo || ts(st.Mtim) > hi {
		t.Errorf("utimensat NULL: atime %d mtime %d, want now (%d..%d)", ts(st.Atim), ts(st.Mtim), lo, hi)
	}

	// Directories, symlinks (not their targets), and open descriptors.
	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	set(d, a0, m1, 0)
	wantTimes("directory", d, ts(a0), ts(m1))
	l := join(dir, "l")
	ok(t, "symlink", unix.Symlink("f", l))
	fBefore := lstat(t, f)
	set(l, m1, a0, unix.AT_SYMLINK_NOFOLLOW)
	wantTimes("symlink", l, ts(m1), ts(a0))
	wantTimes("symlink's target", f, ts(fBefore.Atim), ts(fBefore.Mtim))

	fd := open(t, f, unix.O_RDWR, 0)
	defer closeQuietly(&fd)
	ok(t, "unlink", unix.Unlink(f))
	times := [2]unix.Timespec{a0, m0}
	ok(t, "futimens on an unlinked file", utimensFd(fd, &times))
	if st := fstat(t, fd); ts(st.Atim) != ts(a0) || ts(st.Mtim) != ts(m0) {
		t.Errorf("futimens: atime %d mtime %d, want %d and %d", ts(st.Atim), ts(st.Mtim), ts(a0), ts(m0))
	}
	wantErrno(t, "utimensat with nanoseconds out of range",
		unix.UtimesNanoAt(unix.AT_FDCWD, d, []unix.Timespec{{Sec: 1, Nsec: 1_000_000_000}, m0}, 0), unix.EINVAL)
}

// timeChange describes what an operation must do to a path's times.
type timeChange struct {
	mtime, ctime bool
}

// expectTimes sets path's atime and mtime into the past, runs op, and checks
// which of mtime and ctime changed.
func expectTimes(t *testing.T, label, path string, want timeChange, op func() error) {
	t.Helper()
	setPast(t, path)
	before := lstat(t, path)
	tick()
	ok(t, label, op())
	after := lstat(t, path)
	if got := ts(after.Mtim) != ts(before.Mtim); got != want.mtime {
		t.Errorf("%s: %s mtime changed = %v, want %v", label, path, got, want.mtime)
	}
	if got := ts(after.Ctim) != ts(before.Ctim); got != want.ctime {
		t.Errorf("%s: %s ctime changed = %v, want %v", label, path, got, want.ctime)
	}
}

// checkTimestampUpdates: which operations update mtime and ctime of a file
// and of its directory, as on ext4 (make, rsync, git and editors depend on
// it).
func checkTimestampUpdates(t *testing.T, dir string) {
	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	f := join(d, "f")
	writeFile(t, f, []byte("content"), 0o644)
	both, ctimeOnly, none := timeChange{true, true}, timeChange{false, true}, timeChange{false, false}

	expectTimes(t, "write", f, both, func() error {
		return appendTo(f, "more")
	})
	expectTimes(t, "read", f, none, func() error {
		_, err := readNoAtime(f)
		return err
	})
	expectTimes(t, "ftruncate", f, both, func() error { return unix.Truncate(f, 3) })
	expectTimes(t, "chmod", f, ctimeOnly, func() error { return unix.Chmod(f, 0o600) })
	expectTimes(t, "setxattr", f, ctimeOnly, func() error { return unix.Setxattr(f, "user.t", []byte("1"), 0) })
	expectTimes(t, "removexattr", f, ctimeOnly, func() error { return unix.Removexattr(f, "user.t") })
	expectTimes(t, "link (the file)", f, ctimeOnly, func() error { return unix.Link(f, join(d, "f2")) })
	expectTimes(t, "unlink of another name (the file)", f, ctimeOnly, func() error { return unix.Unlink(join(d, "f2")) })

	expectTimes(t, "create", d, both, func() error { return appendTo(join(d, "new"), "x") })
	expectTimes(t, "write to a child", d, none, func() error { return appendTo(join(d, "new"), "y") })
	expectTimes(t, "unlink", d, both, func() error { return unix.Unlink(join(d, "new")) })
	expectTimes(t, "mkdir", d, both, func() error { return unix.Mkdir(join(d, "sub"), 0o755) })
	expectTimes(t, "rmdir", d, both, func() error { return unix.Rmdir(join(d, "sub")) })
	expectTimes(t, "symlink", d, both, func() error { return unix.Symlink("f", join(d, "sl")) })
	expectTimes(t, "link (the directory)", d, both, func() error { return unix.Link(f, join(d, "hl")) })
	expectTimes(t, "rename within", d, both, func() error { return unix.Rename(join(d, "hl"), join(d, "hl2")) })
	expectTimes(t, "rename out", d, both, func() error { return unix.Rename(join(d, "hl2"), join(dir, "out")) })
	expectTimes(t, "rename in", d, both, func() error { return unix.Rename(join(dir, "out"), join(d, "in")) })
	expectTimes(t, "chmod of a child", d, none, func() error { return unix.Chmod(f, 0o644) })
	expectTimes(t, "chmod of the directory", d, ctimeOnly, func() error { return unix.Chmod(d, 0o750) })
}

// appendTo appends s to path, creating it.
func appendTo(path, s string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	_, werr := unix.Write(fd, []byte(s))
	cerr := unix.Close(fd)
	if werr != nil {
		return werr
	}
	return cerr
}

// readNoAtime reads path without disturbing its atime when the caller may
// (O_NOATIME needs ownership or CAP_FOWNER), and plainly otherwise.
func readNoAtime(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOATIME|unix.O_CLOEXEC, 0)
	if err != nil {
		fd, err = unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = unix.Close(fd) }()
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return out, nil
		}
		out = append(out, buf[:n]...)
	}
}

// readPlain reads path with read(2), which may update atime.
func readPlain(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	_, err = unix.Read(fd, make([]byte, 16))
	return errors.Join(err, unix.Close(fd))
}

// checkAtime: reads update atime as the mount's atime option says
// (relatime, the default: only when atime is not newer than mtime or
// ctime; strictatime: always; noatime: never), for files and directories;
// O_NOATIME reads never do.
func checkAtime(t *testing.T, dir string) {
	flags := statfsFlags(t, dir)
	mode := "strictatime"
	switch {
	case flags&unix.ST_NOATIME != 0:
		mode = "noatime"
	case flags&unix.ST_RELATIME != 0:
		mode = "relatime"
	}
	t.Logf("mount atime mode: %s", mode)
	f := join(dir, "f")
	writeFile(t, f, []byte("data"), 0o644)

	if _, err := readNoAtime(f); err != nil {
		t.Fatal(err)
	}
	// Set atime = mtime in the past: relatime must update on the next read.
	setPast(t, f)
	if _, err := readNoAtime(f); err != nil {
		t.Fatal(err)
	}
	if st := lstat(t, f); ts(st.Atim) != ts(pastTime) {
		t.Errorf("a read with O_NOATIME changed atime")
	}
	ok(t, "read", readPlain(f))
	first := lstat(t, f)
	if changed := ts(first.Atim) != ts(pastTime); changed != (mode != "noatime") {
		t.Errorf("%s: first read after atime = mtime: atime changed = %v", mode, changed)
	}
	tick()
	ok(t, "read again", readPlain(f))
	second := lstat(t, f)
	if changed := ts(second.Atim) != ts(first.Atim); changed != (mode == "strictatime") {
		t.Errorf("%s: second read: atime changed = %v", mode, changed)
	}
	if ts(second.Mtim) != ts(pastTime) {
		t.Errorf("reads changed mtime")
	}

	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	setPast(t, d)
	listDir(t, d)
	if changed := ts(lstat(t, d).Atim) != ts(pastTime); changed != (mode != "noatime") {
		t.Errorf("%s: readdir after atime = mtime: directory atime changed = %v", mode, changed)
	}
}

// checkAtimeDropCaches (root): the access times that reads set (as the
// mount's atime option says) are the filesystem's, not only the kernel's:
// they are the same after the kernel dropped its caches.
func checkAtimeDropCaches(t *testing.T, dir string) {
	needRoot(t, "dropping the kernel's caches")
	f, d := join(dir, "f"), join(dir, "d")
	writeFile(t, f, []byte("data"), 0o644)
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	setPast(t, f)
	setPast(t, d)
	ok(t, "read", readPlain(f))
	listDir(t, d)
	wantF, wantD := lstat(t, f), lstat(t, d)
	dropCaches(t)
	for _, c := range []struct {
		path string
		want unix.Stat_t
	}{{f, wantF}, {d, wantD}} {
		if got := lstat(t, c.path); ts(got.Atim) != ts(c.want.Atim) || ts(got.Ctim) != ts(c.want.Ctim) {
			t.Errorf("%s: after dropping caches atime %d ctime %d, before %d %d", c.path, ts(got.Atim), ts(got.Ctim), ts(c.want.Atim), ts(c.want.Ctim))
		}
	}
}

// checkMkfifo: mkfifo and mknod(S_IFIFO) make FIFOs that work as pipes
// (non-blocking open, write, read, EOF; ENXIO for a writer without reader),
// with size 0 and rdev 0.
func checkMkfifo(t *testing.T, dir string) {
	p := join(dir, "fifo")
	ok(t, "mkfifo", unix.Mkfifo(p, 0o640))
	st := lstat(t, p)
	if st.Mode != unix.S_IFIFO|(0o640&^umask(t)) || st.Size != 0 || st.Rdev != 0 {
		t.Errorf("fifo: mode %#o size %d rdev %d", st.Mode, st.Size, st.Rdev)
	}
	_, err := unix.Open(p, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	wantErrno(t, "open a FIFO for writing without a reader", err, unix.ENXIO)
	r := open(t, p, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	defer closeQuietly(&r)
	w := open(t, p, unix.O_WRONLY|unix.O_NONBLOCK, 0)
	defer closeQuietly(&w)
	if n, err := unix.Write(w, []byte("ping")); err != nil || n != 4 {
		t.Fatalf("write to FIFO: %d, %v", n, err)
	}
	buf := make([]byte, 16)
	n, err := unix.Read(r, buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Errorf("read from FIFO: %q, %v", buf[:n], err)
	}
	_, err = unix.Read(r, buf)
	wantErrno(t, "read an empty FIFO with a writer (non-blocking)", err, unix.EAGAIN)
	closeFD(t, &w)
	if n, err := unix.Read(r, buf); err != nil || n != 0 {
		t.Errorf("read after the writer closed: %d, %v; want EOF", n, err)
	}
	if st := lstat(t, p); st.Size != 0 {
		t.Errorf("fifo size after use %d", st.Size)
	}

	q := join(dir, "fifo2")
	ok(t, "mknod S_IFIFO", unix.Mknod(q, unix.S_IFIFO|0o600, 0))
	if st := lstat(t, q); st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Errorf("mknod S_IFIFO made mode %#o", st.Mode)
	}
	reg := join(dir, "regular")
	ok(t, "mknod S_IFREG", unix.Mknod(reg, unix.S_IFREG|0o600, 0))
	if st := lstat(t, reg); st.Mode != unix.S_IFREG|0o600 || st.Size != 0 {
		t.Errorf("mknod S_IFREG made mode %#o size %d", st.Mode, st.Size)
	}
	ok(t, "rename fifo", unix.Rename(p, join(dir, "renamed")))
	if st := lstat(t, join(dir, "renamed")); st.Mode&unix.S_IFMT != unix.S_IFIFO {
		t.Errorf("renamed fifo has mode %#o", st.Mode)
	}
}

// checkMknodDevice (root): character and block device nodes keep their type
// and device number (they are not opened).
func checkMknodDevice(t *testing.T, dir string) {
	needRoot(t, "mknod of device nodes needs CAP_MKNOD")
	for _, c := range []struct {
		name         string
		typ          uint32
		major, minor uint32
	}{
		{"null", unix.S_IFCHR, 1, 3},
		{"big", unix.S_IFCHR, 4095, 1 << 19},
		{"loop", unix.S_IFBLK, 7, 0},
	} {
		p := join(dir, c.name)
		dev := unix.Mkdev(c.major, c.minor)
		ok(t, "mknod "+c.name, unix.Mknod(p, c.typ|0o640, int(dev)))
		st := lstat(t, p)
		if st.Mode != c.typ|(0o640&^umask(t)) || st.Rdev != dev || st.Size != 0 {
			t.Errorf("%s: mode %#o rdev %#x size %d, want mode %#o rdev %#x", c.name, st.Mode, st.Rdev, st.Size, c.typ|(0o640&^umask(t)), dev)
		}
		ok(t, "rename", unix.Rename(p, p+"-moved"))
		if st := lstat(t, p+"-moved"); st.Rdev != dev {
			t.Errorf("%s after rename: rdev %#x", c.name, st.Rdev)
		}
	}
}

// checkUnixSocket: a unix socket bound in the directory appears as a socket
// file, accepts a connection through its path, and can be removed.
func checkUnixSocket(t *testing.T, dir string) {
	dfd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&dfd)
	// sun_path holds 108 bytes; go through /proc so that deep mounts work.
	short := fmt.Sprintf("/proc/self/fd/%d/sock", dfd)
	ln, err := net.Listen("unix", short)
	ok(t, "listen on a unix socket in the directory", err)
	defer func() { _ = ln.Close() }()
	p := join(dir, "sock")
	if st := lstat(t, p); st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		t.Errorf("bound socket has mode %#o", st.Mode)
	}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		_, err = c.Write([]byte("pong"))
		done <- errors.Join(err, c.Close())
	}()
	c, err := net.Dial("unix", short)
	ok(t, "connect", err)
	defer func() { _ = c.Close() }()
	buf := make([]byte, 4)
	if _, err := c.Read(buf); err != nil || string(buf) != "pong" {
		t.Errorf("read over the socket: %q, %v", buf, err)
	}
	ok(t, "server", <-done)
	ok(t, "unlink socket", unix.Unlink(p))
}

// xattrNames lists the user.* attributes of path (not following symlinks).
func xattrNames(t *testing.T, path string) []string {
	t.Helper()
	sz, err := unix.Llistxattr(path, nil)
	ok(t, "listxattr size", err)
	buf := make([]byte, sz)
	n, err := unix.Llistxattr(path, buf)
	ok(t, "listxattr", err)
	var out []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if strings.HasPrefix(name, "user.") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// getxattr returns the value of name on path (following symlinks).
func getxattr(path, name string) ([]byte, error) {
	sz, err := unix.Getxattr(path, name, nil)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, sz)
	n, err := unix.Getxattr(path, name, buf)
	return buf[:n], err
}

// checkXattrs: user.* attributes on files and directories: set, get, list,
// remove; XATTR_CREATE and XATTR_REPLACE; ENODATA; ERANGE for small buffers
// and long names; empty and binary values; large values up to what ext4
// allows; EPERM on symlinks; survival across rename.
func checkXattrs(t *testing.T, dir string) {
	f := join(dir, "f")
	writeFile(t, f, []byte("x"), 0o644)
	ok(t, "setxattr", unix.Setxattr(f, "user.a", []byte("alpha"), 0))
	ok(t, "setxattr empty", unix.Setxattr(f, "user.empty", nil, 0))
	bin := []byte{0, 1, 2, 0, 255, '\n', 0}
	ok(t, "setxattr binary", unix.Setxattr(f, "user.bin", bin, 0))
	if v, err := getxattr(f, "user.a"); err != nil || string(v) != "alpha" {
		t.Errorf("getxattr user.a: %q, %v", v, err)
	}
	if v, err := getxattr(f, "user.empty"); err != nil || len(v) != 0 {
		t.Errorf("getxattr of an empty value: %q, %v", v, err)
	}
	if v, err := getxattr(f, "user.bin"); err != nil || !bytes.Equal(v, bin) {
		t.Errorf("getxattr of a binary value: %q, %v", v, err)
	}
	if got, want := xattrNames(t, f), []string{"user.a", "user.bin", "user.empty"}; !slices.Equal(got, want) {
		t.Errorf("listxattr: %q, want %q", got, want)
	}

	wantErrno(t, "XATTR_CREATE on an existing name", unix.Setxattr(f, "user.a", []byte("x"), unix.XATTR_CREATE), unix.EEXIST)
	wantErrno(t, "XATTR_REPLACE on a missing name", unix.Setxattr(f, "user.nope", []byte("x"), unix.XATTR_REPLACE), unix.ENODATA)
	ok(t, "XATTR_REPLACE", unix.Setxattr(f, "user.a", []byte("beta"), unix.XATTR_REPLACE))
	ok(t, "XATTR_CREATE", unix.Setxattr(f, "user.c", []byte("gamma"), unix.XATTR_CREATE))
	if v, err := getxattr(f, "user.a"); err != nil || string(v) != "beta" {
		t.Errorf("after XATTR_REPLACE: %q, %v", v, err)
	}
	_, err := unix.Getxattr(f, "user.nope", make([]byte, 10))
	wantErrno(t, "getxattr of a missing name", err, unix.ENODATA)
	wantErrno(t, "removexattr of a missing name", unix.Removexattr(f, "user.nope"), unix.ENODATA)
	_, err = unix.Getxattr(f, "user.a", make([]byte, 2))
	wantErrno(t, "getxattr into a small buffer", err, unix.ERANGE)
	_, err = unix.Listxattr(f, make([]byte, 3))
	wantErrno(t, "listxattr into a small buffer", err, unix.ERANGE)
	wantErrno(t, "setxattr with a 256-byte name", unix.Setxattr(f, "user."+strings.Repeat("n", 251), []byte("x"), 0), unix.ERANGE)
	wantErrno(t, "setxattr in an unknown namespace", unix.Setxattr(f, "bogus.name", []byte("x"), 0), unix.EOPNOTSUPP)
	ok(t, "removexattr", unix.Removexattr(f, "user.c"))
	if got, want := xattrNames(t, f), []string{"user.a", "user.bin", "user.empty"}; !slices.Equal(got, want) {
		t.Errorf("listxattr after removexattr: %q, want %q", got, want)
	}

	// Large values: a few KiB always fit; 64 KiB fits where ext4 has
	// ea_inode (otherwise ENOSPC); beyond 64 KiB is E2BIG everywhere.
	g := join(dir, "g")
	writeFile(t, g, nil, 0o644)
	large := randBytes(7, 3000)
	ok(t, "setxattr 3000 bytes", unix.Setxattr(g, "user.large", large, 0))
	if v, err := getxattr(g, "user.large"); err != nil || !bytes.Equal(v, large) {
		t.Errorf("3000-byte value read back: %d bytes, %v", len(v), err)
	}
	h := join(dir, "h")
	writeFile(t, h, nil, 0o644)
	huge := randBytes(8, 64<<10)
	if err := unix.Setxattr(h, "user.huge", huge, 0); err == nil {
		if v, err := getxattr(h, "user.huge"); err != nil || !bytes.Equal(v, huge) {
			t.Errorf("64 KiB value read back: %d bytes, %v", len(v), err)
		}
	} else {
		wantErrno(t, "setxattr 64 KiB", err, unix.ENOSPC, unix.E2BIG)
	}
	wantErrno(t, "setxattr 64 KiB + 1", unix.Setxattr(h, "user.toohuge", append(huge, 0), 0), unix.E2BIG)
	many := join(dir, "many")
	writeFile(t, many, nil, 0o644)
	for i := range 30 {
		ok(t, "setxattr", unix.Setxattr(many, fmt.Sprintf("user.k%02d", i), []byte(fmt.Sprint(i)), 0))
	}
	if got := xattrNames(t, many); len(got) != 30 {
		t.Errorf("30 attributes set, %d listed", len(got))
	}

	// Directories yes, symlinks no (user.* is for files and directories).
	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	ok(t, "setxattr on a directory", unix.Setxattr(d, "user.dir", []byte("yes"), 0))
	if v, err := getxattr(d, "user.dir"); err != nil || string(v) != "yes" {
		t.Errorf("directory xattr: %q, %v", v, err)
	}
	l := join(dir, "l")
	ok(t, "symlink", unix.Symlink("f", l))
	wantErrno(t, "lsetxattr user.* on a symlink", unix.Lsetxattr(l, "user.x", []byte("x"), 0), unix.EPERM)
	if v, err := getxattr(l, "user.a"); err != nil || string(v) != "beta" {
		t.Errorf("getxattr through a symlink: %q, %v", v, err)
	}

	ok(t, "rename", unix.Rename(f, join(d, "moved")))
	if v, err := getxattr(join(d, "moved"), "user.bin"); err != nil || !bytes.Equal(v, bin) {
		t.Errorf("xattr after rename: %q, %v", v, err)
	}
	fd := open(t, join(d, "moved"), unix.O_RDONLY, 0)
	defer closeQuietly(&fd)
	ok(t, "fsetxattr", unix.Fsetxattr(fd, "user.fd", []byte("via fd"), 0))
	buf := make([]byte, 16)
	if n, err := unix.Fgetxattr(fd, "user.fd", buf); err != nil || string(buf[:n]) != "via fd" {
		t.Errorf("fgetxattr: %q, %v", buf[:n], err)
	}
}

// checkStatfs: statfs and fstatfs report plausible, consistent numbers and
// a 255-byte name limit; the filesystem is not flagged read-only.
func checkStatfs(t *testing.T, dir string) {
	var s, fs unix.Statfs_t
	ok(t, "statfs", unix.Statfs(dir, &s))
	if s.Bsize <= 0 || s.Blocks == 0 || s.Bfree > s.Blocks || s.Bavail > s.Bfree || s.Frsize <= 0 {
		t.Errorf("implausible block counts: %+v", s)
	}
	if s.Files != 0 && s.Ffree > s.Files {
		t.Errorf("more free inodes (%d) than inodes (%d)", s.Ffree, s.Files)
	}
	if s.Namelen != 255 {
		t.Errorf("f_namelen %d, want 255", s.Namelen)
	}
	if s.Flags&unix.ST_RDONLY != 0 {
		t.Errorf("a writable directory reports ST_RDONLY")
	}
	writeFile(t, join(dir, "f"), []byte("x"), 0o644)
	fd := open(t, join(dir, "f"), unix.O_RDONLY, 0)
	defer closeQuietly(&fd)
	ok(t, "fstatfs", unix.Fstatfs(fd, &fs))
	if fs.Type != s.Type || fs.Bsize != s.Bsize || fs.Blocks != s.Blocks || fs.Fsid != s.Fsid {
		t.Errorf("fstatfs of a file differs from statfs of its directory: %+v vs %+v", fs, s)
	}
}
