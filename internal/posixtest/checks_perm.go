package posixtest

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// nobody is the unprivileged uid/gid the permission check switches to.
const nobody = 65534

// checkPermissionsAsOtherUser (root): a child process that switches to an
// unprivileged uid meets the permission checks of a local filesystem:
// EACCES for reads, writes, creates and lookups the mode bits forbid, EPERM
// for chmod/chown/explicit utimes of others' files and for deleting others'
// files in a sticky directory, write access enough for UTIME_NOW, and a
// write by a non-owner clears setuid/setgid. This is what a mount with
// default_permissions (and a container running as a non-root uid) sees.
func checkPermissionsAsOtherUser(t *testing.T, dir string) {
	needRoot(t, "switching to another uid")
	// dir stays root-owned and only searchable (0711): the child reaches it
	// through a descriptor opened before switching, which spares the
	// ancestors, but needs search permission on dir itself.
	ok(t, "chmod", unix.Chmod(dir, 0o711))
	writeFile(t, join(dir, "secret"), []byte("s"), 0o600)
	writeFile(t, join(dir, "ro"), []byte("r"), 0o644)
	writeFile(t, join(dir, "rw"), []byte("w"), 0o666)
	ok(t, "chmod", unix.Chmod(join(dir, "secret"), 0o600))
	ok(t, "chmod", unix.Chmod(join(dir, "rw"), 0o666))
	writeFile(t, join(dir, "suid"), []byte("program"), 0o777)
	ok(t, "chmod", unix.Chmod(join(dir, "suid"), 0o6777))
	for _, d := range []struct {
		name string
		mode uint32
	}{{"pub", 0o777}, {"priv", 0o700}, {"sticky", 0o1777}} {
		ok(t, "mkdir", unix.Mkdir(join(dir, d.name), 0o700))
		ok(t, "chmod", unix.Chmod(join(dir, d.name), d.mode))
	}
	writeFile(t, join(dir, "priv", "x"), nil, 0o644)
	writeFile(t, join(dir, "sticky", "rootfile"), nil, 0o666)
	ok(t, "chmod", unix.Chmod(join(dir, "sticky", "rootfile"), 0o666))

	type step struct {
		helperStep
		want []string
	}
	steps := []step{
		{helperStep{Op: "open-read", Name: "secret"}, []string{"EACCES"}},
		{helperStep{Op: "open-read", Name: "ro"}, []string{""}},
		{helperStep{Op: "open-write", Name: "ro"}, []string{"EACCES"}},
		{helperStep{Op: "truncate", Name: "ro"}, []string{"EACCES"}},
		{helperStep{Op: "create", Name: "new-in-private-dir"}, []string{"EACCES"}},
		{helperStep{Op: "create", Name: "pub/mine"}, []string{""}},
		{helperStep{Op: "readdir", Name: "priv"}, []string{"EACCES"}},
		{helperStep{Op: "open-read", Name: "priv/x"}, []string{"EACCES"}},
		{helperStep{Op: "mkdir", Name: "priv/sub"}, []string{"EACCES"}},
		{helperStep{Op: "chmod", Name: "secret", Arg: "777"}, []string{"EPERM"}},
		{helperStep{Op: "chmod", Name: "pub/mine", Arg: "600"}, []string{""}},
		{helperStep{Op: "chown", Name: "pub/mine", Arg: "0"}, []string{"EPERM"}},
		{helperStep{Op: "utime-now", Name: "secret"}, []string{"EACCES"}},
		{helperStep{Op: "utime-now", Name: "rw"}, []string{""}},
		{helperStep{Op: "utime-set", Name: "rw"}, []string{"EPERM"}},
		{helperStep{Op: "unlink", Name: "sticky/rootfile"}, []string{"EPERM"}},
		{helperStep{Op: "rename", Name: "sticky/rootfile", Arg: "sticky/mine"}, []string{"EPERM"}},
		{helperStep{Op: "setxattr", Name: "ro", Arg: "v"}, []string{"EACCES"}},
		{helperStep{Op: "getxattr", Name: "secret"}, []string{"EACCES"}},
		{helperStep{Op: "write", Name: "suid", Arg: "x"}, []string{""}},
		{helperStep{Op: "unlink", Name: "pub/mine"}, []string{""}},
		{helperStep{Op: "rmdir", Name: "pub"}, []string{"EACCES"}},
	}
	req := helperRequest{Dir: dir, UID: nobody, GID: nobody}
	for _, s := range steps {
		req.Steps = append(req.Steps, s.helperStep)
	}
	res := runHelper(t, req)
	for i, s := range steps {
		wantHelperErr(t, "uid "+strconv.Itoa(nobody)+": "+s.Op+" "+s.Name, res.Errs[i], s.want...)
	}
	if m := lstat(t, join(dir, "suid")).Mode & 0o7777; m != 0o777 {
		t.Errorf("a write by a non-owner left mode %#o, want setuid and setgid cleared (0777)", m)
	}
	var st unix.Stat_t
	wantErrno(t, "file unlinked by its owner", unix.Lstat(join(dir, "pub", "mine"), &st), unix.ENOENT)
	lstat(t, join(dir, "sticky", "rootfile"))
}

// checkKillPrivData (root): every operation that changes a file's data
// drops its set-user-ID bit, and its set-group-ID bit, when the caller
// lacks CAP_FSETID, as on ext4: write, truncate, and fallocate (extending,
// punching a hole, zeroing a range). The set-group-ID bit of a file
// without S_IXGRP stays when the caller is in the file's group (Linux 6.x;
// the bit then marks mandatory locking). The same operations by root keep
// both bits.
func checkKillPrivData(t *testing.T, dir string) {
	needRoot(t, "switching to another uid")
	ok(t, "chmod", unix.Chmod(dir, 0o711))
	ops := []helperStep{{Op: "write", Arg: "x"}, {Op: "truncate"}}
	for _, m := range slices.Sorted(maps.Keys(fallocModes)) {
		ops = append(ops, helperStep{Op: "fallocate", Arg: m})
	}
	type file struct {
		name            string
		mode, gid, want uint32
	}
	var files []file
	req := helperRequest{Dir: dir, UID: nobody, GID: nobody}
	for _, op := range ops {
		for _, f := range []file{
			{mode: 0o6777, gid: nobody, want: 0o777},
			{mode: 0o6666, gid: 0, want: 0o666},
			{mode: 0o6666, gid: nobody, want: 0o2666},
		} {
			f.name = op.Op + "-" + op.Arg + "-" + strconv.FormatUint(uint64(f.mode), 8) + "-" + strconv.Itoa(int(f.gid))
			p := join(dir, f.name)
			writeFile(t, p, []byte("program"), 0o666)
			ok(t, "chown", unix.Chown(p, 0, int(f.gid)))
			ok(t, "chmod", unix.Chmod(p, f.mode))
			files = append(files, f)
			op.Name = f.name
			req.Steps = append(req.Steps, op)
		}
	}
	res := runHelper(t, req)
	for i, f := range files {
		s := req.Steps[i]
		wantHelperErr(t, "uid "+strconv.Itoa(nobody)+": "+s.Op+" "+s.Arg+" "+s.Name, res.Errs[i], "")
		if m := lstat(t, join(dir, f.name)).Mode & 0o7777; m != f.want {
			t.Errorf("%s %s by uid %d of a %#o file of group %d left mode %#o, want %#o", s.Op, s.Arg, nobody, f.mode, f.gid, m, f.want)
		}
	}
	for _, m := range slices.Sorted(maps.Keys(fallocModes)) {
		p := join(dir, "root-"+m)
		writeFile(t, p, []byte("program"), 0o777)
		ok(t, "chmod", unix.Chmod(p, 0o6777))
		fd := open(t, p, unix.O_WRONLY, 0)
		err := unix.Fallocate(fd, fallocModes[m], 0, 8192)
		closeFD(t, &fd)
		ok(t, "fallocate "+m+" as root", err)
		if got := lstat(t, p).Mode & 0o7777; got != 0o6777 {
			t.Errorf("fallocate %s by root (CAP_FSETID) left mode %#o, want 06777", m, got)
		}
	}
}

// checkKillPrivCaps (root): a write or truncate removes the file's
// capabilities (security.capability), whoever the caller, as on ext4 —
// unlike the set-user-ID bits, CAP_FSETID does not keep them; also a write
// while another descriptor holds the file read-only (on a FUSE passthrough
// mount that open makes the writer a passthrough, direct-io handle, for
// which the kernel skips its own privilege check).
func checkKillPrivCaps(t *testing.T, dir string) {
	needRoot(t, "setting file capabilities")
	ok(t, "chmod", unix.Chmod(dir, 0o711))
	// A VFS_CAP_REVISION_2 capability set with the effective flag:
	// CAP_NET_BIND_SERVICE permitted.
	caps := []byte{1, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	withCaps := func(name string) string {
		p := join(dir, name)
		// Larger than a file whose bytes a cache keeps inline, so that a
		// passthrough mount can give it a backing file.
		writeFile(t, p, bytes.Repeat([]byte("program"), 20000), 0o777)
		ok(t, "chmod", unix.Chmod(p, 0o777))
		ok(t, "setxattr security.capability on "+name, unix.Setxattr(p, "security.capability", caps, 0))
		return p
	}
	gone := func(what, p string) {
		t.Helper()
		_, err := unix.Getxattr(p, "security.capability", make([]byte, 64))
		wantErrno(t, what+": security.capability", err, unix.ENODATA)
	}
	p := withCaps("root-write")
	fd := open(t, p, unix.O_WRONLY, 0)
	_, err := unix.Pwrite(fd, []byte("x"), 0)
	closeFD(t, &fd)
	ok(t, "write as root", err)
	gone("after a write by root", p)

	p = withCaps("root-write-under-reader")
	rd := open(t, p, unix.O_RDONLY, 0)
	fd = open(t, p, unix.O_WRONLY, 0)
	_, err = unix.Pwrite(fd, []byte("x"), 0)
	closeFD(t, &fd)
	ok(t, "write as root while another fd reads", err)
	gone("after a write by root while another fd holds the file read-only", p)
	closeFD(t, &rd)

	p = withCaps("root-truncate")
	ok(t, "truncate as root", unix.Truncate(p, 3))
	gone("after a truncate by root", p)

	p = withCaps("nobody-write")
	res := runHelper(t, helperRequest{Dir: dir, UID: nobody, GID: nobody, Steps: []helperStep{{Op: "write", Name: "nobody-write", Arg: "x"}}})
	wantHelperErr(t, "uid "+strconv.Itoa(nobody)+": write", res.Errs[0], "")
	gone("after a write by uid "+strconv.Itoa(nobody), p)
}
