package commit

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// Live is the live namespace as the facade holds it, for what a
// Reconciler cannot do with the records alone: inode numbers, a target
// directory's entries (its tree, or the lower layer's listing), the open
// files and the data side. Its files are held as a checkpoint's apply
// holds them (Files: Hold, and the mark-ordered Update). The Reconciler
// calls it with the namespace lock held exclusively by its caller.
type Live interface {
	Files
	// AllocIno returns a fresh inode number.
	AllocIno() (uint64, error)
	// Record returns the stored record of ino; false if it has none.
	Record(ino uint64) (*meta.Inode, bool, error)
	// Entries returns the entries of a directory of the target: its
	// tree's, or, for a directory of the lower layer not materialized (a
	// zero tree with an origin), the lower's listing of origin.
	Entries(ctx context.Context, tree snapshot.BlobRef, hasOrigin bool, origin string) ([]snapshot.Entry, error)
	// Layout returns record r as the data side reads a file's record.
	Layout(r *meta.Inode) data.Layout
	// Records returns txn as the data side writes a file's records (its
	// inline bytes and presence record).
	Records(txn *meta.Txn) data.Records
	// FetchPinned fetches the chunks of entry e not in keep, by block,
	// for pinned file ino, whose data file must stay whole (HeldFile.Refill
	// installs them once its record is e's).
	FetchPinned(ctx context.Context, ino uint64, e *snapshot.Entry, keep map[uint64]bool) (map[uint64][]byte, error)
	// Orphan makes ino, whose last name is gone, an orphan if a user holds
	// it open: its record says it has no name, and it is deleted at its
	// last release. It reports whether ino was open (its records stay).
	Orphan(ino uint64) (bool, error)
	// DropData removes the local data of ino, whose records are deleted,
	// once that deletion is durable.
	DropData(ino uint64)
}

// Invalidation is a change a Reconciler made that the kernel must be told
// of: the name Name in directory Parent (when Name is not ""), or else the
// attributes or data of inode Ino.
type Invalidation struct {
	Parent uint64
	Name   string
	Ino    uint64
}

// Reconciler rewrites the live namespace to another commit's tree and
// link table (a switch, a restore, a read-only volume following its
// branch). Directories whose tree did not change are not touched, and
// every path that exists before and after keeps its inode number.
type Reconciler struct {
	DB    *meta.DB
	Repo  *snapshot.Repo
	Live  Live
	Gens  *Gens          // the generations of the dirty blocks of inodes dropped are forgotten
	Dirty *meta.DirtySet // a marked directory is rewritten even if its tree is the target's
	// InlineMax is the largest file whose bytes a new record keeps
	// inline.
	InlineMax uint64
}

// Reconcile makes the live namespace commit c's — its link table's
// groups, its tree from the root down, then the groups c lacks removed —
// and returns what the kernel must be told. The caller holds the
// namespace lock exclusively, and clears the marks and records c as the
// volume's commit afterwards.
func (r *Reconciler) Reconcile(ctx context.Context, c snapshot.Commit) ([]Invalidation, error) {
	rc := &reconcile{Reconciler: r, ctx: ctx}
	if err := rc.links(c.Links); err != nil {
		return nil, err
	}
	if err := rc.root(c.Root); err != nil {
		return nil, err
	}
	if err := rc.finishLinks(); err != nil {
		return nil, err
	}
	return rc.inv, nil
}

// reconcile is one run of a Reconciler.
type reconcile struct {
	*Reconciler
	ctx context.Context
	inv []Invalidation
	// newLinks holds the link table entries of the target, by ID.
	newLinks map[uint64]*snapshot.Entry
}

func (rc *reconcile) entry(parent uint64, name string) {
	rc.inv = append(rc.inv, Invalidation{Parent: parent, Name: name})
}

func (rc *reconcile) inode(ino uint64) { rc.inv = append(rc.inv, Invalidation{Ino: ino}) }

// links loads the target link table and updates or creates its groups.
func (rc *reconcile) links(ref *snapshot.BlobRef) error {
	rc.newLinks = map[uint64]*snapshot.Entry{}
	if ref == nil {
		return nil
	}
	b, err := rc.Repo.ReadBlob(rc.ctx, *ref)
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
			if ino, err = rc.Live.AllocIno(); err != nil {
				return err
			}
			r := meta.InodeFromEntry(ino, 0, e, rc.InlineMax)
			if err := rc.DB.Update(func(txn *meta.Txn) error {
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

// linkIno returns the inode of hard-link group id; false if there is none.
func (rc *reconcile) linkIno(id uint64) (uint64, bool, error) {
	var ino uint64
	var ok bool
	err := rc.DB.View(func(txn *meta.Txn) error {
		it, err := txn.Get(meta.Key64(meta.PrefixLink, id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(b []byte) error { ino, ok = meta.U64(b), true; return nil })
	})
	return ino, ok, err
}

// finishLinks removes the hard-link groups the target does not have.
func (rc *reconcile) finishLinks() error {
	var gone []uint64
	err := rc.DB.View(func(txn *meta.Txn) error {
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
		if err := rc.DB.Update(func(txn *meta.Txn) error { return txn.Delete(meta.Key64(meta.PrefixLink, id)) }); err != nil {
			return err
		}
		if err := rc.dropInode(ino); err != nil {
			return err
		}
	}
	return nil
}

// record returns the stored record of ino, which must have one.
func (rc *reconcile) record(ino uint64) (*meta.Inode, error) {
	r, ok, err := rc.Live.Record(ino)
	if err == nil && !ok {
		err = fmt.Errorf("inode %d has no record: %w", ino, ErrInconsistent)
	}
	return r, err
}

// root reconciles the root directory.
func (rc *reconcile) root(r snapshot.RootDir) error {
	rec, err := rc.record(meta.RootIno)
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
func (rc *reconcile) dir(rec *meta.Inode, e *snapshot.Entry) error {
	_, marked := rc.Dirty.MarkSeq(rec.Ino)
	changedAttrs := !SameAttrs(rec, e)
	sameTree := rec.Tree == e.Tree && !marked
	old := rec.Clone()
	SetAttrs(rec, e)
	rec.Nlink = max(e.Nlink, 2)
	rec.SubFiles, rec.SubBytes = e.SubFiles, e.SubBytes
	if sameTree || !rec.Loaded {
		rec.Tree = e.Tree
		if changedAttrs || old.Tree != e.Tree {
			rc.inode(rec.Ino)
		}
		return rc.putRecord(rec)
	}
	entries, err := rc.Live.Entries(rc.ctx, e.Tree, e.HasOrigin, e.Origin)
	if err != nil {
		return err
	}
	live, err := rc.readDir(rec.Ino)
	if err != nil {
		return err
	}
	byName := make(map[string]meta.Dentry, len(live))
	for _, de := range live {
		byName[de.Name] = de
	}
	for i := range entries {
		ne := &entries[i]
		de, ok := byName[ne.Name]
		delete(byName, ne.Name)
		if ok && de.Type == ne.Type && (ne.LinkID != 0) == rc.isLinked(de.Ino) {
			same, err := rc.reconcileEntry(de, ne)
			if err != nil {
				return err
			}
			if same {
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
	return rc.putRecord(rec)
}

// reconcileEntry brings the live entry de, of the same type and kind
// (linked or not) as target entry ne, to ne in place, and reports whether
// it could: a name of another hard-link group must be replaced instead.
func (rc *reconcile) reconcileEntry(de meta.Dentry, ne *snapshot.Entry) (bool, error) {
	if ne.LinkID != 0 {
		ino, _, err := rc.linkIno(ne.LinkID)
		// The same group: its data was reconciled with the link table.
		return err == nil && ino == de.Ino, err
	}
	child, err := rc.record(de.Ino)
	if err != nil {
		return false, err
	}
	if ne.Type == snapshot.TypeDir {
		return true, rc.dir(child, ne)
	}
	return true, rc.updateFile(de.Ino, ne)
}

// putRecord stores record r.
func (rc *reconcile) putRecord(r *meta.Inode) error {
	return rc.DB.Update(func(txn *meta.Txn) error {
		return txn.Set(meta.Key64(meta.PrefixInode, r.Ino), meta.EncodeInode(r))
	})
}

func (rc *reconcile) isLinked(ino uint64) bool {
	r, ok, err := rc.Live.Record(ino)
	return err == nil && ok && r.LinkID != 0
}

// readDir lists live directory ino.
func (rc *reconcile) readDir(ino uint64) ([]meta.Dentry, error) {
	var out []meta.Dentry
	err := rc.DB.View(func(txn *meta.Txn) error {
		var err error
		out, err = meta.ReadDir(txn, ino)
		return err
	})
	return out, err
}

// SameAttrs reports whether record r has the attributes of target entry
// e (its origin, Mod, mode, owner, times, device, target and xattrs; not
// its size, links or content).
func SameAttrs(r *meta.Inode, e *snapshot.Entry) bool {
	return r.HasOrigin == e.HasOrigin && r.Origin == e.Origin && r.OriginSize == e.OriginSize && r.Mod == e.Modified &&
		r.Mode == e.Mode && r.Uid == e.Uid && r.Gid == e.Gid && r.Atime == e.Atime && r.Mtime == e.Mtime &&
		r.Ctime == e.Ctime && r.Rdev == e.Rdev && r.Target == e.Target && slices.EqualFunc(r.Xattrs, e.Xattrs,
		func(a, b snapshot.Xattr) bool { return a.Name == b.Name && string(a.Value) == string(b.Value) })
}

// SetAttrs gives record r the attributes of target entry e (those
// SameAttrs compares).
func SetAttrs(r *meta.Inode, e *snapshot.Entry) {
	r.HasOrigin, r.Origin, r.OriginSize, r.Mod = e.HasOrigin, e.Origin, e.OriginSize, e.Modified
	r.Mode, r.Uid, r.Gid = e.Mode, e.Uid, e.Gid
	r.Atime, r.Mtime, r.Ctime = e.Atime, e.Mtime, e.Ctime
	r.Rdev, r.Target, r.Xattrs = e.Rdev, e.Target, slices.Clone(e.Xattrs)
}

// updateFile makes non-directory ino match target entry e (see
// SameAttrs, SetAttrs), keeping its inode number, an open file's node and
// the local bytes of blocks whose chunk is unchanged, and tells the kernel
// if anything changed.
func (rc *reconcile) updateFile(ino uint64, e *snapshot.Entry) error {
	changed, err := rc.fileTo(ino, e)
	if err != nil {
		return err
	}
	if changed {
		rc.inode(ino)
	}
	return nil
}

// fileTo brings file ino, held through Live.Hold, to entry e and reports
// whether anything changed: the local bytes of blocks whose chunk changed
// are dropped (data.File.Replace), those of a pinned file fetched again
// first (Live.FetchPinned) and installed last (HeldFile.Refill), and the
// record, stored in a mark-ordered update with the data state's records,
// becomes an open file's record in memory too.
func (rc *reconcile) fileTo(ino uint64, e *snapshot.Entry) (bool, error) {
	h, ok, err := rc.Live.Hold(ino)
	if err == nil && !ok {
		err = fmt.Errorf("inode %d has no record: %w", ino, ErrInconsistent)
	}
	if err != nil {
		return false, err
	}
	defer h.Release()
	r, d := h.Record(), h.Data()
	if SameAttrs(r, e) && r.Size == e.Size && r.Nlink == e.Nlink && len(r.Dirty) == 0 && slices.Equal(r.Chunks, e.Chunks) {
		return false, nil
	}
	wasInline := r.Inline
	pinned := d.Pinned() // its data file stays whole
	newInline := r.Type == snapshot.TypeFile && e.Size <= rc.InlineMax && !pinned
	keep := keptBlocks(r, d, e, newInline == wasInline)
	var refill map[uint64][]byte
	if pinned {
		if refill, err = rc.Live.FetchPinned(rc.ctx, ino, e, keep); err != nil {
			return false, err
		}
	}
	for _, b := range r.Dirty {
		rc.Gens.Forget(ino, b)
	}
	if r.Type == snapshot.TypeFile {
		if err := d.Replace(rc.Live.Layout(r), keep, e.Size); err != nil {
			return false, err
		}
	}
	SetAttrs(r, e)
	r.Size, r.Nlink, r.Chunks, r.Dirty, r.Inline = e.Size, e.Nlink, slices.Clone(e.Chunks), nil, newInline
	if err := rc.Live.Update(rc.storeFile(r, d, wasInline, keep[0])); err != nil {
		return false, err
	}
	h.SetRecord(r, true)
	d.Persisted()
	if pinned {
		return true, h.Refill(refill)
	}
	return true, nil
}

// keptBlocks returns the blocks of file record r whose local bytes stay
// when r becomes entry e: those present, clean and with an unchanged
// chunk, unless the file moves between inline and data-file storage
// (sameStorage false).
func keptBlocks(r *meta.Inode, d *data.File, e *snapshot.Entry, sameStorage bool) map[uint64]bool {
	keep := map[uint64]bool{}
	for _, c := range e.Chunks {
		if ref, ok := r.Chunk(c.Index); ok && ref == c.Ref && d.IsPresent(c.Index) && !r.IsDirty(c.Index) && sameStorage {
			keep[c.Index] = true
		}
	}
	return keep
}

// storeFile returns the write of file record r, brought to its target
// entry, with d's records as d.Replace left them: the record, no longer a
// dirty file; the inline bytes deleted if the file was or is inline and
// block 0 is not kept (keep0); the presence and, for an inline file whose
// block 0 stays, its bytes, which a fetch may have installed without
// storing them yet (a presence listing block 0 needs them).
func (rc *reconcile) storeFile(r *meta.Inode, d *data.File, wasInline, keep0 bool) func(*meta.Txn, *meta.Delta) error {
	return func(txn *meta.Txn, md *meta.Delta) error {
		if err := txn.Set(meta.Key64(meta.PrefixInode, r.Ino), meta.EncodeInode(r)); err != nil {
			return err
		}
		if err := meta.SetFileDirty(txn, md, r.Ino, false); err != nil {
			return err
		}
		if (r.Inline || wasInline) && !keep0 {
			if err := txn.Delete(meta.Key64(meta.PrefixInline, r.Ino)); err != nil {
				return err
			}
		}
		return d.Persist(rc.Live.Layout(r), rc.Live.Records(txn))
	}
}

// addEntry creates the record of target entry e in directory dir.
func (rc *reconcile) addEntry(dir uint64, e *snapshot.Entry) error {
	if e.LinkID != 0 && e.Type != snapshot.TypeDir {
		ino, ok, err := rc.linkIno(e.LinkID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("entry %q names hard-link group %x that the link table lacks: %w", e.Name, e.LinkID, snapshot.ErrCorrupt)
		}
		return rc.DB.Update(func(txn *meta.Txn) error { return txn.Set(meta.DentryKey(dir, e.Name), meta.DentryValue(ino, e.Type)) })
	}
	ino, err := rc.Live.AllocIno()
	if err != nil {
		return err
	}
	r := meta.InodeFromEntry(ino, dir, e, rc.InlineMax)
	return rc.DB.Update(func(txn *meta.Txn) error {
		if err := txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(r)); err != nil {
			return err
		}
		return txn.Set(meta.DentryKey(dir, e.Name), meta.DentryValue(ino, e.Type))
	})
}

// dropEntry removes the live entry de of directory dir and, unless it is a
// hard-link group's name, its inode (with its subtree).
func (rc *reconcile) dropEntry(dir uint64, de meta.Dentry) error {
	if err := rc.DB.Update(func(txn *meta.Txn) error { return txn.Delete(meta.DentryKey(dir, de.Name)) }); err != nil {
		return err
	}
	if rc.isLinked(de.Ino) {
		return nil // the group itself is reconciled with the link table
	}
	return rc.dropInode(de.Ino)
}

// dropInode deletes an inode that no longer has a name, with its subtree;
// an open file becomes an orphan (Live.Orphan).
func (rc *reconcile) dropInode(ino uint64) error {
	r, ok, err := rc.Live.Record(ino)
	if err != nil || !ok {
		return err
	}
	if r.Type == snapshot.TypeDir && r.Loaded {
		kids, err := rc.readDir(ino)
		if err != nil {
			return err
		}
		for _, k := range kids {
			if err := rc.dropEntry(ino, k); err != nil {
				return err
			}
		}
	}
	if open, err := rc.Live.Orphan(ino); open || err != nil {
		return err
	}
	for _, b := range r.Dirty {
		rc.Gens.Forget(ino, b)
	}
	err = rc.Live.Update(func(txn *meta.Txn, d *meta.Delta) error {
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
	rc.Live.DropData(ino)
	rc.inode(ino)
	return nil
}
