package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// loadDir materializes the entries of directory ino from its stored tree,
// if that has not happened yet. The tree is fetched without holding the
// namespace lock, once for concurrent callers. Loading a non-directory is
// ErrNotDir.
func (v *Volume) loadDir(ctx context.Context, ino uint64) error {
	v.mu.RLock()
	var rec *meta.Inode
	err := v.db.View(func(txn *meta.Txn) error {
		var err error
		rec, err = readInode(txn, ino)
		return err
	})
	v.mu.RUnlock()
	if err != nil {
		return err
	}
	if rec.Type != snapshot.TypeDir {
		return ErrNotDir
	}
	if rec.Loaded {
		return nil
	}
	tree := rec.Tree
	ch := v.fetches.DoChan("tree:"+strconv.FormatUint(ino, 10)+":"+tree.String()+":"+rec.Origin, func() (any, error) {
		entries, err := v.dirEntries(context.WithoutCancel(ctx), tree, rec.HasOrigin, rec.Origin)
		if err != nil {
			return nil, err
		}
		return nil, v.installDir(ino, tree, entries)
	})
	select {
	case <-ctx.Done():
		return ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			if errors.Is(res.Err, ErrNotFound) {
				return res.Err
			}
			v.log.Error("loading directory failed", "ino", ino, "tree", tree.Hash.String(), "err", res.Err)
			return fmt.Errorf("%w: load directory: %w", ErrIO, res.Err)
		}
		return nil
	}
}

// installDir writes the loaded entries of directory ino. The directory's
// Loaded flag is set in the last transaction, so a crash midway leaves it
// unloaded; stale entries of such an attempt are removed first.
func (v *Volume) installDir(ino uint64, tree snapshot.BlobRef, entries []snapshot.Entry) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	var rec *meta.Inode
	var stale []uint64
	var staleKeys [][]byte
	err := v.db.View(func(txn *meta.Txn) error {
		var err error
		if rec, err = readInode(txn, ino); err != nil {
			return err
		}
		it := txn.NewIterator(badger.IteratorOptions{Prefix: meta.DentryPrefix(ino), PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			staleKeys = append(staleKeys, it.Item().KeyCopy(nil))
			_ = it.Item().Value(func(b []byte) error { stale = append(stale, meta.U64(b)); return nil })
		}
		return nil
	})
	if err != nil {
		return err
	}
	if rec.Loaded || rec.Tree != tree {
		return nil // loaded (or replaced) meanwhile
	}
	if v.readsThrough() {
		// Nlink of a directory read through from the lower is the lower's;
		// the engine keeps it true to the entries it installs.
		subdirs := uint32(0)
		for i := range entries {
			if entries[i].Type == snapshot.TypeDir {
				subdirs++
			}
		}
		rec.Nlink = 2 + subdirs
	}
	wb := meta.NewBatch(v.db)
	if len(stale) > 0 {
		for _, k := range staleKeys {
			wb.Delete(k)
		}
		for _, c := range stale {
			if r, err := v.peekInode(c); err == nil && r.Parent == ino && r.LinkID == 0 {
				wb.Delete(meta.Key64(meta.PrefixInode, c))
			}
		}
	}
	links := map[uint64]uint64{}
	err = v.db.View(func(txn *meta.Txn) error {
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
	})
	if err != nil {
		return err
	}
	for i := range entries {
		e := &entries[i]
		if id := e.LinkID; id != 0 && e.Type != snapshot.TypeDir {
			wb.Set(meta.DentryKey(ino, e.Name), meta.DentryValue(links[id], e.Type))
			continue
		}
		child, err := v.allocIno()
		if err != nil {
			return err
		}
		wb.Set(meta.Key64(meta.PrefixInode, child), meta.EncodeInode(meta.InodeFromEntry(child, ino, e, v.inlineMax)))
		wb.Set(meta.DentryKey(ino, e.Name), meta.DentryValue(child, e.Type))
	}
	rec.Loaded = true
	wb.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(rec))
	return wb.Flush()
}

// peekInode reads a record outside any op.
func (v *Volume) peekInode(ino uint64) (*meta.Inode, error) {
	var r *meta.Inode
	err := v.db.View(func(txn *meta.Txn) error {
		var err error
		r, err = readInode(txn, ino)
		return err
	})
	return r, err
}
