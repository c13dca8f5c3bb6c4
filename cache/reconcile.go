package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentfs/agentfs/cache/commit"
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
	var inv []commit.Invalidation
	err := func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		rc := &commit.Reconciler{DB: v.db, Repo: v.repo, Live: live{v}, Gens: &v.gens, Dirty: &v.dirty, InlineMax: v.inlineMax}
		var err error
		if inv, err = rc.Reconcile(ctx, c); err != nil {
			return inconsistentErr(err)
		}
		// Nothing local is pending any more: the namespace is c.
		v.markMu.Lock()
		defer v.markMu.Unlock()
		wb := meta.NewBatch(v.db)
		d := &meta.Delta{}
		for dir := range v.dirty.DirMarks() {
			wb.Op(func(t *meta.Txn) error { return meta.ClearMark(t, d, dir) })
		}
		for _, ino := range v.dirty.FileList() {
			wb.Op(func(t *meta.Txn) error { return meta.SetFileDirty(t, d, ino, false) })
		}
		v.stateMu.Lock()
		v.state.Branch, v.state.Seq, v.state.Links, v.state.Virtual = c.ID.Branch, c.ID.Seq, c.Links, c.Virtual
		st := v.state
		v.stateMu.Unlock()
		wb.Op(func(t *meta.Txn) error { return v.saveState(t, st) })
		if err := wb.Flush(); err != nil {
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
			if i.Name != "" {
				nerr = n.InvalidateEntry(i.Parent, i.Name)
			} else {
				nerr = n.InvalidateInode(i.Ino)
			}
			if nerr != nil {
				v.log.Debug("kernel invalidation failed", "err", nerr)
			}
		}
	}
	return nil
}

// live is the live namespace as the committer reaches it: for a
// commit.Reconciler (commit.Live) the inode allocator, the lower layer,
// the open files and the data side's adapters and fetches, and for both
// it and a checkpoint's commit.Applier the files held while they change
// and the mark-ordered update (commit.Files). Its methods run under v.mu,
// held exclusively by switchToLocked and apply.
type live struct{ v *Volume }

func (l live) AllocIno() (uint64, error) { return l.v.allocIno() }

func (l live) Record(ino uint64) (*meta.Inode, bool, error) {
	r, err := l.v.names.Stored(ino)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	return r, err == nil, err
}

func (l live) Entries(ctx context.Context, tree snapshot.BlobRef, hasOrigin bool, origin string) ([]snapshot.Entry, error) {
	return l.v.dirEntries(ctx, tree, hasOrigin, origin)
}

func (l live) Update(fn func(txn *meta.Txn, d *meta.Delta) error) error { return l.v.update(fn) }

func (l live) Layout(r *meta.Inode) data.Layout { return meta.FileLayout{R: r} }

func (l live) Records(txn *meta.Txn) data.Records { return meta.FileRecords{Txn: txn} }

func (l live) FetchPinned(ctx context.Context, ino uint64, e *snapshot.Entry, keep map[uint64]bool) (map[uint64][]byte, error) {
	return l.v.fetchPinned(ctx, ino, e, keep)
}

func (l live) DropData(ino uint64) { l.v.dropData(ino) }

// Orphan implements commit.Live: an open file's node says it has no
// name before anyone can release it, so that a last releaseNode deletes
// it instead of storing it again; while a user holds it, its record says
// so too, with an orphan record that recovery deletes after a crash.
func (l live) Orphan(ino uint64) (bool, error) {
	v := l.v
	n := v.lookupNode(ino)
	if n == nil {
		return false, nil
	}
	n.mu.Lock()
	n.rec.Nlink = 0
	n.rec.Parent = 0
	rec := n.rec.Clone()
	n.mu.Unlock()
	if v.openCount(ino) == 0 {
		return false, nil
	}
	return true, v.update(func(txn *meta.Txn, d *meta.Delta) error {
		if err := txn.Set(meta.Key64(meta.PrefixInode, ino), meta.EncodeInode(rec)); err != nil {
			return err
		}
		if err := meta.SetFileDirty(txn, d, ino, false); err != nil {
			return err
		}
		return txn.Set(meta.Key64(meta.PrefixOrphan, ino), nil)
	})
}

// Hold implements commit.Files (holdFile).
func (l live) Hold(ino uint64) (commit.HeldFile, bool, error) { return l.v.holdFile(ino) }

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
