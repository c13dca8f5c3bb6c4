package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/agentfs/agentfs/blobstore"
)

// Reading whole trees: the path walker (Walk, LookupPath, ReadEntry) that
// diff, restore tests and fsck's reports use, and the reachability walker
// (reach) behind gc's mark phase and the "bytes unique to a snapshot" of
// ListSnapshots.
//
// Lock order: reach.mu is the only lock here; it is never held across a
// store call.

// ErrNoEntry: a path names nothing in a tree.
var ErrNoEntry = errors.New("no such file or directory in this tree")

// ErrTooLarge: ReadEntry was asked for a file larger than its limit.
var ErrTooLarge = errors.New("file too large")

// TreeRoot is a complete file tree, as a commit or a snapshot names it: the
// root directory and the link table that its hard-linked entries resolve
// through.
type TreeRoot struct {
	Root  RootDir
	Links *BlobRef
}

// CommitTree returns the tree commit c names.
func CommitTree(c Commit) TreeRoot { return TreeRoot{Root: c.Root, Links: c.Links} }

// LinkTable maps hard-link group IDs to the file entries they share (see
// Entry.LinkID). The entries' names are LinkName(id).
type LinkTable map[uint64]Entry

// ReadLinkTable reads and decodes a link table; a nil ref gives an empty
// table. A missing blob gives ErrMissing, one that does not decode or whose
// entry names are not LinkName forms gives ErrCorrupt.
func (r *Repo) ReadLinkTable(ctx context.Context, ref *BlobRef) (LinkTable, error) {
	if ref == nil {
		return LinkTable{}, nil
	}
	raw, err := r.ReadBlob(ctx, *ref)
	if err != nil {
		return nil, fmt.Errorf("link table %s: %w", ref.Hash, err)
	}
	return DecodeLinkTable(raw)
}

// DecodeLinkTable decodes the raw bytes of a link table blob.
func DecodeLinkTable(raw []byte) (LinkTable, error) {
	entries, err := DecodeTree(raw)
	if err != nil {
		return nil, fmt.Errorf("link table: %w", err)
	}
	lt := make(LinkTable, len(entries))
	for _, e := range entries {
		id, err := strconv.ParseUint(e.Name, 16, 64)
		if err != nil || len(e.Name) != 16 || id == 0 || e.Type == TypeDir {
			return nil, fmt.Errorf("link table: bad entry %q (%s): %w", e.Name, e.Type, ErrCorrupt)
		}
		lt[id] = e
	}
	return lt, nil
}

// Resolve returns the entry that e stands for: e itself when it is not a
// hard link, otherwise the link table's entry carrying e's name and LinkID.
// A LinkID the table lacks gives ErrCorrupt.
func (lt LinkTable) Resolve(e Entry) (Entry, error) {
	if e.LinkID == 0 {
		return e, nil
	}
	le, ok := lt[e.LinkID]
	if !ok {
		return e, fmt.Errorf("entry %q: hard link %s is not in the link table: %w", e.Name, LinkName(e.LinkID), ErrCorrupt)
	}
	le.Name, le.LinkID = e.Name, e.LinkID
	return le, nil
}

// RootEntry returns the root directory of t as a directory Entry named ".".
func RootEntry(t TreeRoot) Entry {
	d := t.Root
	return Entry{Name: ".", Type: TypeDir, Mode: d.Mode, Uid: d.Uid, Gid: d.Gid, Atime: d.Atime, Mtime: d.Mtime,
		Ctime: d.Ctime, Nlink: d.Nlink, Xattrs: d.Xattrs, Tree: d.Tree, SubFiles: d.SubFiles, SubBytes: d.SubBytes}
}

// ReadTree reads and decodes the directory tree blob ref points to.
func (r *Repo) ReadTree(ctx context.Context, ref BlobRef) ([]Entry, error) {
	raw, err := r.ReadBlob(ctx, ref)
	if err != nil {
		return nil, err
	}
	entries, err := DecodeTree(raw)
	if err != nil {
		return nil, fmt.Errorf("tree %s in pack %s: %w", ref.Hash, ref.Pack, err)
	}
	return entries, nil
}

// Walk calls fn for every entry of t, depth first in name order, with its
// slash-separated path relative to the root (the root itself is not
// passed). Hard-linked entries are passed resolved through t's link table.
// If fn returns fs.SkipDir for a directory, Walk does not descend into it;
// any other error stops the walk and is returned. Memory is bounded by the
// depth of the tree times the size of its directories (plus the link
// table).
func (r *Repo) Walk(ctx context.Context, t TreeRoot, fn func(path string, e Entry) error) error {
	lt, err := r.ReadLinkTable(ctx, t.Links)
	if err != nil {
		return err
	}
	return r.walkDir(ctx, lt, t.Root.Tree, "", fn)
}

func (r *Repo) walkDir(ctx context.Context, lt LinkTable, ref BlobRef, dir string, fn func(string, Entry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := r.ReadTree(ctx, ref)
	if err != nil {
		return fmt.Errorf("%s: %w", displayPath(dir), err)
	}
	for _, e := range entries {
		p := joinPath(dir, e.Name)
		re, err := lt.Resolve(e)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		err = fn(p, re)
		if errors.Is(err, fs.SkipDir) {
			continue
		}
		if err != nil {
			return err
		}
		if re.Type == TypeDir {
			if err := r.walkDir(ctx, lt, re.Tree, p, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// LookupPath returns the entry at p in t (slash-separated, relative to the
// root; "." or "" is the root, as RootEntry gives it), resolved through the
// link table. A path that names nothing gives an error matching ErrNoEntry.
// It reads one tree per path component.
func (r *Repo) LookupPath(ctx context.Context, t TreeRoot, p string) (Entry, error) {
	p = strings.Trim(path.Clean("/"+p), "/")
	cur := RootEntry(t)
	if p == "" {
		return cur, nil
	}
	var lt LinkTable
	parts := strings.Split(p, "/")
	for i, name := range parts {
		if cur.Type != TypeDir {
			return Entry{}, fmt.Errorf("%s: not a directory: %w", strings.Join(parts[:i], "/"), ErrNoEntry)
		}
		entries, err := r.ReadTree(ctx, cur.Tree)
		if err != nil {
			return Entry{}, fmt.Errorf("%s: %w", displayPath(strings.Join(parts[:i], "/")), err)
		}
		j, found := searchEntries(entries, name)
		if !found {
			return Entry{}, fmt.Errorf("%s: %w", strings.Join(parts[:i+1], "/"), ErrNoEntry)
		}
		cur = entries[j]
		if cur.LinkID != 0 {
			if lt == nil {
				if lt, err = r.ReadLinkTable(ctx, t.Links); err != nil {
					return Entry{}, err
				}
			}
			if cur, err = lt.Resolve(cur); err != nil {
				return Entry{}, fmt.Errorf("%s: %w", p, err)
			}
		}
	}
	return cur, nil
}

func searchEntries(entries []Entry, name string) (int, bool) {
	lo, hi := 0, len(entries)
	for lo < hi {
		m := (lo + hi) / 2
		if entries[m].Name < name {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(entries) && entries[lo].Name == name
}

// ReadEntry returns the bytes of file entry e (resolved, not a bare hard
// link name): its chunks, with holes read as zeros. If max >= 0 and the
// file is larger, it fails with an error matching ErrTooLarge without
// reading anything. Chunk bytes are verified against their hashes.
func (r *Repo) ReadEntry(ctx context.Context, e Entry, max int64) ([]byte, error) {
	if e.Type != TypeFile {
		return nil, fmt.Errorf("%s is a %s, not a file: %w", e.Name, e.Type, ErrNoEntry)
	}
	if e.LinkID != 0 && len(e.Chunks) == 0 && e.Size > 0 {
		return nil, fmt.Errorf("%s: hard link not resolved through the link table", e.Name)
	}
	if max >= 0 && e.Size > uint64(max) {
		return nil, fmt.Errorf("%s: %d bytes (limit %d): %w", e.Name, e.Size, max, ErrTooLarge)
	}
	out := make([]byte, e.Size)
	cs := uint64(r.cfg.ChunkSize)
	for _, c := range e.Chunks {
		start := c.Index * cs
		if start >= e.Size {
			break
		}
		b, err := r.ReadBlob(ctx, c.Ref)
		if err != nil {
			return nil, fmt.Errorf("%s: chunk %d: %w", e.Name, c.Index, err)
		}
		copy(out[start:], b[:min(uint64(len(b)), e.Size-start)])
	}
	return out, nil
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// displayPath shows the root as ".".
func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// BlobLoc is where a blob is stored: its pack and its offset in the pack.
// Two references to the same location are the same stored bytes.
type BlobLoc struct {
	Pack   PackID
	Offset uint64
}

// LocOf returns the location of ref.
func LocOf(ref BlobRef) BlobLoc { return BlobLoc{Pack: ref.Pack, Offset: ref.Offset} }

// ownerShared marks a tree or blob reached from more than one owner.
const ownerShared int32 = -1

type locState struct {
	owner  int32
	length uint32 // stored length
}

// reach computes what a set of tree roots reaches, each root belonging to
// an owner (a small integer): every stored blob location (with its stored
// length), and for each the one owner that reaches it, or ownerShared. It
// reads each distinct tree (by hash) at most twice: once when an owner
// first reaches it, once more if a second owner does (its whole subtree
// then becomes shared). gc uses a single owner; ListSnapshots one per
// snapshot plus one for the retained commits.
//
// Memory: one map entry per distinct tree hash (~50 bytes) and one per
// distinct stored blob location (~50 bytes), plus the trees being decoded
// by the concurrent readers.
type reach struct {
	r    *Repo
	conc int
	// onTree is called after each tree read (under mu), for progress.
	onTree func(trees, blobs int)

	mu    sync.Mutex
	trees map[Hash]int32       // guarded by mu: descent state by tree hash
	blobs map[BlobLoc]locState // guarded by mu
	reads int                  // guarded by mu: trees read
}

func newReach(r *Repo, conc int) *reach {
	if conc <= 0 {
		conc = 16
	}
	return &reach{r: r, conc: conc, trees: map[Hash]int32{}, blobs: map[BlobLoc]locState{}}
}

// root marks everything t reaches as reached by owner. It returns the first
// error reading a tree (ErrMissing, ErrCorrupt or a store error); what was
// marked before stays marked.
func (w *reach) root(ctx context.Context, t TreeRoot, owner int32) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(w.conc)
	w.markLoc(t.Root.Tree, owner)
	g.Go(func() error { return w.descend(gctx, g, t.Root.Tree, owner, "") })
	if t.Links != nil {
		links := *t.Links
		w.markLoc(links, owner)
		g.Go(func() error { return w.descend(gctx, g, links, owner, "(link table)") })
	}
	return g.Wait()
}

func (w *reach) markLoc(ref BlobRef, owner int32) {
	k := LocOf(ref)
	w.mu.Lock()
	s, ok := w.blobs[k]
	switch {
	case !ok:
		w.blobs[k] = locState{owner: owner, length: ref.Length}
	case s.owner != owner && s.owner != ownerShared:
		s.owner = ownerShared
		w.blobs[k] = s
	}
	w.mu.Unlock()
}

func (w *reach) descend(ctx context.Context, g *errgroup.Group, ref BlobRef, owner int32, where string) error {
	w.mu.Lock()
	s, ok := w.trees[ref.Hash]
	mode := owner
	switch {
	case !ok:
		w.trees[ref.Hash] = owner
	case s == ownerShared || s == owner:
		w.mu.Unlock()
		return nil
	default:
		w.trees[ref.Hash] = ownerShared
		mode = ownerShared
	}
	w.mu.Unlock()

	entries, err := w.r.ReadTree(ctx, ref)
	if err != nil {
		return fmt.Errorf("%s: %w", displayPath(where), err)
	}
	w.mu.Lock()
	w.reads++
	if w.onTree != nil {
		w.onTree(w.reads, len(w.blobs))
	}
	w.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		switch e.Type {
		case TypeFile:
			for _, c := range e.Chunks {
				w.markLoc(c.Ref, mode)
			}
		case TypeDir:
			w.markLoc(e.Tree, mode)
			sub, subWhere := e.Tree, joinPath(where, e.Name)
			if !g.TryGo(func() error { return w.descend(ctx, g, sub, mode, subWhere) }) {
				if err := w.descend(ctx, g, sub, mode, subWhere); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// listAll lists every object under prefix. A listing that fails with
// not-found raced with a delete on a store whose listings are not atomic
// (file:// stats each file it lists): it is retried from the start, a few
// times.
func (r *Repo) listAll(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	for attempt := 0; ; attempt++ {
		var out []blobstore.ObjectInfo
		err := r.store.Walk(ctx, prefix, func(o blobstore.ObjectInfo) error {
			out = append(out, o)
			return nil
		})
		if err == nil || !errors.Is(err, blobstore.ErrNotFound) || attempt == 4 {
			return out, err
		}
	}
}

// rootsInFlight bounds the roots (commits, snapshots) walked at once; each
// root's walk has its own bound on tree reads (the store's concurrency
// limit caps the total).
const rootsInFlight = 8

// forEach calls fn for every item, up to n at once, and returns the first
// error (the others' contexts are cancelled).
func forEach[T any](ctx context.Context, n int, items []T, fn func(ctx context.Context, item T) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, it := range items {
		g.Go(func() error { return fn(gctx, it) })
	}
	return g.Wait()
}
