package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentfs/agentfs/cache/commit"
	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/cache/ns"
	"github.com/agentfs/agentfs/snapshot"
)

// A checkpoint turns the local changes into a commit:
//
//	A. without the namespace lock: read every dirty block, encode it into
//	   packs and upload them (in parallel);
//	B. under the namespace lock (a short freeze, which writes wait for:
//	   they dirty blocks holding it shared, lockData): persist open files'
//	   pending attributes, encode the blocks written since A, and rebuild the
//	   trees of the directories that changed and of their ancestors,
//	   bottom-up (unchanged subtrees keep their stored trees);
//	C. without the lock: upload the remaining packs, then create the commit
//	   with a conditional write;
//	D. under the lock: record the new chunks and trees, clear the dirty
//	   marks that the commit covers (blocks by write generation, directories
//	   by op sequence).
//
// A crash anywhere before D leaves every dirty mark in place: the next
// checkpoint redoes the work (the uploaded packs become garbage for gc). A
// crash during D leaves some marks in place: they are redone too, and the
// commit itself is adopted at the next Open (catchUp).
//
// Before A, and again in C (WriteCommit), the checkpoint checks that the
// store still holds this volume (snapshot.Repo.CheckVolume: one GET of
// volume.json each). If it does not (the store directory was moved away or
// unmounted, the bucket recreated), the checkpoint fails before uploading
// anything, with an error matching snapshot.ErrVolumeChanged, and every
// dirty mark stays: the changes wait in the cache until the store holds
// the volume again.

func (v *Volume) checkpointLoop() {
	defer v.wg.Done()
	interval := v.opts.CheckpointInterval
	delay := interval
	for {
		var tick <-chan time.Time
		var t *time.Timer
		if delay > 0 {
			t = time.NewTimer(delay)
			tick = t.C
		}
		select {
		case <-v.ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-tick:
		case <-v.kick:
		}
		if t != nil {
			t.Stop()
		}
		if err := v.checkpoint(v.ctx, "checkpoint", ""); err != nil && v.ctx.Err() == nil {
			v.log.Warn("checkpoint failed; will retry", "err", err)
			delay = min(max(delay*2, time.Second), time.Minute)
		} else {
			delay = interval
		}
	}
}

// Sync commits everything written before the call and returns when it is in
// the blob store and reachable from a commit. While the store fails it
// retries with backoff until ctx ends (the last error is in Status).
func (v *Volume) Sync(ctx context.Context) error {
	return v.syncWith(ctx, "sync", "")
}

func (v *Volume) syncWith(ctx context.Context, kind, message string) error {
	if v.opts.ReadOnly {
		return nil
	}
	delay := 100 * time.Millisecond
	for {
		err := v.checkpoint(ctx, kind, message)
		if err == nil || errors.Is(err, ErrClosed) || ctx.Err() != nil {
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("sync: %w (last error: %w)", ctx.Err(), err)
			}
			return err
		}
		v.log.Warn("sync: checkpoint failed; retrying", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("sync: %w (last error: %w)", ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 10*time.Second)
	}
}

// hasWork reports whether anything waits to be committed.
func (v *Volume) hasWork() (bool, error) {
	v.nodesMu.Lock()
	nodes := make([]*node, 0, len(v.nodes))
	for _, n := range v.nodes {
		nodes = append(nodes, n)
	}
	v.nodesMu.Unlock()
	for _, n := range nodes {
		n.mu.RLock()
		d := n.memDirty
		n.mu.RUnlock()
		if d {
			return true, nil
		}
	}
	return v.hasLocalChanges()
}

// checkpoint commits the local changes (see the comment at the top).
func (v *Volume) checkpoint(ctx context.Context, kind, message string) error {
	v.cpMu.Lock()
	defer v.cpMu.Unlock()
	return v.checkpointLocked(ctx, kind, message)
}

// checkpointLocked is checkpoint with v.cpMu held.
func (v *Volume) checkpointLocked(ctx context.Context, kind, message string) (err error) {
	if v.opts.ReadOnly {
		return nil
	}
	// What shared writable mappings of pinned files stored behind the
	// engine becomes dirty first (passthrough.go).
	v.adoptMapped(ctx)
	work, err := v.hasWork()
	if err != nil || !work {
		return err
	}
	start := v.now()
	up := commit.NewUploader(ctx, v.repo, v.opts.UploadConcurrency, v.now())
	defer func() {
		// On failure, wait for uploads still in flight before returning.
		if err != nil {
			_ = up.Wait()
			err = v.keptLocally(err)
		}
		v.stats.Checkpoint(start, v.now(), up, err)
	}()

	// Nothing goes to a store that no longer holds this volume.
	if err := v.repo.CheckVolume(ctx); err != nil {
		return err
	}

	// A: upload dirty blocks.
	files, err := v.dirtyFiles()
	if err != nil {
		return err
	}
	cp := v.capture(up)
	for _, ino := range files {
		if err := v.captureFile(cp, ino, false); err != nil {
			return err
		}
		if err := up.Err(); err != nil {
			return up.Wait()
		}
	}

	// B: freeze and build trees.
	res, err := v.freeze(up)
	if err != nil {
		return err
	}

	// C: finish uploads, commit.
	if err := up.Finish(); err != nil {
		return err
	}
	if err := up.CheckPacks(ctx, v.now()); err != nil {
		return err
	}
	st := v.getState()
	c := snapshot.Commit{
		ID:      snapshot.CommitID{Branch: st.Branch, Seq: st.Seq + 1},
		Parent:  &snapshot.CommitID{Branch: st.Branch, Seq: st.Seq},
		Root:    res.root,
		Links:   res.links,
		Virtual: st.Virtual,
		Time:    v.now().UTC(),
		Kind:    kind,
		Message: message,
		Host:    v.opts.Host,
		Writer:  st.Writer,
	}
	if st.Seq == 0 {
		c.Parent = nil
	}
	err = v.repo.WriteCommit(ctx, c)
	if errors.Is(err, snapshot.ErrCommitExists) {
		c, err = v.diverge(ctx, c)
	}
	if err != nil {
		return err
	}

	// D: record what the commit covers, in Badger before returning: a
	// restart must not find the commit's changes still marked as work.
	if err := v.apply(c, res, up); err != nil {
		return err
	}
	return v.db.Flush()
}

// keptLocally adds to an error matching snapshot.ErrVolumeChanged that
// nothing is lost, and where it is; other errors are returned as they are.
func (v *Volume) keptLocally(err error) error {
	if !errors.Is(err, snapshot.ErrVolumeChanged) {
		return err
	}
	return fmt.Errorf("%w; nothing is lost: the cache (%s) keeps every change and uploads them "+
		"at the next sync or mount once the store holds volume %s again", err, v.opts.CacheDir, v.getState().VolumeID)
}

// dirtyFiles lists the files with dirty blocks.
func (v *Volume) dirtyFiles() ([]uint64, error) { return v.dirty.FileList(), nil }

// capture returns the capture of this checkpoint's blocks into up.
func (v *Volume) capture(up *commit.Uploader) *commit.Capture {
	return &commit.Capture{Up: up, Gens: &v.gens, ChunkSize: v.chunkSize}
}

// captureFile reads the dirty blocks of file ino that c does not hold at
// their current generation, and adds them. With frozen, the caller holds
// v.mu exclusively (phase B).
func (v *Volume) captureFile(c *commit.Capture, ino uint64, frozen bool) error {
	if !frozen {
		n, err := v.acquireNode(ino)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer func() { _ = v.releaseNode(n) }()
		return c.Blocks(n)
	}
	if n := v.lookupNode(ino); n != nil {
		return c.Frozen(n)
	}
	// Frozen and not open: nobody can write it; read its bytes directly.
	var tmp *node
	err := v.db.View(func(txn *meta.Txn) error {
		var err error
		tmp, err = v.loadNode(txn, ino)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !tmp.rec.Inline {
		if _, err := tmp.file(false); err != nil {
			return err
		}
		defer tmp.closeFile()
	}
	return c.Frozen(tmp)
}

// View makes a node the commit.File a checkpoint captures: fn runs with
// n.mu held shared, on n's record and its local bytes; a file with dirty
// blocks has its data file opened first (under n.mu held exclusively).
func (n *node) View(fn func(r *meta.Inode, read func(p []byte, off uint64) error) error) error {
	n.mu.RLock()
	if !n.rec.Inline && n.d.DataFile() == nil && len(n.rec.Dirty) > 0 {
		n.mu.RUnlock()
		n.mu.Lock()
		_, err := n.file(false)
		n.mu.Unlock()
		if err != nil {
			return err
		}
		n.mu.RLock()
	}
	defer n.mu.RUnlock()
	return fn(n.rec, n.readLocal)
}

// freezeResult is what phase B built.
type freezeResult struct {
	seq   uint64 // tree marks up to this sequence are covered
	dirs  map[uint64]commit.Dir
	root  snapshot.RootDir
	links *snapshot.BlobRef
	// linkTable is true when the link table was rebuilt.
	linkTable bool
}

// freeze runs phase B under the namespace lock, in three steps: it
// persists the open files' pending attributes (which may add tree marks),
// captures what the dirty files changed since phase A, and builds the
// trees commit.Builder.Plan chooses (the changed directories and their
// ancestors, deepest first) and the link table into up.
func (v *Volume) freeze(up *commit.Uploader) (*freezeResult, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	res := &freezeResult{dirs: map[uint64]commit.Dir{}}
	if err := v.persistOpenFiles(); err != nil {
		return nil, err
	}
	res.seq = v.seq.Load()

	files, err := v.dirtyFiles()
	if err != nil {
		return nil, err
	}
	cp := v.capture(up)
	for _, ino := range files {
		if err := v.captureFile(cp, ino, true); err != nil {
			return nil, err
		}
	}
	if err := v.buildTrees(v.treeBuilder(up), files, res); err != nil {
		return nil, err
	}
	return res, nil
}

// persistOpenFiles writes every open file's pending attributes to its
// record (this may add tree marks). Caller holds v.mu.
func (v *Volume) persistOpenFiles() error {
	v.nodesMu.Lock()
	nodes := make([]*node, 0, len(v.nodes))
	for _, n := range v.nodes {
		nodes = append(nodes, n)
	}
	v.nodesMu.Unlock()
	for _, n := range nodes {
		n.mu.Lock()
		err := v.persistNode(n)
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// treeBuilder returns the builder of this checkpoint's trees into up,
// which reads open files' records from their nodes (recOf).
func (v *Volume) treeBuilder(up *commit.Uploader) *commit.Builder {
	return &commit.Builder{Up: up, ChunkSize: v.chunkSize, ReadsThrough: v.readsThrough(), Record: v.recOf}
}

// buildTrees encodes with b, in one read of the records, the trees of the
// directories that b.Plan chooses for the marked directories and the dirty
// files, recording each in res.dirs, the root, and the link table if the
// plan says so (else res keeps the state's). Records found inconsistent
// are ErrIO. Caller holds v.mu.
func (v *Volume) buildTrees(b *commit.Builder, files []uint64, res *freezeResult) error {
	err := v.db.View(func(txn *meta.Txn) error {
		p, err := b.Plan(txn, v.dirty.DirMarks(), files)
		if err != nil {
			return err
		}
		if err := b.Trees(txn, p.Order, p.Recs, res.dirs); err != nil {
			return err
		}
		res.root = b.Root(p.Recs[RootIno], res.dirs[RootIno])
		res.linkTable = p.LinkTable
		if !res.linkTable {
			res.links = v.getState().Links
			return nil
		}
		res.links, err = b.LinkTable(txn)
		return err
	})
	return inconsistentErr(err)
}

// inconsistentErr reports cache/commit's ErrInconsistent (records that
// contradict each other) as ErrIO; other errors are returned as they are.
func inconsistentErr(err error) error {
	if errors.Is(err, commit.ErrInconsistent) {
		return fmt.Errorf("%w: %w", err, ErrIO)
	}
	return err
}

// recOf returns the current record of ino: an open file's in-memory one or
// the stored one; false if it has none. Caller holds v.mu, and not
// markMu: an open file's record is read under its n.mu (shared), which
// comes before markMu (commit.Applier reads the rebuilt directories'
// records before it takes markMu).
func (v *Volume) recOf(txn *meta.Txn, ino uint64) (*meta.Inode, bool, error) {
	if n := v.lookupNode(ino); n != nil {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return n.rec.Clone(), true, nil
	}
	r, err := ns.ReadInode(txn, ino)
	if errors.Is(err, ErrNotFound) {
		return nil, false, nil
	}
	return r, err == nil, err
}

// heldFile is a file held for the committer (commit.HeldFile: a
// checkpoint's apply, a reconcile's file brought to its target entry): an
// open file's node, locked until Release, or, for a file not open, a node
// of its record and the present blocks its presence record lists (not its
// inline bytes), which nothing else can find (it is not registered, and
// the caller holds v.mu exclusively, so the file cannot open meanwhile).
type heldFile struct {
	n    *node
	open bool
}

func (h heldFile) Record() *meta.Inode { return h.n.rec.Clone() }
func (h heldFile) Data() *data.File    { return h.n.d }
func (h heldFile) Open() bool          { return h.open }

func (h heldFile) SetRecord(r *meta.Inode, stored bool) {
	if !h.open {
		return
	}
	h.n.rec = r
	if stored {
		h.n.memDirty = false
	}
}

// Refill installs a reconcile's fetched chunks into a pinned open file
// (refillPinned).
func (h heldFile) Refill(chunks map[uint64][]byte) error { return h.n.v.refillPinned(h.n, chunks) }

// Release unlocks an open file's node, or closes the data file a node
// read from the records may have opened.
func (h heldFile) Release() {
	if h.open {
		h.n.mu.Unlock()
		return
	}
	h.n.closeFile()
}

// holdFile holds file ino (commit.Files.Hold): an open file's node, which
// it locks, else a node read from its records; false if it has no record.
// Caller holds v.mu exclusively.
func (v *Volume) holdFile(ino uint64) (heldFile, bool, error) {
	if n := v.lookupNode(ino); n != nil {
		n.mu.Lock()
		return heldFile{n: n, open: true}, true, nil
	}
	var n *node
	err := v.db.View(func(txn *meta.Txn) error {
		r, err := ns.ReadInode(txn, ino)
		if err != nil {
			return err
		}
		present, _, err := data.StoredPresence(meta.FileRecords{Txn: txn}, ino)
		n = &node{v: v, ino: ino, rec: r, d: data.NewFile(v.data, ino, present, nil)}
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return heldFile{}, false, nil
	}
	if err != nil {
		return heldFile{}, false, err
	}
	return heldFile{n: n}, true, nil
}

// diverge saves a commit that lost its number to another writer on a new
// branch (commit.Diverge), and moves this volume there, with its lease.
// Nothing is dropped.
func (v *Volume) diverge(ctx context.Context, c snapshot.Commit) (snapshot.Commit, error) {
	st := v.getState()
	orig := st.Branch
	if st.DivergedFrom != "" {
		orig = st.DivergedFrom
	}
	nc, err := commit.Diverge(ctx, v.repo, c, orig, v.now, v.log)
	if err != nil {
		return c, err
	}
	if old := v.lease; old != nil {
		if l, lerr := v.repo.AcquireLease(ctx, nc.ID.Branch, old.Holder(), v.opts.LeaseTTL, v.now(), nil); lerr == nil {
			v.lease = l
			_ = old.Release(ctx)
		}
	}
	v.stateMu.Lock()
	v.state.Branch = nc.ID.Branch
	v.state.Seq = 0 // apply sets it to the commit's number
	v.state.DivergedFrom = orig
	v.stateMu.Unlock()
	return nc, nil
}

// apply is phase D: it records what commit c covers (commit.Applier),
// under the namespace lock, with the volume's state moved to c.
func (v *Volume) apply(c snapshot.Commit, res *freezeResult, up *commit.Uploader) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	a := &commit.Applier{DB: v.db, Dirty: &v.dirty, Marks: &v.markMu, Files: live{v}, Capture: v.capture(up), Builder: v.treeBuilder(up)}
	return a.Apply(res.dirs, res.linkTable, res.seq, func() func(*meta.Txn) error {
		v.stateMu.Lock()
		v.state.Seq = c.ID.Seq
		v.state.Links = c.Links
		st := v.state
		v.stateMu.Unlock()
		return func(t *meta.Txn) error { return v.saveState(t, st) }
	})
}
