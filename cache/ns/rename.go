package ns

import (
	"errors"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// RenameFlags modify Rename, as renameat2(2) flags do.
type RenameFlags uint32

// Rename flags.
const (
	// RenameNoReplace fails with ErrExists if the target exists.
	RenameNoReplace RenameFlags = 1 << iota
	// RenameExchange atomically swaps source and target, which must both
	// exist.
	RenameExchange
)

// Rename moves parent/name to newParent/newName, replacing a compatible
// target (an empty directory for a directory, a non-directory for a
// non-directory) unless flags say otherwise. It resolves and checks both
// ends, then either swaps the two names (RenameExchange) or moves the
// source over the target (dropping a replaced target's name), and finally
// stamps, stores and marks both directories and the renamed inode. The
// caller checked the flags' combination and the names.
func (c *Change) Rename(parent uint64, name string, newParent uint64, newName string, flags RenameFlags) error {
	e, err := c.resolveRename(parent, name, newParent, newName, flags)
	if err != nil || e == nil {
		return err
	}
	now := c.Now()
	if flags&RenameExchange != 0 {
		err = c.renameExchange(e, now)
	} else {
		err = c.renameOver(e, now)
	}
	if err != nil {
		return err
	}
	e.src.Mtime, e.src.Ctime = now, now
	e.dst.Mtime, e.dst.Ctime = now, now
	c.Put(e.src)
	c.Put(e.dst)
	c.MarkDir(parent)
	c.MarkDir(newParent)
	c.MarkEntry(e.src)
	c.MarkEntry(e.dst)
	c.MarkEntry(e.r)
	return nil
}

// renameEnds are the two ends of a rename, resolved in its transaction.
type renameEnds struct {
	parent, newParent uint64
	name, newName     string
	src, dst          *meta.Inode // the two directories (one record if the same)
	ino               uint64      // the renamed inode
	t                 snapshot.EntryType
	r                 *meta.Inode // its record
	exists            bool        // newParent/newName exists
	tino              uint64      // the target's inode, if it exists
	tt                snapshot.EntryType
}

// resolveRename reads both directories and both names and checks what
// does not depend on the operation's kind: the flags against the target's
// existence, and that a directory does not move into its own subtree. It
// returns nil, nil when there is nothing to do (both names are one file's).
func (c *Change) resolveRename(parent uint64, name string, newParent uint64, newName string, flags RenameFlags) (*renameEnds, error) {
	e := &renameEnds{parent: parent, newParent: newParent, name: name, newName: newName}
	var err error
	if e.src, err = c.DirRec(parent); err != nil {
		return nil, err
	}
	e.dst = e.src
	if newParent != parent {
		if e.dst, err = c.DirRec(newParent); err != nil {
			return nil, err
		}
	}
	if e.ino, e.t, err = c.LookupChild(parent, name); err != nil {
		return nil, err
	}
	e.tino, e.tt, err = c.LookupChild(newParent, newName)
	e.exists = err == nil
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if flags&RenameExchange != 0 && !e.exists {
		return nil, ErrNotFound
	}
	if flags&RenameNoReplace != 0 && e.exists {
		return nil, ErrExists
	}
	if e.exists && e.tino == e.ino {
		return nil, nil // two names of one file, or the same name: nothing to do
	}
	if e.r, err = c.Get(e.ino); err != nil {
		return nil, err
	}
	// A directory must not move into its own subtree.
	if e.t == snapshot.TypeDir && newParent != parent {
		if err := c.checkNotAncestor(e.ino, newParent); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// renameExchange swaps the two names' inodes (RenameExchange), moving a
// directory's link to its parent when a directory and a non-directory
// trade places.
func (c *Change) renameExchange(e *renameEnds, now int64) error {
	tr, err := c.Get(e.tino)
	if err != nil {
		return err
	}
	if e.tt == snapshot.TypeDir && e.newParent != e.parent {
		if err := c.checkNotAncestor(e.tino, e.parent); err != nil {
			return err
		}
	}
	if err := c.txn.Set(meta.DentryKey(e.parent, e.name), meta.DentryValue(e.tino, e.tt)); err != nil {
		return err
	}
	if err := c.txn.Set(meta.DentryKey(e.newParent, e.newName), meta.DentryValue(e.ino, e.t)); err != nil {
		return err
	}
	if e.newParent != e.parent {
		if e.t == snapshot.TypeDir && e.tt != snapshot.TypeDir {
			e.src.Nlink--
			e.dst.Nlink++
		} else if e.tt == snapshot.TypeDir && e.t != snapshot.TypeDir {
			e.src.Nlink++
			e.dst.Nlink--
		}
	}
	reparent(e.r, e.newParent)
	reparent(tr, e.parent)
	e.r.Ctime, tr.Ctime = now, now
	c.Put(e.r)
	c.Put(tr)
	return nil
}

// renameOver moves the source name to the target, replacing a compatible
// target (a non-directory by a non-directory, an empty directory by a
// directory), whose name is dropped.
func (c *Change) renameOver(e *renameEnds, now int64) error {
	if e.exists {
		tr, err := c.Get(e.tino)
		if err != nil {
			return err
		}
		switch {
		case e.t == snapshot.TypeDir && e.tt != snapshot.TypeDir:
			return ErrNotDir
		case e.t != snapshot.TypeDir && e.tt == snapshot.TypeDir:
			return ErrIsDir
		case e.tt == snapshot.TypeDir:
			if err := c.checkEmpty(tr); err != nil {
				return err
			}
			e.dst.Nlink--
			if err := c.unmarkDir(e.tino); err != nil {
				return err
			}
		}
		if err := c.dropName(tr); err != nil {
			return err
		}
	}
	if err := c.txn.Delete(meta.DentryKey(e.parent, e.name)); err != nil {
		return err
	}
	if err := c.txn.Set(meta.DentryKey(e.newParent, e.newName), meta.DentryValue(e.ino, e.t)); err != nil {
		return err
	}
	if e.t == snapshot.TypeDir && e.newParent != e.parent {
		e.src.Nlink--
		e.dst.Nlink++
	}
	reparent(e.r, e.newParent)
	e.r.Ctime = now
	c.Put(e.r)
	return nil
}

// reparent records that r's name now lives in dir (a hard-link group's
// entry is the link table's).
func reparent(r *meta.Inode, dir uint64) {
	if r.LinkID == 0 {
		r.Parent = dir
	}
}

// checkNotAncestor fails with ErrInvalid if dir is ino or lies below it.
func (c *Change) checkNotAncestor(ino, dir uint64) error {
	for d := dir; d != 0; {
		if d == ino {
			return ErrInvalid
		}
		r, err := c.Get(d)
		if err != nil {
			return err
		}
		if d == RootIno {
			break
		}
		d = r.Parent
	}
	return nil
}
