package posixtest

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// checkMkdirRmdir: mkdir applies the umask and keeps only the permission and
// sticky bits, link counts of the directory and its parent follow ext4
// (2 + subdirectories), readdir lists "." and ".." with the right inodes,
// and rmdir's errors.
func checkMkdirRmdir(t *testing.T, dir string) {
	parent := join(dir, "p")
	ok(t, "mkdir", unix.Mkdir(parent, 0o755))
	if n := lstat(t, parent).Nlink; n != 2 {
		t.Errorf("empty directory nlink %d, want 2", n)
	}
	d := join(parent, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o777))
	st := lstat(t, d)
	if want := unix.S_IFDIR | (0o777 &^ umask(t)); st.Mode != want {
		t.Errorf("mkdir 0777: mode %#o, want %#o", st.Mode, want)
	}
	if st.Gid != uint32(unix.Getegid()) || st.Uid != uint32(unix.Geteuid()) {
		t.Errorf("new directory owned by %d:%d, want %d:%d", st.Uid, st.Gid, unix.Geteuid(), unix.Getegid())
	}
	if n := lstat(t, parent).Nlink; n != 3 {
		t.Errorf("parent nlink with one subdirectory %d, want 3", n)
	}
	// A file does not count.
	writeFile(t, join(parent, "file"), nil, 0o644)
	if n := lstat(t, parent).Nlink; n != 3 {
		t.Errorf("parent nlink after adding a file %d, want 3", n)
	}

	fd := open(t, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&fd)
	ents := getdents(t, fd, 4096, 0)
	seen := map[string]uint64{}
	for _, e := range ents {
		seen[e.name] = e.ino
	}
	if len(ents) != 2 || seen["."] != st.Ino || seen[".."] != lstat(t, parent).Ino {
		t.Errorf("readdir of an empty directory: %+v, want . (ino %d) and .. (ino %d)", ents, st.Ino, lstat(t, parent).Ino)
	}

	sticky := join(parent, "sticky")
	ok(t, "mkdir 01777", unix.Mkdir(sticky, 0o1777))
	if m := lstat(t, sticky).Mode & 0o7777; m != 0o1777&^umask(t) {
		t.Errorf("mkdir 01777: mode %#o, want %#o", m, 0o1777&^umask(t))
	}
	nosgid := join(parent, "nosgid")
	ok(t, "mkdir 02755", unix.Mkdir(nosgid, 0o2755))
	if m := lstat(t, nosgid).Mode & 0o7777; m != 0o755&^umask(t) {
		t.Errorf("mkdir 02755 under a non-setgid parent: mode %#o, want %#o (Linux drops S_ISGID)", m, 0o755&^umask(t))
	}

	wantErrno(t, "mkdir existing", unix.Mkdir(d, 0o755), unix.EEXIST)
	wantErrno(t, "mkdir over a file", unix.Mkdir(join(parent, "file"), 0o755), unix.EEXIST)
	writeFile(t, join(d, "x"), nil, 0o644)
	wantErrno(t, "rmdir non-empty", unix.Rmdir(d), unix.ENOTEMPTY, unix.EEXIST)
	wantErrno(t, "rmdir d/.", unix.Rmdir(d+"/."), unix.EINVAL)
	wantErrno(t, "rmdir d/..", unix.Rmdir(d+"/.."), unix.ENOTEMPTY)
	wantErrno(t, "rmdir a file", unix.Rmdir(join(parent, "file")), unix.ENOTDIR)
	wantErrno(t, "rmdir missing", unix.Rmdir(join(parent, "missing")), unix.ENOENT)
	ok(t, "unlink", unix.Unlink(join(d, "x")))
	ok(t, "rmdir", unix.Rmdir(d))
	ok(t, "rmdir", unix.Rmdir(sticky))
	ok(t, "rmdir", unix.Rmdir(nosgid))
	if n := lstat(t, parent).Nlink; n != 2 {
		t.Errorf("parent nlink after rmdir of all subdirectories %d, want 2", n)
	}
}

// checkRenameFile: rename of files over existing files (atomic replace,
// inode moves with the name), onto itself and onto another link of the same
// inode (both no-ops), across directories (both parents' times change, the
// file's ctime too), and the errors.
func checkRenameFile(t *testing.T, dir string) {
	a, b := join(dir, "a"), join(dir, "b")
	writeFile(t, a, []byte("A"), 0o644)
	writeFile(t, b, []byte("B"), 0o600)
	inoA := lstat(t, a).Ino
	bfd := open(t, b, unix.O_RDONLY, 0)
	defer closeQuietly(&bfd)
	ok(t, "rename a b", unix.Rename(a, b))
	var st unix.Stat_t
	wantErrno(t, "lstat old name", unix.Lstat(a, &st), unix.ENOENT)
	st = lstat(t, b)
	if st.Ino != inoA || st.Mode&0o777 != 0o644 {
		t.Errorf("renamed file: ino %d mode %#o, want ino %d mode 0644", st.Ino, st.Mode&0o777, inoA)
	}
	wantContent(t, b, []byte("A"))
	if n := fstat(t, bfd).Nlink; n != 0 {
		t.Errorf("replaced file nlink %d, want 0", n)
	}

	ok(t, "rename b b", unix.Rename(b, b))
	wantContent(t, b, []byte("A"))
	c := join(dir, "c")
	ok(t, "link", unix.Link(b, c))
	ok(t, "rename onto another link of the same inode", unix.Rename(b, c))
	for _, p := range []string{b, c} {
		if st := lstat(t, p); st.Nlink != 2 || st.Ino != inoA {
			t.Errorf("%s after rename onto its own hard link: nlink %d ino %d, want 2 and %d (a no-op)", p, st.Nlink, st.Ino, inoA)
		}
	}

	d1, d2 := join(dir, "d1"), join(dir, "d2")
	ok(t, "mkdir", unix.Mkdir(d1, 0o755))
	ok(t, "mkdir", unix.Mkdir(d2, 0o755))
	x := join(d1, "x")
	writeFile(t, x, []byte("moving"), 0o644)
	setPast(t, d1)
	setPast(t, d2)
	before := lstat(t, x)
	tick()
	ok(t, "rename across directories", unix.Rename(x, join(d2, "y")))
	wantContent(t, join(d2, "y"), []byte("moving"))
	for _, d := range []string{d1, d2} {
		if st := lstat(t, d); ts(st.Mtim) == ts(pastTime) {
			t.Errorf("%s: mtime unchanged by a rename in or out", d)
		}
	}
	if after := lstat(t, join(d2, "y")); ts(after.Ctim) == ts(before.Ctim) || ts(after.Mtim) != ts(before.Mtim) {
		t.Errorf("renamed file: ctime %d -> %d (ext4 updates it), mtime %d -> %d (must not change)",
			ts(before.Ctim), ts(after.Ctim), ts(before.Mtim), ts(after.Mtim))
	}

	wantErrno(t, "rename missing", unix.Rename(join(dir, "missing"), join(dir, "z")), unix.ENOENT)
	wantErrno(t, "rename into a missing directory", unix.Rename(c, join(dir, "nodir", "z")), unix.ENOENT)
	wantErrno(t, "rename under a file", unix.Rename(c, join(b, "z")), unix.ENOTDIR)
	wantErrno(t, "rename a file to name/", unix.Rename(c, join(dir, "z")+"/"), unix.ENOTDIR)
}

// checkRenameDir: non-empty directories move over empty ones, never over
// non-empty ones (ENOTEMPTY), nor over files (ENOTDIR), files never over
// directories (EISDIR), nothing into its own subtree (EINVAL); link counts
// and ".." follow the move, and open descriptors inside keep working.
func checkRenameDir(t *testing.T, dir string) {
	a, b, c := join(dir, "a"), join(dir, "b"), join(dir, "c")
	mkdirAll(t, join(a, "sub"))
	writeFile(t, join(a, "x"), []byte("x"), 0o644)
	writeFile(t, join(a, "sub", "y"), []byte("y"), 0o644)
	inoY := lstat(t, join(a, "sub", "y")).Ino
	ok(t, "mkdir", unix.Mkdir(b, 0o755))
	mkdirAll(t, c)
	writeFile(t, join(c, "z"), []byte("z"), 0o644)
	yfd := open(t, join(a, "sub", "y"), unix.O_RDWR, 0)
	defer closeQuietly(&yfd)

	ok(t, "rename non-empty a over empty b", unix.Rename(a, b))
	wantContent(t, join(b, "x"), []byte("x"))
	wantContent(t, join(b, "sub", "y"), []byte("y"))
	if st := lstat(t, join(b, "sub", "y")); st.Ino != inoY {
		t.Errorf("a file inside a renamed directory changed inode %d -> %d", inoY, st.Ino)
	}
	pwriteAll(t, yfd, []byte("Y"), 0)
	wantContent(t, join(b, "sub", "y"), []byte("Y"))
	var st unix.Stat_t
	wantErrno(t, "lstat old directory name", unix.Lstat(a, &st), unix.ENOENT)

	wantErrno(t, "rename c over non-empty b", unix.Rename(c, b), unix.ENOTEMPTY)
	wantContent(t, join(c, "z"), []byte("z"))
	f := join(dir, "file")
	writeFile(t, f, []byte("f"), 0o644)
	wantErrno(t, "rename directory over file", unix.Rename(c, f), unix.ENOTDIR)
	wantErrno(t, "rename file over directory", unix.Rename(f, c), unix.EISDIR)
	wantErrno(t, "rename directory into its own subdirectory", unix.Rename(b, join(b, "sub", "inner")), unix.EINVAL)
	wantErrno(t, "rename directory onto its own child", unix.Rename(b, join(b, "sub")), unix.EINVAL, unix.ENOTEMPTY)
	ok(t, "rename directory onto itself", unix.Rename(b, b))
	wantContent(t, join(c, "z"), []byte("z"))
	wantContent(t, f, []byte("f"))

	// Moving a directory between parents: link counts and "..".
	p1, p2 := join(dir, "p1"), join(dir, "p2")
	mkdirAll(t, join(p1, "m", "deep"))
	ok(t, "mkdir", unix.Mkdir(p2, 0o755))
	mfd := open(t, join(p1, "m"), unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&mfd)
	ok(t, "rename p1/m p2/m", unix.Rename(join(p1, "m"), join(p2, "m")))
	if n1, n2 := lstat(t, p1).Nlink, lstat(t, p2).Nlink; n1 != 2 || n2 != 3 {
		t.Errorf("after moving a directory from p1 to p2: nlink %d and %d, want 2 and 3", n1, n2)
	}
	if dotdot, p2ino := lstat(t, join(p2, "m", "..")).Ino, lstat(t, p2).Ino; dotdot != p2ino {
		t.Errorf("moved directory's .. is inode %d, want p2's %d", dotdot, p2ino)
	}
	nfd, err := unix.Openat(mfd, "made-after-move", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	ok(t, "openat in the moved directory", err)
	ok(t, "close", unix.Close(nfd))
	lstat(t, join(p2, "m", "made-after-move"))
	wantContent(t, join(c, "z"), []byte("z"))
}

// checkRenameNoreplace: RENAME_NOREPLACE fails with EEXIST on any existing
// target and leaves both untouched; works when the target is free.
func checkRenameNoreplace(t *testing.T, dir string) {
	a, b := join(dir, "a"), join(dir, "b")
	writeFile(t, a, []byte("A"), 0o644)
	writeFile(t, b, []byte("B"), 0o644)
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
	wantErrno(t, "RENAME_NOREPLACE over a file", err, unix.EEXIST)
	wantContent(t, a, []byte("A"))
	wantContent(t, b, []byte("B"))
	d := join(dir, "d")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	err = unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, d, unix.RENAME_NOREPLACE)
	wantErrno(t, "RENAME_NOREPLACE over an empty directory", err, unix.EEXIST)
	ok(t, "RENAME_NOREPLACE to a free name", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, join(d, "a"), unix.RENAME_NOREPLACE))
	wantContent(t, join(d, "a"), []byte("A"))
	ok(t, "RENAME_NOREPLACE of a directory", unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, join(dir, "e"), unix.RENAME_NOREPLACE))
	wantContent(t, join(dir, "e", "a"), []byte("A"))
	err = unix.Renameat2(unix.AT_FDCWD, b, unix.AT_FDCWD, join(dir, "x"), unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE)
	wantErrno(t, "RENAME_NOREPLACE|RENAME_EXCHANGE", err, unix.EINVAL)
}

// checkRenameExchange: RENAME_EXCHANGE swaps two names atomically, files
// and directories alike (parents' link counts and ".." follow), and fails
// with ENOENT when either is missing.
func checkRenameExchange(t *testing.T, dir string) {
	a, b := join(dir, "a"), join(dir, "b")
	writeFile(t, a, []byte("A"), 0o644)
	writeFile(t, b, []byte("B"), 0o600)
	inoA, inoB := lstat(t, a).Ino, lstat(t, b).Ino
	ok(t, "exchange files", unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE))
	wantContent(t, a, []byte("B"))
	wantContent(t, b, []byte("A"))
	if sa, sb := lstat(t, a), lstat(t, b); sa.Ino != inoB || sb.Ino != inoA || sa.Mode&0o777 != 0o600 {
		t.Errorf("after exchange: a is ino %d mode %#o, b is ino %d; want %d/0600 and %d", sa.Ino, sa.Mode&0o777, sb.Ino, inoB, inoA)
	}

	// A directory in p1 and a file in p2 trade places.
	p1, p2 := join(dir, "p1"), join(dir, "p2")
	mkdirAll(t, join(p1, "d"))
	writeFile(t, join(p1, "d", "inside"), []byte("in"), 0o644)
	mkdirAll(t, p2)
	writeFile(t, join(p2, "f"), []byte("F"), 0o644)
	ok(t, "exchange directory and file", unix.Renameat2(unix.AT_FDCWD, join(p1, "d"), unix.AT_FDCWD, join(p2, "f"), unix.RENAME_EXCHANGE))
	wantContent(t, join(p2, "f", "inside"), []byte("in"))
	wantContent(t, join(p1, "d"), []byte("F"))
	if n1, n2 := lstat(t, p1).Nlink, lstat(t, p2).Nlink; n1 != 2 || n2 != 3 {
		t.Errorf("after exchanging a directory from p1 with a file in p2: nlink %d and %d, want 2 and 3", n1, n2)
	}
	if dotdot, p2ino := lstat(t, join(p2, "f", "..")).Ino, lstat(t, p2).Ino; dotdot != p2ino {
		t.Errorf("exchanged directory's .. is inode %d, want %d", dotdot, p2ino)
	}

	// Two non-empty directories.
	x, y := join(dir, "x"), join(dir, "y")
	mkdirAll(t, x)
	mkdirAll(t, y)
	writeFile(t, join(x, "fx"), nil, 0o644)
	writeFile(t, join(y, "fy"), nil, 0o644)
	ok(t, "exchange directories", unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, y, unix.RENAME_EXCHANGE))
	lstat(t, join(x, "fy"))
	lstat(t, join(y, "fx"))

	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, join(dir, "missing"), unix.RENAME_EXCHANGE)
	wantErrno(t, "exchange with a missing target", err, unix.ENOENT)
	wantContent(t, a, []byte("B"))
	err = unix.Renameat2(unix.AT_FDCWD, x, unix.AT_FDCWD, join(x, "fy"), unix.RENAME_EXCHANGE)
	wantErrno(t, "exchange a directory with its own child", err, unix.EINVAL)
}

// checkHardLinks: link counts on every name (also across directories and
// after unlink), one inode seen through all names (data, mode, xattrs,
// times), links to symlinks, and the errors (directories, existing names).
func checkHardLinks(t *testing.T, dir string) {
	f := join(dir, "f")
	writeFile(t, f, []byte("data"), 0o644)
	before := lstat(t, f)
	tick()
	g := join(dir, "g")
	ok(t, "link", unix.Link(f, g))
	sub := join(dir, "sub")
	ok(t, "mkdir", unix.Mkdir(sub, 0o755))
	h := join(sub, "h")
	ok(t, "link across directories", unix.Link(f, h))
	for _, p := range []string{f, g, h} {
		st := lstat(t, p)
		if st.Nlink != 3 || st.Ino != before.Ino {
			t.Errorf("%s: nlink %d ino %d, want 3 and %d", p, st.Nlink, st.Ino, before.Ino)
		}
		if ts(st.Ctim) == ts(before.Ctim) {
			t.Errorf("%s: ctime unchanged by link", p)
		}
	}
	fd := open(t, g, unix.O_WRONLY|unix.O_APPEND, 0)
	defer closeQuietly(&fd)
	if _, err := unix.Write(fd, []byte("+more")); err != nil {
		t.Fatalf("write through g: %v", err)
	}
	if n := fstat(t, fd).Nlink; n != 3 {
		t.Errorf("fstat nlink %d, want 3", n)
	}
	wantContent(t, h, []byte("data+more"))

	// Attributes belong to the inode, not to the name.
	ok(t, "chmod through h", unix.Chmod(h, 0o640))
	ok(t, "setxattr through g", unix.Setxattr(g, "user.shared", []byte("v"), 0))
	ok(t, "utimensat through f", unix.UtimesNanoAt(unix.AT_FDCWD, f, []unix.Timespec{pastTime, pastTime}, 0))
	for _, p := range []string{f, g, h} {
		st := lstat(t, p)
		if st.Mode&0o777 != 0o640 || ts(st.Mtim) != ts(pastTime) {
			t.Errorf("%s: mode %#o mtime %d, want 0640 and %d (set through another name)", p, st.Mode&0o777, ts(st.Mtim), ts(pastTime))
		}
		buf := make([]byte, 8)
		n, err := unix.Getxattr(p, "user.shared", buf)
		if err != nil || string(buf[:n]) != "v" {
			t.Errorf("%s: xattr set through another name: %q, %v", p, buf[:n], err)
		}
	}

	ok(t, "unlink f", unix.Unlink(f))
	for _, p := range []string{g, h} {
		if n := lstat(t, p).Nlink; n != 2 {
			t.Errorf("%s after unlinking one name: nlink %d, want 2", p, n)
		}
	}
	if n := fstat(t, fd).Nlink; n != 2 {
		t.Errorf("fstat nlink after unlink %d, want 2", n)
	}
	// Rename another file over one of the names.
	o := join(dir, "other")
	writeFile(t, o, []byte("other"), 0o644)
	ok(t, "rename over a link", unix.Rename(o, g))
	if n := lstat(t, h).Nlink; n != 1 {
		t.Errorf("after renaming over one of two links: nlink %d, want 1", n)
	}
	wantContent(t, h, []byte("data+more"))

	// linkat of a symlink links the symlink itself; AT_SYMLINK_FOLLOW its target.
	ok(t, "symlink", unix.Symlink("sub/h", join(dir, "sl")))
	ok(t, "linkat symlink", unix.Linkat(unix.AT_FDCWD, join(dir, "sl"), unix.AT_FDCWD, join(dir, "sl2"), 0))
	if st := lstat(t, join(dir, "sl2")); st.Mode&unix.S_IFMT != unix.S_IFLNK || st.Nlink != 2 {
		t.Errorf("hard link to a symlink: mode %#o nlink %d, want a symlink with nlink 2", st.Mode, st.Nlink)
	}
	ok(t, "linkat AT_SYMLINK_FOLLOW", unix.Linkat(unix.AT_FDCWD, join(dir, "sl"), unix.AT_FDCWD, join(dir, "followed"), unix.AT_SYMLINK_FOLLOW))
	if st := lstat(t, join(dir, "followed")); st.Ino != before.Ino || st.Nlink != 2 {
		t.Errorf("AT_SYMLINK_FOLLOW link: ino %d nlink %d, want %d and 2", st.Ino, st.Nlink, before.Ino)
	}

	wantErrno(t, "link a directory", unix.Link(sub, join(dir, "dirlink")), unix.EPERM)
	wantErrno(t, "link onto an existing name", unix.Link(h, g), unix.EEXIST)
	wantErrno(t, "link a missing file", unix.Link(join(dir, "missing"), join(dir, "m2")), unix.ENOENT)
}

// checkSymlinks: readlink, lstat (type, size = target length), following
// relative chains across directories and absolute targets, dangling links,
// loops (ELOOP), O_NOFOLLOW (ELOOP) and O_PATH|O_NOFOLLOW, long targets, and
// that l* calls act on the link, not the target.
func checkSymlinks(t *testing.T, dir string) {
	f := join(dir, "f")
	writeFile(t, f, []byte("target content"), 0o600)
	l := join(dir, "l")
	ok(t, "symlink", unix.Symlink("f", l))
	buf := make([]byte, 8192)
	n, err := unix.Readlink(l, buf)
	if err != nil || string(buf[:n]) != "f" {
		t.Errorf("readlink: %q, %v", buf[:n], err)
	}
	st := lstat(t, l)
	if st.Mode != unix.S_IFLNK|0o777 || st.Size != 1 || st.Nlink != 1 {
		t.Errorf("lstat of a symlink: mode %#o size %d nlink %d, want %#o, 1, 1", st.Mode, st.Size, st.Nlink, unix.S_IFLNK|0o777)
	}
	var fst unix.Stat_t
	ok(t, "stat through the link", unix.Stat(l, &fst))
	if fst.Ino != lstat(t, f).Ino {
		t.Errorf("stat did not follow the symlink")
	}
	wantContent(t, l, []byte("target content"))

	// Relative chain across directories, and an absolute target.
	mkdirAll(t, join(dir, "d1"))
	mkdirAll(t, join(dir, "d2"))
	ok(t, "symlink", unix.Symlink("../d2/l2", join(dir, "d1", "l1")))
	ok(t, "symlink", unix.Symlink("../l", join(dir, "d2", "l2")))
	wantContent(t, join(dir, "d1", "l1"), []byte("target content"))
	ok(t, "symlink", unix.Symlink(f, join(dir, "abs")))
	wantContent(t, join(dir, "abs"), []byte("target content"))
	ok(t, "symlink to a directory", unix.Symlink("d1", join(dir, "dl")))
	wantContent(t, join(dir, "dl", "l1"), []byte("target content"))

	// Dangling.
	dangling := join(dir, "dangling")
	ok(t, "symlink", unix.Symlink("nowhere/at/all", dangling))
	wantErrno(t, "stat a dangling symlink", unix.Stat(dangling, &fst), unix.ENOENT)
	lstat(t, dangling)

	// Loops.
	ok(t, "symlink", unix.Symlink("loop2", join(dir, "loop1")))
	ok(t, "symlink", unix.Symlink("loop1", join(dir, "loop2")))
	_, err = unix.Open(join(dir, "loop1"), unix.O_RDONLY, 0)
	wantErrno(t, "open a symlink loop", err, unix.ELOOP)
	wantErrno(t, "stat a symlink loop", unix.Stat(join(dir, "loop1"), &fst), unix.ELOOP)

	// O_NOFOLLOW and O_PATH.
	_, err = unix.Open(l, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	wantErrno(t, "O_NOFOLLOW on a symlink", err, unix.ELOOP)
	pfd, err := unix.Open(l, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	ok(t, "O_PATH|O_NOFOLLOW", err)
	if st := fstat(t, pfd); st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Errorf("fstat of an O_PATH|O_NOFOLLOW descriptor: mode %#o, want a symlink", st.Mode)
	}
	n, err = unix.Readlinkat(pfd, "", buf)
	if err != nil || string(buf[:n]) != "f" {
		t.Errorf("readlinkat(fd, \"\"): %q, %v", buf[:n], err)
	}
	ok(t, "close", unix.Close(pfd))

	// Long targets: 4095 bytes is the most Linux accepts.
	longTarget := strings.Repeat("abcdefghi/", 409) + "xxxxx"
	ok(t, "symlink with a 4095-byte target", unix.Symlink(longTarget, join(dir, "long")))
	n, err = unix.Readlink(join(dir, "long"), buf)
	if err != nil || string(buf[:n]) != longTarget {
		t.Errorf("readlink of a 4095-byte target: %d bytes, %v", n, err)
	}
	if st := lstat(t, join(dir, "long")); st.Size != 4095 {
		t.Errorf("lstat size of a 4095-byte symlink %d", st.Size)
	}
	wantErrno(t, "symlink with a 4096-byte target", unix.Symlink(longTarget+"y", join(dir, "toolong")), unix.ENAMETOOLONG)
	wantErrno(t, "symlink with an empty target", unix.Symlink("", join(dir, "empty")), unix.ENOENT)
	wantErrno(t, "symlink onto an existing name", unix.Symlink("x", f), unix.EEXIST)
	_, err = unix.Readlink(f, buf)
	wantErrno(t, "readlink of a regular file", err, unix.EINVAL)

	// l* calls act on the link.
	fBefore := lstat(t, f)
	ok(t, "lutimes", unix.UtimesNanoAt(unix.AT_FDCWD, l, []unix.Timespec{pastTime, pastTime}, unix.AT_SYMLINK_NOFOLLOW))
	if st := lstat(t, l); ts(st.Mtim) != ts(pastTime) || ts(st.Atim) != ts(pastTime) {
		t.Errorf("utimensat AT_SYMLINK_NOFOLLOW: link times %d/%d, want %d", ts(st.Atim), ts(st.Mtim), ts(pastTime))
	}
	if st := lstat(t, f); ts(st.Mtim) != ts(fBefore.Mtim) {
		t.Errorf("utimensat AT_SYMLINK_NOFOLLOW changed the target")
	}
	// Renaming the link keeps its target text.
	ok(t, "rename symlink", unix.Rename(l, join(dir, "d2", "moved")))
	n, err = unix.Readlink(join(dir, "d2", "moved"), buf)
	if err != nil || string(buf[:n]) != "f" {
		t.Errorf("readlink after rename: %q, %v", buf[:n], err)
	}
}

// checkNameMax: 255-byte names (ASCII and multi-byte UTF-8) work for every
// kind of entry; 256-byte names fail with ENAMETOOLONG everywhere.
func checkNameMax(t *testing.T, dir string) {
	ascii := strings.Repeat("n", 255)
	utf := strings.Repeat("€", 85) // 3 bytes each
	for _, name := range []string{ascii, utf} {
		p := join(dir, name)
		writeFile(t, p, []byte(name[:3]), 0o644)
		lstat(t, p)
		if !slicesContains(listDir(t, dir), name) {
			t.Errorf("readdir does not list the %d-byte name", len(name))
		}
		other := join(dir, strings.Repeat("m", 254)+name[:1])
		ok(t, "rename to another 255-byte name", unix.Rename(p, other))
		ok(t, "link with a 255-byte name", unix.Link(other, p))
		ok(t, "unlink", unix.Unlink(other))
		ok(t, "unlink", unix.Unlink(p))
	}
	d := join(dir, ascii)
	ok(t, "mkdir 255", unix.Mkdir(d, 0o755))
	ok(t, "symlink 255", unix.Symlink(ascii, join(d, ascii)))
	lstat(t, join(d, ascii))

	long := join(dir, ascii+"x")
	longUTF := join(dir, utf+"x")
	_, err := unix.Open(long, unix.O_CREAT|unix.O_WRONLY, 0o644)
	wantErrno(t, "create 256", err, unix.ENAMETOOLONG)
	_, err = unix.Open(longUTF, unix.O_CREAT|unix.O_WRONLY, 0o644)
	wantErrno(t, "create 256 (UTF-8)", err, unix.ENAMETOOLONG)
	var st unix.Stat_t
	wantErrno(t, "lstat 256", unix.Lstat(long, &st), unix.ENAMETOOLONG)
	wantErrno(t, "mkdir 256", unix.Mkdir(long, 0o755), unix.ENAMETOOLONG)
	wantErrno(t, "symlink 256", unix.Symlink("x", long), unix.ENAMETOOLONG)
	wantErrno(t, "link 256", unix.Link(join(d, ascii), long), unix.ENAMETOOLONG)
	wantErrno(t, "rename to 256", unix.Rename(d, long), unix.ENAMETOOLONG)
	wantErrno(t, "mkfifo 256", unix.Mkfifo(long, 0o644), unix.ENAMETOOLONG)
}

// oddNames are names that are legal on ext4 and that naive encoders,
// normalisers or case-folders get wrong. Byte strings, not necessarily UTF-8.
var oddNames = []string{
	"with space", " leading", "trailing ", "new\nline", "tab\there", `back\slash`,
	"-dash", "--double-dash", "colon:name", "glob*?[x]", `quote"'`, "shell;|&$()<>",
	"percent%2Fenc", "caf\u00e9", "cafe\u0301", "CASE", "case", "Case",
	"\xff\xfe-not-utf8", "\x01\x7f-control", "日本語", "emoji-😀", ".hidden", "...",
	"..x", "x..", "a.b.c", "~", "#hash", "=equals", "{braces}", "\u200bzero-width",
}

// checkOddNames: every byte sequence ext4 accepts as a name round-trips
// exactly through create, readdir, lookup, rename and unlink, with no
// Unicode normalisation or case folding.
func checkOddNames(t *testing.T, dir string) {
	for _, name := range oddNames {
		writeFile(t, join(dir, name), []byte(name), 0o644)
	}
	got := listDir(t, dir)
	slices.Sort(got)
	want := slices.Clone(oddNames)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("readdir returned %q\nwant %q", got, want)
	}
	for _, name := range oddNames {
		wantContent(t, join(dir, name), []byte(name))
		ok(t, fmt.Sprintf("rename %q", name), unix.Rename(join(dir, name), join(dir, name+"~")))
	}
	for _, name := range oddNames {
		wantContent(t, join(dir, name+"~"), []byte(name))
		ok(t, fmt.Sprintf("unlink %q", name+"~"), unix.Unlink(join(dir, name+"~")))
	}
	if left := listDir(t, dir); len(left) != 0 {
		t.Errorf("left after unlinking all: %q", left)
	}
	// Directories with odd names hold files.
	for _, name := range oddNames[:6] {
		mkdirAll(t, join(dir, name, name))
		writeFile(t, join(dir, name, name, "f"), []byte("x"), 0o644)
	}
	for _, name := range oddNames[:6] {
		wantContent(t, join(dir, name, name, "f"), []byte("x"))
	}
}

// checkDeepPaths: a chain of 100 directories whose full path exceeds
// PATH_MAX works through *at calls (the full path fails with ENAMETOOLONG),
// a 100-level chain of short names works through plain paths, renaming the
// top of a deep chain keeps the bottom reachable, and both chains delete.
func checkDeepPaths(t *testing.T, dir string) {
	const depth = 100
	name := strings.Repeat("d", 50)
	fd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&fd)
	cur := fd
	for i := range depth {
		ok(t, fmt.Sprintf("mkdirat level %d", i), unix.Mkdirat(cur, name, 0o755))
		next, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		ok(t, fmt.Sprintf("openat level %d", i), err)
		if cur != fd {
			ok(t, "close", unix.Close(cur))
		}
		cur = next
	}
	ffd, err := unix.Openat(cur, "bottom", unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	ok(t, "create at the bottom", err)
	pwriteAll(t, ffd, []byte("deep"), 0)
	ok(t, "close", unix.Close(ffd))
	ok(t, "close", unix.Close(cur))
	full := dir + strings.Repeat("/"+name, depth) + "/bottom"
	_, err = unix.Open(full, unix.O_RDONLY, 0)
	wantErrno(t, fmt.Sprintf("open a %d-byte path", len(full)), err, unix.ENAMETOOLONG)
	// Walk down again by *at calls and read.
	cur = fd
	for i := range depth {
		next, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		ok(t, fmt.Sprintf("openat level %d again", i), err)
		if cur != fd {
			ok(t, "close", unix.Close(cur))
		}
		cur = next
	}
	ffd, err = unix.Openat(cur, "bottom", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	ok(t, "open the bottom file", err)
	buf := make([]byte, 8)
	if n := preadFull(t, ffd, buf, 0); string(buf[:n]) != "deep" {
		t.Errorf("bottom file reads %q", buf[:n])
	}
	ok(t, "close", unix.Close(ffd))
	ok(t, "close", unix.Close(cur))

	// Short names: plain paths.
	short := join(dir, "s") + strings.Repeat("/d", depth)
	mkdirAll(t, short)
	writeFile(t, join(short, "leaf"), []byte("leaf"), 0o644)
	ok(t, "rename the top of the chain", unix.Rename(join(dir, "s"), join(dir, "t")))
	moved := join(dir, "t") + strings.Repeat("/d", depth)
	wantContent(t, join(moved, "leaf"), []byte("leaf"))
	dirs, files := 0, 0
	err = filepath.WalkDir(join(dir, "t"), func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			dirs++
		} else {
			files++
		}
		return nil
	})
	ok(t, "walk", err)
	if dirs != depth+1 || files != 1 {
		t.Errorf("walk of the short chain: %d directories and %d files, want %d and 1", dirs, files, depth+1)
	}
	ok(t, "remove the long chain", os.RemoveAll(join(dir, name)))
	ok(t, "remove the short chain", os.RemoveAll(join(dir, "t")))
	if left := listDir(t, dir); len(left) != 0 {
		t.Errorf("left after removing both chains: %q", left)
	}
}

// checkReaddirLarge: a directory of 10,000 entries lists every name exactly
// once with the right d_type and d_ino, in large and small batches; the
// offsets getdents returns resume the listing where it stopped (telldir /
// seekdir), and rewinding lists the same set again.
func checkReaddirLarge(t *testing.T, dir string) {
	const n = 10_000
	want := map[string]uint8{}
	for i := range n {
		name := fmt.Sprintf("entry-%05d-%s", i, strings.Repeat("x", i%40))
		fd, err := unix.Open(join(dir, name), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		ok(t, "create "+name, err)
		ok(t, "close "+name, unix.Close(fd))
		want[name] = unix.DT_REG
	}
	ok(t, "mkdir", unix.Mkdir(join(dir, "a-dir"), 0o755))
	want["a-dir"] = unix.DT_DIR
	ok(t, "symlink", unix.Symlink("a-dir", join(dir, "a-link")))
	want["a-link"] = unix.DT_LNK
	ok(t, "mkfifo", unix.Mkfifo(join(dir, "a-fifo"), 0o644))
	want["a-fifo"] = unix.DT_FIFO

	fd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&fd)
	first := getdents(t, fd, 32<<10, 0)
	checkListing := func(label string, ents []dirent) {
		t.Helper()
		seen := map[string]int{}
		for _, e := range ents {
			seen[e.name]++
			if e.name == "." || e.name == ".." {
				continue
			}
			typ, known := want[e.name]
			if !known {
				t.Errorf("%s: unexpected entry %q", label, e.name)
			} else if e.typ != typ && e.typ != unix.DT_UNKNOWN {
				t.Errorf("%s: %q has d_type %d, want %d", label, e.name, e.typ, typ)
			}
		}
		for name := range want {
			if seen[name] != 1 {
				t.Errorf("%s: %q listed %d times, want once", label, name, seen[name])
			}
		}
		if seen["."] != 1 || seen[".."] != 1 {
			t.Errorf("%s: . listed %d times and .. %d times, want once each", label, seen["."], seen[".."])
		}
	}
	checkListing("getdents 32 KiB", first)
	for i, e := range first {
		if i%97 != 0 || e.name == "." || e.name == ".." {
			continue
		}
		if st := lstat(t, join(dir, e.name)); st.Ino != e.ino {
			t.Errorf("%q: d_ino %d but st_ino %d", e.name, e.ino, st.Ino)
		}
	}

	// Resume from the offset of entry k.
	k := len(first) / 2
	_, err := unix.Seek(fd, first[k].off, unix.SEEK_SET)
	ok(t, "seekdir", err)
	rest := getdents(t, fd, 4096, 1)
	if len(rest) == 0 || rest[0].name != first[k+1].name {
		t.Errorf("after seeking to the offset of entry %d (%q), the next entry is %v, want %q", k, first[k].name, rest, first[k+1].name)
	}
	// Rewind and read in small batches.
	_, err = unix.Seek(fd, 0, unix.SEEK_SET)
	ok(t, "rewinddir", err)
	checkListing("getdents 1 KiB after rewind", getdents(t, fd, 1024, 0))

	f, err := os.Open(dir)
	ok(t, "open", err)
	defer f.Close()
	var batched []dirent
	for {
		es, err := f.ReadDir(7)
		for _, e := range es {
			batched = append(batched, dirent{name: e.Name(), typ: modeToDT(e.Type())})
		}
		if err != nil {
			break
		}
	}
	batched = append(batched, dirent{name: "."}, dirent{name: ".."})
	checkListing("ReadDir(7)", batched)
}

func modeToDT(m fs.FileMode) uint8 {
	switch {
	case m.IsDir():
		return unix.DT_DIR
	case m&fs.ModeSymlink != 0:
		return unix.DT_LNK
	case m&fs.ModeNamedPipe != 0:
		return unix.DT_FIFO
	case m.IsRegular():
		return unix.DT_REG
	}
	return unix.DT_UNKNOWN
}

// checkReaddirWhileMutating: while a directory is read in batches and
// entries are deleted and created between batches, every entry that stays
// is listed exactly once, nothing is listed twice, and nothing unknown
// appears; a rewind then lists exactly the current contents.
func checkReaddirWhileMutating(t *testing.T, dir string) {
	const n = 500
	for i := range n {
		writeFile(t, join(dir, fmt.Sprintf("keep%04d", i)), nil, 0o644)
		writeFile(t, join(dir, fmt.Sprintf("del%04d", i)), nil, 0o644)
	}
	fd := open(t, dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&fd)
	seen := map[string]int{}
	for _, e := range getdents(t, fd, 2048, 100) {
		seen[e.name]++
	}
	for i := range n {
		ok(t, "unlink", unix.Unlink(join(dir, fmt.Sprintf("del%04d", i))))
		writeFile(t, join(dir, fmt.Sprintf("new%04d", i)), nil, 0o644)
	}
	for _, e := range getdents(t, fd, 2048, 0) {
		seen[e.name]++
	}
	for name, c := range seen {
		if c != 1 {
			t.Errorf("%q listed %d times", name, c)
		}
		if name != "." && name != ".." && !strings.HasPrefix(name, "keep") && !strings.HasPrefix(name, "del") && !strings.HasPrefix(name, "new") {
			t.Errorf("unknown entry %q", name)
		}
	}
	for i := range n {
		if name := fmt.Sprintf("keep%04d", i); seen[name] != 1 {
			t.Errorf("%q, present throughout, listed %d times", name, seen[name])
		}
	}
	_, err := unix.Seek(fd, 0, unix.SEEK_SET)
	ok(t, "rewind", err)
	after := names(getdents(t, fd, 4096, 0))
	slices.Sort(after)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("keep%04d", i), fmt.Sprintf("new%04d", i))
	}
	slices.Sort(want)
	if !slices.Equal(after, want) {
		t.Errorf("listing after rewind has %d entries, want %d (keep* and new*)", len(after), len(want))
	}
}

// checkConcurrentWriters: goroutines writing different files, disjoint
// regions of one file, and creating files in one directory at once lose
// nothing.
func checkConcurrentWriters(t *testing.T, dir string) {
	const (
		writers   = 8
		block     = 64 << 10
		blocks    = 32
		perWriter = 100 // files each writer creates in the shared directory
	)
	shared := join(dir, "shared")
	writeFile(t, shared, nil, 0o644)
	var wg sync.WaitGroup
	errs := make(chan error, 3*writers)
	for w := range writers {
		wg.Go(func() {
			own, err := os.OpenFile(join(dir, fmt.Sprintf("own%d", w)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				errs <- err
				return
			}
			defer own.Close()
			sh, err := os.OpenFile(shared, os.O_WRONLY, 0)
			if err != nil {
				errs <- err
				return
			}
			defer sh.Close()
			for b := range blocks {
				data := randBytes(uint64(w*blocks+b), block)
				if _, err := own.Write(data); err != nil {
					errs <- err
					return
				}
				// Block b of the shared file belongs to writer b%writers; write
				// interleaved so that neighbours land concurrently.
				if b%writers == w {
					for s := range blocks / writers {
						off := int64((s*writers + w) * block)
						if _, err := sh.WriteAt(randBytes(uint64(1000+s*writers+w), block), off); err != nil {
							errs <- err
							return
						}
					}
				}
			}
			for i := range perWriter {
				f, err := os.OpenFile(join(dir, fmt.Sprintf("many-%d-%d", w, i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err != nil {
					errs <- err
					return
				}
				f.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("writer: %v", err)
	}
	for w := range writers {
		var want []byte
		for b := range blocks {
			want = append(want, randBytes(uint64(w*blocks+b), block)...)
		}
		wantContent(t, join(dir, fmt.Sprintf("own%d", w)), want)
	}
	var want []byte
	for i := range blocks {
		want = append(want, randBytes(uint64(1000+i), block)...)
	}
	wantContent(t, shared, want)
	many := 0
	for _, name := range listDir(t, dir) {
		if strings.HasPrefix(name, "many-") {
			many++
		}
	}
	if many != writers*perWriter {
		t.Errorf("%d files created concurrently are listed, want %d", many, writers*perWriter)
	}
}

// checkErrnos: the error numbers of common mistakes are ext4's.
func checkErrnos(t *testing.T, dir string) {
	f := join(dir, "file")
	writeFile(t, f, []byte("x"), 0o644)
	d := join(dir, "dir")
	ok(t, "mkdir", unix.Mkdir(d, 0o755))
	writeFile(t, join(d, "child"), nil, 0o644)
	missing := join(dir, "missing")
	var st unix.Stat_t
	openErr := func(path string, flags int) error {
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
		if err == nil {
			err = unix.Close(fd) // the open should have failed; report success
		}
		return err
	}

	wantErrno(t, "open missing", openErr(missing, unix.O_RDONLY), unix.ENOENT)
	wantErrno(t, "create under a missing directory", openErr(join(missing, "x"), unix.O_CREAT|unix.O_WRONLY), unix.ENOENT)
	wantErrno(t, "stat missing", unix.Lstat(missing, &st), unix.ENOENT)
	wantErrno(t, "unlink missing", unix.Unlink(missing), unix.ENOENT)
	wantErrno(t, "chmod missing", unix.Chmod(missing, 0o644), unix.ENOENT)
	wantErrno(t, "stat through a file", unix.Lstat(join(f, "x"), &st), unix.ENOTDIR)
	wantErrno(t, "create under a file", openErr(join(f, "x"), unix.O_CREAT|unix.O_WRONLY), unix.ENOTDIR)
	wantErrno(t, "mkdir under a file", unix.Mkdir(join(f, "x"), 0o755), unix.ENOTDIR)
	wantErrno(t, "O_DIRECTORY on a file", openErr(f, unix.O_RDONLY|unix.O_DIRECTORY), unix.ENOTDIR)
	wantErrno(t, "open file/ (trailing slash)", openErr(f+"/", unix.O_RDONLY), unix.ENOTDIR)
	wantErrno(t, "rmdir a file", unix.Rmdir(f), unix.ENOTDIR)
	wantErrno(t, "open a directory for writing", openErr(d, unix.O_WRONLY), unix.EISDIR)
	wantErrno(t, "open a directory read-write", openErr(d, unix.O_RDWR), unix.EISDIR)
	wantErrno(t, "O_CREAT of name/", openErr(join(dir, "new")+"/", unix.O_CREAT|unix.O_WRONLY), unix.EISDIR)
	wantErrno(t, "unlink a directory", unix.Unlink(d), unix.EISDIR)
	wantErrno(t, "mkdir existing", unix.Mkdir(d, 0o755), unix.EEXIST)
	wantErrno(t, "mkfifo existing", unix.Mkfifo(f, 0o644), unix.EEXIST)
	wantErrno(t, "rmdir non-empty", unix.Rmdir(d), unix.ENOTEMPTY)
	wantErrno(t, "rmdir .", unix.Rmdir(d+"/."), unix.EINVAL)

	dfd := open(t, d, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	defer closeQuietly(&dfd)
	_, err := unix.Read(dfd, make([]byte, 10))
	wantErrno(t, "read a directory", err, unix.EISDIR)
	ffd := open(t, f, unix.O_RDONLY, 0)
	defer closeQuietly(&ffd)
	_, err = unix.Getdents(ffd, make([]byte, 4096))
	wantErrno(t, "getdents on a file", err, unix.ENOTDIR)
	_, err = unix.Write(ffd, []byte("x"))
	wantErrno(t, "write to a read-only descriptor", err, unix.EBADF)
	wfd := open(t, f, unix.O_WRONLY, 0)
	defer closeQuietly(&wfd)
	_, err = unix.Read(wfd, make([]byte, 1))
	wantErrno(t, "read from a write-only descriptor", err, unix.EBADF)
	_, err = unix.Seek(ffd, -1, unix.SEEK_SET)
	wantErrno(t, "lseek to a negative offset", err, unix.EINVAL)
	if !bytes.Equal(readFile(t, f), []byte("x")) {
		t.Errorf("failed calls changed the file")
	}
}
