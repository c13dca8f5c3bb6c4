package posixtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FileType is the kind of a manifest entry.
type FileType string

// The file types a Manifest records.
const (
	TypeFile     FileType = "file"
	TypeDir      FileType = "dir"
	TypeSymlink  FileType = "symlink"
	TypeFIFO     FileType = "fifo"
	TypeSocket   FileType = "socket"
	TypeCharDev  FileType = "chardev"
	TypeBlockDev FileType = "blockdev"
)

// Entry is what a Manifest records about one path. Fields that do not apply
// to the entry's type are zero.
type Entry struct {
	Type     FileType
	Perm     uint32 // mode & 07777: permissions, setuid, setgid, sticky
	UID, GID uint32
	Size     int64  // regular files and symlinks only (directory sizes are filesystem-specific)
	SHA256   string // hex SHA-256 of the content, regular files only
	Target   string // symlinks only
	// Xattrs maps every extended attribute name llistxattr reports (all
	// namespaces the caller may read) to its raw value; nil when there are
	// none.
	Xattrs map[string]string
	Nlink  uint64
	// LinkGroup is, for a non-directory with Nlink > 1, the smallest path
	// in the manifest that shares its inode (itself when no other does).
	// Comparing groups compares which paths are hard links of each other,
	// never inode numbers.
	LinkGroup string
	Rdev      uint64 // character and block devices only
	// Times in nanoseconds since the epoch. Atime is as it was before the
	// walk, since ManifestOf reads files and directories with O_NOATIME
	// (when the caller may: owner or CAP_FOWNER). Symlinks record no atime
	// (0): readlink updates it, so no walk sees it unchanged.
	Atime, Mtime, Ctime int64
}

// Manifest maps slash-separated paths relative to the walked root ("." is
// the root itself) to their entries.
type Manifest map[string]Entry

// Paths returns the manifest's paths in sorted order.
func (m Manifest) Paths() []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ManifestOptions tunes ManifestOf. The zero value records everything.
type ManifestOptions struct {
	// Skip, if not nil, is called for every path below the root (relative,
	// slash-separated); returning true leaves the path out, and for a
	// directory its whole subtree.
	Skip func(path string) bool
}

// ManifestOf walks the tree at root without following symlinks and records
// every path. It reads every regular file in full to hash it, opens
// directories and files with O_NOATIME where the caller may, never opens
// FIFOs, sockets or devices, and does not change the tree. Paths must stay
// below PATH_MAX. The first error (with its path) ends the walk.
func ManifestOf(root string, opts ManifestOptions) (Manifest, error) {
	w := walker{root: root, opts: opts, m: Manifest{}, inodes: map[[2]uint64][]string{}}
	if err := w.walk("."); err != nil {
		return nil, err
	}
	for _, paths := range w.inodes {
		slices.Sort(paths)
		for _, p := range paths {
			e := w.m[p]
			if e.Nlink > 1 {
				e.LinkGroup = paths[0]
				w.m[p] = e
			}
		}
	}
	return w.m, nil
}

type walker struct {
	root   string
	opts   ManifestOptions
	m      Manifest
	inodes map[[2]uint64][]string // (dev, ino) of non-directories -> paths
}

func (w *walker) abs(rel string) string {
	if rel == "." {
		return w.root
	}
	return w.root + "/" + rel
}

func (w *walker) walk(rel string) error {
	p := w.abs(rel)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fmt.Errorf("manifest: lstat %s: %w", p, err)
	}
	e := Entry{Perm: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid, Nlink: st.Nlink}
	var children []string
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = TypeFile
		e.Size = st.Size
		sum, err := hashFile(p)
		if err != nil {
			return fmt.Errorf("manifest: hash %s: %w", p, err)
		}
		e.SHA256 = sum
	case unix.S_IFDIR:
		e.Type = TypeDir
		names, err := readDirNames(p)
		if err != nil {
			return fmt.Errorf("manifest: read directory %s: %w", p, err)
		}
		children = names
	case unix.S_IFLNK:
		e.Type = TypeSymlink
		target, err := os.Readlink(p)
		if err != nil {
			return fmt.Errorf("manifest: readlink %s: %w", p, err)
		}
		e.Target = target
		e.Size = st.Size
	case unix.S_IFIFO:
		e.Type = TypeFIFO
	case unix.S_IFSOCK:
		e.Type = TypeSocket
	case unix.S_IFCHR:
		e.Type = TypeCharDev
		e.Rdev = st.Rdev
	case unix.S_IFBLK:
		e.Type = TypeBlockDev
		e.Rdev = st.Rdev
	default:
		return fmt.Errorf("manifest: %s has unknown mode %#o", p, st.Mode)
	}
	e.Atime, e.Mtime, e.Ctime = ts(st.Atim), ts(st.Mtim), ts(st.Ctim)
	if e.Type == TypeSymlink {
		// readlink(2) updates a link's atime (relatime included) and nothing
		// reads a link without it, so no walk can observe it unchanged.
		e.Atime = 0
	}
	xattrs, err := readXattrs(p)
	if err != nil {
		return fmt.Errorf("manifest: xattrs of %s: %w", p, err)
	}
	e.Xattrs = xattrs
	w.m[rel] = e
	if e.Type != TypeDir {
		key := [2]uint64{st.Dev, st.Ino}
		w.inodes[key] = append(w.inodes[key], rel)
	}
	for _, name := range children {
		child := path.Join(rel, name)
		if w.opts.Skip != nil && w.opts.Skip(child) {
			continue
		}
		if err := w.walk(child); err != nil {
			return err
		}
	}
	return nil
}

// openNoAtime opens p read-only, with O_NOATIME when the caller is allowed
// to use it (owner or CAP_FOWNER).
func openNoAtime(p string, flags int) (int, error) {
	flags |= unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	fd, err := unix.Open(p, flags|unix.O_NOATIME, 0)
	if errors.Is(err, unix.EPERM) {
		fd, err = unix.Open(p, flags, 0)
	}
	return fd, err
}

func hashFile(p string) (string, error) {
	fd, err := openNoAtime(p, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func readDirNames(p string) ([]string, error) {
	fd, err := openNoAtime(p, unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func readXattrs(p string) (map[string]string, error) {
	var buf []byte
	for {
		sz, err := unix.Llistxattr(p, nil)
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if sz == 0 {
			return nil, nil
		}
		buf = make([]byte, sz)
		n, err := unix.Llistxattr(p, buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew between the two calls
		}
		if err != nil {
			return nil, err
		}
		buf = buf[:n]
		break
	}
	out := map[string]string{}
	for _, name := range strings.Split(strings.TrimSuffix(string(buf), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		v, err := lgetxattr(p, name)
		if errors.Is(err, unix.ENODATA) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = string(v)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func lgetxattr(p, name string) ([]byte, error) {
	for {
		sz, err := unix.Lgetxattr(p, name, nil)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, sz)
		n, err := unix.Lgetxattr(p, name, buf)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		return buf[:n], err
	}
}

// Ignore names attributes that Diff should not compare. Values combine with
// |, and Diff accepts any number of them.
type Ignore uint

// The attributes Diff can be told to ignore.
const (
	IgnoreAtime  Ignore = 1 << iota // access times
	IgnoreCtime                     // change times (no tool can set them)
	IgnoreMtime                     // modification times
	IgnoreOwner                     // uid and gid
	IgnoreXattrs                    // extended attributes
	IgnoreNlink                     // link counts and hard-link groups
)

// Diff returns the differences between manifests a and b as readable lines,
// one per differing attribute, sorted by path; an empty result means the
// trees are identical in everything not ignored. A path present in only one
// manifest is one line; a path whose type differs is one line (its other
// attributes are not compared).
func Diff(a, b Manifest, ignore ...Ignore) []string {
	var ig Ignore
	for _, i := range ignore {
		ig |= i
	}
	paths := a.Paths()
	for _, p := range b.Paths() {
		if _, ok := a[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	var out []string
	for _, p := range paths {
		ea, inA := a[p]
		eb, inB := b[p]
		switch {
		case !inB:
			out = append(out, fmt.Sprintf("%q: only in the first tree (%s)", p, ea.Type))
			continue
		case !inA:
			out = append(out, fmt.Sprintf("%q: only in the second tree (%s)", p, eb.Type))
			continue
		case ea.Type != eb.Type:
			out = append(out, fmt.Sprintf("%q: type %s != %s", p, ea.Type, eb.Type))
			continue
		}
		out = append(out, diffEntry(p, ea, eb, ig)...)
	}
	return out
}

func diffEntry(p string, a, b Entry, ig Ignore) []string {
	var out []string
	add := func(format string, args ...any) {
		out = append(out, fmt.Sprintf("%q: ", p)+fmt.Sprintf(format, args...))
	}
	if a.Perm != b.Perm {
		add("perm %#o != %#o", a.Perm, b.Perm)
	}
	if ig&IgnoreOwner == 0 && (a.UID != b.UID || a.GID != b.GID) {
		add("uid:gid %d:%d != %d:%d", a.UID, a.GID, b.UID, b.GID)
	}
	if a.Size != b.Size {
		add("size %d != %d", a.Size, b.Size)
	}
	if a.SHA256 != b.SHA256 {
		add("content sha256 %.12s… != %.12s…", a.SHA256, b.SHA256)
	}
	if a.Target != b.Target {
		add("symlink target %q != %q", a.Target, b.Target)
	}
	if a.Rdev != b.Rdev {
		add("rdev %#x != %#x", a.Rdev, b.Rdev)
	}
	if ig&IgnoreNlink == 0 {
		if a.Nlink != b.Nlink {
			add("nlink %d != %d", a.Nlink, b.Nlink)
		}
		if a.LinkGroup != b.LinkGroup {
			add("hard-link group %q != %q", a.LinkGroup, b.LinkGroup)
		}
	}
	if ig&IgnoreXattrs == 0 {
		names := make([]string, 0, len(a.Xattrs)+len(b.Xattrs))
		for n := range a.Xattrs {
			names = append(names, n)
		}
		for n := range b.Xattrs {
			if _, ok := a.Xattrs[n]; !ok {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		for _, n := range names {
			va, inA := a.Xattrs[n]
			vb, inB := b.Xattrs[n]
			switch {
			case !inB:
				add("xattr %s only in the first tree", n)
			case !inA:
				add("xattr %s only in the second tree", n)
			case va != vb:
				add("xattr %s: %s != %s", n, shortValue(va), shortValue(vb))
			}
		}
	}
	times := []struct {
		name   string
		ignore Ignore
		a, b   int64
	}{
		{"atime", IgnoreAtime, a.Atime, b.Atime},
		{"mtime", IgnoreMtime, a.Mtime, b.Mtime},
		{"ctime", IgnoreCtime, a.Ctime, b.Ctime},
	}
	for _, tm := range times {
		if ig&tm.ignore == 0 && tm.a != tm.b {
			add("%s %s != %s", tm.name, fmtTime(tm.a), fmtTime(tm.b))
		}
	}
	return out
}

func shortValue(v string) string {
	if len(v) <= 32 {
		return fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("%q… (%d bytes)", v[:32], len(v))
}

func fmtTime(ns int64) string {
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}
