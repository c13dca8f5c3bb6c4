package commit

import (
	"sync"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
)

// This file is a checkpoint's phase D: once the commit is written, the
// records say what it covers. Apply runs it under the namespace lock its
// caller holds, reaching the facade's files through Files.

// Files is how the committer holds the facade's files while it changes
// their records and local data (phase D's Apply, and a Reconciler's file
// brought to its target entry, through Live, which embeds it): a file
// held stays still until released — an open file with its lock taken,
// one not open kept from opening by the namespace lock that the caller
// holds. It is also the committer's one mark-ordered update.
type Files interface {
	// Hold holds file ino; false (nothing held) if it has no record.
	Hold(ino uint64) (HeldFile, bool, error)
	// Update runs fn in a transaction ordered against mark writers and
	// the clearing of marks (it takes the facade's mark lock, which comes
	// after a file's lock: an open file may be held meanwhile), and
	// applies d to the dirty set once it commits.
	Update(fn func(txn *meta.Txn, d *meta.Delta) error) error
}

// HeldFile is a file that Files.Hold holds.
type HeldFile interface {
	// Record returns a private copy of the file's record.
	Record() *meta.Inode
	// Data returns the file's data state: an open file's own, or, for a
	// file not open, one holding the present blocks its presence record
	// lists (not its bytes), whose changes count in the block cache and
	// whose data file, if opened, closes at Release.
	Data() *data.File
	// Open reports whether the file is open: its record lives in memory
	// too (SetRecord), and a change to it is stored before the hold ends,
	// in a transaction of its own (Files.Update), so that a writer waiting
	// for its lock finds the change stored.
	Open() bool
	// SetRecord makes r the open file's record; with stored, r is all the
	// database must hold of it (nothing waits to be persisted). Nothing
	// for a file not open.
	SetRecord(r *meta.Inode, stored bool)
	// Refill installs chunks (by block) into the data file of a pinned
	// open file whose record is already the new one (SetRecord), and
	// stores its presence.
	Refill(chunks map[uint64][]byte) error
	// Release ends the hold.
	Release()
}

// Applier records what a written commit covers (phase D): its files'
// captured blocks clean, its directories' trees, the tree marks it covers
// cleared, and the volume's state.
type Applier struct {
	DB      *meta.DB
	Dirty   *meta.DirtySet
	Marks   sync.Locker // the facade's mark lock (writers of tree marks)
	Files   Files
	Capture *Capture // this checkpoint's capture: its uploader holds the blocks
	Builder *Builder // this checkpoint's builder: its Record reads records
}

// Apply records what the commit covers, under the namespace lock that
// the caller holds. Files first: each file with captured blocks is held
// (Files.Hold) and its covered blocks marked clean (Capture.Cover): an
// open file's in a transaction of its own, under its lock (its writer may
// be waiting), the others, which cannot change meanwhile, in one batch.
// Then the records of the directories of dirs are read (DirRecords), and,
// under Marks, so that no mark is written between reading and clearing
// it, they get their trees (ApplyTrees), with the marks the freeze saw
// (up to sequence seq) cleared; once those are staged, state moves the
// volume's state to the commit (in memory, even if the batch fails later:
// the commit is written) and returns the write that stores it, last in
// the same batch.
//
// Nothing under Marks takes a file's lock, which comes before the mark
// lock in the facade's lock order: the records are read before it, since
// Builder.Record may take an open file's lock. (It takes none for a
// directory, which is never an open file, but the order does not rest on
// that.)
func (a *Applier) Apply(dirs map[uint64]Dir, linkTable bool, seq uint64, state func() func(*meta.Txn) error) error {
	fb := meta.NewBatch(a.DB)
	fd := &meta.Delta{}
	for ino, blocks := range a.Capture.Up.Files() {
		if err := a.file(fb, fd, ino, blocks); err != nil {
			fb.Discard()
			return err
		}
	}
	if err := fb.Flush(); err != nil {
		return err
	}
	a.Dirty.Apply(fd)

	var recs map[uint64]*meta.Inode
	err := a.DB.View(func(txn *meta.Txn) error {
		var err error
		recs, err = a.Builder.DirRecords(txn, dirs)
		return err
	})
	if err != nil {
		return err
	}
	a.Marks.Lock()
	defer a.Marks.Unlock()
	wb := meta.NewBatch(a.DB)
	d := &meta.Delta{}
	covered := func(dir uint64) bool {
		s, ok := a.Dirty.MarkSeq(dir)
		return ok && s <= seq
	}
	// The directories' new trees; marks the commit covers are cleared in
	// the same transaction as the tree they describe.
	ApplyTrees(recs, linkTable, covered, d, wb.Op)
	wb.Op(state())
	if err := wb.Flush(); err != nil {
		return err
	}
	a.Dirty.Apply(d)
	return nil
}

// file marks the captured blocks of file ino clean: committed chunks
// replace them, and their local bytes stay as cache (data.File.AddPresent).
// A file not open is written through wb (its dirty-set change in d).
func (a *Applier) file(wb *meta.Batch, d *meta.Delta, ino uint64, blocks []uint64) error {
	h, ok, err := a.Files.Hold(ino)
	if err != nil || !ok {
		return err
	}
	defer h.Release()
	r, fd := h.Record(), h.Data()
	write, cached := a.Capture.Cover(r, fd.Present(), blocks)
	if write == nil {
		return nil
	}
	if h.Open() {
		// Its own transaction, committed before the file's lock is
		// released: a write waiting for the lock sees the clean state.
		if err := a.Files.Update(write); err != nil {
			return err
		}
		// Only the chunk map and dirty list changed; memory-only size and
		// time changes made since the freeze stay pending.
		h.SetRecord(r, false)
	} else {
		wb.Op(func(t *meta.Txn) error { return write(t, d) })
	}
	a.Capture.Forget(r, blocks)
	fd.AddPresent(cached, r.Size)
	return nil
}

// Cover marks clean, in file record r and its present blocks, the blocks
// of the given ones that the commit covers (Clean), and returns the write
// that stores the outcome — the record, the dirty-file index once no block
// is dirty, the presence record — with the blocks that became cache; a nil
// write if r did not change. The caller holds the file still until the
// write commits, and then calls Forget.
func (c *Capture) Cover(r *meta.Inode, present map[uint64]bool, blocks []uint64) (write func(*meta.Txn, *meta.Delta) error, cached []uint64) {
	changed, cached := c.Clean(r, present, blocks)
	if !changed {
		return nil, nil
	}
	ino, rec, pres, clean := r.Ino, meta.EncodeInode(r), data.EncodePresence(present), len(r.Dirty) == 0
	return func(t *meta.Txn, d *meta.Delta) error {
		if err := t.Set(meta.Key64(meta.PrefixInode, ino), rec); err != nil {
			return err
		}
		if clean {
			if err := meta.SetFileDirty(t, d, ino, false); err != nil {
				return err
			}
		}
		return t.Set(meta.Key64(meta.PrefixPresence, ino), pres)
	}, cached
}

// DirRecords returns the records of the directories of dirs (the trees
// this checkpoint built) that still have one, read in txn through Record,
// each with its new tree and totals: what ApplyTrees writes.
func (b *Builder) DirRecords(txn *meta.Txn, dirs map[uint64]Dir) (map[uint64]*meta.Inode, error) {
	recs := make(map[uint64]*meta.Inode, len(dirs))
	for ino, bd := range dirs {
		r, ok, err := b.Record(txn, ino)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue // deleted since the freeze
		}
		r.Tree, r.SubFiles, r.SubBytes = bd.Ref, bd.SubFiles, bd.SubBytes
		recs[ino] = r
	}
	return recs, nil
}

// ApplyTrees writes through op the directory records recs (DirRecords)
// and, in the same write as each, clears its tree mark if covered says
// the commit covers it; then the link table's mark, if linkTable (it was
// rebuilt) and covered. d records the marks cleared, for the dirty set
// once op's writes commit. It reads nothing and takes no lock: the
// Applier calls it under the mark lock.
func ApplyTrees(recs map[uint64]*meta.Inode, linkTable bool, covered func(dir uint64) bool, d *meta.Delta, op func(func(*meta.Txn) error)) {
	for ino, r := range recs {
		rec, done := meta.EncodeInode(r), covered(ino)
		op(func(t *meta.Txn) error {
			if err := t.Set(meta.Key64(meta.PrefixInode, ino), rec); err != nil {
				return err
			}
			if done {
				return meta.ClearMark(t, d, ino)
			}
			return nil
		})
	}
	if linkTable && covered(meta.LinkTableDir) {
		op(func(t *meta.Txn) error { return meta.ClearMark(t, d, meta.LinkTableDir) })
	}
}
