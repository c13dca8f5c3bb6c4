package overlay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/snapshot"
)

// HostDir is a directory on this machine used, read-only, as the base of a
// virtual workspace: the cache.Lower the engine reads through to (listings,
// attributes and bytes of what the workspace has not changed). Every path is resolved beneath the
// directory with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS): a symlink in
// the host tree, even one swapped in after a listing, never leads a read
// outside it.
//
// HostDir never writes; Apply (used by Workspace.Commit) is the only code
// that changes the host directory.
type HostDir struct {
	root string
	fd   int // the root directory, opened O_PATH
}

var _ cache.Lower = (*HostDir)(nil)

// OpenHostDir opens dir (made absolute) as a base. It must be a directory.
func OpenHostDir(dir string) (*HostDir, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("host directory %s: %w", dir, err)
	}
	fd, err := unix.Open(abs, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("host directory %s: %w", abs, err)
	}
	return &HostDir{root: abs, fd: fd}, nil
}

// Root returns the directory's absolute path.
func (h *HostDir) Root() string { return h.root }

// Close releases the directory.
func (h *HostDir) Close() error { return unix.Close(h.fd) }

// openBeneath opens path (relative; "" is the root) beneath the root.
func (h *HostDir) openBeneath(path string, flags uint64) (int, error) {
	if path == "" {
		path = "."
	}
	if err := snapshot.ValidateOrigin(strings.TrimPrefix(path, "./")); err != nil && path != "." {
		return -1, fmt.Errorf("%s: %w", path, cache.ErrInvalid)
	}
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	for {
		fd, err := unix.Openat2(h.fd, path, &how)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return -1, h.mapErr(path, err)
		}
		return fd, nil
	}
}

func (h *HostDir) mapErr(path string, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s in host directory %s: %w: %w", path, h.root, cache.ErrNotFound, err)
	}
	return fmt.Errorf("%s in host directory %s: %w", path, h.root, err)
}

// split returns the parent directory and the last element of path.
func split(path string) (string, string) {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i], path[i+1:]
	}
	return "", path
}

// listDir opens the directory at path beneath the root for reading,
// without updating its access time where the process may (O_NOATIME needs
// the file's owner or CAP_FOWNER), and lists it with list. It returns the
// directory, still open for the caller to close, and what list returned.
// An error opening it is openBeneath's; an error of list is wrapped with
// path and the host directory, and the directory is closed.
func listDir[T any](h *HostDir, path string, list func(*os.File) (T, error)) (*os.File, T, error) {
	var none T
	fd, err := h.openBeneath(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOATIME)
	if errors.Is(err, unix.EPERM) {
		fd, err = h.openBeneath(path, unix.O_RDONLY|unix.O_DIRECTORY)
	}
	if err != nil {
		return nil, none, err
	}
	f := os.NewFile(uintptr(fd), path)
	got, err := list(f)
	if err != nil {
		_ = f.Close()
		return nil, none, fmt.Errorf("list %s in host directory %s: %w", path, h.root, err)
	}
	return f, got, nil
}

// Entries lists the host directory at origin as entries that read through
// to it (cache.Lower): what the engine materializes for a directory of the
// host base that is not materialized yet. One that is gone lists as empty.
func (h *HostDir) Entries(ctx context.Context, origin string) ([]snapshot.Entry, error) {
	entries, err := h.ReadDir(ctx, origin)
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	for i := range entries {
		pristine(&entries[i], joinPath(origin, entries[i].Name))
	}
	return entries, nil
}

// pristine makes host entry e one that reads through to origin: the
// workspace has not changed it, and its bytes are the host file's.
func pristine(e *snapshot.Entry, origin string) {
	e.HasOrigin, e.Origin, e.Modified = true, origin, false
	e.OriginSize = 0
	if e.Type == snapshot.TypeFile {
		e.OriginSize = e.Size
	}
	if e.Type != snapshot.TypeDir {
		e.Nlink = 1
	}
	e.Tree, e.Chunks, e.LinkID = snapshot.BlobRef{}, nil, 0
}

// ReadDir lists the directory at path, sorted by name, with each entry's
// attributes as Stat gives them.
func (h *HostDir) ReadDir(ctx context.Context, path string) ([]snapshot.Entry, error) {
	dir, names, err := listDir(h, path, func(f *os.File) ([]string, error) { return f.Readdirnames(-1) })
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	fd := int(dir.Fd())
	sort.Strings(names)
	out := make([]snapshot.Entry, 0, len(names))
	for _, name := range names {
		if path == "" && strings.HasPrefix(name, stagePrefix) {
			continue // a commit in progress stages files here
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, err := h.statAt(fd, name)
		if errors.Is(err, cache.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// HostName is an entry of a host directory as its listing gives it: the
// name and the file type, without the attributes.
type HostName struct {
	Name string
	Type snapshot.EntryType
}

// Names lists the directory at path, sorted by name, with no more than
// its listing costs (no stat per entry, where the filesystem reports
// types in its listing): for comparing which entries a directory has.
func (h *HostDir) Names(ctx context.Context, path string) ([]HostName, error) {
	dir, des, err := listDir(h, path, func(f *os.File) ([]os.DirEntry, error) { return f.ReadDir(-1) })
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	out := make([]HostName, 0, len(des))
	for _, de := range des {
		if path == "" && strings.HasPrefix(de.Name(), stagePrefix) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, ok := cache.TypeOfMode(unixType(de.Type()))
		if !ok {
			continue
		}
		out = append(out, HostName{Name: de.Name(), Type: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// unixType converts the type bits of an fs.FileMode to S_IFMT bits.
func unixType(m os.FileMode) uint32 {
	switch {
	case m&os.ModeDir != 0:
		return unix.S_IFDIR
	case m&os.ModeSymlink != 0:
		return unix.S_IFLNK
	case m&os.ModeNamedPipe != 0:
		return unix.S_IFIFO
	case m&os.ModeSocket != 0:
		return unix.S_IFSOCK
	case m&os.ModeCharDevice != 0:
		return unix.S_IFCHR
	case m&os.ModeDevice != 0:
		return unix.S_IFBLK
	}
	return unix.S_IFREG
}

// Stat returns the attributes of path (a cache.Lower's Stat).
func (h *HostDir) Stat(ctx context.Context, path string) (snapshot.Entry, error) {
	dir, name := split(path) // "" (the root) gives "", "": the root itself
	fd, err := h.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return snapshot.Entry{}, err
	}
	defer func() { _ = unix.Close(fd) }()
	return h.statAt(fd, name)
}

// statAt describes name in directory dirfd ("" is the directory itself).
func (h *HostDir) statAt(dirfd int, name string) (snapshot.Entry, error) {
	var st unix.Stat_t
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	if err := unix.Fstatat(dirfd, name, &st, flags); err != nil {
		return snapshot.Entry{}, h.mapErr(name, err)
	}
	t, ok := cache.TypeOfMode(st.Mode)
	if !ok {
		return snapshot.Entry{}, fmt.Errorf("%s: unknown file type %o: %w", name, st.Mode, cache.ErrInvalid)
	}
	e := snapshot.Entry{
		Name: name, Type: t, Mode: st.Mode & cache.ModePerm, Uid: st.Uid, Gid: st.Gid,
		Atime: st.Atim.Nano(), Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Nlink: 1,
	}
	switch t {
	case snapshot.TypeFile:
		e.Size = uint64(st.Size)
	case snapshot.TypeDir:
		e.Nlink = uint32(st.Nlink)
	case snapshot.TypeSymlink:
		buf := make([]byte, cache.MaxSymlinkLen+1)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return snapshot.Entry{}, h.mapErr(name, err)
		}
		e.Target = string(buf[:n])
		e.Size = uint64(n)
	case snapshot.TypeCharDev, snapshot.TypeBlockDev:
		e.Rdev = st.Rdev
	}
	if t != snapshot.TypeSymlink {
		e.Xattrs = h.xattrs(dirfd, name)
	}
	return e, nil
}

// xattrs reads the extended attributes of name (best effort: a filesystem
// without them, or attributes this process may not read, give none).
func (h *HostDir) xattrs(dirfd int, name string) []snapshot.Xattr {
	p := fmt.Sprintf("/proc/self/fd/%d", dirfd)
	if name != "" {
		p += "/" + name
	}
	sz, err := unix.Llistxattr(p, nil)
	if err != nil || sz <= 0 {
		return nil
	}
	buf := make([]byte, sz)
	sz, err = unix.Llistxattr(p, buf)
	if err != nil {
		return nil
	}
	var out []snapshot.Xattr
	for _, n := range strings.Split(strings.TrimRight(string(buf[:sz]), "\x00"), "\x00") {
		if n == "" || strings.HasPrefix(n, "system.") {
			continue
		}
		vsz, err := unix.Lgetxattr(p, n, nil)
		if err != nil {
			continue
		}
		val := make([]byte, vsz)
		if vsz, err = unix.Lgetxattr(p, n, val); err != nil {
			continue
		}
		out = append(out, snapshot.Xattr{Name: n, Value: val[:vsz]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Open opens the regular file at path for reading (without updating its
// access time when the process may). Whatever is at path now must still be
// a regular file: one replaced by a FIFO or a device since it was listed
// gives an error wrapping cache.ErrInvalid, without blocking (the open is
// non-blocking until the type is checked).
func (h *HostDir) Open(ctx context.Context, path string) (cache.LowerFile, error) {
	const flags = unix.O_RDONLY | unix.O_NONBLOCK
	fd, err := h.openBeneath(path, flags|unix.O_NOATIME)
	if errors.Is(err, unix.EPERM) {
		fd, err = h.openBeneath(path, flags)
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, h.mapErr(path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%s in host directory %s: %w: no longer a regular file (mode %o)", path, h.root, cache.ErrInvalid, st.Mode)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, h.mapErr(path, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(h.root, path)), nil
}
