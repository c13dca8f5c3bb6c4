package ns

import (
	"slices"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// The reads of the namespace. They run with the namespace lock held by the
// caller, shared or exclusively, so no change runs meanwhile; the current
// record of an open file is its in-memory one, read under its lock held
// shared (Host.ViewOpen).

// DirEntry is one entry of a directory listing.
type DirEntry = meta.Dentry

// Record calls fn with the current record of inode ino, which fn must not
// change or keep: an open file's in-memory record, or the stored one.
func (s *Namespace) Record(ino uint64, fn func(r *meta.Inode) error) error {
	return s.db.View(func(txn *meta.Txn) error { return s.recordIn(txn, ino, fn) })
}

// recordIn is Record in transaction txn.
func (s *Namespace) recordIn(txn *meta.Txn, ino uint64, fn func(r *meta.Inode) error) error {
	var err error
	if s.host.ViewOpen(ino, func(r *meta.Inode) { err = fn(r) }) {
		return err
	}
	r, err := ReadInode(txn, ino)
	if err != nil {
		return err
	}
	return fn(r)
}

// Lookup returns the attributes of the entry name in directory parent
// (ErrNotFound if there is none), or *NotLoadedError if parent is a
// directory whose entries are not loaded yet.
func (s *Namespace) Lookup(parent uint64, name string) (Attr, error) {
	if len(name) > MaxNameLen {
		return Attr{}, ErrNameTooLong
	}
	var a Attr
	err := s.db.View(func(txn *meta.Txn) error {
		dir, err := ReadInode(txn, parent)
		switch {
		case err != nil:
			return err
		case dir.Type != snapshot.TypeDir:
			return ErrNotDir
		case !dir.Loaded:
			return &NotLoadedError{Ino: parent}
		}
		ino, _, err := GetDentry(txn, parent, name)
		if err != nil {
			return err
		}
		return s.recordIn(txn, ino, func(r *meta.Inode) error { a = AttrOf(r); return nil })
	})
	return a, err
}

// GetAttr returns the attributes of inode ino.
func (s *Namespace) GetAttr(ino uint64) (Attr, error) {
	var a Attr
	err := s.Record(ino, func(r *meta.Inode) error { a = AttrOf(r); return nil })
	return a, err
}

// Readlink returns the target of symlink ino (ErrInvalid if ino is no
// symlink).
func (s *Namespace) Readlink(ino uint64) (string, error) {
	var target string
	err := s.Record(ino, func(r *meta.Inode) error {
		if r.Type != snapshot.TypeSymlink {
			return ErrInvalid
		}
		target = r.Target
		return nil
	})
	return target, err
}

// ReadDir returns the entries of directory ino (without "." and ".."),
// sorted by name; ErrNotDir if ino is no directory. A directory whose
// entries are not loaded yet lists as empty: the caller loads it first.
func (s *Namespace) ReadDir(ino uint64) ([]DirEntry, error) {
	var out []DirEntry
	err := s.db.View(func(txn *meta.Txn) error {
		r, err := ReadInode(txn, ino)
		if err != nil {
			return err
		}
		if r.Type != snapshot.TypeDir {
			return ErrNotDir
		}
		out, err = meta.ReadDir(txn, ino)
		return err
	})
	return out, err
}

// GetXattr returns the value of attribute name of ino (ErrNoAttr if
// unset).
func (s *Namespace) GetXattr(ino uint64, name string) ([]byte, error) {
	var val []byte
	err := s.Record(ino, func(r *meta.Inode) error {
		x, ok := r.Xattr(name)
		if !ok {
			return ErrNoAttr
		}
		val = slices.Clone(x)
		return nil
	})
	return val, err
}

// ListXattr returns the attribute names of ino, sorted.
func (s *Namespace) ListXattr(ino uint64) ([]string, error) {
	var names []string
	err := s.Record(ino, func(r *meta.Inode) error {
		for _, x := range r.Xattrs {
			names = append(names, x.Name)
		}
		return nil
	})
	return names, err
}

// MaxFiles is how many inodes a volume can hold as statfs(2) reports it:
// the database holds them, so they are not limited by the local disk.
const MaxFiles = 1 << 40

// FreeFiles returns how many more inodes the volume can hold: MaxFiles
// less the root record's SubFiles (its files as the last checkpoint
// counted them; none if the record cannot be read).
func (s *Namespace) FreeFiles() uint64 {
	var files uint64
	_ = s.Record(RootIno, func(r *meta.Inode) error {
		files = r.SubFiles
		return nil
	})
	return MaxFiles - min(files, MaxFiles)
}
