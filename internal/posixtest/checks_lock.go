package posixtest

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stillBlocked reports whether done stays empty for a moment: the call
// feeding it is blocked. A result that did arrive is put back for
// unblocked. done must have a buffer of one.
func stillBlocked(done chan error) bool {
	select {
	case err := <-done:
		done <- err
		return false
	case <-time.After(100 * time.Millisecond):
		return true
	}
}

// unblocked waits (with a generous bound) for the blocked call feeding done
// to return, and fails on its error.
func unblocked(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		ok(t, what, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still blocked 30 s after the conflicting lock was released", what)
	}
}

// checkFlock: flock(2) locks belong to open file descriptions: a second
// open of the same file conflicts (EWOULDBLOCK with LOCK_NB), a dup does
// not; shared locks share; a blocked LOCK_EX wakes on release; the lock goes
// with the last descriptor of its description; directories lock too.
func checkFlock(t *testing.T, dir string) {
	p := join(dir, "f")
	writeFile(t, p, nil, 0o644)
	fd1 := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&fd1)
	fd2 := open(t, p, unix.O_RDONLY, 0)
	defer closeQuietly(&fd2)

	ok(t, "LOCK_EX", unix.Flock(fd1, unix.LOCK_EX|unix.LOCK_NB))
	wantErrno(t, "LOCK_EX|LOCK_NB from a second open", unix.Flock(fd2, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	wantErrno(t, "LOCK_SH|LOCK_NB from a second open", unix.Flock(fd2, unix.LOCK_SH|unix.LOCK_NB), unix.EWOULDBLOCK)
	dup, err := unix.FcntlInt(uintptr(fd1), unix.F_DUPFD_CLOEXEC, 0)
	ok(t, "dup", err)
	defer closeQuietly(&dup)
	ok(t, "LOCK_EX through a dup of the holder", unix.Flock(dup, unix.LOCK_EX|unix.LOCK_NB))

	ok(t, "LOCK_UN", unix.Flock(fd1, unix.LOCK_UN))
	ok(t, "LOCK_SH", unix.Flock(fd2, unix.LOCK_SH|unix.LOCK_NB))
	ok(t, "second LOCK_SH", unix.Flock(fd1, unix.LOCK_SH|unix.LOCK_NB))
	fd3 := open(t, p, unix.O_RDONLY, 0)
	defer closeQuietly(&fd3)
	wantErrno(t, "LOCK_EX|LOCK_NB against two shared locks", unix.Flock(fd3, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	wantErrno(t, "upgrade to LOCK_EX while another holds LOCK_SH", unix.Flock(fd1, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	ok(t, "LOCK_UN", unix.Flock(fd1, unix.LOCK_UN))
	ok(t, "LOCK_UN", unix.Flock(fd2, unix.LOCK_UN))

	// A blocked LOCK_EX wakes when the holder unlocks.
	ok(t, "LOCK_EX", unix.Flock(fd1, unix.LOCK_EX))
	done := make(chan error, 1)
	go func() { done <- unix.Flock(fd3, unix.LOCK_EX) }()
	if !stillBlocked(done) {
		t.Fatalf("LOCK_EX from a second open did not block while the lock was held")
	}
	ok(t, "LOCK_UN", unix.Flock(fd1, unix.LOCK_UN))
	unblocked(t, "blocked LOCK_EX", done)
	ok(t, "LOCK_UN", unix.Flock(fd3, unix.LOCK_UN))

	// The lock lives until the last descriptor of its description closes.
	ok(t, "LOCK_EX", unix.Flock(fd1, unix.LOCK_EX|unix.LOCK_NB))
	closeFD(t, &fd1)
	wantErrno(t, "LOCK_EX|LOCK_NB while a dup still holds the lock", unix.Flock(fd2, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
	closeFD(t, &dup)
	ok(t, "LOCK_EX after the holder's last descriptor closed", unix.Flock(fd2, unix.LOCK_EX|unix.LOCK_NB))

	d1 := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&d1)
	d2 := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&d2)
	ok(t, "LOCK_EX on a directory", unix.Flock(d1, unix.LOCK_EX|unix.LOCK_NB))
	wantErrno(t, "conflicting LOCK_EX on a directory", unix.Flock(d2, unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
}

// lk builds a Flock_t for a byte range from the start of the file.
func lk(typ int16, start, length int64) unix.Flock_t {
	return unix.Flock_t{Type: typ, Whence: unix.SEEK_SET, Start: start, Len: length}
}

// checkFcntlLock: POSIX record locks (F_SETLK/F_GETLK) conflict between
// processes, not within one: a child process sees the parent's lock with the
// parent's pid, conflicting ranges fail with EAGAIN (or EACCES), others
// succeed; downgrades take effect; closing any descriptor of the file
// releases all of the process's locks on it; F_SETLKW waits for another
// process's lock; flock and fcntl locks do not interact.
func checkFcntlLock(t *testing.T, dir string) {
	p := join(dir, "f")
	writeFile(t, p, make([]byte, 1000), 0o644)
	fd := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&fd)
	set := func(fd int, l unix.Flock_t) error {
		return unix.FcntlFlock(uintptr(fd), unix.F_SETLK, &l)
	}
	ok(t, "F_SETLK write [0,100)", set(fd, lk(unix.F_WRLCK, 0, 100)))
	pid := int32(unix.Getpid())

	res := runHelper(t, helperRequest{Dir: dir, Steps: []helperStep{
		{Op: "getlk", Name: "f", Lock: lk(unix.F_WRLCK, 50, 10)},
		{Op: "setlk", Name: "f", Lock: lk(unix.F_WRLCK, 50, 10)},
		{Op: "setlk", Name: "f", Lock: lk(unix.F_RDLCK, 0, 10)},
		{Op: "setlk", Name: "f", Lock: lk(unix.F_WRLCK, 200, 10)},
	}})
	if g := res.Locks[0]; res.Errs[0] != "" || g.Type != unix.F_WRLCK || g.Pid != pid || g.Start != 0 || g.Len != 100 {
		t.Errorf("child F_GETLK: %+v (err %q), want the parent's write lock on [0,100) with pid %d", g, res.Errs[0], pid)
	}
	wantHelperErr(t, "child write lock on a locked range", res.Errs[1], "EAGAIN", "EACCES")
	wantHelperErr(t, "child read lock on a write-locked range", res.Errs[2], "EAGAIN", "EACCES")
	wantHelperErr(t, "child write lock on a free range", res.Errs[3], "")

	// Within one process, locks never conflict; F_GETLK sees nothing.
	fd2 := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&fd2)
	g := lk(unix.F_WRLCK, 0, 10)
	ok(t, "F_GETLK in the holder's process", unix.FcntlFlock(uintptr(fd2), unix.F_GETLK, &g))
	if g.Type != unix.F_UNLCK {
		t.Errorf("F_GETLK within the holding process reports %+v, want F_UNLCK", g)
	}

	ok(t, "downgrade to read lock", set(fd, lk(unix.F_RDLCK, 0, 100)))
	res = runHelper(t, helperRequest{Dir: dir, Steps: []helperStep{
		{Op: "setlk", Name: "f", Lock: lk(unix.F_RDLCK, 0, 10)},
		{Op: "setlk", Name: "f", Lock: lk(unix.F_WRLCK, 0, 10)},
	}})
	wantHelperErr(t, "child read lock against a read lock", res.Errs[0], "")
	wantHelperErr(t, "child write lock against a read lock", res.Errs[1], "EAGAIN", "EACCES")

	// Closing any descriptor of the file drops the process's locks.
	closeFD(t, &fd2)
	res = runHelper(t, helperRequest{Dir: dir, Steps: []helperStep{
		{Op: "setlk", Name: "f", Lock: lk(unix.F_WRLCK, 0, 100)},
	}})
	wantHelperErr(t, "child write lock after the parent closed another descriptor of the file", res.Errs[0], "")

	// The child holds a lock; the parent sees it, conflicts, and F_SETLKW
	// waits for the child to let go. flock is independent of it.
	ok(t, "flock LOCK_EX", unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB))
	res, release := startHelper(t, helperRequest{Dir: dir, Hold: true, Steps: []helperStep{
		{Op: "setlk", Name: "f", Lock: lk(unix.F_WRLCK, 500, 10)},
	}})
	defer release()
	wantHelperErr(t, "child write lock while the parent holds flock", res.Errs[0], "")
	g = lk(unix.F_RDLCK, 505, 1)
	ok(t, "F_GETLK", unix.FcntlFlock(uintptr(fd), unix.F_GETLK, &g))
	if g.Type != unix.F_WRLCK || g.Start != 500 || g.Len != 10 || g.Pid <= 0 || g.Pid == pid {
		t.Errorf("parent F_GETLK: %+v, want the child's write lock on [500,510)", g)
	}
	wantErrno(t, "parent lock on the child's range", set(fd, lk(unix.F_RDLCK, 509, 5)), unix.EAGAIN, unix.EACCES)
	done := make(chan error, 1)
	go func() {
		l := lk(unix.F_WRLCK, 500, 10)
		done <- unix.FcntlFlock(uintptr(fd), unix.F_SETLKW, &l)
	}()
	if !stillBlocked(done) {
		t.Fatalf("F_SETLKW did not wait for the child's lock")
	}
	release()
	unblocked(t, "F_SETLKW after the child exited", done)
}

func wantHelperErr(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if got == w {
			return
		}
	}
	if got == "" {
		got = "success"
	}
	t.Errorf("%s: got %s, want %q", what, got, want)
}

// checkOFDLock: open-file-description locks (F_OFD_SETLK) conflict between
// two opens in one process, F_OFD_GETLK reports pid -1, they conflict with
// classic POSIX locks too, F_OFD_SETLKW waits, and closing the holding
// description releases them.
func checkOFDLock(t *testing.T, dir string) {
	p := join(dir, "f")
	writeFile(t, p, make([]byte, 100), 0o644)
	a := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&a)
	b := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&b)
	c := open(t, p, unix.O_RDWR, 0)
	defer closeQuietly(&c)
	ofd := func(fd, cmd int, l unix.Flock_t) (unix.Flock_t, error) {
		err := unix.FcntlFlock(uintptr(fd), cmd, &l)
		return l, err
	}
	_, err := ofd(a, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 0, 10))
	ok(t, "F_OFD_SETLK", err)
	_, err = ofd(b, unix.F_OFD_SETLK, lk(unix.F_WRLCK, 5, 5))
	wantErrno(t, "F_OFD_SETLK from another open in the same process", err, unix.EAGAIN, unix.EACCES)
	_, err = ofd(b, unix.F_OFD_SETLK, lk(unix.F_RDLCK, 10, 10))
	ok(t, "F_OFD_SETLK on a free range", err)
	g, err := ofd(b, unix.F_OFD_GETLK, lk(unix.F_RDLCK, 0, 1))
	ok(t, "F_OFD_GETLK", err)
	if g.Type != unix.F_WRLCK || g.Pid != -1 || g.Start != 0 || g.Len != 10 {
		t.Errorf("F_OFD_GETLK: %+v, want a write lock on [0,10) with pid -1", g)
	}
	_, err = ofd(c, unix.F_SETLK, lk(unix.F_WRLCK, 0, 1))
	wantErrno(t, "classic F_SETLK against an OFD lock in the same process", err, unix.EAGAIN, unix.EACCES)

	done := make(chan error, 1)
	go func() {
		_, err := ofd(b, unix.F_OFD_SETLKW, lk(unix.F_WRLCK, 0, 10))
		done <- err
	}()
	if !stillBlocked(done) {
		t.Fatalf("F_OFD_SETLKW did not wait")
	}
	closeFD(t, &a)
	unblocked(t, "F_OFD_SETLKW after the holder closed", done)
}
