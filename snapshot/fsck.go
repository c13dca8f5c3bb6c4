package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentfs/agentfs/blobstore"
)

// fsck: check that everything reachable from every commit and snapshot
// exists and decodes, and (Full) that every blob's bytes match its hash.
//
//  1. List branches, commits, snapshots and packs; read every commit and
//     snapshot record.
//  2. Walk every root's tree and link table, each distinct tree (by hash)
//     once, concurrently: read and decode every tree (its hash is checked on
//     read) and record every blob location referenced, which trees
//     reference it, each tree's subtrees and whether it names hard links.
//  3. For every referenced pack: it exists, its footer decodes, and every
//     referenced blob is listed in it at its offset with its length and
//     hash. With Full, read each referenced pack whole once and check every
//     referenced data blob against its hash.
//  4. Report paths: walk each root again, descending only into subtrees
//     that hold a bad object (known from steps 2–3 without reading) or a
//     hard link (to check it against the root's link table), and record
//     each bad object's paths and the roots they are reachable from.
//
// It runs while volumes are mounted: commits and snapshots written after
// step 1 are not checked, and a problem whose roots have all disappeared
// by the end (pruned by a concurrent gc) is dropped.
//
// Lock order: fsck.mu only; never held across a store call.

// FsckOptions modify Fsck.
type FsckOptions struct {
	// Full reads every referenced blob and checks its bytes against its
	// hash (every referenced pack is read whole, once).
	Full bool
	// Concurrency bounds the reads in flight; default 16.
	Concurrency int
	// Progress, if set, is called from one goroutine at a time.
	Progress func(Progress)
}

// Affected is one path a problem affects, and the commits and snapshots
// ("main@3", "snapshot base") from which it is reachable.
type Affected struct {
	Path string   `json:"path"`
	From []string `json:"from"`
}

// Problem is one thing fsck found wrong.
type Problem struct {
	// Object names what is wrong: "commit main@3", "snapshot base",
	// "pack <id>", "tree <hash> in pack <id>", "blob <hash> in pack <id>",
	// "link table of main@3".
	Object string `json:"object"`
	// Err says what is wrong; it matches ErrMissing or ErrCorrupt (or is a
	// store error).
	Err error `json:"-"`
	// Message is Err's text.
	Message string `json:"error"`
	// Affected lists the paths the problem makes unreadable, sorted.
	Affected []Affected `json:"affected,omitempty"`

	paths map[string]map[string]bool // path -> roots
}

// FsckReport is what Fsck found.
type FsckReport struct {
	Full      bool `json:"full"`
	Branches  int  `json:"branches"`
	Commits   int  `json:"commits"`
	Snapshots int  `json:"snapshots"`
	Trees     int  `json:"trees"` // distinct trees read
	Blobs     int  `json:"blobs"` // distinct blob locations referenced
	Packs     int  `json:"packs"` // packs referenced
	// PacksUnreferenced exist but nothing checked references them: garbage
	// for gc, or uploads of a live writer not committed yet.
	PacksUnreferenced int           `json:"packs_unreferenced"`
	BytesVerified     int64         `json:"bytes_verified"` // Full: stored bytes whose hash was checked
	Problems          []Problem     `json:"problems"`
	Duration          time.Duration `json:"duration_ns"`
}

// OK reports whether fsck found no problem.
func (r FsckReport) OK() bool { return len(r.Problems) == 0 }

type fsckRoot struct {
	label    string // "main@3" or "snapshot base"
	commit   *CommitID
	snapshot string
	tree     TreeRoot
}

type fnode struct {
	children []Hash
	hasLinks bool
	err      error   // reading or decoding failed
	loc      BlobLoc // where it was read from
	parents  []Hash  // filled after the walk
	linkFree int8    // 0 unknown, 1 yes, -1 no
	dirty    bool    // holds a bad object in its subtree
	isLinks  bool    // a link table
}

type fblob struct {
	ref   BlobRef
	typ   BlobType
	users []Hash // trees that reference it (none for a root's tree or link table)
	bad   *Problem
}

// fsck is one run of Fsck: its settings, what each step leaves for the
// next, and the report it fills in.
type fsck struct {
	r    *Repo
	opts FsckOptions
	prog func(Progress)
	rep  *FsckReport

	roots []*fsckRoot      // step 1: every commit and snapshot read
	packs map[PackID]int64 // step 1: every pack listed, with its size

	mu       sync.Mutex
	trees    map[Hash]*fnode              // guarded by mu
	blobs    map[PackID]map[uint64]*fblob // guarded by mu
	problems []*Problem                   // guarded by mu
	reads    int                          // guarded by mu

	fullSem chan struct{} // bounds the whole packs held by Full checks
}

// fullReads bounds the packs a full fsck holds in memory at once: its
// memory is at most about fullReads × the pack size, plus the walk's.
const fullReads = 4

func (f *fsck) addProblem(object string, err error) *Problem {
	p := &Problem{Object: object, Err: err, Message: err.Error(), paths: map[string]map[string]bool{}}
	f.mu.Lock()
	f.problems = append(f.problems, p)
	f.mu.Unlock()
	return p
}

// Fsck checks the volume; see the comment at the top of fsck.go. Problems
// go into the report; the error is for failures to run the check at all
// (the store is unreachable, ctx ended).
func (r *Repo) Fsck(ctx context.Context, opts FsckOptions) (FsckReport, error) {
	started := time.Now()
	if opts.Concurrency <= 0 {
		opts.Concurrency = 16
	}
	rep := FsckReport{Full: opts.Full}
	f := &fsck{r: r, opts: opts, prog: newProgressFunc(opts.Progress), rep: &rep,
		trees: map[Hash]*fnode{}, blobs: map[PackID]map[uint64]*fblob{}}
	steps := []func(context.Context) error{
		f.listRoots,   // 1
		f.walkTrees,   // 2
		f.checkStore,  // 3
		f.reportPaths, // 4
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return rep, err
		}
	}
	f.collectProblems()
	rep.Duration = time.Since(started)
	return rep, nil
}

// listRoots lists the branches, reads every commit and snapshot record
// into f.roots (commits by branch and number, then snapshots by name), and
// lists the packs (step 1).
func (f *fsck) listRoots(ctx context.Context) error {
	f.prog(Progress{Phase: "list"})
	branches, err := f.r.ListBranches(ctx)
	if err != nil {
		return err
	}
	objs, err := f.r.listCommitObjects(ctx)
	if err != nil {
		return err
	}
	bset := map[string]bool{}
	for _, b := range branches {
		bset[b] = true
	}
	for b := range objs {
		bset[b] = true
	}
	f.rep.Branches = len(bset)
	commits, err := f.commitRoots(ctx, objs)
	if err != nil {
		return err
	}
	snaps, err := f.snapshotRoots(ctx)
	if err != nil {
		return err
	}
	f.rep.Commits, f.rep.Snapshots = len(commits), len(snaps)
	f.roots = append(commits, snaps...)
	listed, err := f.r.listAll(ctx, "packs/")
	if err != nil {
		return fmt.Errorf("list packs: %w", err)
	}
	f.packs = map[PackID]int64{}
	for _, o := range listed {
		if id, ok := packOfKey(o.Key); ok {
			f.packs[id] = o.Size
		}
	}
	return nil
}

// commitRoots reads the records of the listed commits, sorted by branch
// and number. A commit removed since the listing is skipped; a corrupt
// one is a problem.
func (f *fsck) commitRoots(ctx context.Context, objs map[string][]commitObj) ([]*fsckRoot, error) {
	var ids []CommitID
	for b, cs := range objs {
		for _, c := range cs {
			ids = append(ids, CommitID{b, c.seq})
		}
	}
	slices.SortFunc(ids, func(a, b CommitID) int {
		if c := strings.Compare(a.Branch, b.Branch); c != 0 {
			return c
		}
		return cmpU64(a.Seq, b.Seq)
	})
	return readRoots(ctx, len(ids), func(ctx context.Context, i int) (*fsckRoot, error) {
		id := ids[i]
		c, err := f.r.ReadCommit(ctx, id)
		switch {
		case errors.Is(err, ErrMissing):
			return nil, nil // removed since the listing
		case errors.Is(err, ErrCorrupt):
			f.addProblem("commit "+id.String(), err)
			return nil, nil
		case err != nil:
			return nil, err
		}
		cid := c.ID
		return &fsckRoot{label: id.String(), commit: &cid, tree: CommitTree(c)}, nil
	})
}

// snapshotRoots reads the records of the listed snapshots, in listing
// order. A snapshot removed since the listing is skipped; a corrupt one
// or one with a bad name is a problem.
func (f *fsck) snapshotRoots(ctx context.Context) ([]*fsckRoot, error) {
	names, err := f.r.snapshotNames(ctx)
	if err != nil {
		return nil, err
	}
	return readRoots(ctx, len(names), func(ctx context.Context, i int) (*fsckRoot, error) {
		n := names[i]
		s, err := f.r.getListedSnapshot(ctx, n)
		switch {
		case errors.Is(err, ErrNoSnapshot):
			return nil, nil
		case errors.Is(err, ErrCorrupt), errors.Is(err, ErrBadName):
			f.addProblem("snapshot "+n, err)
			return nil, nil
		case err != nil:
			return nil, err
		}
		return &fsckRoot{label: "snapshot " + n, snapshot: n, tree: s.Tree()}, nil
	})
}

// readRoots calls read for the indexes 0..n-1, several at once, and
// returns the roots it gave (nil ones left out) in index order.
func readRoots(ctx context.Context, n int, read func(ctx context.Context, i int) (*fsckRoot, error)) ([]*fsckRoot, error) {
	out := make([]*fsckRoot, n)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	err := forEach(ctx, rootsInFlight*4, idx, func(ctx context.Context, i int) (err error) {
		out[i], err = read(ctx, i)
		return err
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(out, func(rt *fsckRoot) bool { return rt == nil }), nil
}

// walkTrees walks every root's tree and link table (step 2) and counts
// what the walk found.
func (f *fsck) walkTrees(ctx context.Context) error {
	var walked atomic.Int64
	err := forEach(ctx, rootsInFlight, f.roots, func(ctx context.Context, rt *fsckRoot) error {
		if err := f.walkRoot(ctx, rt); err != nil {
			return err
		}
		f.mu.Lock()
		reads := f.reads
		f.mu.Unlock()
		f.prog(Progress{Phase: "trees", Done: walked.Add(1), Total: int64(len(f.roots)), Items: int64(reads)})
		return nil
	})
	if err != nil {
		return err
	}
	f.rep.Trees = f.reads
	for _, m := range f.blobs {
		f.rep.Blobs += len(m)
	}
	f.rep.Packs = len(f.blobs)
	for id := range f.packs {
		if _, ok := f.blobs[id]; !ok {
			f.rep.PacksUnreferenced++
		}
	}
	return nil
}

// checkStore checks every referenced pack (step 3), then makes a problem
// of each tree that failed to read, unless its pack's problem already
// covers it.
func (f *fsck) checkStore(ctx context.Context) error {
	verified, err := f.checkPacks(ctx, f.packs)
	if err != nil {
		return err
	}
	f.rep.BytesVerified = verified
	for h, n := range f.trees {
		if n.err == nil {
			continue
		}
		b := f.blobs[n.loc.Pack][n.loc.Offset]
		if b != nil && b.bad != nil {
			continue
		}
		what := "tree"
		if n.isLinks {
			what = "link table"
		}
		p := f.addProblem(fmt.Sprintf("%s %s in pack %s", what, h, n.loc.Pack), n.err)
		if b != nil {
			b.bad = p
		}
	}
	return nil
}

// reportPaths records each problem's paths and the roots they are
// reachable from (step 4), then drops the problems whose roots have all
// disappeared.
func (f *fsck) reportPaths(ctx context.Context) error {
	f.computeDirty()
	memo := map[[2]Hash]bool{}
	for i, rt := range f.roots {
		if err := f.reportRoot(ctx, rt, memo); err != nil {
			return err
		}
		f.prog(Progress{Phase: "paths", Done: int64(i + 1), Total: int64(len(f.roots))})
	}
	return f.dropVanished(ctx, f.roots)
}

// collectProblems puts the problems into the report, sorted by object,
// each with its affected paths sorted.
func (f *fsck) collectProblems() {
	for _, p := range f.problems {
		for path, from := range p.paths {
			a := Affected{Path: path}
			for l := range from {
				a.From = append(a.From, l)
			}
			slices.Sort(a.From)
			p.Affected = append(p.Affected, a)
		}
		slices.SortFunc(p.Affected, func(a, b Affected) int { return strings.Compare(a.Path, b.Path) })
		f.rep.Problems = append(f.rep.Problems, *p)
	}
	slices.SortFunc(f.rep.Problems, func(a, b Problem) int { return strings.Compare(a.Object, b.Object) })
}

// addBlob records a reference to ref of type t from tree user (zero: a
// root).
func (f *fsck) addBlob(ref BlobRef, t BlobType, user Hash) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.blobs[ref.Pack]
	if m == nil {
		m = map[uint64]*fblob{}
		f.blobs[ref.Pack] = m
	}
	b := m[ref.Offset]
	if b == nil {
		b = &fblob{ref: ref, typ: t}
		m[ref.Offset] = b
	}
	if !user.IsZero() && !slices.Contains(b.users, user) {
		b.users = append(b.users, user)
	}
}

func (f *fsck) walkRoot(ctx context.Context, rt *fsckRoot) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.opts.Concurrency)
	f.addBlob(rt.tree.Root.Tree, BlobTree, Hash{})
	g.Go(func() error { return f.walkTree(gctx, g, rt.tree.Root.Tree, false) })
	if rt.tree.Links != nil {
		l := *rt.tree.Links
		f.addBlob(l, BlobTree, Hash{})
		g.Go(func() error { return f.walkTree(gctx, g, l, true) })
	}
	return g.Wait()
}

// walkTree reads one tree (once per hash) and its subtrees. Missing and
// corrupt trees are recorded, not returned; store failures are returned.
func (f *fsck) walkTree(ctx context.Context, g *errgroup.Group, ref BlobRef, isLinks bool) error {
	f.mu.Lock()
	if _, ok := f.trees[ref.Hash]; ok {
		f.mu.Unlock()
		return nil
	}
	n := &fnode{loc: LocOf(ref), isLinks: isLinks}
	f.trees[ref.Hash] = n
	f.mu.Unlock()

	var entries []Entry
	raw, err := f.r.ReadBlob(ctx, ref)
	if err == nil {
		if isLinks {
			var lt LinkTable
			if lt, err = DecodeLinkTable(raw); err == nil {
				for _, e := range lt {
					entries = append(entries, e)
				}
			}
		} else {
			entries, err = DecodeTree(raw)
		}
	}
	f.mu.Lock()
	f.reads++
	reads := f.reads
	f.mu.Unlock()
	if reads%256 == 0 {
		f.prog(Progress{Phase: "trees", Items: int64(reads)})
	}
	if err != nil {
		if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCorrupt) {
			return err
		}
		f.mu.Lock()
		n.err = err
		f.mu.Unlock()
		return nil
	}
	var children []Hash
	hasLinks := false
	for i := range entries {
		e := &entries[i]
		if e.LinkID != 0 {
			hasLinks = true
		}
		switch e.Type {
		case TypeFile:
			for _, c := range e.Chunks {
				f.addBlob(c.Ref, BlobData, ref.Hash)
			}
		case TypeDir:
			if isLinks {
				continue
			}
			f.addBlob(e.Tree, BlobTree, ref.Hash)
			children = append(children, e.Tree.Hash)
			sub := e.Tree
			if !g.TryGo(func() error { return f.walkTree(ctx, g, sub, false) }) {
				if err := f.walkTree(ctx, g, sub, false); err != nil {
					return err
				}
			}
		}
	}
	f.mu.Lock()
	n.children, n.hasLinks = children, hasLinks
	f.mu.Unlock()
	return nil
}

// checkPacks runs step 3 and returns the bytes verified (Full).
func (f *fsck) checkPacks(ctx context.Context, listed map[PackID]int64) (int64, error) {
	ids := make([]PackID, 0, len(f.blobs))
	for id := range f.blobs {
		ids = append(ids, id)
	}
	var verified, done int64
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.opts.Concurrency)
	// Whole packs (Full) in memory at once: at most fullReads.
	f.fullSem = make(chan struct{}, fullReads)
	for _, id := range ids {
		g.Go(func() error {
			v, err := f.checkPack(gctx, id, listed)
			mu.Lock()
			verified += v
			done++
			f.prog(Progress{Phase: "packs", Done: done, Total: int64(len(ids)), Items: verified})
			mu.Unlock()
			return err
		})
	}
	return verified, g.Wait()
}

func (f *fsck) checkPack(ctx context.Context, id PackID, listed map[PackID]int64) (int64, error) {
	f.mu.Lock()
	refs := make([]*fblob, 0, len(f.blobs[id]))
	for _, b := range f.blobs[id] {
		refs = append(refs, b)
	}
	f.mu.Unlock()
	packProblem := func(err error) {
		p := f.addProblem("pack "+id.String(), err)
		f.mu.Lock()
		for _, b := range refs {
			b.bad = p
		}
		f.mu.Unlock()
	}
	entries, err := f.r.ReadPackIndex(ctx, id)
	if err != nil {
		if errors.Is(err, ErrMissing) || errors.Is(err, ErrCorrupt) {
			packProblem(err)
			return 0, nil
		}
		return 0, err
	}
	byOff := make(map[uint64]PackEntry, len(entries))
	for _, e := range entries {
		byOff[e.Offset] = e
	}
	blobProblem := func(b *fblob, err error) {
		what := "blob"
		if b.typ == BlobTree {
			what = "tree"
		}
		p := f.addProblem(fmt.Sprintf("%s %s in pack %s at offset %d", what, b.ref.Hash, id, b.ref.Offset), err)
		f.mu.Lock()
		b.bad = p
		f.mu.Unlock()
	}
	var toVerify []*fblob
	for _, b := range refs {
		e, ok := byOff[b.ref.Offset]
		switch {
		case !ok:
			blobProblem(b, fmt.Errorf("pack %s has no blob at offset %d: %w", id, b.ref.Offset, ErrMissing))
		case e.Hash != b.ref.Hash || e.Length != b.ref.Length || e.RawLen != b.ref.RawLen || e.Type != b.typ:
			blobProblem(b, fmt.Errorf("pack %s lists %s blob %s (%d/%d bytes) at offset %d, the reference wants %s (%d/%d bytes): %w",
				id, typeName(e.Type), e.Hash, e.Length, e.RawLen, e.Offset, b.ref.Hash, b.ref.Length, b.ref.RawLen, ErrCorrupt))
		case f.opts.Full && b.typ == BlobData:
			toVerify = append(toVerify, b)
		}
	}
	if len(toVerify) == 0 {
		return 0, nil
	}
	select {
	case f.fullSem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	defer func() { <-f.fullSem }()
	data, err := f.r.store.Get(ctx, PackKey(id))
	if errors.Is(err, blobstore.ErrNotFound) {
		packProblem(fmt.Errorf("pack %s: %w", id, ErrMissing))
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read pack %s: %w", id, err)
	}
	var verified int64
	for _, b := range toVerify {
		end := b.ref.Offset + uint64(b.ref.Length)
		if end > uint64(len(data)) {
			blobProblem(b, fmt.Errorf("pack %s: blob at %d runs past the end: %w", id, b.ref.Offset, ErrCorrupt))
			continue
		}
		if _, err := f.r.DecodeStored(b.ref, data[b.ref.Offset:end]); err != nil {
			blobProblem(b, err)
			continue
		}
		verified += int64(b.ref.Length)
	}
	return verified, nil
}

func typeName(t BlobType) string {
	switch t {
	case BlobData:
		return "data"
	case BlobTree:
		return "tree"
	}
	return fmt.Sprintf("type-%d", t)
}

// computeDirty marks every tree whose subtree holds a bad object, and
// computes which trees are free of hard links.
func (f *fsck) computeDirty() {
	for h, n := range f.trees {
		for _, c := range n.children {
			if cn := f.trees[c]; cn != nil {
				cn.parents = append(cn.parents, h)
			}
		}
	}
	var stack []Hash
	mark := func(h Hash) {
		if n := f.trees[h]; n != nil && !n.dirty {
			n.dirty = true
			stack = append(stack, h)
		}
	}
	for h, n := range f.trees {
		if n.err != nil {
			mark(h)
		}
	}
	for _, m := range f.blobs {
		for _, b := range m {
			if b.bad == nil {
				continue
			}
			for _, u := range b.users {
				mark(u)
			}
			if b.typ == BlobTree {
				mark(b.ref.Hash)
			}
		}
	}
	for len(stack) > 0 {
		h := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range f.trees[h].parents {
			mark(p)
		}
	}
}

// linkFree reports whether no tree under h (included) names a hard link.
// Trees that could not be read count as free (they are reported anyway).
func (f *fsck) linkFree(h Hash) bool {
	n := f.trees[h]
	if n == nil || n.err != nil {
		return true
	}
	if n.linkFree != 0 {
		return n.linkFree > 0
	}
	free := !n.hasLinks
	for _, c := range n.children {
		if !free {
			break
		}
		free = f.linkFree(c)
	}
	n.linkFree = map[bool]int8{true: 1, false: -1}[free]
	return free
}

func (f *fsck) bad(ref BlobRef) *Problem {
	if b := f.blobs[ref.Pack][ref.Offset]; b != nil {
		return b.bad
	}
	return nil
}

func (p *Problem) affect(path, root string) {
	m := p.paths[path]
	if m == nil {
		m = map[string]bool{}
		p.paths[path] = m
	}
	m[root] = true
}

// reportRoot runs step 4 for one root.
func (f *fsck) reportRoot(ctx context.Context, rt *fsckRoot, memo map[[2]Hash]bool) error {
	t := rt.tree.Root.Tree
	if p := f.bad(t); p != nil {
		p.affect(".", rt.label)
		return nil
	}
	var lt LinkTable
	var ltProblem *Problem
	var ltHash Hash
	if rt.tree.Links != nil {
		ltHash = rt.tree.Links.Hash
		if p := f.bad(*rt.tree.Links); p != nil {
			ltProblem = p
		} else {
			var err error
			lt, err = f.r.ReadLinkTable(ctx, rt.tree.Links)
			if err != nil {
				if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCorrupt) {
					return err
				}
				ltProblem = f.addProblem("link table of "+rt.label, err)
			}
		}
	}
	rw := &reportWalk{f: f, rt: rt, lt: lt, ltProblem: ltProblem, ltHash: ltHash, memo: memo}
	if n := f.trees[t.Hash]; n == nil || !n.dirty && f.linkFree(t.Hash) {
		return nil
	}
	_, err := rw.walk(ctx, t, "")
	return err
}

type reportWalk struct {
	f         *fsck
	rt        *fsckRoot
	lt        LinkTable
	ltProblem *Problem
	ltHash    Hash
	memo      map[[2]Hash]bool // (tree, link table) known clean
	missing   *Problem         // hard links the link table lacks
}

// walk reports the problems under tree t at dir; it returns whether it
// found any.
func (w *reportWalk) walk(ctx context.Context, t BlobRef, dir string) (bool, error) {
	key := [2]Hash{t.Hash, w.ltHash}
	if w.memo[key] {
		return false, nil
	}
	if n := w.f.trees[t.Hash]; n != nil && n.err != nil {
		if p := w.f.bad(t); p != nil {
			p.affect(displayPath(dir), w.rt.label)
		}
		return true, nil
	}
	entries, err := w.f.r.ReadTree(ctx, t)
	if err != nil {
		if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCorrupt) {
			return false, err
		}
		w.f.addProblem(fmt.Sprintf("tree %s in pack %s", t.Hash, t.Pack), err).affect(displayPath(dir), w.rt.label)
		return true, nil
	}
	found := false
	for _, e := range entries {
		p := joinPath(dir, e.Name)
		if e.LinkID != 0 {
			switch {
			case w.ltProblem != nil:
				w.ltProblem.affect(p, w.rt.label)
				found = true
			case w.lt == nil:
				w.missingLink(p, e.LinkID, "the commit has no link table")
				found = true
			default:
				le, ok := w.lt[e.LinkID]
				if !ok {
					w.missingLink(p, e.LinkID, "the link table has no entry for it")
					found = true
					continue
				}
				e = le // its chunks are checked below
			}
		}
		switch e.Type {
		case TypeFile:
			for _, c := range e.Chunks {
				if bp := w.f.bad(c.Ref); bp != nil {
					bp.affect(p, w.rt.label)
					found = true
				}
			}
		case TypeDir:
			if bp := w.f.bad(e.Tree); bp != nil {
				bp.affect(p, w.rt.label)
				found = true
				continue
			}
			n := w.f.trees[e.Tree.Hash]
			if n == nil || !n.dirty && w.f.linkFree(e.Tree.Hash) {
				continue
			}
			sub, err := w.walk(ctx, e.Tree, p)
			if err != nil {
				return found, err
			}
			found = found || sub
		}
	}
	if !found {
		w.memo[key] = true
	}
	return found, nil
}

func (w *reportWalk) missingLink(path string, id uint64, why string) {
	if w.missing == nil {
		w.missing = w.f.addProblem("link table of "+w.rt.label,
			fmt.Errorf("hard links without a file: %s: %w", why, ErrCorrupt))
	}
	w.missing.affect(path+" (link "+LinkName(id)+")", w.rt.label)
}

// dropVanished removes the roots that no longer exist from the problems'
// paths (a concurrent gc pruned them), and the problems left without any
// path that had some.
func (f *fsck) dropVanished(ctx context.Context, roots []*fsckRoot) error {
	used := map[string]bool{}
	for _, p := range f.problems {
		for _, from := range p.paths {
			for l := range from {
				used[l] = true
			}
		}
	}
	gone := map[string]bool{}
	for _, rt := range roots {
		if !used[rt.label] {
			continue
		}
		var err error
		if rt.commit != nil {
			_, err = f.r.store.Stat(ctx, CommitKey(*rt.commit))
		} else {
			_, err = f.r.store.Stat(ctx, SnapshotKey(rt.snapshot))
		}
		if errors.Is(err, blobstore.ErrNotFound) {
			gone[rt.label] = true
		} else if err != nil {
			return err
		}
	}
	if len(gone) == 0 {
		return nil
	}
	kept := f.problems[:0]
	for _, p := range f.problems {
		had := len(p.paths) > 0
		for path, from := range p.paths {
			for l := range from {
				if gone[l] {
					delete(from, l)
				}
			}
			if len(from) == 0 {
				delete(p.paths, path)
			}
		}
		if had && len(p.paths) == 0 {
			continue
		}
		kept = append(kept, p)
	}
	f.problems = kept
	return nil
}
