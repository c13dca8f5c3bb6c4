package overlay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache"
	"github.com/agentfs/agentfs/snapshot"
)

// stagePrefix starts the name of the directory where a commit stages new
// file contents inside the host directory (HostDir never lists it).
const stagePrefix = ".agentfs-commit-"

// applyToHost writes changes to the host directory. First every new file,
// symlink and special file is staged — its bytes read from the workspace,
// which still reads through to the unchanged host — in a directory of the
// host directory (same filesystem, so renames are atomic). Then deletions
// and renames, new directories (shallowest first), and the staged files
// are renamed into place, each atomically (a renamed file that was also
// edited is moved, then replaced by its staged bytes). Directories get
// their times last, once their contents are in place. If it stops midway,
// every path is either old or new, never partly written.
func (w *Workspace) applyToHost(ctx context.Context, changes []Change) (err error) {
	stage, err := w.host.mkdirTemp(stagePrefix)
	if err != nil {
		return fmt.Errorf("commit: stage in %s: %w", w.host.Root(), err)
	}
	defer func() {
		if rerr := w.host.removeAll(stage); rerr != nil && err == nil {
			err = rerr
		}
	}()
	a := &hostApply{w: w, h: w.host, stage: stage, moved: map[string]string{}}
	steps := []func(context.Context) error{
		func(ctx context.Context) error { return a.stageChanges(ctx, changes) },
		a.moveOut,
		a.placeRenamesAndDirs,
		a.placeFiles,
		a.setDirTimes,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

// hostApply is one applyToHost: the changes sorted by what each step does
// with them, and the stage directory they pass through.
type hostApply struct {
	w     *Workspace
	h     *HostDir
	stage string // the stage directory, in the host directory

	files   []stagedFile      // new bytes of non-directories, staged
	dels    []Change          // deletions
	dirs    []Change          // changes whose live entry is a directory
	renames []Change          // renames, of anything
	moved   map[string]string // a rename's destination -> where its source waits in the stage
}

// stagedFile is a non-directory's new bytes, staged at tmp for path.
type stagedFile struct {
	path, tmp string
}

// stageChanges sorts the changes into a's lists and stages the bytes of
// every changed non-directory (a renamed one only if it was also edited).
func (a *hostApply) stageChanges(ctx context.Context, changes []Change) error {
	for i, c := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch c.Op {
		case Deleted:
			a.dels = append(a.dels, c)
			continue
		case Renamed:
			a.renames = append(a.renames, c)
		}
		attr, err := lookupPath(ctx, a.w.vol, c.Path)
		if err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		if attr.Type == snapshot.TypeDir {
			a.dirs = append(a.dirs, c)
			continue
		}
		if c.Op == Renamed && !c.Edited {
			continue // moved whole by placeRenamesAndDirs
		}
		tmp := a.stage + "/" + fmt.Sprint(i)
		if err := a.w.stageFile(ctx, tmp, attr); err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		a.files = append(a.files, stagedFile{c.Path, tmp})
	}
	return nil
}

// moveOut does the first half of deletions and renames, which work where
// the entries are in the base: each deleted entry goes and each rename's
// source moves into the stage, deepest base path first (so that a deletion
// inside a renamed directory happens before it moves, and a source inside
// a deleted directory leaves before it goes). placeRenamesAndDirs then
// moves each source to its destination, shallowest first (so that a
// renamed directory is in place before what goes into it). Swaps and
// renames inside renamed directories come out right.
func (a *hostApply) moveOut(context.Context) error {
	out := append(slices.Clone(a.dels), a.renames...)
	sort.SliceStable(out, func(i, j int) bool { return pathDepth(out[i].basePath()) > pathDepth(out[j].basePath()) })
	for i, c := range out {
		if c.Op == Deleted {
			if err := a.h.removeAll(c.basePath()); err != nil {
				return fmt.Errorf("commit %s: %w", c, err)
			}
			continue
		}
		tmp := a.stage + "/" + fmt.Sprintf("r%d", i)
		if err := a.h.rename(c.From, tmp); err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		a.moved[c.Path] = tmp
	}
	return nil
}

// placeRenamesAndDirs puts every rename's destination and every directory
// in place, shallowest first, so that each has its parent: a rename into a
// new directory finds it made, a new directory inside a renamed one finds
// it moved. At one depth, renames go first (a renamed directory that was
// also edited is in place before its attributes are set).
func (a *hostApply) placeRenamesAndDirs(ctx context.Context) error {
	place := append(slices.Clone(a.renames), a.dirs...)
	sort.SliceStable(place, func(i, j int) bool { return pathDepth(place[i].Path) < pathDepth(place[j].Path) })
	renamed := map[string]bool{}
	for _, c := range place {
		if tmp, ok := a.moved[c.Path]; ok && !renamed[c.Path] {
			renamed[c.Path] = true
			if err := a.moveIn(c, tmp); err != nil {
				return err
			}
		}
		if c.Type == snapshot.TypeDir {
			if err := a.placeDir(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// moveIn moves a rename's source from the stage (tmp) to its destination.
// What the rename replaced in the workspace goes whole when either side is
// a directory (a file is simply renamed over).
func (a *hostApply) moveIn(c Change, tmp string) error {
	dst := c.Path
	if t, err := a.h.lstatType(dst); err == nil && (t == snapshot.TypeDir || c.Type == snapshot.TypeDir) {
		if err := a.h.removeAll(dst); err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
	}
	if err := a.h.rename(tmp, dst); err != nil {
		return fmt.Errorf("commit %s: %w", c, err)
	}
	return nil
}

// placeDir makes the directory c.Path on the host if it is not there (a
// non-directory in its place goes), and gives it the live directory's
// attributes (its times come last, in setDirTimes).
func (a *hostApply) placeDir(ctx context.Context, c Change) error {
	attr, err := lookupPath(ctx, a.w.vol, c.Path)
	if err != nil {
		return err
	}
	if attr.Type != snapshot.TypeDir {
		return nil
	}
	dst := c.Path
	if t, err := a.h.lstatType(dst); err == nil && t != snapshot.TypeDir {
		if err := a.h.removeAll(dst); err != nil {
			return err
		}
	}
	if err := a.h.mkdir(dst, attr.Mode&0o777); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("commit %s: %w", c, err)
	}
	if err := a.w.setAttrs(ctx, dst, attr, false); err != nil {
		return fmt.Errorf("commit %s: %w", c, err)
	}
	return nil
}

// placeFiles renames every staged file into place; a directory in its
// place goes whole.
func (a *hostApply) placeFiles(context.Context) error {
	for _, f := range a.files {
		dst := f.path
		if t, err := a.h.lstatType(dst); err == nil && t == snapshot.TypeDir {
			if err := a.h.removeAll(dst); err != nil {
				return err
			}
		}
		if err := a.h.rename(f.tmp, dst); err != nil {
			return fmt.Errorf("commit %s: %w", f.path, err)
		}
	}
	return nil
}

// setDirTimes gives every changed directory its live times once its
// contents are in place, in the reverse of the changes' order (a
// directory's entries, listed after it, before it).
func (a *hostApply) setDirTimes(ctx context.Context) error {
	for i := len(a.dirs) - 1; i >= 0; i-- {
		attr, err := lookupPath(ctx, a.w.vol, a.dirs[i].Path)
		if err != nil {
			return err
		}
		if err := a.h.setTimes(a.dirs[i].Path, attr); err != nil {
			return fmt.Errorf("commit %s: %w", a.dirs[i].Path, err)
		}
	}
	return nil
}

// pathDepth is the number of slashes in p: its depth below the root.
func pathDepth(p string) int { return strings.Count(p, "/") }

// hostConflicts refuses changes to host entries the host changed after
// since (their ctime is later), or that the host removed while the
// workspace changed them. A deleted directory conflicts if anything below
// it changed. Directories' own attributes are not checked: adding an entry
// changes a directory's ctime.
func (w *Workspace) hostConflicts(ctx context.Context, changes []Change, since time.Time) error {
	limit := since.UnixNano()
	var conflicts []string
	changed := func(p string, dirOK bool) (bool, error) {
		h, err := w.host.Stat(ctx, p)
		if isNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if h.Type == snapshot.TypeDir && dirOK {
			return false, nil
		}
		return h.Ctime > limit, nil
	}
	for _, c := range changes {
		var bad bool
		var err error
		switch c.Op {
		case Added:
			bad, err = changed(c.Path, c.Type == snapshot.TypeDir)
		case Deleted:
			bad, err = w.changedBelow(ctx, c.basePath(), limit)
		case Modified, Renamed:
			src := c.basePath()
			if _, serr := w.host.Stat(ctx, src); isNotFound(serr) {
				conflicts = append(conflicts, src+" (gone from the host)")
				continue
			}
			if bad, err = changed(src, c.Type == snapshot.TypeDir); err == nil && !bad && c.Op == Renamed {
				bad, err = changed(c.Path, c.Type == snapshot.TypeDir)
			}
		}
		if err != nil {
			return err
		}
		if bad {
			conflicts = append(conflicts, c.Path)
		}
	}
	if len(conflicts) > 0 {
		sort.Strings(conflicts)
		return fmt.Errorf("the host directory %s changed since %s at %s (commit with force to overwrite them, or discard those changes): %w",
			w.host.Root(), since.Local().Format(time.DateTime), strings.Join(conflicts, ", "), ErrConflict)
	}
	return nil
}

// changedBelow reports whether the host entry at p, or anything below it,
// changed after limit (ns since the epoch).
func (w *Workspace) changedBelow(ctx context.Context, p string, limit int64) (bool, error) {
	h, err := w.host.Stat(ctx, p)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if h.Type != snapshot.TypeDir {
		return h.Ctime > limit, nil
	}
	if h.Mtime > limit {
		return true, nil // entries added or removed
	}
	entries, err := w.host.ReadDir(ctx, p)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		bad, err := w.changedBelow(ctx, joinPath(p, e.Name), limit)
		if bad || err != nil {
			return bad, err
		}
	}
	return false, nil
}

// stageFile writes the live non-directory a to tmp, with its attributes.
func (w *Workspace) stageFile(ctx context.Context, tmp string, a cache.Attr) error {
	h := w.host
	switch a.Type {
	case snapshot.TypeFile:
		f, err := h.create(tmp)
		if err != nil {
			return err
		}
		err = w.copyLive(ctx, a, f)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		return w.setAttrs(ctx, tmp, a, false)
	case snapshot.TypeSymlink:
		target, err := w.vol.Readlink(ctx, a.Ino)
		if err != nil {
			return err
		}
		if err := h.symlink(target, tmp); err != nil {
			return err
		}
		return w.setAttrs(ctx, tmp, a, true)
	default:
		if err := h.mknod(tmp, cache.TypeMode(a.Type)|a.Mode&0o777, int(a.Rdev)); err != nil {
			return err
		}
		return w.setAttrs(ctx, tmp, a, false)
	}
}

// copyLive streams the bytes of live file a to f.
func (w *Workspace) copyLive(ctx context.Context, a cache.Attr, f *os.File) error {
	a, err := w.vol.Open(ctx, a.Ino, false)
	if err != nil {
		return err
	}
	defer func() { _ = w.vol.Release(ctx, a.Ino) }()
	buf := make([]byte, 1<<20)
	for off := uint64(0); off < a.Size; {
		n, err := w.vol.Read(ctx, a.Ino, buf[:min(uint64(len(buf)), a.Size-off)], off)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("read: %w", io.ErrUnexpectedEOF)
		}
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
		off += uint64(n)
	}
	return nil
}

// setAttrs gives p (a path of the host directory) the owner (when this
// process may), mode, xattrs and times of live inode a.
func (w *Workspace) setAttrs(ctx context.Context, p string, a cache.Attr, symlink bool) error {
	h := w.host
	e, err := h.entry(p)
	if err != nil {
		return err
	}
	defer e.close()
	if os.Geteuid() == 0 {
		if err := unix.Fchownat(e.dir, e.name, int(a.Uid), int(a.Gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return h.pathErr("chown", p, err)
		}
	}
	if !symlink {
		if err := e.chmod(os.FileMode(a.Mode&0o777) | modeBits(a.Mode)); err != nil {
			return h.pathErr("chmod", p, err)
		}
		names, err := w.vol.ListXattr(ctx, a.Ino)
		if err != nil {
			return err
		}
		for _, n := range names {
			val, err := w.vol.GetXattr(ctx, a.Ino, n)
			if err != nil {
				return err
			}
			if err := unix.Lsetxattr(e.procPath(), n, val, 0); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOTSUP) {
				return fmt.Errorf("xattr %s: %w", n, err)
			}
		}
	}
	if a.Type == snapshot.TypeDir {
		return nil // after its contents (applyToHost)
	}
	return e.setTimes(a)
}

// modeBits converts setuid, setgid and sticky bits to os.FileMode.
func modeBits(m uint32) os.FileMode {
	var out os.FileMode
	if m&0o4000 != 0 {
		out |= os.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= os.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

// Writing to the host directory. Every path is reached through its parent
// directory, opened beneath the root without following any symlink
// (openBeneath: openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), and
// changed with the *at system calls relative to that descriptor: a symlink
// in the host tree, even one planted while a commit runs, makes the
// operation fail; it never leads it outside the directory.

// hostEntry is a path of the host directory opened for a change: its
// parent directory and its last element.
type hostEntry struct {
	dir  int // the parent directory, opened O_PATH
	name string
}

// entry opens the parent of path (relative, not the root itself).
func (h *HostDir) entry(path string) (hostEntry, error) {
	dir, name := split(path)
	if name == "" || name == "." || name == ".." {
		return hostEntry{}, fmt.Errorf("%q in host directory %s: %w", path, h.root, cache.ErrInvalid)
	}
	fd, err := h.openBeneath(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return hostEntry{}, err
	}
	return hostEntry{dir: fd, name: name}, nil
}

func (e hostEntry) close() { _ = unix.Close(e.dir) }

// procPath names the entry for the system calls without an *at form: the
// kernel reaches the parent by its descriptor, then looks the name up in it
// (and the l- forms do not follow it if it is a symlink).
func (e hostEntry) procPath() string { return fmt.Sprintf("/proc/self/fd/%d/%s", e.dir, e.name) }

// chmod sets the mode of the entry, which must not be a symlink: it is
// opened O_PATH without following, checked, and changed through its
// descriptor, as the C library does for fchmodat(AT_SYMLINK_NOFOLLOW).
func (e hostEntry) chmod(mode os.FileMode) error {
	fd, err := unix.Openat(e.dir, e.name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	return os.Chmod(fmt.Sprintf("/proc/self/fd/%d", fd), mode)
}

// setTimes gives the entry (not following a symlink) the times of a.
func (e hostEntry) setTimes(a cache.Attr) error {
	ts := []unix.Timespec{unix.NsecToTimespec(a.Atime), unix.NsecToTimespec(a.Mtime)}
	return unix.UtimesNanoAt(e.dir, e.name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// at opens path's entry and runs op on it, wrapping op's error with what
// failed where.
func (h *HostDir) at(what, path string, op func(e hostEntry) error) error {
	e, err := h.entry(path)
	if err != nil {
		return err
	}
	defer e.close()
	if err := op(e); err != nil {
		return h.pathErr(what, path, err)
	}
	return nil
}

func (h *HostDir) pathErr(what, path string, err error) error {
	return fmt.Errorf("%s %s in host directory %s: %w", what, path, h.root, err)
}

// mkdirTemp makes a new directory (0700) named prefix and a random suffix
// in the root, and returns its name.
func (h *HostDir) mkdirTemp(prefix string) (string, error) {
	for range 100 {
		var rnd [6]byte
		if _, err := rand.Read(rnd[:]); err != nil {
			return "", err
		}
		name := prefix + hex.EncodeToString(rnd[:])
		err := unix.Mkdirat(h.fd, name, 0o700)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return "", h.pathErr("mkdir", name, err)
		}
		return name, nil
	}
	return "", h.pathErr("mkdir", prefix+"*", unix.EEXIST)
}

// removeAll removes path and everything below it, as os.RemoveAll does (a
// missing path is not an error), through an os.Root of its parent, which
// removes a symlink rather than follow it.
func (h *HostDir) removeAll(path string) error {
	e, err := h.entry(path)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer e.close()
	r, err := os.OpenRoot(fmt.Sprintf("/proc/self/fd/%d", e.dir))
	if err != nil {
		return h.pathErr("remove", path, err)
	}
	defer func() { _ = r.Close() }()
	if err := r.RemoveAll(e.name); err != nil {
		return h.pathErr("remove", path, err)
	}
	return nil
}

// rename renames from to to (both paths of the host directory).
func (h *HostDir) rename(from, to string) error {
	return h.at("rename "+from+" to", to, func(t hostEntry) error {
		f, err := h.entry(from)
		if err != nil {
			return err
		}
		defer f.close()
		return unix.Renameat(f.dir, f.name, t.dir, t.name)
	})
}

// lstatType returns the type of path, not following a symlink.
func (h *HostDir) lstatType(path string) (snapshot.EntryType, error) {
	var t snapshot.EntryType
	err := h.at("stat", path, func(e hostEntry) error {
		var st unix.Stat_t
		if err := unix.Fstatat(e.dir, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		var ok bool
		if t, ok = cache.TypeOfMode(st.Mode); !ok {
			return fmt.Errorf("unknown file type %o: %w", st.Mode, cache.ErrInvalid)
		}
		return nil
	})
	return t, err
}

// mkdir makes the directory path with permissions perm.
func (h *HostDir) mkdir(path string, perm uint32) error {
	return h.at("mkdir", path, func(e hostEntry) error { return unix.Mkdirat(e.dir, e.name, perm) })
}

// create makes the new regular file path (0600) and opens it for writing.
func (h *HostDir) create(path string) (*os.File, error) {
	var f *os.File
	err := h.at("create", path, func(e hostEntry) error {
		fd, err := unix.Openat(e.dir, e.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f = os.NewFile(uintptr(fd), h.root+"/"+path)
		return nil
	})
	return f, err
}

// symlink makes path a new symlink to target.
func (h *HostDir) symlink(target, path string) error {
	return h.at("symlink", path, func(e hostEntry) error { return unix.Symlinkat(target, e.dir, e.name) })
}

// mknod makes the special file path.
func (h *HostDir) mknod(path string, mode uint32, dev int) error {
	return h.at("mknod", path, func(e hostEntry) error { return unix.Mknodat(e.dir, e.name, mode, dev) })
}

// setTimes gives path (not following a symlink) the times of a.
func (h *HostDir) setTimes(path string, a cache.Attr) error {
	return h.at("set times of", path, func(e hostEntry) error { return e.setTimes(a) })
}
