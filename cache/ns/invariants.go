package ns

import (
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// CheckInvariants returns what of the namespace's invariants does not hold
// in db's records. The caller holds off every change (the namespace lock);
// the engine's model test calls it after every step.
//   - The root is a directory.
//   - Every dentry is in a loaded directory and names an inode whose record
//     exists and has the dentry's type; a directory or a single-named file
//     (no LinkID) has exactly that one name, and its Parent is the dentry's
//     directory.
//   - A loaded directory's Nlink is 2 plus its subdirectories.
//   - A hard-link group (LinkID) is in the link table under its inode, and
//     has at most Nlink names in loaded directories.
//   - An inode with no name (Nlink 0) is exactly an orphan.
func CheckInvariants(db *meta.DB) error {
	recs := map[uint64]*meta.Inode{}
	names := map[uint64]int{}   // ino → its dentries
	subdirs := map[uint64]int{} // directory → its subdirectories
	links := map[uint64]uint64{}
	orphans := map[uint64]bool{}
	var errs []error
	err := db.View(func(txn *meta.Txn) error {
		if err := scan(txn, meta.PrefixInode, func(k, v []byte) error {
			r, err := meta.DecodeInode(v)
			if err != nil {
				return fmt.Errorf("inode %d: %w", meta.U64(k[1:]), err)
			}
			recs[r.Ino] = r
			return nil
		}); err != nil {
			return err
		}
		if err := scan(txn, meta.PrefixLink, func(k, v []byte) error { links[meta.U64(k[1:])] = meta.U64(v); return nil }); err != nil {
			return err
		}
		if err := scan(txn, meta.PrefixOrphan, func(k, _ []byte) error { orphans[meta.U64(k[1:])] = true; return nil }); err != nil {
			return err
		}
		return scan(txn, meta.PrefixDentry, func(k, v []byte) error {
			parent, name := meta.U64(k[1:9]), string(k[9:])
			if len(v) != 9 {
				errs = append(errs, fmt.Errorf("dentry %d/%q: value of %d bytes", parent, name, len(v)))
				return nil
			}
			ino, t := meta.U64(v), snapshot.EntryType(v[8])
			dir, r := recs[parent], recs[ino]
			switch {
			case dir == nil || dir.Type != snapshot.TypeDir || !dir.Loaded:
				errs = append(errs, fmt.Errorf("dentry %d/%q: its directory's record is %+v, not a loaded directory", parent, name, dir))
			case r == nil:
				errs = append(errs, fmt.Errorf("dentry %d/%q names inode %d, which has no record", parent, name, ino))
			case r.Type != t:
				errs = append(errs, fmt.Errorf("dentry %d/%q has type %v, inode %d is a %v", parent, name, t, ino, r.Type))
			case r.LinkID == 0 && r.Parent != parent:
				errs = append(errs, fmt.Errorf("dentry %d/%q: inode %d's Parent is %d", parent, name, ino, r.Parent))
			}
			names[ino]++
			if t == snapshot.TypeDir {
				subdirs[parent]++
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if root := recs[RootIno]; root == nil || root.Type != snapshot.TypeDir {
		errs = append(errs, fmt.Errorf("the root's record is %+v, not a directory", root))
	}
	for ino, r := range recs {
		switch {
		case r.Type == snapshot.TypeDir && r.Loaded && int(r.Nlink) != 2+subdirs[ino] && r.Nlink != 0:
			errs = append(errs, fmt.Errorf("directory %d: Nlink %d, %d subdirectories", ino, r.Nlink, subdirs[ino]))
		case r.LinkID != 0 && links[r.LinkID] != ino && r.Nlink > 0:
			errs = append(errs, fmt.Errorf("inode %d: hard-link group %x is inode %d's in the link table", ino, r.LinkID, links[r.LinkID]))
		case r.LinkID != 0 && names[ino] > int(r.Nlink):
			errs = append(errs, fmt.Errorf("inode %d: %d names, Nlink %d", ino, names[ino], r.Nlink))
		case r.LinkID == 0 && names[ino] > 1:
			errs = append(errs, fmt.Errorf("inode %d: %d names, but no hard-link group", ino, names[ino]))
		case r.Type != snapshot.TypeDir && r.LinkID == 0 && r.Nlink > 1:
			errs = append(errs, fmt.Errorf("inode %d: Nlink %d, but no hard-link group", ino, r.Nlink))
		case (r.Nlink == 0) != orphans[ino] && ino != RootIno:
			errs = append(errs, fmt.Errorf("inode %d: Nlink %d, orphan %v", ino, r.Nlink, orphans[ino]))
		}
	}
	for ino := range orphans {
		if recs[ino] == nil {
			errs = append(errs, fmt.Errorf("orphan %d has no record", ino))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("namespace: %d invariant failures, first %w", len(errs), errs[0])
	}
	return nil
}

// scan calls fn with every key of prefix and its value.
func scan(txn *meta.Txn, prefix byte, fn func(k, v []byte) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefix}, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().KeyCopy(nil)
		if err := it.Item().Value(func(v []byte) error { return fn(k, v) }); err != nil {
			return err
		}
	}
	return nil
}
