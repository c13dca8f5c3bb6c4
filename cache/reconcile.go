package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// Notifier is told about changes the engine makes behind the kernel's back
// — following a branch head, a restore, a discard — so that the FUSE layer
// can drop what the kernel caches. The engine calls it without holding its
// locks, after the change is complete. fs.Server implements it.
type Notifier interface {
	// InvalidateInode: the attributes or data of ino changed.
	InvalidateInode(ino uint64) error
	// InvalidateEntry: the name in directory parent now names another
	// inode, or nothing.
	InvalidateEntry(parent uint64, name string) error
}

// SetNotifier installs the notifier (nil: none). Call it once the mount is
// serving.
func (v *Volume) SetNotifier(n Notifier) {
	v.stateMu.Lock()
	v.notifier = n
	v.stateMu.Unlock()
}

type invalidation struct {
	parent uint64 // entry invalidation when name != ""
	name   string
	ino    uint64 // inode invalidation otherwise
}

// SwitchTo makes the live namespace equal to commit c — its tree, its link
// table — and records c as the commit the volume derives from. Local
// changes not in c are dropped: callers that must keep them commit (Sync)
// first. Directories whose tree did not change are not touched, and every
// path that exists before and after keeps its inode number, so open files
// and the kernel's caches stay valid; the kernel is told about the rest
// through the Notifier. The cost grows with the loaded directories that
// differ, not with the size of the volume.
func (v *Volume) SwitchTo(ctx context.Context, c snapshot.Commit) error {
	v.cpMu.Lock()
	defer v.cpMu.Unlock()
	return v.switchToLocked(ctx, c)
}

// switchToLocked is SwitchTo with v.cpMu held.
func (v *Volume) switchToLocked(ctx context.Context, c snapshot.Commit) error {
	var inv []invalidation
	err := func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		rc := &reconciler{v: v, ctx: ctx}
		if err := rc.links(c.Links); err != nil {
			return err
		}
		if err := rc.root(c.Root); err != nil {
			return err
		}
		if err := rc.finishLinks(); err != nil {
			return err
		}
		inv = rc.inv
		// Nothing local is pending any more: the namespace is c.
		v.markMu.Lock()
		defer v.markMu.Unlock()
		wb := newBatch(v.db)
		d := &meta.Delta{}
		for dir := range v.dirty.DirMarks() {
			wb.op(func(t *meta.Txn) error { return meta.ClearMark(t, d, dir) })
		}
		for _, ino := range v.dirty.FileList() {
			wb.op(func(t *meta.Txn) error { return meta.SetFileDirty(t, d, ino, false) })
		}
		v.stateMu.Lock()
		v.state.Branch, v.state.Seq, v.state.Links, v.state.Virtual = c.ID.Branch, c.ID.Seq, c.Links, c.Virtual
		st := v.state
		v.stateMu.Unlock()
		wb.op(func(t *meta.Txn) error { return v.saveState(t, st) })
		if err := wb.flush(); err != nil {
			return err
		}
		v.dirty.Apply(d)
		return nil
	}()
	if err != nil {
		return fmt.Errorf("switch to %v: %w", c.ID, err)
	}
	if err := v.db.Flush(); err != nil {
		return fmt.Errorf("switch to %v: %w", c.ID, err)
	}
	v.stateMu.Lock()
	n := v.notifier
	v.stateMu.Unlock()
	if n != nil {
		for _, i := range inv {
			var nerr error
			if i.name != "" {
				nerr = n.InvalidateEntry(i.parent, i.name)
			} else {
				nerr = n.InvalidateInode(i.ino)
			}
			if nerr != nil {
				v.log.Debug("kernel invalidation failed", "err", nerr)
			}
		}
	}
	return nil
}

// reconciler rewrites the namespace to a new tree. It runs under v.mu held
// exclusively.
type reconciler struct {
	v   *Volume
	ctx context.Context
	inv []invalidation
	// newLinks holds the link table entries of the target, by ID.
	newLinks map[uint64]*snapshot.Entry
}

func (rc *reconciler) entry(parent uint64, name string) {
	rc.inv = append(rc.inv, invalidation{parent: parent, name: name})
}

func (rc *reconciler) inode(ino uint64) { rc.inv = append(rc.inv, invalidation{ino: ino}) }

// links loads the target link table and updates or creates its groups.
func (rc *reconciler) links(ref *snapshot.BlobRef) error {
	rc.newLinks = map[uint64]*snapshot.Entry{}
	if ref == nil {
		return nil
	}
	b, err := rc.v.repo.ReadBlob(rc.ctx, *ref)
	if err != nil {
		return fmt.Errorf("read link table: %w", err)
	}
	entries, err := snapshot.DecodeTree(b)
	if err != nil {
		return fmt.Errorf("link table: %w", err)
	}
	for i := range entries {
		e := &entries[i]
		rc.newLinks[e.LinkID] = e
		ino, ok, err := rc.linkIno(e.LinkID)
		if err != nil {
			return err
		}
		if !ok {
			if ino, err = rc.v.allocIno(); err != nil {
				return err
			}
			r := meta.InodeFromEntry(ino, 0, e, rc.v.inlineMax)
			if err := rc.v.db.Update(func(txn *meta.Txn) error {
				if err := txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(r)); err != nil {
					return err
				}
				return txn.Set(meta.Key64(meta.PrefixLink, e.LinkID), meta.Put64(ino))
			}); err != nil {
				return err
			}
			continue
		}
		if err := rc.updateFile(ino, e); err != nil {
			return err
		}
	}
	return nil
}

func (rc *reconciler) linkIno(id uint64) (uint64, bool, error) {
	var ino uint64
	var ok bool
	err := rc.v.db.View(func(txn *meta.Txn) error {
		b, found, err := getValue(txn, meta.Key64(meta.PrefixLink, id))
		ino, ok = meta.U64(b), found
		return err
	})
	return ino, ok, err
}

// finishLinks removes the hard-link groups the target does not have.
func (rc *reconciler) finishLinks() error {
	var gone []uint64
	err := rc.v.db.View(func(txn *meta.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{meta.PrefixLink}, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			id := meta.U64(it.Item().Key()[1:])
			if rc.newLinks[id] == nil {
				gone = append(gone, id)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, id := range gone {
		ino, ok, err := rc.linkIno(id)
		if err != nil || !ok {
			return err
		}
		if err := rc.v.db.Update(func(txn *meta.Txn) error { return txn.Delete(meta.Key64(meta.PrefixLink, id)) }); err != nil {
			return err
		}
		if err := rc.dropInode(ino); err != nil {
			return err
		}
	}
	return nil
}

// root reconciles the root directory.
func (rc *reconciler) root(r snapshot.RootDir) error {
	rec, err := rc.v.peekInode(RootIno)
	if err != nil {
		return err
	}
	e := snapshot.Entry{Type: snapshot.TypeDir, Mode: r.Mode, Uid: r.Uid, Gid: r.Gid, Atime: r.Atime,
		Mtime: r.Mtime, Ctime: r.Ctime, Nlink: r.Nlink, Xattrs: r.Xattrs, Tree: r.Tree, SubFiles: r.SubFiles, SubBytes: r.SubBytes,
		HasOrigin: r.HasOrigin, Modified: r.Modified}
	return rc.dir(rec, &e)
}

// dir reconciles directory rec with target entry e (its attributes and
// tree).
func (rc *reconciler) dir(rec *meta.Inode, e *snapshot.Entry) error {
	_, marked := rc.v.dirty.MarkSeq(rec.Ino)
	changedAttrs := !sameAttrs(rec, e)
	sameTree := rec.Tree == e.Tree && !marked
	old := rec.Clone()
	setAttrs(rec, e)
	rec.Nlink = max(e.Nlink, 2)
	rec.SubFiles, rec.SubBytes = e.SubFiles, e.SubBytes
	if sameTree || !rec.Loaded {
		rec.Tree = e.Tree
		if changedAttrs || old.Tree != e.Tree {
			rc.inode(rec.Ino)
		}
		return rc.v.db.Update(func(txn *meta.Txn) error {
			return txn.Set(meta.Key64(meta.PrefixInode, rec.Ino), meta.EncodeInode(rec))
		})
	}
	entries, err := rc.v.dirEntries(rc.ctx, e.Tree, e.HasOrigin, e.Origin)
	if err != nil {
		return err
	}
	live, err := rc.v.readDirLocked(rec.Ino)
	if err != nil {
		return err
	}
	byName := make(map[string]DirEntry, len(live))
	for _, de := range live {
		byName[de.Name] = de
	}
	for i := range entries {
		ne := &entries[i]
		de, ok := byName[ne.Name]
		delete(byName, ne.Name)
		if ok && de.Type == ne.Type && (ne.LinkID != 0) == rc.isLinked(de.Ino) {
			if ne.LinkID != 0 {
				ino, _, err := rc.linkIno(ne.LinkID)
				if err != nil {
					return err
				}
				if ino == de.Ino {
					continue // same group; its data was reconciled with the link table
				}
			} else {
				child, err := rc.v.peekInode(de.Ino)
				if err != nil {
					return err
				}
				if ne.Type == snapshot.TypeDir {
					if err := rc.dir(child, ne); err != nil {
						return err
					}
				} else if err := rc.updateFile(de.Ino, ne); err != nil {
					return err
				}
				continue
			}
		}
		if ok {
			if err := rc.dropEntry(rec.Ino, de); err != nil {
				return err
			}
		}
		if err := rc.addEntry(rec.Ino, ne); err != nil {
			return err
		}
		rc.entry(rec.Ino, ne.Name)
	}
	for name, de := range byName {
		if err := rc.dropEntry(rec.Ino, de); err != nil {
			return err
		}
		rc.entry(rec.Ino, name)
	}
	rec.Tree = e.Tree
	rc.inode(rec.Ino)
	return rc.v.db.Update(func(txn *meta.Txn) error {
		return txn.Set(meta.Key64(meta.PrefixInode, rec.Ino), meta.EncodeInode(rec))
	})
}

func (rc *reconciler) isLinked(ino uint64) bool {
	r, err := rc.v.peekInode(ino)
	return err == nil && r.LinkID != 0
}

// readDirLocked lists directory ino; the caller holds v.mu.
func (v *Volume) readDirLocked(ino uint64) ([]DirEntry, error) {
	var out []DirEntry
	err := v.db.View(func(txn *meta.Txn) error {
		prefix := meta.DentryPrefix(ino)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			name := string(it.Item().Key()[len(prefix):])
			err := it.Item().Value(func(b []byte) error {
				out = append(out, DirEntry{Name: name, Ino: meta.U64(b), Type: snapshot.EntryType(b[8])})
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

func sameAttrs(r *meta.Inode, e *snapshot.Entry) bool {
	return r.HasOrigin == e.HasOrigin && r.Origin == e.Origin && r.OriginSize == e.OriginSize && r.Mod == e.Modified &&
		r.Mode == e.Mode && r.Uid == e.Uid && r.Gid == e.Gid && r.Atime == e.Atime && r.Mtime == e.Mtime &&
		r.Ctime == e.Ctime && r.Rdev == e.Rdev && r.Target == e.Target && slices.EqualFunc(r.Xattrs, e.Xattrs,
		func(a, b snapshot.Xattr) bool { return a.Name == b.Name && string(a.Value) == string(b.Value) })
}

func setAttrs(r *meta.Inode, e *snapshot.Entry) {
	r.HasOrigin, r.Origin, r.OriginSize, r.Mod = e.HasOrigin, e.Origin, e.OriginSize, e.Modified
	r.Mode, r.Uid, r.Gid = e.Mode, e.Uid, e.Gid
	r.Atime, r.Mtime, r.Ctime = e.Atime, e.Mtime, e.Ctime
	r.Rdev, r.Target, r.Xattrs = e.Rdev, e.Target, slices.Clone(e.Xattrs)
}

// updateFile makes non-directory ino match entry e, keeping its inode
// number. Local bytes of blocks whose chunk changed are forgotten.
func (rc *reconciler) updateFile(ino uint64, e *snapshot.Entry) error {
	v := rc.v
	h, err := v.holdFile(ino)
	if err != nil {
		return err
	}
	defer h.release()
	n, r, present := h.n, h.r, h.present
	same := sameAttrs(r, e) && r.Size == e.Size && r.Nlink == e.Nlink && len(r.Dirty) == 0 &&
		slices.Equal(r.Chunks, e.Chunks)
	if same {
		return nil
	}
	// Keep cached bytes of the blocks whose chunk is unchanged, unless the
	// file moves between inline and data-file storage.
	wasInline := r.Inline
	pinned := n != nil && n.pins > 0 // its data file stays whole (passthrough.go)
	newInline := r.Type == snapshot.TypeFile && e.Size <= v.inlineMax && !pinned
	keep := map[uint64]bool{}
	for _, c := range e.Chunks {
		if ref, ok := r.Chunk(c.Index); ok && ref == c.Ref && present[c.Index] && !r.IsDirty(c.Index) && newInline == wasInline {
			keep[c.Index] = true
		}
	}
	var refill map[uint64][]byte
	if pinned {
		if refill, err = v.fetchPinned(rc.ctx, n, e, keep); err != nil {
			return err
		}
	}
	var dropped int64
	for b := range present {
		if !keep[b] {
			dropped += int64(min(v.chunkSize, r.Size-min(r.Size, b*v.chunkSize)))
		}
	}
	for _, b := range r.Dirty {
		v.gens.Forget(ino, b)
	}
	if r.Type == snapshot.TypeFile && !wasInline {
		// Data-file bytes of blocks that are neither present nor dirty
		// must read as zeros: punch out what is not kept.
		var drop []uint64
		for b := range present {
			if !keep[b] {
				drop = append(drop, b)
			}
		}
		drop = append(drop, r.Dirty...)
		if err := v.clearDataFile(n, ino, drop, e.Size, len(keep) == 0 && !pinned); err != nil {
			return err
		}
	}
	setAttrs(r, e)
	r.Size, r.Nlink, r.Chunks, r.Dirty, r.Inline = e.Size, e.Nlink, slices.Clone(e.Chunks), nil, newInline
	err = v.update(func(txn *meta.Txn, d *meta.Delta) error {
		if err := txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(r)); err != nil {
			return err
		}
		if err := meta.SetFileDirty(txn, d, ino, false); err != nil {
			return err
		}
		if (r.Inline || wasInline) && !keep[0] {
			if err := txn.Delete(meta.Key64(meta.PrefixInline, ino)); err != nil {
				return err
			}
		}
		if len(keep) == 0 {
			return txn.Delete(meta.Key64(meta.PrefixPresence, ino))
		}
		return txn.Set(meta.Key64(meta.PrefixPresence, ino), data.EncodePresence(keep))
	})
	if err != nil {
		return err
	}
	if n != nil {
		n.rec, n.memDirty = r, false
		n.d.SetPresent(keep)
		if !keep[0] {
			n.d.SetInline(nil, false)
		}
	}
	v.blocks.Add(ino, -dropped)
	rc.inode(ino)
	if pinned {
		return v.refillPinned(n, refill)
	}
	return nil
}

// clearDataFile punches the given blocks out of ino's data file and cuts it
// to size, or removes it (all). n, if not nil, is the file's locked node.
func (v *Volume) clearDataFile(n *node, ino uint64, blocks []uint64, size uint64, all bool) error {
	if all {
		if n != nil {
			n.closeFile()
		}
		return v.files.Remove(ino)
	}
	return v.files.PunchFile(ino, blocks, v.chunkSize, true, size)
}

// addEntry creates the record of target entry e in directory dir.
func (rc *reconciler) addEntry(dir uint64, e *snapshot.Entry) error {
	v := rc.v
	if e.LinkID != 0 && e.Type != snapshot.TypeDir {
		ino, ok, err := rc.linkIno(e.LinkID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("entry %q names hard-link group %x that the link table lacks: %w", e.Name, e.LinkID, snapshot.ErrCorrupt)
		}
		return v.db.Update(func(txn *meta.Txn) error { return txn.Set(meta.DentryKey(dir, e.Name), meta.DentryValue(ino, e.Type)) })
	}
	ino, err := v.allocIno()
	if err != nil {
		return err
	}
	r := meta.InodeFromEntry(ino, dir, e, v.inlineMax)
	return v.db.Update(func(txn *meta.Txn) error {
		if err := txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(r)); err != nil {
			return err
		}
		return txn.Set(meta.DentryKey(dir, e.Name), meta.DentryValue(ino, e.Type))
	})
}

// dropEntry removes the live entry de of directory dir and, unless it is a
// hard-link group's name, its inode (with its subtree).
func (rc *reconciler) dropEntry(dir uint64, de DirEntry) error {
	if err := rc.v.db.Update(func(txn *meta.Txn) error { return txn.Delete(meta.DentryKey(dir, de.Name)) }); err != nil {
		return err
	}
	if rc.isLinked(de.Ino) {
		return nil // the group itself is reconciled with the link table
	}
	return rc.dropInode(de.Ino)
}

// dropInode deletes an inode that no longer has a name, with its subtree;
// an open file becomes an orphan.
func (rc *reconciler) dropInode(ino uint64) error {
	v := rc.v
	r, err := v.peekInode(ino)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.Type == snapshot.TypeDir && r.Loaded {
		kids, err := v.readDirLocked(ino)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := rc.dropEntry(ino, k); err != nil {
				return err
			}
		}
	}
	if n := v.lookupNode(ino); n != nil {
		// Its record says it is gone before anyone can release it: a
		// last releaseNode then deletes it instead of storing it again.
		n.mu.Lock()
		n.rec.Nlink = 0
		n.rec.Parent = 0
		rec := n.rec.Clone()
		n.mu.Unlock()
		if v.openCount(ino) > 0 {
			return v.update(func(txn *meta.Txn, d *meta.Delta) error {
				if err := txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(rec)); err != nil {
					return err
				}
				if err := meta.SetFileDirty(txn, d, ino, false); err != nil {
					return err
				}
				return txn.Set(meta.Key64(meta.PrefixOrphan, ino), nil)
			})
		}
	}
	for _, b := range r.Dirty {
		v.gens.Forget(ino, b)
	}
	err = v.update(func(txn *meta.Txn, d *meta.Delta) error {
		for _, p := range []byte{meta.PrefixInode, meta.PrefixPresence, meta.PrefixInline} {
			if err := txn.Delete(meta.Key64(p, ino)); err != nil {
				return err
			}
		}
		if r.Type == snapshot.TypeDir {
			return meta.ClearMark(txn, d, ino)
		}
		return meta.SetFileDirty(txn, d, ino, false)
	})
	if err != nil {
		return err
	}
	v.dropData(ino)
	rc.inode(ino)
	return nil
}

// followLoop keeps a read-only volume at its branch head.
func (v *Volume) followLoop() {
	defer v.wg.Done()
	t := time.NewTicker(v.opts.FollowInterval)
	defer t.Stop()
	for {
		select {
		case <-v.ctx.Done():
			return
		case <-t.C:
		}
		if err := v.follow(v.ctx); err != nil && v.ctx.Err() == nil {
			v.log.Warn("following the branch head failed; will retry", "err", err)
		}
	}
}

// follow moves a read-only volume to its branch's newest commit.
func (v *Volume) follow(ctx context.Context) error {
	st := v.getState()
	seq, err := v.repo.HeadSeq(ctx, st.Branch)
	if err != nil || seq <= st.Seq {
		return err
	}
	c, err := v.repo.ReadCommit(ctx, snapshot.CommitID{Branch: st.Branch, Seq: seq})
	if err != nil {
		return err
	}
	v.log.Info("following branch head", "from", st.Seq, "to", seq)
	return v.SwitchTo(ctx, c)
}
