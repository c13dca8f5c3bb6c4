package snapshot

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Tree diff: what changed between two trees, skipping subtrees whose tree
// hashes are equal.

// ChangeOp says how a path changed.
type ChangeOp byte

// Change operations.
const (
	// Added: the path exists only in the second tree.
	Added ChangeOp = 'A'
	// Modified: the path exists in both trees with different content or
	// attributes (Change.What says which).
	Modified ChangeOp = 'M'
	// Deleted: the path exists only in the first tree.
	Deleted ChangeOp = 'D'
)

// String returns "added", "modified" or "deleted".
func (o ChangeOp) String() string {
	switch o {
	case Added:
		return "added"
	case Modified:
		return "modified"
	case Deleted:
		return "deleted"
	}
	return fmt.Sprintf("op(%d)", byte(o))
}

// ChangeFlags say what differs in a Modified entry.
type ChangeFlags uint16

// What a modification changed.
const (
	ChangedContent ChangeFlags = 1 << iota // a file's bytes (or size)
	ChangedType                            // file <-> directory <-> symlink <-> device ...
	ChangedMode                            // permission bits
	ChangedOwner                           // uid or gid
	ChangedXattrs                          // extended attributes
	ChangedTarget                          // a symlink's target
	ChangedRdev                            // a device's number
)

var flagNames = []string{"content", "type", "mode", "owner", "xattrs", "target", "rdev"}

// String lists the flags, comma-separated ("content,mode").
func (f ChangeFlags) String() string {
	var parts []string
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, ",")
}

// Change is one difference between two trees. Entries are resolved through
// their tree's link table (a hard link's attributes and chunks are the
// file's). Old is nil for Added, New for Deleted.
type Change struct {
	Op   ChangeOp
	Path string // slash-separated, relative to the root; "." is the root
	Old  *Entry
	New  *Entry
	What ChangeFlags // Modified only
}

// Entry returns the newest side of the change (New, or Old for Deleted).
func (c Change) Entry() *Entry {
	if c.New != nil {
		return c.New
	}
	return c.Old
}

// Sizes returns the size before and after (0 for a missing side).
func (c Change) Sizes() (before, after uint64) {
	if c.Old != nil {
		before = c.Old.Size
	}
	if c.New != nil {
		after = c.New.Size
	}
	return before, after
}

// Diff calls fn for every difference from tree a to tree b, in path order
// (a directory before its entries). Added and deleted directories are
// reported with everything beneath them. A path that changes between a
// directory and something else is one modification (ChangedType), followed
// by what was below the old directory, deleted, or what is below the new
// one, added. Modifications of
// content, type, mode, owner, xattrs, symlink target and device number are
// reported; times and link counts are not. Subtrees with equal tree hashes
// are skipped without being read, unless the link tables differ for a
// hard-link group (then such subtrees are scanned for names of the changed
// groups). Memory is bounded by the depth of the trees times the size of
// their directories, plus both link tables. An error from fn stops Diff and
// is returned.
func (r *Repo) Diff(ctx context.Context, a, b TreeRoot, fn func(Change) error) error {
	pctx, cancel := context.WithCancel(ctx)
	pf := &prefetcher{r: r, ctx: pctx, sem: make(chan struct{}, prefetchReads),
		m: map[Hash]*treeRead{}, started: map[Hash]bool{}, budget: prefetchBudget}
	defer func() {
		cancel()
		pf.wg.Wait()
	}()
	d := &differ{r: r, fn: fn, pf: pf}
	var err error
	if d.lta, err = r.ReadLinkTable(ctx, a.Links); err != nil {
		return err
	}
	if d.ltb, err = r.ReadLinkTable(ctx, b.Links); err != nil {
		return err
	}
	if a.Links == nil || b.Links == nil || a.Links.Hash != b.Links.Hash {
		d.changedLinks = map[uint64]bool{}
		for id, ea := range d.lta {
			if eb, ok := d.ltb[id]; !ok || compareEntries(&ea, &eb) != 0 {
				d.changedLinks[id] = true
			}
		}
		for id := range d.ltb {
			if _, ok := d.lta[id]; !ok {
				d.changedLinks[id] = true
			}
		}
	}
	ra, rb := RootEntry(a), RootEntry(b)
	if f := compareEntries(&ra, &rb); f != 0 {
		if err := fn(Change{Op: Modified, Path: ".", Old: &ra, New: &rb, What: f}); err != nil {
			return err
		}
	}
	return d.dirs(ctx, a.Root.Tree, b.Root.Tree, "")
}

type differ struct {
	r            *Repo
	fn           func(Change) error
	lta, ltb     LinkTable
	changedLinks map[uint64]bool // hard-link groups whose file differs
	pf           *prefetcher
}

// prefetcher reads ahead the trees a diff will need: when a pair of
// directories differs, the pairs of their subdirectories that differ are
// read too, recursively, so that a diff costs about one store round trip
// per level of the tree rather than one per changed directory. At most
// prefetchBudget trees are held read but not yet used; the rest are read
// when needed.
//
// Lock order: prefetcher.mu only, never held across a store call.
type prefetcher struct {
	r   *Repo
	ctx context.Context // cancelled when the diff returns
	sem chan struct{}   // bounds the reads in flight

	wg sync.WaitGroup // the read-ahead goroutines; Diff waits for them

	mu      sync.Mutex
	m       map[Hash]*treeRead // guarded by mu: read ahead, not yet used
	started map[Hash]bool      // guarded by mu: every tree ever read ahead
	budget  int                // guarded by mu
}

type treeRead struct {
	done    chan struct{}
	entries []Entry
	err     error
}

const (
	prefetchBudget = 256
	prefetchReads  = 16
)

// start begins reading ref unless it is being read or the budget is spent.
func (p *prefetcher) start(ref BlobRef) *treeRead {
	p.mu.Lock()
	if tr, ok := p.m[ref.Hash]; ok || p.started[ref.Hash] || p.budget == 0 {
		p.mu.Unlock()
		return tr
	}
	tr := &treeRead{done: make(chan struct{})}
	p.m[ref.Hash] = tr
	p.started[ref.Hash] = true
	p.budget--
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(tr.done)
		select {
		case p.sem <- struct{}{}:
		case <-p.ctx.Done():
			tr.err = p.ctx.Err()
			return
		}
		tr.entries, tr.err = p.r.ReadTree(p.ctx, ref)
		<-p.sem
	}()
	return tr
}

// startPair reads a differing pair of directories and, once both are read,
// the differing pairs of their subdirectories.
func (p *prefetcher) startPair(a, b BlobRef) {
	ta, tb := p.start(a), p.start(b)
	if ta == nil || tb == nil {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for _, tr := range []*treeRead{ta, tb} {
			select {
			case <-tr.done:
			case <-p.ctx.Done():
				return
			}
		}
		if ta.err != nil || tb.err != nil {
			return
		}
		i, j := 0, 0
		for i < len(ta.entries) && j < len(tb.entries) {
			ea, eb := &ta.entries[i], &tb.entries[j]
			switch {
			case ea.Name < eb.Name:
				i++
			case ea.Name > eb.Name:
				j++
			default:
				if ea.Type == TypeDir && eb.Type == TypeDir && ea.Tree.Hash != eb.Tree.Hash {
					p.startPair(ea.Tree, eb.Tree)
				}
				i++
				j++
			}
		}
	}()
}

// get returns the entries of ref, prefetched or read now.
func (p *prefetcher) get(ctx context.Context, ref BlobRef) ([]Entry, error) {
	p.mu.Lock()
	tr := p.m[ref.Hash]
	if tr != nil {
		delete(p.m, ref.Hash)
		p.budget++
	}
	p.mu.Unlock()
	if tr == nil {
		return p.r.ReadTree(ctx, ref)
	}
	select {
	case <-tr.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if tr.err != nil {
		// A prefetch cancelled or failed: read again, reporting this
		// read's own error.
		return p.r.ReadTree(ctx, ref)
	}
	return tr.entries, nil
}

func (d *differ) dirs(ctx context.Context, ta, tb BlobRef, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ta.Hash == tb.Hash {
		if len(d.changedLinks) == 0 {
			return nil
		}
		return d.scanLinks(ctx, ta, dir)
	}
	d.pf.startPair(ta, tb)
	ea, errA := d.pf.get(ctx, ta)
	eb, errB := d.pf.get(ctx, tb)
	if errA != nil {
		return fmt.Errorf("%s (old): %w", displayPath(dir), errA)
	}
	if errB != nil {
		return fmt.Errorf("%s (new): %w", displayPath(dir), errB)
	}
	i, j := 0, 0
	for i < len(ea) || j < len(eb) {
		switch {
		case j == len(eb) || i < len(ea) && ea[i].Name < eb[j].Name:
			if err := d.subtree(ctx, Deleted, d.lta, ea[i], dir); err != nil {
				return err
			}
			i++
		case i == len(ea) || ea[i].Name > eb[j].Name:
			if err := d.subtree(ctx, Added, d.ltb, eb[j], dir); err != nil {
				return err
			}
			j++
		default:
			if err := d.pair(ctx, ea[i], eb[j], dir); err != nil {
				return err
			}
			i++
			j++
		}
	}
	return nil
}

// pair compares two entries of the same name.
func (d *differ) pair(ctx context.Context, a, b Entry, dir string) error {
	p := joinPath(dir, a.Name)
	ra, err := d.lta.Resolve(a)
	if err != nil {
		return fmt.Errorf("%s (old): %w", p, err)
	}
	rb, err := d.ltb.Resolve(b)
	if err != nil {
		return fmt.Errorf("%s (new): %w", p, err)
	}
	aDir, bDir := ra.Type == TypeDir, rb.Type == TypeDir
	switch {
	case aDir && bDir:
		if f := compareEntries(&ra, &rb); f != 0 {
			if err := d.fn(Change{Op: Modified, Path: p, Old: &ra, New: &rb, What: f}); err != nil {
				return err
			}
		}
		return d.dirs(ctx, ra.Tree, rb.Tree, p)
	case aDir:
		// A directory replaced by something else: one modification, then
		// what was below it, deleted.
		if err := d.fn(Change{Op: Modified, Path: p, Old: &ra, New: &rb, What: compareEntries(&ra, &rb)}); err != nil {
			return err
		}
		return d.below(ctx, Deleted, d.lta, ra, p)
	case bDir:
		if err := d.fn(Change{Op: Modified, Path: p, Old: &ra, New: &rb, What: compareEntries(&ra, &rb)}); err != nil {
			return err
		}
		return d.below(ctx, Added, d.ltb, rb, p)
	}
	if f := compareEntries(&ra, &rb); f != 0 {
		return d.fn(Change{Op: Modified, Path: p, Old: &ra, New: &rb, What: f})
	}
	return nil
}

// subtree reports e (an entry of dir) and, for a directory, everything
// beneath it, as op.
func (d *differ) subtree(ctx context.Context, op ChangeOp, lt LinkTable, e Entry, dir string) error {
	p := joinPath(dir, e.Name)
	re, err := lt.Resolve(e)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	c := Change{Op: op, Path: p}
	if op == Added {
		c.New = &re
	} else {
		c.Old = &re
	}
	if err := d.fn(c); err != nil {
		return err
	}
	return d.below(ctx, op, lt, re, p)
}

// below reports everything beneath the resolved entry re at path p (none
// unless it is a directory), as op.
func (d *differ) below(ctx context.Context, op ChangeOp, lt LinkTable, re Entry, p string) error {
	if re.Type != TypeDir {
		return nil
	}
	entries, err := d.pf.get(ctx, re.Tree)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	for _, child := range entries {
		if child.Type == TypeDir {
			d.pf.start(child.Tree)
		}
	}
	for _, child := range entries {
		if err := d.subtree(ctx, op, lt, child, p); err != nil {
			return err
		}
	}
	return nil
}

// scanLinks looks, in a subtree both sides share, for names of hard-link
// groups whose file changed.
func (d *differ) scanLinks(ctx context.Context, t BlobRef, dir string) error {
	entries, err := d.r.ReadTree(ctx, t)
	if err != nil {
		return fmt.Errorf("%s: %w", displayPath(dir), err)
	}
	for _, e := range entries {
		switch {
		case e.Type == TypeDir:
			if err := d.scanLinks(ctx, e.Tree, joinPath(dir, e.Name)); err != nil {
				return err
			}
		case e.LinkID != 0 && d.changedLinks[e.LinkID]:
			if err := d.pair(ctx, e, e, dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// compareEntries returns what differs between two resolved entries of the
// same name.
func compareEntries(a, b *Entry) ChangeFlags {
	var f ChangeFlags
	if a.Type != b.Type {
		f |= ChangedType
	}
	if a.Mode != b.Mode {
		f |= ChangedMode
	}
	if a.Uid != b.Uid || a.Gid != b.Gid {
		f |= ChangedOwner
	}
	if !slices.EqualFunc(a.Xattrs, b.Xattrs, func(x, y Xattr) bool { return x.Name == y.Name && bytes.Equal(x.Value, y.Value) }) {
		f |= ChangedXattrs
	}
	switch {
	case a.Type == TypeFile && b.Type == TypeFile:
		if a.Size != b.Size || !slices.EqualFunc(a.Chunks, b.Chunks, func(x, y Chunk) bool {
			return x.Index == y.Index && x.Ref.Hash == y.Ref.Hash
		}) {
			f |= ChangedContent
		}
	case a.Type == TypeSymlink && b.Type == TypeSymlink:
		if a.Target != b.Target {
			f |= ChangedTarget
		}
	case a.Type == b.Type && (a.Type == TypeCharDev || a.Type == TypeBlockDev):
		if a.Rdev != b.Rdev {
			f |= ChangedRdev
		}
	}
	return f
}

// IsBinary reports whether b (a file's first bytes, or all of it) looks
// binary: it holds a NUL byte or is not valid UTF-8 in its first 8000
// bytes (a multi-byte character cut at that limit is allowed).
func IsBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
		// Drop a trailing partial rune.
		if i := lastRuneStart(b); i >= 0 && !utf8.FullRune(b[i:]) {
			b = b[:i]
		}
	}
	return bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b)
}

// lastRuneStart returns the index of the start of the last rune of b
// (looking back at most UTFMax bytes), or -1.
func lastRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return -1
}
