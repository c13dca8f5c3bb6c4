package cache

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// The facade's side of the namespace (v.names, cache/ns): one method per
// operation, which takes the namespace lock (v.mu; exclusively for a
// change, ns.Change, shared for a read) and calls ns; the namespace
// reaches back through nsHost.

// change runs fn as one namespace change.
func (v *Volume) change(fn func(c *ns.Change) error) error {
	if v.opts.ReadOnly {
		return ErrReadOnly
	}
	if v.closed.Load() {
		return ErrClosed
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.names.Change(fn)
}

// nsHost is what the engine supplies to the namespace (ns.Host).
type nsHost struct{ v *Volume }

func (h nsHost) LockOpen(ino uint64) ns.OpenFile {
	n := h.v.lookupNode(ino)
	if n == nil {
		return nil
	}
	n.mu.Lock()
	return nsFile{n}
}

func (h nsHost) ViewOpen(ino uint64, fn func(*meta.Inode)) bool {
	n := h.v.lookupNode(ino)
	if n == nil {
		return false
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	fn(n.rec)
	return true
}

func (h nsHost) OpenCount(ino uint64) int  { return h.v.openCount(ino) }
func (h nsHost) Modified(r *meta.Inode)    { h.v.markModified(r) }
func (h nsHost) AllocIno() (uint64, error) { return h.v.allocIno() }
func (h nsHost) Now() int64                { return h.v.now().UnixNano() }

func (h nsHost) CommitMarked(txn *meta.Txn, d *meta.Delta, dirs map[uint64]bool) error {
	return h.v.commitMarked(txn, d, dirs)
}

func (h nsHost) Deleted(ino uint64, dirty []uint64) {
	h.v.forgetGens(ino, dirty)
	h.v.dropData(ino)
}

// nsFile is an open file's record as a namespace change holds it: under
// n.mu, held exclusively from LockOpen to Unlock.
type nsFile struct{ n *node }

func (f nsFile) Record() *meta.Inode   { return f.n.rec }
func (f nsFile) Install(r *meta.Inode) { f.n.rec = r }
func (f nsFile) Unlock()               { f.n.mu.Unlock() }

// retryLoad runs fn, loading the directory it reports as not loaded
// (*ns.NotLoadedError) and retrying, a few times. Directories are not
// loaded up front: almost always they are, and checking costs a database
// transaction per namespace change.
func (v *Volume) retryLoad(ctx context.Context, fn func() error) error {
	for range 8 {
		err := fn()
		var nl *ns.NotLoadedError
		if !errors.As(err, &nl) {
			return err
		}
		if err := v.loadDir(ctx, nl.Ino); err != nil {
			return err
		}
	}
	return fmt.Errorf("directory keeps unloading: %w", ErrIO)
}

// shared runs read fn with the namespace lock held shared.
func shared[T any](v *Volume, fn func() (T, error)) (T, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return fn()
}

// Lookup returns the attributes of the entry name in directory parent.
func (v *Volume) Lookup(ctx context.Context, parent uint64, name string) (Attr, error) {
	var a Attr
	err := v.retryLoad(ctx, func() (err error) {
		a, err = shared(v, func() (Attr, error) { return v.names.Lookup(parent, name) })
		return err
	})
	return a, err
}

// GetAttr returns the attributes of ino.
func (v *Volume) GetAttr(ctx context.Context, ino uint64) (Attr, error) {
	return shared(v, func() (Attr, error) { return v.names.GetAttr(ino) })
}

// Readlink returns the target of symlink ino.
func (v *Volume) Readlink(ctx context.Context, ino uint64) (string, error) {
	return shared(v, func() (string, error) { return v.names.Readlink(ino) })
}

// ReadDir returns the entries of directory ino (without "." and ".."),
// sorted by name: a consistent snapshot at the time of the call.
func (v *Volume) ReadDir(ctx context.Context, ino uint64) ([]DirEntry, error) {
	if err := v.loadDir(ctx, ino); err != nil {
		return nil, err
	}
	return shared(v, func() ([]DirEntry, error) { return v.names.ReadDir(ino) })
}

func (v *Volume) create(ctx context.Context, parent uint64, name string, t snapshot.EntryType, mode uint32, rdev uint64, target string, cred Cred) (Attr, error) {
	var a Attr
	err := v.retryLoad(ctx, func() error {
		return v.change(func(c *ns.Change) error {
			r, err := c.Create(parent, name, t, mode, rdev, target, cred)
			if err == nil {
				a = ns.AttrOf(r)
			}
			return err
		})
	})
	return a, err
}

// Mkdir creates directory name in parent with permission bits mode.
func (v *Volume) Mkdir(ctx context.Context, parent uint64, name string, mode uint32, cred Cred) (Attr, error) {
	return v.create(ctx, parent, name, snapshot.TypeDir, mode, 0, "", cred)
}

// Mknod creates a special file (FIFO, socket, character or block device;
// mode carries the type bits) or, for a regular type, an empty file.
func (v *Volume) Mknod(ctx context.Context, parent uint64, name string, mode uint32, rdev uint64, cred Cred) (Attr, error) {
	t, ok := TypeOfMode(mode)
	if !ok || t == snapshot.TypeDir || t == snapshot.TypeSymlink {
		return Attr{}, ErrInvalid
	}
	if t != snapshot.TypeCharDev && t != snapshot.TypeBlockDev {
		rdev = 0
	}
	return v.create(ctx, parent, name, t, mode, rdev, "", cred)
}

// Symlink creates symlink name in parent pointing to target.
func (v *Volume) Symlink(ctx context.Context, parent uint64, name, target string, cred Cred) (Attr, error) {
	if len(target) > MaxSymlinkLen {
		return Attr{}, ErrNameTooLong
	}
	if target == "" {
		return Attr{}, ErrNotFound
	}
	return v.create(ctx, parent, name, snapshot.TypeSymlink, 0o777, 0, target, cred)
}

// Create creates regular file name in parent and opens it (as Open does).
// With exclusive false, an existing regular file is opened instead
// (truncated if truncate is set).
func (v *Volume) Create(ctx context.Context, parent uint64, name string, mode uint32, cred Cred, exclusive, truncate bool) (Attr, error) {
	a, err := v.create(ctx, parent, name, snapshot.TypeFile, mode, 0, "", cred)
	if errors.Is(err, ErrExists) && !exclusive {
		a, err = v.Lookup(ctx, parent, name)
		if err != nil {
			return Attr{}, err
		}
		if a.Type == snapshot.TypeDir {
			return Attr{}, ErrIsDir
		}
		return v.Open(ctx, a.Ino, truncate)
	}
	if err != nil {
		return Attr{}, err
	}
	if _, err := v.Open(ctx, a.Ino, false); err != nil {
		return Attr{}, err
	}
	return a, nil
}

// CreateUnnamed creates a regular file with no name (open(2) with
// O_TMPFILE) for directory parent, which must exist (its set-group-ID bit
// gives the file its group, as Create does), and opens it (as Open does).
// The file has link count 0 and is an orphan: it is deleted with its data
// at its last Release, and by the recovery after a crash, unless Link
// gives it a name first. It is in no tree and nothing of it is uploaded
// while it has no name.
func (v *Volume) CreateUnnamed(ctx context.Context, parent uint64, mode uint32, cred Cred) (Attr, error) {
	var ino uint64
	err := v.retryLoad(ctx, func() error {
		return v.change(func(c *ns.Change) error {
			r, err := c.CreateUnnamed(parent, mode, cred)
			if err == nil {
				ino = r.Ino
			}
			return err
		})
	})
	if err != nil {
		return Attr{}, err
	}
	return v.Open(ctx, ino, false)
}

// Link creates name in newParent as a new name of ino (not a directory).
// A file with no name that is still open (CreateUnnamed, or unlinked while
// open) gets name as its only name and is no longer an orphan; the kernel
// allows that only for O_TMPFILE files. A file with no name that nobody
// has open is ErrNotFound.
func (v *Volume) Link(ctx context.Context, ino, newParent uint64, name string) (Attr, error) {
	if err := ns.CheckName(name); err != nil {
		return Attr{}, err
	}
	var a Attr
	err := v.retryLoad(ctx, func() error {
		return v.change(func(c *ns.Change) error {
			r, err := c.Link(ino, newParent, name)
			if err == nil {
				a = ns.AttrOf(r)
			}
			return err
		})
	})
	return a, err
}

// Unlink removes the non-directory entry name from parent.
func (v *Volume) Unlink(ctx context.Context, parent uint64, name string) error {
	return v.remove(ctx, parent, name, false)
}

// Rmdir removes the empty directory name from parent.
func (v *Volume) Rmdir(ctx context.Context, parent uint64, name string) error {
	return v.remove(ctx, parent, name, true)
}

func (v *Volume) remove(ctx context.Context, parent uint64, name string, isDir bool) error {
	if len(name) > MaxNameLen {
		return ErrNameTooLong
	}
	if name == "." || (isDir && name == "..") {
		return ErrInvalid
	}
	return v.retryLoad(ctx, func() error {
		return v.change(func(c *ns.Change) error { return c.Remove(parent, name, isDir) })
	})
}

// Rename moves parent/name to newParent/newName, replacing a compatible
// target (an empty directory for a directory, a non-directory for a
// non-directory) unless flags say otherwise.
//
// A rename is in the cache database when it returns, as if followed by
// fsync of the directories: the write-a-temporary-file, fsync, rename
// pattern of editors and git then survives a crash of the mount without
// the directory fsync most of them omit (ext4's auto_da_alloc makes a
// similar promise for renames over a file).
func (v *Volume) Rename(ctx context.Context, parent uint64, name string, newParent uint64, newName string, flags RenameFlags) error {
	if flags&RenameNoReplace != 0 && flags&RenameExchange != 0 {
		return ErrInvalid
	}
	if err := ns.CheckName(newName); err != nil {
		return err
	}
	if len(name) > MaxNameLen {
		return ErrNameTooLong
	}
	err := v.retryLoad(ctx, func() error {
		return v.change(func(c *ns.Change) error { return c.Rename(parent, name, newParent, newName, flags) })
	})
	if err == nil {
		err = v.db.Flush()
	}
	return err
}

// SetAttr changes the attributes in; a size change truncates or extends
// the file (extension reads as zeros).
func (v *Volume) SetAttr(ctx context.Context, ino uint64, in SetAttrIn) (Attr, error) {
	if in.Size != nil {
		if err := v.truncate(ctx, ino, *in.Size); err != nil {
			return Attr{}, err
		}
	}
	var a Attr
	err := v.change(func(c *ns.Change) error {
		r, err := c.SetAttr(ino, in)
		if err == nil {
			a = ns.AttrOf(r)
		}
		return err
	})
	return a, err
}

// GetXattr returns the value of attribute name of ino (ErrNoAttr if unset).
func (v *Volume) GetXattr(ctx context.Context, ino uint64, name string) ([]byte, error) {
	return shared(v, func() ([]byte, error) { return v.names.GetXattr(ino, name) })
}

// ListXattr returns the attribute names of ino, sorted.
func (v *Volume) ListXattr(ctx context.Context, ino uint64) ([]string, error) {
	return shared(v, func() ([]string, error) { return v.names.ListXattr(ino) })
}

// SetXattr sets attribute name of ino. flags may hold XattrCreate (fail if
// it exists) or XattrReplace (fail if it does not).
func (v *Volume) SetXattr(ctx context.Context, ino uint64, name string, value []byte, flags uint32) error {
	if err := ns.CheckXattrName(name); err != nil {
		return err
	}
	if len(value) > MaxXattrValue {
		return ErrRange
	}
	return v.change(func(c *ns.Change) error { return c.SetXattr(ino, name, value, flags) })
}

// RemoveXattr removes attribute name of ino (ErrNoAttr if unset).
func (v *Volume) RemoveXattr(ctx context.Context, ino uint64, name string) error {
	if err := ns.CheckXattrName(name); err != nil {
		if errors.Is(err, ErrNotSupported) {
			return ErrNoAttr
		}
		return err
	}
	return v.change(func(c *ns.Change) error { return c.RemoveXattr(ino, name) })
}

// StatFs reports what can really be written to the volume. Every write
// lands in the cache directory first, so the blocks (total, free and
// available, in 4 KiB blocks) are those of the cache directory's
// filesystem, as an overlay reports its upper layer's (the volume's
// logical size is not part of it). Inodes are not limited by the local
// disk (the database holds them): Files is 2^40. It fails only if the
// cache directory's filesystem cannot be asked.
func (v *Volume) StatFs(ctx context.Context) (StatFs, error) {
	const bsize = 4096
	var local unix.Statfs_t
	if err := unix.Statfs(v.files.Dir(), &local); err != nil {
		return StatFs{}, fmt.Errorf("statfs of the cache directory %s: %w", v.files.Dir(), err)
	}
	scale := func(blocks uint64) uint64 { return blocks * uint64(local.Bsize) / bsize }
	ffree, _ := shared(v, func() (uint64, error) { return v.names.FreeFiles(), nil })
	return StatFs{Bsize: bsize, Blocks: scale(local.Blocks), Bfree: scale(local.Bfree), Bavail: scale(local.Bavail),
		Files: ns.MaxFiles, Ffree: ffree, NameLen: MaxNameLen}, nil
}

// FreeBytes is how many bytes can still be written to the volume: the
// available space of the cache directory's filesystem (StatFs's Bavail).
func (v *Volume) FreeBytes(ctx context.Context) (uint64, error) {
	s, err := v.StatFs(ctx)
	return s.Bavail * uint64(s.Bsize), err
}
