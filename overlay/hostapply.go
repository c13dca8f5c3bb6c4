package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	depth := func(p string) int { return strings.Count(p, "/") }
	stage, err := os.MkdirTemp(w.host.Root(), stagePrefix+"*")
	if err != nil {
		return fmt.Errorf("commit: stage in %s: %w", w.host.Root(), err)
	}
	defer func() {
		if rerr := os.RemoveAll(stage); rerr != nil && err == nil {
			err = rerr
		}
	}()
	type staged struct {
		path, tmp string
	}
	var files []staged
	var dels, dirs, renames []Change
	for i, c := range changes {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch c.Op {
		case Deleted:
			dels = append(dels, c)
			continue
		case Renamed:
			renames = append(renames, c)
		}
		a, err := lookupPath(ctx, w.vol, c.Path)
		if err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		if a.Type == snapshot.TypeDir {
			dirs = append(dirs, c)
			continue
		}
		if c.Op == Renamed && !c.Edited {
			continue // moved whole below
		}
		tmp := filepath.Join(stage, fmt.Sprint(i))
		if err := w.stageFile(ctx, tmp, a); err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		files = append(files, staged{c.Path, tmp})
	}
	// Deletions and renames work where the entries are in the base, in two
	// steps: first each deleted entry goes and each rename's source moves
	// into the stage, deepest base path first (so that a deletion inside a
	// renamed directory happens before it moves, and a source inside a
	// deleted directory leaves before it goes); then each source moves to
	// its destination, shallowest first (so that a renamed directory is in
	// place before what goes into it). Swaps and renames inside renamed
	// directories come out right.
	out := append(slices.Clone(dels), renames...)
	sort.SliceStable(out, func(i, j int) bool { return depth(out[i].basePath()) > depth(out[j].basePath()) })
	moved := map[string]string{}
	for i, c := range out {
		if c.Op == Deleted {
			if err := os.RemoveAll(w.hostPath(c.basePath())); err != nil {
				return fmt.Errorf("commit %s: %w", c, err)
			}
			continue
		}
		tmp := filepath.Join(stage, fmt.Sprintf("r%d", i))
		if err := os.Rename(w.hostPath(c.From), tmp); err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		moved[c.Path] = tmp
	}
	// Then every rename's destination and every directory, shallowest
	// first, so that each has its parent: a rename into a new directory
	// finds it made, a new directory inside a renamed one finds it moved.
	// At one depth, renames go first (a renamed directory that was also
	// edited is in place before its attributes are set).
	place := append(slices.Clone(renames), dirs...)
	sort.SliceStable(place, func(i, j int) bool { return depth(place[i].Path) < depth(place[j].Path) })
	renamed := map[string]bool{}
	for _, c := range place {
		dst := w.hostPath(c.Path)
		if tmp, ok := moved[c.Path]; ok && !renamed[c.Path] {
			renamed[c.Path] = true
			if fi, err := os.Lstat(dst); err == nil && (fi.IsDir() || c.Type == snapshot.TypeDir) {
				// What the rename replaced in the workspace goes whole (a
				// file is simply renamed over).
				if err := os.RemoveAll(dst); err != nil {
					return fmt.Errorf("commit %s: %w", c, err)
				}
			}
			if err := os.Rename(tmp, dst); err != nil {
				return fmt.Errorf("commit %s: %w", c, err)
			}
			if c.Type != snapshot.TypeDir {
				continue
			}
		}
		if c.Type != snapshot.TypeDir {
			continue
		}
		a, err := lookupPath(ctx, w.vol, c.Path)
		if err != nil {
			return err
		}
		if a.Type != snapshot.TypeDir {
			continue
		}
		if fi, err := os.Lstat(dst); err == nil && !fi.IsDir() {
			if err := os.Remove(dst); err != nil {
				return err
			}
		}
		if err := os.Mkdir(dst, os.FileMode(a.Mode&0o777)); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("commit %s: %w", c, err)
		}
		if err := w.setAttrs(ctx, dst, a, false); err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
	}
	for _, f := range files {
		dst := w.hostPath(f.path)
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() {
			if err := os.RemoveAll(dst); err != nil {
				return err
			}
		}
		if err := os.Rename(f.tmp, dst); err != nil {
			return fmt.Errorf("commit %s: %w", f.path, err)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		a, err := lookupPath(ctx, w.vol, dirs[i].Path)
		if err != nil {
			return err
		}
		if err := setTimes(w.hostPath(dirs[i].Path), a); err != nil {
			return fmt.Errorf("commit %s: %w", dirs[i].Path, err)
		}
	}
	return nil
}

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
	switch a.Type {
	case snapshot.TypeFile:
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
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
		if err := os.Symlink(target, tmp); err != nil {
			return err
		}
		return w.setAttrs(ctx, tmp, a, true)
	default:
		if err := unix.Mknod(tmp, cache.TypeMode(a.Type)|a.Mode&0o777, int(a.Rdev)); err != nil {
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

// setAttrs gives p the owner (when this process may), mode, xattrs and
// times of live inode a.
func (w *Workspace) setAttrs(ctx context.Context, p string, a cache.Attr, symlink bool) error {
	if os.Geteuid() == 0 {
		if err := os.Lchown(p, int(a.Uid), int(a.Gid)); err != nil {
			return err
		}
	}
	if !symlink {
		if err := os.Chmod(p, os.FileMode(a.Mode&0o777)|modeBits(a.Mode)); err != nil {
			return err
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
			if err := unix.Lsetxattr(p, n, val, 0); err != nil && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.ENOTSUP) {
				return fmt.Errorf("xattr %s: %w", n, err)
			}
		}
	}
	if a.Type == snapshot.TypeDir {
		return nil // after its contents (applyToHost)
	}
	return setTimes(p, a)
}

func setTimes(p string, a cache.Attr) error {
	ts := []unix.Timespec{unix.NsecToTimespec(a.Atime), unix.NsecToTimespec(a.Mtime)}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
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
