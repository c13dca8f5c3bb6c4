package ns

import (
	"cmp"
	"errors"
	"slices"
	"strings"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// Cred is the caller's identity, used for the owner of new inodes.
type Cred struct {
	Uid uint32
	Gid uint32
}

// Create creates the record of a new inode named name in directory
// parent, of type t with the permission bits of mode, owned by cred (a
// set-group-ID directory passes its group on); rdev is a device's number,
// target a symlink's.
func (c *Change) Create(parent uint64, name string, t snapshot.EntryType, mode uint32, rdev uint64, target string, cred Cred) (*meta.Inode, error) {
	dir, err := c.DirRec(parent)
	if err != nil {
		return nil, err
	}
	r, err := c.newInode(dir, name, t, mode, cred)
	if err != nil {
		return nil, err
	}
	r.Rdev = rdev
	r.Target = target
	return r, nil
}

// newInode creates the record of a new inode named name in directory dir
// (a record this change read).
func (c *Change) newInode(dir *meta.Inode, name string, t snapshot.EntryType, mode uint32, cred Cred) (*meta.Inode, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if _, _, err := c.LookupChild(dir.Ino, name); err == nil {
		return nil, ErrExists
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	ino, err := c.ns.host.AllocIno()
	if err != nil {
		return nil, err
	}
	now := c.Now()
	r := &meta.Inode{Ino: ino, Type: t, Mode: mode & ModePerm, Uid: cred.Uid, Gid: cred.Gid,
		Atime: now, Mtime: now, Ctime: now, Nlink: 1, Parent: dir.Ino, Inline: t == snapshot.TypeFile}
	if dir.Mode&ModeSetgid != 0 {
		// BSD group semantics in setgid directories, as on ext4.
		r.Gid = dir.Gid
		if t == snapshot.TypeDir {
			r.Mode |= ModeSetgid
		}
	}
	if t == snapshot.TypeDir {
		r.Nlink = 2
		r.Loaded = true
		dir.Nlink++
		c.MarkDir(ino) // it has no stored tree until the next checkpoint
	}
	if err := c.txn.Set(meta.DentryKey(dir.Ino, name), meta.DentryValue(ino, t)); err != nil {
		return nil, err
	}
	dir.Mtime, dir.Ctime = now, now
	c.Put(r)
	c.Put(dir)
	c.MarkDir(dir.Ino)
	c.MarkEntry(dir)
	return r, nil
}

// CreateUnnamed creates the record of a regular file with no name (an
// orphan, open(2)'s O_TMPFILE) for directory parent, whose set-group-ID
// bit gives the file its group.
func (c *Change) CreateUnnamed(parent uint64, mode uint32, cred Cred) (*meta.Inode, error) {
	dir, err := c.DirRec(parent)
	if err != nil {
		return nil, err
	}
	ino, err := c.ns.host.AllocIno()
	if err != nil {
		return nil, err
	}
	now := c.Now()
	r := &meta.Inode{Ino: ino, Type: snapshot.TypeFile, Mode: mode & ModePerm, Uid: cred.Uid, Gid: cred.Gid,
		Atime: now, Mtime: now, Ctime: now, Inline: true}
	if dir.Mode&ModeSetgid != 0 {
		r.Gid = dir.Gid
	}
	c.Put(r)
	return r, c.txn.Set(meta.Key64(meta.PrefixOrphan, ino), nil)
}

// Link creates name in newParent as a new name of ino (not a directory)
// and returns ino's record. A file with no name that is still open gets
// name as its only name and is no longer an orphan; one that nobody has
// open is ErrNotFound. A file's second name makes it a hard-link group:
// its entry moves to the link table.
func (c *Change) Link(ino, newParent uint64, name string) (*meta.Inode, error) {
	dir, err := c.DirRec(newParent)
	if err != nil {
		return nil, err
	}
	r, err := c.Get(ino)
	if err != nil {
		return nil, err
	}
	if r.Type == snapshot.TypeDir {
		return nil, ErrPermission
	}
	if r.Nlink == 0 && c.ns.host.OpenCount(ino) == 0 {
		return nil, ErrNotFound
	}
	if _, _, err := c.LookupChild(newParent, name); err == nil {
		return nil, ErrExists
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if r.Nlink == 0 {
		return r, c.name(r, dir, name)
	}
	if r.LinkID == 0 {
		// The file becomes a hard-link group: its entry moves to the link
		// table, its old directory names it by ID.
		r.LinkID = newLinkID()
		if err := c.txn.Set(meta.Key64(meta.PrefixLink, r.LinkID), meta.Put64(ino)); err != nil {
			return nil, err
		}
		if r.Parent != 0 {
			c.MarkDir(r.Parent)
		}
		r.Parent = 0
	}
	now := c.Now()
	r.Nlink++
	r.Ctime = now
	dir.Mtime, dir.Ctime = now, now
	if err := c.txn.Set(meta.DentryKey(newParent, name), meta.DentryValue(ino, r.Type)); err != nil {
		return nil, err
	}
	c.Put(r)
	c.Put(dir)
	c.MarkEntry(r)
	c.MarkDir(newParent)
	c.MarkEntry(dir)
	return r, nil
}

// name gives orphan r (open, with no name) its only name, name in dir.
func (c *Change) name(r, dir *meta.Inode, name string) error {
	if err := c.txn.Delete(meta.Key64(meta.PrefixOrphan, r.Ino)); err != nil {
		return err
	}
	now := c.Now()
	r.Nlink, r.Parent, r.LinkID, r.Ctime = 1, dir.Ino, 0, now
	dir.Mtime, dir.Ctime = now, now
	if err := c.txn.Set(meta.DentryKey(dir.Ino, name), meta.DentryValue(r.Ino, r.Type)); err != nil {
		return err
	}
	// Its data is the volume's from now on: upload what it holds.
	if err := meta.SetFileDirty(c.txn, &c.d, r.Ino, len(r.Dirty) > 0); err != nil {
		return err
	}
	c.Put(r)
	c.Put(dir)
	c.MarkEntry(r)
	c.MarkDir(dir.Ino)
	c.MarkEntry(dir)
	return nil
}

// Remove removes the entry name from directory parent: an empty directory
// if isDir, a non-directory otherwise.
func (c *Change) Remove(parent uint64, name string, isDir bool) error {
	dir, err := c.DirRec(parent)
	if err != nil {
		return err
	}
	ino, t, err := c.LookupChild(parent, name)
	if err != nil {
		return err
	}
	if isDir && t != snapshot.TypeDir {
		return ErrNotDir
	}
	if !isDir && t == snapshot.TypeDir {
		return ErrIsDir
	}
	r, err := c.Get(ino)
	if err != nil {
		return err
	}
	if isDir {
		if err := c.checkEmpty(r); err != nil {
			return err
		}
		dir.Nlink--
	}
	if err := c.txn.Delete(meta.DentryKey(parent, name)); err != nil {
		return err
	}
	now := c.Now()
	dir.Mtime, dir.Ctime = now, now
	c.Put(dir)
	c.MarkDir(parent)
	c.MarkEntry(dir)
	if isDir {
		if err := c.unmarkDir(ino); err != nil {
			return err
		}
	}
	return c.dropName(r)
}

// dropName removes one name of r (whose dentry the caller deletes): nlink
// drops, and at zero the inode is deleted, or kept as an orphan while open.
func (c *Change) dropName(r *meta.Inode) error {
	now := c.Now()
	if r.Type == snapshot.TypeDir {
		r.Nlink = 0
	} else {
		r.Nlink--
	}
	r.Ctime = now
	if r.Nlink > 0 {
		c.Put(r)
		c.MarkEntry(r)
		return nil
	}
	if r.LinkID != 0 {
		if err := c.txn.Delete(meta.Key64(meta.PrefixLink, r.LinkID)); err != nil {
			return err
		}
		c.marks[meta.LinkTableDir] = true
	}
	r.Parent = 0
	if c.ns.host.OpenCount(r.Ino) > 0 {
		// Unlinked while open: the data stays until the last close, and
		// is no longer anything to upload.
		c.Put(r)
		if err := meta.SetFileDirty(c.txn, &c.d, r.Ino, false); err != nil {
			return err
		}
		return c.txn.Set(meta.Key64(meta.PrefixOrphan, r.Ino), nil)
	}
	ino := r.Ino
	delete(c.dirty, ino)
	if f := c.files[ino]; f != nil {
		// Its last user is releasing it right now (no opens, and the
		// release waits for the record's lock, which this change holds):
		// its record must say it is gone, or the release would store it
		// again.
		gone := r
		c.After(func() { f.Install(gone) })
	}
	for _, k := range [][]byte{meta.Key64(meta.PrefixInode, ino), meta.Key64(meta.PrefixPresence, ino), meta.Key64(meta.PrefixInline, ino)} {
		if err := c.txn.Delete(k); err != nil {
			return err
		}
	}
	if err := meta.SetFileDirty(c.txn, &c.d, ino, false); err != nil {
		return err
	}
	dirty := r.Dirty
	c.After(func() { c.ns.host.Deleted(ino, dirty) })
	return nil
}

// checkEmpty fails with ErrNotEmpty unless directory r has no entries.
func (c *Change) checkEmpty(r *meta.Inode) error {
	if !r.Loaded {
		if r.Tree.Hash == c.ns.emptyTree {
			return nil
		}
		return &NotLoadedError{Ino: r.Ino}
	}
	it := c.txn.NewIterator(badger.IteratorOptions{Prefix: meta.DentryPrefix(r.Ino), PrefetchValues: false})
	defer it.Close()
	it.Rewind()
	if it.Valid() {
		return ErrNotEmpty
	}
	return nil
}

// SetAttrIn lists the attributes SetAttr changes; nil fields are left alone.
type SetAttrIn struct {
	Mode *uint32 // permission bits; type bits are ignored
	Uid  *uint32
	Gid  *uint32
	Size *uint64
	// Atime and Mtime in nanoseconds; AtimeNow / MtimeNow set the current
	// time instead (UTIME_NOW).
	Atime    *int64
	Mtime    *int64
	AtimeNow bool
	MtimeNow bool
	// Ctime, if set, is taken as is (otherwise any change sets it to now).
	Ctime *int64
}

// SetAttr changes the attributes of ino that in sets, but for the size
// (the data side's), and returns its record.
func (c *Change) SetAttr(ino uint64, in SetAttrIn) (*meta.Inode, error) {
	r, err := c.Get(ino)
	if err != nil {
		return nil, err
	}
	now := c.Now()
	if in.Mode != nil {
		r.Mode = *in.Mode & ModePerm
	}
	if in.Uid != nil {
		r.Uid = *in.Uid
	}
	if in.Gid != nil {
		r.Gid = *in.Gid
	}
	switch {
	case in.AtimeNow:
		r.Atime = now
	case in.Atime != nil:
		r.Atime = *in.Atime
	}
	switch {
	case in.MtimeNow:
		r.Mtime = now
	case in.Mtime != nil:
		r.Mtime = *in.Mtime
	}
	if in.Ctime != nil {
		r.Ctime = *in.Ctime
	} else {
		r.Ctime = now
	}
	c.Put(r)
	c.MarkEntry(r)
	return r, nil
}

// Xattr set flags, as setxattr(2) takes them.
const (
	XattrCreate  = 1 // fail with ErrExists if the attribute exists
	XattrReplace = 2 // fail with ErrNoAttr if it does not
)

// CheckXattrName fails unless name can name an extended attribute kept
// here (system.* attributes, POSIX ACLs among them, are not kept:
// ErrNotSupported).
func CheckXattrName(name string) error {
	switch {
	case name == "":
		return ErrInvalid
	case len(name) > MaxXattrName:
		return ErrRange
	case strings.HasPrefix(name, "system."):
		return ErrNotSupported
	}
	return nil
}

func xattrIndex(r *meta.Inode, name string) (int, bool) {
	return slices.BinarySearchFunc(r.Xattrs, name, func(x snapshot.Xattr, t string) int { return cmp.Compare(x.Name, t) })
}

// SetXattr sets attribute name of ino to value (the caller checked both).
// flags may hold XattrCreate (fail if it exists) or XattrReplace (fail if
// it does not).
func (c *Change) SetXattr(ino uint64, name string, value []byte, flags uint32) error {
	r, err := c.Get(ino)
	if err != nil {
		return err
	}
	i, ok := xattrIndex(r, name)
	switch {
	case ok && flags&XattrCreate != 0:
		return ErrExists
	case !ok && flags&XattrReplace != 0:
		return ErrNoAttr
	}
	total := len(name) + len(value)
	for _, x := range r.Xattrs {
		if x.Name != name {
			total += len(x.Name) + len(x.Value)
		}
	}
	if total > MaxXattrsTotal {
		return ErrNoSpace
	}
	x := snapshot.Xattr{Name: name, Value: slices.Clone(value)}
	if ok {
		r.Xattrs[i] = x
	} else {
		r.Xattrs = slices.Insert(r.Xattrs, i, x)
	}
	r.Ctime = c.Now()
	c.Put(r)
	c.MarkEntry(r)
	return nil
}

// RemoveXattr removes attribute name of ino (ErrNoAttr if unset).
func (c *Change) RemoveXattr(ino uint64, name string) error {
	r, err := c.Get(ino)
	if err != nil {
		return err
	}
	i, ok := xattrIndex(r, name)
	if !ok {
		return ErrNoAttr
	}
	r.Xattrs = slices.Delete(r.Xattrs, i, i+1)
	r.Ctime = c.Now()
	c.Put(r)
	c.MarkEntry(r)
	return nil
}
