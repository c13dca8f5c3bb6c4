package posixtest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// baseTimes gives entry i of the base tree fixed atime/mtime values.
func baseTimes(i int) []unix.Timespec {
	return []unix.Timespec{
		{Sec: 1_500_000_000 + int64(i), Nsec: 111_111_111 + int64(i)},
		{Sec: 1_600_000_000 + int64(i), Nsec: 222_222_222 + int64(i)},
	}
}

// buildBase writes the small tree the manifest tests compare. With
// swapGroups, the hard-link pairs are {p1,q1} and {p2,q2} instead of
// {p1,p2} and {q1,q2}: the same link counts, different groups.
func buildBase(t *testing.T, dir string, swapGroups bool) {
	t.Helper()
	at := func(p string) string { return join(dir, p) }
	writeFile(t, at("file"), []byte("hello"), 0o644)
	ok(t, "setxattr", unix.Setxattr(at("file"), "user.k", []byte("v"), 0))
	ok(t, "mkdir", os.Mkdir(at("sub"), 0o755))
	writeFile(t, at("sub/nested"), []byte("nested"), 0o640)
	ok(t, "chmod", os.Chmod(at("sub/nested"), 0o640))
	ok(t, "symlink", os.Symlink("file", at("link")))
	writeFile(t, at("h1"), []byte("hard"), 0o644)
	ok(t, "link", os.Link(at("h1"), at("sub/h2")))
	writeFile(t, at("p1"), []byte("pq"), 0o644)
	writeFile(t, at("q1"), []byte("pq"), 0o644)
	if swapGroups {
		ok(t, "link", os.Link(at("p1"), at("q2")))
		ok(t, "link", os.Link(at("q1"), at("p2")))
	} else {
		ok(t, "link", os.Link(at("p1"), at("p2")))
		ok(t, "link", os.Link(at("q1"), at("q2")))
	}
	ok(t, "mkfifo", unix.Mkfifo(at("fifo"), 0o600))
	ok(t, "chmod", os.Chmod(at("fifo"), 0o600))
	for i, p := range []string{"file", "sub/nested", "link", "h1", "p1", "fifo", "sub", "."} {
		ok(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, at(p), baseTimes(i), unix.AT_SYMLINK_NOFOLLOW))
	}
	// q1 looks exactly like p1, so that only the grouping tells them apart.
	ok(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, at("q1"), baseTimes(4), 0))
}

func TestManifestRecords(t *testing.T) {
	dir := t.TempDir()
	buildBase(t, dir, false)
	m := manifest(t, dir)
	want := []string{".", "fifo", "file", "h1", "link", "p1", "p2", "q1", "q2", "sub", "sub/h2", "sub/nested"}
	if got := m.Paths(); !slices.Equal(got, want) {
		t.Fatalf("paths %q, want %q", got, want)
	}
	sum := sha256.Sum256([]byte("hello"))
	f := m["file"]
	if f.Type != TypeFile || f.Perm != 0o644 || f.Size != 5 || f.SHA256 != hex.EncodeToString(sum[:]) ||
		f.Xattrs["user.k"] != "v" || f.Nlink != 1 || f.LinkGroup != "" ||
		f.Atime != ts(baseTimes(0)[0]) || f.Mtime != ts(baseTimes(0)[1]) || f.Ctime == 0 {
		t.Errorf("file entry: %+v", f)
	}
	if e := m["sub/nested"]; e.Perm != 0o640 || e.Mtime != ts(baseTimes(1)[1]) {
		t.Errorf("sub/nested entry: %+v", e)
	}
	if l := m["link"]; l.Type != TypeSymlink || l.Target != "file" || l.Size != 4 || l.Atime != 0 || l.Mtime != ts(baseTimes(2)[1]) || l.SHA256 != "" {
		t.Errorf("symlink entry: %+v", l)
	}
	for _, p := range []string{"h1", "sub/h2"} {
		if e := m[p]; e.Nlink != 2 || e.LinkGroup != "h1" {
			t.Errorf("%s: nlink %d group %q, want 2 and h1", p, e.Nlink, e.LinkGroup)
		}
	}
	if m["p2"].LinkGroup != "p1" || m["q2"].LinkGroup != "q1" {
		t.Errorf("link groups: p2 in %q, q2 in %q", m["p2"].LinkGroup, m["q2"].LinkGroup)
	}
	if e := m["fifo"]; e.Type != TypeFIFO || e.Perm != 0o600 || e.Size != 0 || e.Rdev != 0 {
		t.Errorf("fifo entry: %+v", e)
	}
	if e := m["sub"]; e.Type != TypeDir || e.Size != 0 || e.Nlink != 2 || e.Atime != ts(baseTimes(6)[0]) {
		t.Errorf("sub entry: %+v", e)
	}
	if e := m["."]; e.Type != TypeDir || e.Nlink != 3 {
		t.Errorf("root entry: %+v", e)
	}
}

// TestManifestDoesNotDisturb: walking twice records exactly the same,
// atime included: the walk leaves no trace in what it records.
func TestManifestDoesNotDisturb(t *testing.T) {
	dir := t.TempDir()
	buildBase(t, dir, false)
	m1 := manifest(t, dir)
	tick()
	m2 := manifest(t, dir)
	if d := Diff(m1, m2); len(d) != 0 {
		t.Errorf("a second walk differs from the first:\n%s", strings.Join(d, "\n"))
	}
}

// TestManifestCopiesIdentical: two trees built the same way differ only in
// ctime, which no tool can set.
func TestManifestCopiesIdentical(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	buildBase(t, a, false)
	tick()
	buildBase(t, b, false)
	ma, mb := manifest(t, a), manifest(t, b)
	if d := Diff(ma, mb, IgnoreCtime); len(d) != 0 {
		t.Errorf("identical trees differ:\n%s", strings.Join(d, "\n"))
	}
	d := Diff(ma, mb)
	if len(d) == 0 {
		t.Fatalf("trees built at different times show no ctime difference")
	}
	for _, line := range d {
		if !strings.Contains(line, "ctime") {
			t.Errorf("unexpected difference: %s", line)
		}
	}
}

// restoreTimes sets path's atime and mtime back to those in e.
func restoreTimes(t *testing.T, path string, e Entry) {
	t.Helper()
	ok(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, path,
		[]unix.Timespec{unix.NsecToTimespec(e.Atime), unix.NsecToTimespec(e.Mtime)}, unix.AT_SYMLINK_NOFOLLOW))
}

// TestManifestDetects: every kind of difference is reported on the right
// path, and the matching Ignore (where there is one) hides it.
func TestManifestDetects(t *testing.T) {
	cases := []struct {
		name   string
		root   bool // needs root
		mutate func(t *testing.T, dir string, m Manifest)
		path   string
		want   string
		hide   Ignore // 0: cannot be ignored
	}{
		{name: "content, same size", path: "file", want: "content sha256", mutate: func(t *testing.T, dir string, m Manifest) {
			fd := open(t, join(dir, "file"), unix.O_WRONLY, 0)
			pwriteAll(t, fd, []byte("j"), 0)
			closeFD(t, &fd)
			restoreTimes(t, join(dir, "file"), m["file"])
		}},
		{name: "size", path: "file", want: "size 5 != 6", mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "append", appendTo(join(dir, "file"), "!"))
			restoreTimes(t, join(dir, "file"), m["file"])
		}},
		{name: "perm", path: "sub/nested", want: "perm 0640 != 0600", mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "chmod", unix.Chmod(join(dir, "sub/nested"), 0o600))
		}},
		{name: "setuid bit", path: "file", want: "perm 0644 != 04644", mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "chmod", unix.Chmod(join(dir, "file"), 0o4644))
		}},
		{name: "mtime by a nanosecond", path: "file", want: "mtime", hide: IgnoreMtime, mutate: func(t *testing.T, dir string, m Manifest) {
			e := m["file"]
			e.Mtime++
			restoreTimes(t, join(dir, "file"), e)
		}},
		{name: "atime by a nanosecond", path: "sub", want: "atime", hide: IgnoreAtime, mutate: func(t *testing.T, dir string, m Manifest) {
			e := m["sub"]
			e.Atime++
			restoreTimes(t, join(dir, "sub"), e)
		}},
		{name: "owner", root: true, path: "file", want: "uid:gid", hide: IgnoreOwner, mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "chown", unix.Chown(join(dir, "file"), 4321, -1))
		}},
		{name: "xattr value", path: "file", want: `xattr user.k: "v" != "w"`, hide: IgnoreXattrs, mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "setxattr", unix.Setxattr(join(dir, "file"), "user.k", []byte("w"), 0))
		}},
		{name: "xattr added", path: "sub", want: "xattr user.new only in the second tree", hide: IgnoreXattrs, mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "setxattr", unix.Setxattr(join(dir, "sub"), "user.new", nil, 0))
		}},
		{name: "xattr removed", path: "file", want: "xattr user.k only in the first tree", hide: IgnoreXattrs, mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "removexattr", unix.Removexattr(join(dir, "file"), "user.k"))
		}},
		{name: "hard link broken", path: "sub/h2", want: "hard-link group \"h1\" != \"\"", hide: IgnoreNlink, mutate: func(t *testing.T, dir string, m Manifest) {
			p := join(dir, "sub/h2")
			ok(t, "unlink", unix.Unlink(p))
			writeFile(t, p, []byte("hard"), 0o644)
			restoreTimes(t, p, m["sub/h2"])
			restoreTimes(t, join(dir, "sub"), m["sub"])
		}},
		{name: "symlink target", path: "link", want: `symlink target "file" != "elif"`, mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "unlink", unix.Unlink(join(dir, "link")))
			ok(t, "symlink", unix.Symlink("elif", join(dir, "link")))
			restoreTimes(t, join(dir, "link"), m["link"])
			restoreTimes(t, dir, m["."])
		}},
		{name: "type", path: "sub/nested", want: "type file != dir", mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "unlink", unix.Unlink(join(dir, "sub/nested")))
			ok(t, "mkdir", unix.Mkdir(join(dir, "sub/nested"), 0o640))
		}},
		{name: "missing", path: "file", want: "only in the first tree", mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "unlink", unix.Unlink(join(dir, "file")))
		}},
		{name: "extra", path: "sub/extra", want: "only in the second tree", mutate: func(t *testing.T, dir string, m Manifest) {
			writeFile(t, join(dir, "sub/extra"), nil, 0o644)
		}},
		{name: "directory link count", path: ".", want: "nlink 3 != 4", hide: 0, mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "mkdir", unix.Mkdir(join(dir, "newdir"), 0o755))
		}},
		{name: "rdev", root: true, path: "dev", want: "rdev", mutate: func(t *testing.T, dir string, m Manifest) {
			ok(t, "unlink", unix.Unlink(join(dir, "dev")))
			ok(t, "mknod", unix.Mknod(join(dir, "dev"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5))))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				needRoot(t, "chown and mknod")
			}
			a, b := t.TempDir(), t.TempDir()
			for _, d := range []string{a, b} {
				buildBase(t, d, false)
				if c.path == "dev" {
					ok(t, "mknod", unix.Mknod(join(d, "dev"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
					ok(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, join(d, "dev"), baseTimes(20), 0))
					ok(t, "utimensat", unix.UtimesNanoAt(unix.AT_FDCWD, d, baseTimes(7), 0))
				}
			}
			ma := manifest(t, a)
			c.mutate(t, b, manifest(t, b))
			mb := manifest(t, b)
			d := Diff(ma, mb, IgnoreCtime)
			prefix := `"` + c.path + `": `
			found := false
			for _, line := range d {
				if strings.HasPrefix(line, prefix) && strings.Contains(line, c.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("no line %s…%s… in the differences:\n%s", prefix, c.want, strings.Join(d, "\n"))
			}
			if c.hide != 0 {
				if d := Diff(ma, mb, IgnoreCtime, c.hide); len(d) != 0 {
					t.Errorf("ignoring the attribute still leaves differences:\n%s", strings.Join(d, "\n"))
				}
			}
			if c.name == "type" {
				for _, line := range d {
					if strings.HasPrefix(line, prefix) && !strings.Contains(line, "type") {
						t.Errorf("a type change also reports %q", line)
					}
				}
			}
		})
	}
}

// TestManifestLinkGroupsNotCounts: trees whose hard links pair up
// differently, with identical link counts, differ.
func TestManifestLinkGroupsNotCounts(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	buildBase(t, a, false)
	buildBase(t, b, true)
	ma, mb := manifest(t, a), manifest(t, b)
	for _, p := range []string{"p1", "p2", "q1", "q2"} {
		if ma[p].Nlink != 2 || mb[p].Nlink != 2 || ma[p].SHA256 != mb[p].SHA256 {
			t.Fatalf("%s: setup broken: %+v vs %+v", p, ma[p], mb[p])
		}
	}
	d := Diff(ma, mb, IgnoreCtime)
	want := []string{
		`"p2": hard-link group "p1" != "p2"`,
		`"q1": hard-link group "q1" != "p2"`,
		`"q2": hard-link group "q1" != "p1"`,
	}
	for _, w := range want {
		if !slices.Contains(d, w) {
			t.Errorf("missing %q in:\n%s", w, strings.Join(d, "\n"))
		}
	}
	if d := Diff(ma, mb, IgnoreCtime, IgnoreNlink); len(d) != 0 {
		t.Errorf("IgnoreNlink leaves:\n%s", strings.Join(d, "\n"))
	}
}

// TestManifestCtime: a change that only touches ctime (chmod to the same
// mode) is reported unless ignored.
func TestManifestCtime(t *testing.T) {
	dir := t.TempDir()
	buildBase(t, dir, false)
	m1 := manifest(t, dir)
	tick()
	ok(t, "chmod", unix.Chmod(join(dir, "file"), 0o644))
	m2 := manifest(t, dir)
	d := Diff(m1, m2)
	if len(d) != 1 || !strings.HasPrefix(d[0], `"file": ctime `) {
		t.Errorf("differences %q, want one ctime line for file", d)
	}
	if d := Diff(m1, m2, IgnoreCtime); len(d) != 0 {
		t.Errorf("IgnoreCtime leaves %q", d)
	}
}

// TestManifestSkip: Skip leaves out a path, and for a directory its subtree.
func TestManifestSkip(t *testing.T) {
	dir := t.TempDir()
	buildBase(t, dir, false)
	var asked []string
	m, err := ManifestOf(dir, ManifestOptions{Skip: func(p string) bool {
		asked = append(asked, p)
		return p == "sub" || p == "fifo"
	}})
	ok(t, "manifest", err)
	if got, want := m.Paths(), []string{".", "file", "h1", "link", "p1", "p2", "q1", "q2"}; !slices.Equal(got, want) {
		t.Errorf("paths with sub and fifo skipped: %q, want %q", got, want)
	}
	if slices.Contains(asked, "sub/nested") {
		t.Errorf("Skip was asked about a path inside a skipped directory")
	}
	// h1's partner is skipped: the group is what the manifest can see.
	if e := m["h1"]; e.Nlink != 2 || e.LinkGroup != "h1" {
		t.Errorf("h1 with its partner skipped: nlink %d group %q, want 2 and h1", e.Nlink, e.LinkGroup)
	}
}

// TestManifestErrors: a missing root is an error naming the path.
func TestManifestErrors(t *testing.T) {
	missing := join(t.TempDir(), "missing")
	_, err := ManifestOf(missing, ManifestOptions{})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("ManifestOf of a missing root: %v", err)
	}
	wantErrno(t, "ManifestOf of a missing root", err, unix.ENOENT)
}
