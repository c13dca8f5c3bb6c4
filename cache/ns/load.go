package ns

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// A directory of the base commit (or of the lower layer) is loaded lazily:
// its record holds its tree (or origin) with Loaded false and it has no
// dentries until its entries are installed. The caller reads the entries
// (from the store or the lower: this package reads no tree) between
// ToLoad and InstallDir, without holding the namespace lock.

// Stored returns the stored record of inode ino, read in a transaction of
// its own (an open file's in-memory record is not looked at).
func (s *Namespace) Stored(ino uint64) (*meta.Inode, error) {
	var r *meta.Inode
	err := s.db.View(func(txn *meta.Txn) error {
		var err error
		r, err = ReadInode(txn, ino)
		return err
	})
	return r, err
}

// ToLoad returns the stored record of directory ino if its entries are not
// loaded yet, nil if they are, and ErrNotDir if ino is not a directory.
// The caller holds the namespace lock, shared or exclusively.
func (s *Namespace) ToLoad(ino uint64) (*meta.Inode, error) {
	r, err := s.Stored(ino)
	switch {
	case err != nil:
		return nil, err
	case r.Type != snapshot.TypeDir:
		return nil, ErrNotDir
	case r.Loaded:
		return nil, nil
	}
	return r, nil
}

// Writer writes the keys of a directory's load, committing as it goes
// (many keys, in commits of bounded size): not atomic as a whole, so every
// prefix of its writes must be a state that a later load can repair.
type Writer interface {
	Set(key, val []byte)
	Delete(key []byte)
	// Flush commits what is left and returns the first error of any
	// write.
	Flush() error
}

// InstallDir writes, through w, the records of directory ino's entries,
// which the caller read from tree (the directory's stored tree, or its
// origin's listing in the lower layer): a record and a dentry for each
// entry, and for a name of a hard-link group a dentry naming the group's
// inode (from the link table; snapshot.ErrCorrupt if the table lacks the
// group). The directory's Loaded flag is set by the last write, so a crash
// midway leaves it unloaded; the stale keys of such an attempt (its
// dentries and the records of their inodes that are the directory's own)
// are deleted first. It does nothing if the directory was loaded, or its
// tree replaced, meanwhile. With countSubdirs the directory's Nlink is
// made 2 plus its subdirectories (a directory read through from the lower
// has the lower's). A file of at most inlineMax bytes keeps its local
// bytes inline. The caller holds the namespace lock exclusively.
func (s *Namespace) InstallDir(w Writer, ino uint64, tree snapshot.BlobRef, entries []snapshot.Entry, countSubdirs bool, inlineMax uint64) error {
	var rec *meta.Inode
	var stale [][]byte
	links := map[uint64]uint64{}
	err := s.db.View(func(txn *meta.Txn) error {
		var err error
		if rec, err = ReadInode(txn, ino); err != nil {
			return err
		}
		if rec.Loaded || rec.Tree != tree {
			return nil
		}
		stale = staleKeys(txn, ino)
		return linkGroups(txn, entries, links)
	})
	if err != nil || rec.Loaded || rec.Tree != tree {
		return err // or loaded (or replaced) meanwhile
	}
	for _, k := range stale {
		w.Delete(k)
	}
	if countSubdirs {
		subdirs := uint32(0)
		for i := range entries {
			if entries[i].Type == snapshot.TypeDir {
				subdirs++
			}
		}
		rec.Nlink = 2 + subdirs
	}
	for i := range entries {
		e := &entries[i]
		if id := e.LinkID; id != 0 && e.Type != snapshot.TypeDir {
			w.Set(meta.DentryKey(ino, e.Name), meta.DentryValue(links[id], e.Type))
			continue
		}
		child, err := s.host.AllocIno()
		if err != nil {
			return err
		}
		// The dentry first: a load cut between the two leaves a dentry
		// naming no record, which the next load removes (staleKeys), and
		// not a record that no dentry names, which nothing would.
		w.Set(meta.DentryKey(ino, e.Name), meta.DentryValue(child, e.Type))
		w.Set(meta.Key64(meta.PrefixInode, child), meta.EncodeInode(meta.InodeFromEntry(child, ino, e, inlineMax)))
	}
	rec.Loaded = true
	w.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(rec))
	return w.Flush()
}

// staleKeys returns the keys an interrupted load of directory ino left:
// for each of its dentries the record of its inode if that is the
// directory's own (not a hard-link group's), then the dentry. In that
// order a cleanup cut midway leaves a dentry naming no record, which the
// next load removes, and not a record that no dentry names.
func staleKeys(txn *meta.Txn, ino uint64) [][]byte {
	var dentries [][]byte
	var inos []uint64
	it := txn.NewIterator(badger.IteratorOptions{Prefix: meta.DentryPrefix(ino), PrefetchValues: true})
	for it.Rewind(); it.Valid(); it.Next() {
		dentries = append(dentries, it.Item().KeyCopy(nil))
		_ = it.Item().Value(func(b []byte) error { inos = append(inos, meta.U64(b)); return nil })
	}
	it.Close()
	var keys [][]byte
	for i, c := range inos {
		if r, err := ReadInode(txn, c); err == nil && r.Parent == ino && r.LinkID == 0 {
			keys = append(keys, meta.Key64(meta.PrefixInode, c))
		}
		keys = append(keys, dentries[i])
	}
	return keys
}

// linkGroups fills links with the inode of each hard-link group that
// entries name, from the link table.
func linkGroups(txn *meta.Txn, entries []snapshot.Entry, links map[uint64]uint64) error {
	for i := range entries {
		id := entries[i].LinkID
		if id == 0 || entries[i].Type == snapshot.TypeDir {
			continue
		}
		it, err := txn.Get(meta.Key64(meta.PrefixLink, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("entry %q names hard-link group %x that the link table lacks: %w", entries[i].Name, id, snapshot.ErrCorrupt)
		}
		if err != nil {
			return err
		}
		_ = it.Value(func(b []byte) error { links[id] = meta.U64(b); return nil })
	}
	return nil
}
