package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"golang.org/x/sync/errgroup"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// A checkpoint turns the local changes into a commit:
//
//	A. without the namespace lock: read every dirty block, encode it into
//	   packs and upload them (in parallel);
//	B. under the namespace lock (a short freeze): persist open files'
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

// blockKey names one block of one file.
type blockKey struct {
	ino uint64
	b   uint64
}

// cpStats records the last checkpoint, for Status.
type cpStats struct {
	last      time.Time
	lastDur   time.Duration
	lastErr   string
	lastPuts  int64
	lastBytes int64
	commits   int64
	leaseErr  string
}

// upBlock is a block captured by a checkpoint.
type upBlock struct {
	gen  uint64
	ref  snapshot.BlobRef
	zero bool // all zeros: stored as a hole
}

// uploader packs blobs and uploads full packs in the background.
type uploader struct {
	v       *Volume
	ctx     context.Context
	g       *errgroup.Group
	started time.Time

	mu     sync.Mutex
	pw     [3]*snapshot.PackWriter // guarded by mu; by blob type: trees and data never share a pack
	blocks map[blockKey]upBlock    // guarded by mu
	packs  []snapshot.PackID       // guarded by mu
	puts   atomic.Int64
	bytes  atomic.Int64
}

func (v *Volume) newUploader(ctx context.Context) *uploader {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(v.opts.UploadConcurrency)
	return &uploader{v: v, ctx: gctx, g: g, started: v.now(), blocks: map[blockKey]upBlock{}}
}

// addBlock encodes one block's bytes and records its reference. An
// all-zero block becomes a hole unless keepZero (a block of a host origin
// must override the host's bytes).
func (u *uploader) addBlock(k blockKey, gen uint64, data []byte, keepZero bool) {
	if !keepZero && isZero(data) {
		u.mu.Lock()
		u.blocks[k] = upBlock{gen: gen, zero: true}
		u.mu.Unlock()
		return
	}
	ref := u.add(snapshot.BlobData, data)
	u.mu.Lock()
	u.blocks[k] = upBlock{gen: gen, ref: ref}
	u.mu.Unlock()
}

// add encodes a blob into the current pack and returns its reference;
// a full pack is uploaded in the background.
func (u *uploader) add(t snapshot.BlobType, raw []byte) snapshot.BlobRef {
	eb := u.v.repo.EncodeBlob(t, raw)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pw[t] == nil {
		u.pw[t] = u.v.repo.NewPackWriter()
	}
	ref := u.pw[t].Add(eb)
	if u.pw[t].Len() >= u.v.repo.Config().PackSize {
		u.flushLocked(t)
	}
	return ref
}

func (u *uploader) flushLocked(t snapshot.BlobType) {
	pw := u.pw[t]
	u.pw[t] = nil
	if pw == nil || pw.Count() == 0 {
		return
	}
	u.packs = append(u.packs, pw.ID())
	u.g.Go(func() error {
		if err := u.v.repo.PutPack(u.ctx, pw); err != nil {
			return err
		}
		u.puts.Add(1)
		u.bytes.Add(int64(pw.Len()))
		return nil
	})
}

// finish uploads the last pack and waits for every upload.
func (u *uploader) finish() error {
	u.mu.Lock()
	u.flushLocked(snapshot.BlobData)
	u.flushLocked(snapshot.BlobTree)
	u.mu.Unlock()
	return u.g.Wait()
}

func (u *uploader) block(k blockKey) (upBlock, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.blocks[k]
	return b, ok
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// gens tracks the write generation of dirty blocks, across node lifetimes.
// A generation is unique volume-wide; a block without one (after a restart)
// has generation 0.
type gens struct {
	mu  sync.Mutex
	m   map[blockKey]uint64 // guarded by mu
	seq atomic.Uint64
}

func (g *gens) bump(k blockKey) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[blockKey]uint64{}
	}
	g.m[k] = g.seq.Add(1)
	g.mu.Unlock()
}

func (g *gens) get(k blockKey) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[k]
}

func (g *gens) forget(k blockKey) {
	g.mu.Lock()
	delete(g.m, k)
	g.mu.Unlock()
}

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
	work, err := v.hasWork()
	if err != nil || !work {
		return err
	}
	start := v.now()
	up := v.newUploader(ctx)
	defer func() {
		// On failure, wait for uploads still in flight before returning.
		if err != nil {
			_ = up.g.Wait()
			err = v.keptLocally(err)
		}
		v.stateMu.Lock()
		v.cp.last, v.cp.lastDur = v.now(), v.now().Sub(start)
		v.cp.lastPuts, v.cp.lastBytes = up.puts.Load(), up.bytes.Load()
		if err != nil {
			v.cp.lastErr = err.Error()
		} else {
			v.cp.lastErr = ""
			v.cp.commits++
		}
		v.stateMu.Unlock()
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
	for _, ino := range files {
		if err := v.captureFile(up, ino, false); err != nil {
			return err
		}
		if err := up.ctx.Err(); err != nil {
			return up.g.Wait()
		}
	}

	// B: freeze and build trees.
	res, err := v.freeze(up)
	if err != nil {
		return err
	}

	// C: finish uploads, commit.
	if err := up.finish(); err != nil {
		return err
	}
	if v.now().Sub(up.started) > snapshot.UploadGrace/2 {
		if err := v.checkPacks(ctx, up.packs); err != nil {
			return err
		}
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

// captureFile reads the dirty blocks of file ino that up does not hold at
// their current generation, and adds them. With frozen, the caller holds
// v.mu exclusively (phase B).
func (v *Volume) captureFile(up *uploader, ino uint64, frozen bool) error {
	var n *node
	if frozen {
		n = v.lookupNode(ino)
	} else {
		var err error
		n, err = v.acquireNode(ino)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		defer func() { _ = v.releaseNode(n) }()
	}
	if n != nil && !frozen {
		// Phase A: block by block, so that the file's writers and
		// closes wait for one block's read at most, never for the
		// encoding of all its dirty blocks (seconds for a large file).
		n.mu.RLock()
		dirty := slices.Clone(n.rec.Dirty)
		n.mu.RUnlock()
		for _, b := range dirty {
			if err := v.captureBlock(up, n, b); err != nil {
				return err
			}
		}
		return nil
	}
	if n != nil {
		n.mu.RLock()
		defer n.mu.RUnlock()
		if !n.rec.Inline && n.d.DataFile() == nil && len(n.rec.Dirty) > 0 {
			n.mu.RUnlock()
			n.mu.Lock()
			_, err := n.file(false)
			n.mu.Unlock()
			n.mu.RLock()
			if err != nil {
				return err
			}
		}
		return v.captureBlocks(up, n.rec, n.readLocal)
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
	return v.captureBlocks(up, tmp.rec, tmp.readLocal)
}

// captureBlock adds block b of open file n to up unless up holds it at its
// current generation, or it is no longer dirty. Its bytes and generation
// are read together under n.mu, and encoded after n.mu is released: a
// block written meanwhile has a new generation, so phase B captures it
// again (and apply does not take the stale copy).
func (v *Volume) captureBlock(up *uploader, n *node, b uint64) error {
	n.mu.RLock()
	if !n.rec.Inline && n.d.DataFile() == nil && n.rec.IsDirty(b) {
		n.mu.RUnlock()
		n.mu.Lock()
		_, err := n.file(false)
		n.mu.Unlock()
		if err != nil {
			return err
		}
		n.mu.RLock()
	}
	r := n.rec
	if r.Nlink == 0 || !r.IsDirty(b) {
		n.mu.RUnlock()
		return nil
	}
	k := blockKey{r.Ino, b}
	gen := v.gens.get(k)
	start := b * v.chunkSize
	if have, ok := up.block(k); (ok && have.gen == gen) || start >= r.Size {
		n.mu.RUnlock()
		return nil
	}
	buf := make([]byte, min(v.chunkSize, r.Size-start))
	err := n.readLocal(buf, start)
	keepZero := r.HasOrigin
	n.mu.RUnlock()
	if err != nil {
		return err
	}
	up.addBlock(k, gen, buf, keepZero)
	return nil
}

func (v *Volume) captureBlocks(up *uploader, r *meta.Inode, read func([]byte, uint64) error) error {
	if r.Nlink == 0 {
		return nil // an orphan: not part of any tree
	}
	for _, b := range r.Dirty {
		k := blockKey{r.Ino, b}
		gen := v.gens.get(k)
		if have, ok := up.block(k); ok && have.gen == gen {
			continue
		}
		start := b * v.chunkSize
		if start >= r.Size {
			continue
		}
		buf := make([]byte, min(v.chunkSize, r.Size-start))
		if err := read(buf, start); err != nil {
			return err
		}
		up.addBlock(k, gen, buf, r.HasOrigin)
	}
	return nil
}

// freezeResult is what phase B built.
type freezeResult struct {
	seq   uint64 // tree marks up to this sequence are covered
	dirs  map[uint64]builtDir
	root  snapshot.RootDir
	links *snapshot.BlobRef
	// linkTable is true when the link table was rebuilt.
	linkTable bool
}

type builtDir struct {
	ref      snapshot.BlobRef
	subFiles uint64
	subBytes uint64
	// mod: the directory differs from its host origin (or has none). An
	// unmodified directory of a host base is stored as its origin alone.
	mod bool
}

// freeze runs phase B under the namespace lock, in four steps: it
// persists the open files' pending attributes (which may add tree marks),
// captures what the dirty files changed since phase A, chooses the
// directories whose trees must be rebuilt (deepest first), and encodes
// those trees and the link table into up.
func (v *Volume) freeze(up *uploader) (*freezeResult, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	res := &freezeResult{dirs: map[uint64]builtDir{}}
	if err := v.persistOpenFiles(); err != nil {
		return nil, err
	}
	res.seq = v.seq.Load()

	files, err := v.dirtyFiles()
	if err != nil {
		return nil, err
	}
	for _, ino := range files {
		if err := v.captureFile(up, ino, true); err != nil {
			return nil, err
		}
	}

	todo, err := v.dirsToRebuild(files)
	if err != nil {
		return nil, err
	}
	if todo[meta.LinkTableDir] {
		res.linkTable = true
		delete(todo, meta.LinkTableDir)
	}
	order, recs, err := v.rebuildOrder(todo)
	if err != nil {
		return nil, err
	}
	if err := v.buildTrees(up, order, recs, res); err != nil {
		return nil, err
	}
	root := recs[RootIno]
	bd := res.dirs[RootIno]
	res.root = snapshot.RootDir{Mode: root.Mode, Uid: root.Uid, Gid: root.Gid, Atime: root.Atime, Mtime: root.Mtime,
		Ctime: root.Ctime, Nlink: root.Nlink, Xattrs: root.Xattrs, Tree: bd.ref, SubFiles: bd.subFiles, SubBytes: bd.subBytes,
		HasOrigin: root.HasOrigin, Modified: bd.mod && v.readsThrough()}
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

// dirsToRebuild returns the directories whose trees a checkpoint must
// rebuild, besides their ancestors: the marked ones, and the parents of the
// files with dirty blocks (meta.LinkTableDir for a file of a hard-link
// group: its names are in the link table). Caller holds v.mu.
func (v *Volume) dirsToRebuild(files []uint64) (map[uint64]bool, error) {
	todo := map[uint64]bool{}
	for dir := range v.dirty.DirMarks() {
		todo[dir] = true
	}
	err := v.db.View(func(txn *meta.Txn) error {
		for _, ino := range files {
			r, err := v.recOf(txn, ino)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			switch {
			case r.Nlink == 0:
			case r.LinkID != 0:
				todo[meta.LinkTableDir] = true
			case r.Parent != 0:
				todo[r.Parent] = true
			}
		}
		return nil
	})
	return todo, err
}

// rebuildOrder returns the directories of todo and all their ancestors,
// deepest first (then by inode number), with their records; the root alone
// when there are none. A directory deleted since its mark is skipped.
// Caller holds v.mu.
func (v *Volume) rebuildOrder(todo map[uint64]bool) ([]uint64, map[uint64]*meta.Inode, error) {
	depth := map[uint64]int{}
	var recs map[uint64]*meta.Inode
	err := v.db.View(func(txn *meta.Txn) error {
		recs = map[uint64]*meta.Inode{}
		var walk func(ino uint64) (int, error)
		walk = func(ino uint64) (int, error) {
			if d, ok := depth[ino]; ok {
				return d, nil
			}
			r, err := readInode(txn, ino)
			if err != nil {
				return 0, err
			}
			recs[ino] = r
			d := 0
			if ino != RootIno {
				if r.Parent == 0 {
					return 0, fmt.Errorf("directory %d has no parent: %w", ino, ErrIO)
				}
				pd, err := walk(r.Parent)
				if err != nil {
					return 0, err
				}
				d = pd + 1
			}
			depth[ino] = d
			return d, nil
		}
		for ino := range todo {
			if _, err := walk(ino); err != nil {
				if errors.Is(err, ErrNotFound) {
					continue // deleted directory with a stale mark
				}
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	order := make([]uint64, 0, len(depth))
	for ino := range depth {
		if recs[ino].Type == snapshot.TypeDir {
			order = append(order, ino)
		}
	}
	if len(order) == 0 {
		order = append(order, RootIno)
		if err := v.db.View(func(txn *meta.Txn) error {
			r, err := readInode(txn, RootIno)
			recs[RootIno] = r
			return err
		}); err != nil {
			return nil, nil, err
		}
	}
	sort.Slice(order, func(i, j int) bool {
		if depth[order[i]] != depth[order[j]] {
			return depth[order[i]] > depth[order[j]]
		}
		return order[i] < order[j]
	})
	return order, recs, nil
}

// buildTrees encodes into up the trees of the directories in order (whose
// children's trees come before them), recording each in res.dirs, and the
// link table if res.linkTable (else res keeps the state's). Caller holds
// v.mu.
func (v *Volume) buildTrees(up *uploader, order []uint64, recs map[uint64]*meta.Inode, res *freezeResult) error {
	return v.db.View(func(txn *meta.Txn) error {
		for _, ino := range order {
			bd, err := v.buildDir(txn, up, recs[ino], res.dirs)
			if err != nil {
				return err
			}
			res.dirs[ino] = bd
		}
		if res.linkTable {
			ref, err := v.buildLinkTable(txn, up)
			if err != nil {
				return err
			}
			res.links = ref
		} else {
			res.links = v.getState().Links
		}
		return nil
	})
}

// recOf returns the current record of ino: an open file's in-memory one or
// the stored one. Caller holds v.mu.
func (v *Volume) recOf(txn *meta.Txn, ino uint64) (*meta.Inode, error) {
	if n := v.lookupNode(ino); n != nil {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return n.rec.Clone(), nil
	}
	return readInode(txn, ino)
}

// heldFile is one file's record and the blocks it holds present, read to
// be changed (by a checkpoint's apply, by a reconcile): an open file's,
// with its node locked until release, or the stored ones (n is nil).
type heldFile struct {
	n       *node           // the open file, locked; nil if not open
	r       *meta.Inode     // a private copy of the record
	present map[uint64]bool // a private copy of the present blocks
}

// holdFile reads file ino's record and present blocks: an open file's from
// its node, which it locks until release, else the stored ones (a missing
// record is ErrNotFound). Caller holds v.mu.
func (v *Volume) holdFile(ino uint64) (*heldFile, error) {
	h := &heldFile{present: map[uint64]bool{}}
	if n := v.lookupNode(ino); n != nil {
		n.mu.Lock()
		h.n, h.r, h.present = n, n.rec.Clone(), n.d.Present()
		return h, nil
	}
	err := v.db.View(func(txn *meta.Txn) error {
		var err error
		if h.r, err = readInode(txn, ino); err != nil {
			return err
		}
		b, ok, err := getValue(txn, meta.Key64(meta.PrefixPresence, ino))
		if ok {
			for _, i := range data.DecodePresence(b) {
				h.present[i] = true
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// release unlocks the open file's node, if h holds one.
func (h *heldFile) release() {
	if h.n != nil {
		h.n.mu.Unlock()
	}
}

// fileEntry returns the tree entry of file record r, with its dirty blocks'
// new chunks from up.
func (v *Volume) fileEntry(r *meta.Inode, name string, up *uploader) (snapshot.Entry, error) {
	e := r.Entry(name)
	if r.Type != snapshot.TypeFile {
		return e, nil
	}
	chunks := slices.Clone(r.Chunks)
	for _, b := range r.Dirty {
		if b*v.chunkSize >= r.Size {
			continue
		}
		ub, ok := up.block(blockKey{r.Ino, b})
		if !ok {
			return e, fmt.Errorf("file %d block %d was not captured: %w", r.Ino, b, ErrIO)
		}
		i, found := slices.BinarySearchFunc(chunks, b, func(c snapshot.Chunk, t uint64) int { return cmp.Compare(c.Index, t) })
		switch {
		case ub.zero && found:
			chunks = slices.Delete(chunks, i, i+1)
		case ub.zero:
		case found:
			chunks[i].Ref = ub.ref
		default:
			chunks = slices.Insert(chunks, i, snapshot.Chunk{Index: b, Ref: ub.ref})
		}
	}
	// Chunks wholly past the end (possible only after a crash) are dropped.
	for len(chunks) > 0 && chunks[len(chunks)-1].Index*v.chunkSize >= r.Size {
		chunks = chunks[:len(chunks)-1]
	}
	e.Chunks = chunks
	return e, nil
}

// buildDir encodes the tree of directory r.
func (v *Volume) buildDir(txn *meta.Txn, up *uploader, r *meta.Inode, built map[uint64]builtDir) (builtDir, error) {
	var entries []snapshot.Entry
	var bd builtDir
	if !r.Loaded {
		// Marked only for its own attributes: its entries are unchanged.
		return builtDir{ref: r.Tree, subFiles: r.SubFiles, subBytes: r.SubBytes, mod: r.Mod || !r.Tree.IsZero()}, nil
	}
	bd.mod = r.Mod || !r.HasOrigin
	prefix := meta.DentryPrefix(r.Ino)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		name := string(it.Item().Key()[len(prefix):])
		var child uint64
		_ = it.Item().Value(func(b []byte) error { child = meta.U64(b); return nil })
		cr, err := v.recOf(txn, child)
		if err != nil {
			return bd, fmt.Errorf("entry %q of directory %d: %w", name, r.Ino, err)
		}
		switch {
		case cr.Type == snapshot.TypeDir:
			e := cr.Entry(name)
			childMod := false
			if b, ok := built[child]; ok {
				e.Tree, e.SubFiles, e.SubBytes = b.ref, b.subFiles, b.subBytes
				childMod = b.mod
			} else {
				e.Tree, e.SubFiles, e.SubBytes = cr.Tree, cr.SubFiles, cr.SubBytes
				childMod = cr.Mod || !cr.Tree.IsZero()
			}
			if e.Tree.IsZero() && !e.HasOrigin {
				return bd, fmt.Errorf("directory %q (%d) has no tree: %w", name, child, ErrIO)
			}
			e.Modified = childMod && v.readsThrough()
			bd.mod = bd.mod || childMod
			bd.subFiles += e.SubFiles
			bd.subBytes += e.SubBytes
			entries = append(entries, e)
		case cr.LinkID != 0:
			entries = append(entries, snapshot.Entry{Name: name, Type: cr.Type, LinkID: cr.LinkID})
			bd.mod = true
			bd.subFiles++
			if cr.Type == snapshot.TypeFile {
				bd.subBytes += cr.Size
			}
		default:
			e, err := v.fileEntry(cr, name, up)
			if err != nil {
				return bd, err
			}
			bd.mod = bd.mod || cr.Mod || !cr.HasOrigin
			entries = append(entries, e)
			bd.subFiles++
			if cr.Type == snapshot.TypeFile {
				bd.subBytes += cr.Size
			}
		}
	}
	if !bd.mod && v.readsThrough() && r.HasOrigin {
		// Nothing differs from the lower's directory: store the origin
		// only (a zero tree); the directory reads through to it again.
		bd.ref = snapshot.BlobRef{}
		return bd, nil
	}
	raw, err := snapshot.EncodeTree(entries)
	if err != nil {
		return bd, fmt.Errorf("directory %d: %w", r.Ino, err)
	}
	if !r.Tree.IsZero() && v.repo.HashOf(raw) == r.Tree.Hash {
		bd.ref = r.Tree // unchanged (a change undone): no new copy
		return bd, nil
	}
	bd.ref = up.add(snapshot.BlobTree, raw)
	return bd, nil
}

// buildLinkTable encodes the link table from the hard-link groups.
func (v *Volume) buildLinkTable(txn *meta.Txn, up *uploader) (*snapshot.BlobRef, error) {
	var entries []snapshot.Entry
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{meta.PrefixLink}, PrefetchValues: true})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		id := meta.U64(it.Item().Key()[1:])
		var ino uint64
		_ = it.Item().Value(func(b []byte) error { ino = meta.U64(b); return nil })
		r, err := v.recOf(txn, ino)
		if err != nil {
			return nil, fmt.Errorf("hard-link group %x: %w", id, err)
		}
		if r.Nlink == 0 {
			continue
		}
		e, err := v.fileEntry(r, snapshot.LinkName(id), up)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, nil
	}
	raw, err := snapshot.EncodeTree(entries)
	if err != nil {
		return nil, fmt.Errorf("link table: %w", err)
	}
	ref := up.add(snapshot.BlobTree, raw)
	return &ref, nil
}

// checkPacks verifies that a slow checkpoint's packs were not collected.
func (v *Volume) checkPacks(ctx context.Context, packs []snapshot.PackID) error {
	for _, p := range packs {
		if _, err := v.repo.Store().Stat(ctx, snapshot.PackKey(p)); err != nil {
			if errors.Is(err, blobstore.ErrNotFound) {
				return fmt.Errorf("pack %s vanished before its commit (checkpoint outlived the gc grace period); retrying: %w", p, err)
			}
			return err
		}
	}
	return nil
}

// diverge saves a commit that lost its number to another writer on a new
// branch, and moves this volume there. Nothing is dropped.
func (v *Volume) diverge(ctx context.Context, c snapshot.Commit) (snapshot.Commit, error) {
	st := v.getState()
	orig := st.Branch
	if st.DivergedFrom != "" {
		orig = st.DivergedFrom
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-conflict-%s", orig, v.now().UTC().Format("20060102-150405"))
		if i > 0 {
			name = fmt.Sprintf("%s-%d", name, i)
		}
		if len(name) > 100 {
			name = name[len(name)-100:]
		}
		nc := c
		nc.ID = snapshot.CommitID{Branch: name, Seq: 1}
		nc.Kind = "diverged"
		nc.Message = fmt.Sprintf("changes of %s that lost a commit race on %s", st.Writer, st.Branch)
		err := v.repo.WriteCommit(ctx, nc)
		if errors.Is(err, snapshot.ErrCommitExists) && i < 20 {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("save diverged changes: %w", err)
		}
		v.log.Warn("another writer committed to this branch; this volume's changes continue on a new branch",
			"branch", st.Branch, "new_branch", name)
		// The new branch reuses the trees and chunks of this volume's old
		// base, which is no longer a branch head: if gc pruned that commit
		// before the new branch appeared, some of them may be gone.
		if c.Parent != nil {
			if _, err := v.repo.ReadCommit(ctx, *c.Parent); errors.Is(err, snapshot.ErrMissing) {
				v.log.Error("the base of the diverged changes was pruned by gc meanwhile; check the new branch with agentfs fsck",
					"base", c.Parent.String(), "new_branch", name)
			}
		}
		old := v.lease
		if v.lease != nil {
			h := v.lease.Holder()
			if l, lerr := v.repo.AcquireLease(ctx, name, h, v.opts.LeaseTTL, v.now(), nil); lerr == nil {
				v.lease = l
				_ = old.Release(ctx)
			}
		}
		v.stateMu.Lock()
		v.state.Branch = name
		v.state.Seq = 0 // apply sets it to the commit's number
		v.state.DivergedFrom = orig
		v.stateMu.Unlock()
		return nc, nil
	}
}

// apply is phase D: it records the chunks and trees commit c covers.
//
// Files first: an open file's blocks are cleared in a transaction of its
// own, under its lock (its writer may be waiting); files not open cannot
// change while v.mu is held and go in one batch. Then the directories,
// under markMu, so that no mark is written between reading and clearing it.
func (v *Volume) apply(c snapshot.Commit, res *freezeResult, up *uploader) error {
	v.mu.Lock()
	defer v.mu.Unlock()

	byIno := map[uint64][]uint64{}
	up.mu.Lock()
	for k := range up.blocks {
		byIno[k.ino] = append(byIno[k.ino], k.b)
	}
	up.mu.Unlock()
	fb := newBatch(v.db)
	fd := &meta.Delta{}
	for ino, blocks := range byIno {
		if err := v.applyFile(fb, fd, ino, blocks, up); err != nil {
			fb.txn.Discard()
			return err
		}
	}
	if err := fb.flush(); err != nil {
		return err
	}
	v.dirty.Apply(fd)

	v.markMu.Lock()
	defer v.markMu.Unlock()
	wb := newBatch(v.db)
	d := &meta.Delta{}
	covered := func(dir uint64) bool {
		seq, ok := v.dirty.MarkSeq(dir)
		return ok && seq <= res.seq
	}
	// The directories' new trees; marks the commit covers are cleared in
	// the same transaction as the tree they describe.
	err := v.db.View(func(txn *meta.Txn) error {
		for ino, bd := range res.dirs {
			r, err := readInode(txn, ino)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			r.Tree, r.SubFiles, r.SubBytes = bd.ref, bd.subFiles, bd.subBytes
			rec := meta.EncodeInode(r)
			done := covered(ino)
			wb.op(func(t *meta.Txn) error {
				if err := t.Set(meta.Key64(meta.PrefixInode, ino), rec); err != nil {
					return err
				}
				if done {
					return meta.ClearMark(t, d, ino)
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		wb.txn.Discard()
		return err
	}
	if res.linkTable && covered(meta.LinkTableDir) {
		wb.op(func(t *meta.Txn) error { return meta.ClearMark(t, d, meta.LinkTableDir) })
	}
	v.stateMu.Lock()
	v.state.Seq = c.ID.Seq
	v.state.Links = c.Links
	st := v.state
	v.stateMu.Unlock()
	wb.op(func(t *meta.Txn) error { return v.saveState(t, st) })
	if err := wb.flush(); err != nil {
		return err
	}
	v.dirty.Apply(d)
	return nil
}

// applyFile marks the captured blocks of one file clean: committed chunks
// replace them, and their local bytes stay as cache. Caller holds v.mu.
func (v *Volume) applyFile(wb *batch, d *meta.Delta, ino uint64, blocks []uint64, up *uploader) error {
	h, err := v.holdFile(ino)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer h.release()
	n, r, present := h.n, h.r, h.present
	changed := false
	var cached int64
	for _, b := range blocks {
		k := blockKey{ino, b}
		ub, _ := up.block(k)
		if !r.IsDirty(b) || v.gens.get(k) != ub.gen || b*v.chunkSize >= r.Size {
			continue
		}
		if ub.zero {
			i, found := slices.BinarySearchFunc(r.Chunks, b, func(c snapshot.Chunk, t uint64) int { return cmp.Compare(c.Index, t) })
			if found {
				r.Chunks = slices.Delete(r.Chunks, i, i+1)
			}
		} else {
			r.SetChunk(b, ub.ref)
			present[b] = true
			cached += int64(min(v.chunkSize, r.Size-b*v.chunkSize))
		}
		r.RemoveDirty(b)
		changed = true
	}
	if !changed {
		return nil
	}
	rec := meta.EncodeInode(r)
	pres := data.EncodePresence(present)
	write := func(t *meta.Txn, d *meta.Delta) error {
		if err := t.Set(meta.Key64(meta.PrefixInode, ino), rec); err != nil {
			return err
		}
		if len(r.Dirty) == 0 {
			if err := meta.SetFileDirty(t, d, ino, false); err != nil {
				return err
			}
		}
		return t.Set(meta.Key64(meta.PrefixPresence, ino), pres)
	}
	if n != nil {
		// Its own transaction, committed before the file's lock is
		// released: a write waiting for the lock sees the clean state.
		if err := v.update(write); err != nil {
			return err
		}
		// Only the chunk map and dirty list changed; memory-only size and
		// time changes made since the freeze stay pending.
		n.rec.Chunks, n.rec.Dirty = r.Chunks, r.Dirty
		n.d.SetPresent(present)
	} else {
		wb.op(func(t *meta.Txn) error { return write(t, d) })
	}
	for _, b := range blocks {
		if !r.IsDirty(b) {
			v.gens.forget(blockKey{ino, b})
		}
	}
	v.blocks.Add(ino, cached)
	return nil
}
