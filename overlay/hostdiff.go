package overlay

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentfs/agentfs/snapshot"
)

// hostDiff walks the directories the workspace stored (only changed ones
// are) and compares them with the host directory it reads through to.
func (w *Workspace) hostDiff(ctx context.Context, live snapshot.Commit) ([]Change, []reader, error) {
	links, err := w.repo.ReadLinkTable(ctx, live.Links)
	if err != nil {
		return nil, nil, err
	}
	d := &hostDiffer{w: w, ctx: ctx, links: links, trees: map[snapshot.BlobRef][]snapshot.Entry{}, moved: map[string]bool{}}
	if err := d.findMoved(rootEntry(live.Root), ""); err != nil {
		return nil, nil, err
	}
	if err := d.walk(rootEntry(live.Root), "", "", live.Root.HasOrigin); err != nil {
		return nil, nil, err
	}
	// A rename's source shows as deleted in its directory: say it once.
	from := map[string]bool{}
	for _, c := range d.out {
		if c.Op == Renamed {
			from[c.From] = true
		}
	}
	out := slices.DeleteFunc(d.out, func(c Change) bool { return c.Op == Deleted && from[c.basePath()] })
	return out, d.readers, nil
}

// hostDiffer is one run of hostDiff: the trees read so far, the base paths
// the workspace moved away, and the changes and readers found.
type hostDiffer struct {
	w     *Workspace
	ctx   context.Context
	links snapshot.LinkTable
	trees map[snapshot.BlobRef][]snapshot.Entry
	// moved holds the base paths whose entries the workspace renamed: a new
	// entry in such a place replaces nothing, and their absence there is no
	// deletion.
	moved   map[string]bool
	out     []Change
	readers []reader
}

func (d *hostDiffer) readTree(ref snapshot.BlobRef) ([]snapshot.Entry, error) {
	if t, ok := d.trees[ref]; ok {
		return t, nil
	}
	t, err := d.w.repo.ReadTree(d.ctx, ref)
	if err != nil {
		return nil, err
	}
	d.trees[ref] = t
	return t, nil
}

// findMoved fills d.moved from the stored directory dir, at path, and
// everything stored below it.
func (d *hostDiffer) findMoved(dir snapshot.Entry, path string) error {
	if dir.Tree.IsZero() {
		return nil
	}
	entries, err := d.readTree(dir.Tree)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := joinPath(path, e.Name)
		if e.LinkID != 0 {
			continue // a hard link's names are copies, not moves
		}
		if e.HasOrigin && e.Origin != p {
			d.moved[e.Origin] = true
		}
		if e.Type == snapshot.TypeDir {
			if err := d.findMoved(e, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// walk compares the stored directory dir, at path, with the host directory
// origin (when hasOrigin): the one it reads through to, or the base
// directory a new directory took the place of.
func (d *hostDiffer) walk(dir snapshot.Entry, path, origin string, hasOrigin bool) error {
	if dir.HasOrigin && dir.Tree.IsZero() {
		return nil // not materialized: the host's own
	}
	var entries []snapshot.Entry
	if !dir.Tree.IsZero() {
		var err error
		if entries, err = d.readTree(dir.Tree); err != nil {
			return err
		}
	}
	// The host's listing: names and types only; the attributes of the few
	// entries that need them are read one by one.
	var hs []HostName
	inBase := map[string]snapshot.EntryType{}
	if hasOrigin {
		var err error
		if hs, err = d.w.host.Names(d.ctx, origin); err != nil && !isNotFound(err) {
			return err
		}
		for _, h := range hs {
			inBase[h.Name] = h.Type
		}
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name] = true
		if err := d.entry(e, path, origin, hasOrigin, inBase); err != nil {
			return err
		}
	}
	for _, h := range hs {
		if names[h.Name] || d.moved[joinPath(origin, h.Name)] {
			continue
		}
		c := Change{Op: Deleted, Path: joinPath(path, h.Name), Type: h.Type}
		if h.Type != snapshot.TypeDir {
			he, err := d.hostEntry(joinPath(origin, h.Name))
			if err != nil {
				return err
			}
			c.Size = he.Size
		}
		if o := joinPath(origin, h.Name); o != c.Path {
			c.From = o
		}
		d.out = append(d.out, c)
	}
	return nil
}

// entry compares one stored entry e of the directory at path with the host
// (origin and inBase describe the host directory it is compared with), and
// walks into it when it is a directory.
func (d *hostDiffer) entry(e snapshot.Entry, path, origin string, hasOrigin bool, inBase map[string]snapshot.EntryType) error {
	p := joinPath(path, e.Name)
	linked := e.LinkID != 0
	if linked {
		var err error
		if e, err = d.links.Resolve(e); err != nil {
			return err
		}
	}
	baseLoc := joinPath(origin, e.Name)
	ht, replaced := inBase[e.Name]
	// A new entry, or a new name of a base file (a hard link: its names
	// share the origin, and none of them is a rename).
	isNew := !e.HasOrigin || linked && e.Origin != baseLoc
	if isNew && d.moved[baseLoc] {
		replaced = false // the base's entry lives on elsewhere
	}
	from := ""
	switch {
	case isNew && replaced && baseLoc != p:
		from = baseLoc
	case !isNew && e.Origin != p:
		from = e.Origin
	}
	switch {
	case isNew && replaced:
		return d.replaced(e, p, from, baseLoc, ht)
	case isNew:
		if e.HasOrigin {
			d.readers = append(d.readers, reader{p, e.Origin})
		}
		d.out = append(d.out, Change{Op: Added, Path: p, Type: e.Type, Size: e.Size})
		if e.Type == snapshot.TypeDir {
			// What is inside is new, or moved in from the base (renamed):
			// compared with no base directory.
			return d.walk(e, p, "", false)
		}
	case !hasOrigin || e.Origin != baseLoc:
		return d.renamed(e, p)
	case e.Type == snapshot.TypeDir:
		if e.Modified && replaced {
			he, err := d.hostEntry(baseLoc)
			if err != nil {
				return err
			}
			if !sameHostAttrs(e, he) {
				d.out = append(d.out, Change{Op: Modified, Path: p, From: from, Type: e.Type})
			}
		}
		return d.walk(e, p, e.Origin, true)
	case e.Modified:
		old, err := d.hostSize(e)
		if err != nil {
			return err
		}
		d.out = append(d.out, Change{Op: Modified, Path: p, From: from, Type: e.Type, Size: e.Size, OldSize: old})
	}
	return nil
}

// replaced records a new entry e at p in the place of the base entry at
// baseLoc (of type ht): a modification.
func (d *hostDiffer) replaced(e snapshot.Entry, p, from, baseLoc string, ht snapshot.EntryType) error {
	c := Change{Op: Modified, Path: p, From: from, Type: e.Type, Size: e.Size}
	var he snapshot.Entry
	if ht == snapshot.TypeFile || ht == snapshot.TypeDir {
		var err error
		if he, err = d.hostEntry(baseLoc); err != nil {
			return err
		}
	}
	if ht == snapshot.TypeFile {
		c.OldSize = he.Size
	}
	if e.Type == snapshot.TypeDir && ht == snapshot.TypeDir {
		if !sameHostAttrs(e, he) {
			d.out = append(d.out, c)
		}
		return d.walk(e, p, baseLoc, true)
	}
	d.out = append(d.out, c)
	if e.Type == snapshot.TypeDir {
		// What is inside is new, or moved in from the base (renamed):
		// compared with no base directory.
		return d.walk(e, p, "", false)
	}
	return nil
}

// renamed records e, at p, as moved from its origin (and edited when its
// content or attributes changed too), and walks into it when it is a
// directory.
func (d *hostDiffer) renamed(e snapshot.Entry, p string) error {
	d.readers = append(d.readers, reader{p, e.Origin})
	old, err := d.hostSize(e)
	if err != nil {
		return err
	}
	edited := e.Modified
	if edited && e.Type == snapshot.TypeDir {
		he, err := d.hostEntry(e.Origin)
		if err != nil {
			return err
		}
		// A directory whose origin is gone keeps no attributes to compare.
		edited = he.Type != 0 && !sameHostAttrs(e, he)
	}
	d.out = append(d.out, Change{Op: Renamed, Path: p, From: e.Origin, Type: e.Type, Size: e.Size, OldSize: old, Edited: edited})
	if e.Type == snapshot.TypeDir {
		return d.walk(e, p, e.Origin, true)
	}
	return nil
}

// hostEntry describes the host's entry at p now; an entry that is gone
// (removed meanwhile) is the zero Entry. Any other failure to stat it (no
// permission, an I/O error) is an error naming the path: the diff would be
// wrong without it.
func (d *hostDiffer) hostEntry(p string) (snapshot.Entry, error) {
	h, err := d.w.host.Stat(d.ctx, p)
	switch {
	case isNotFound(err):
		return snapshot.Entry{}, nil
	case err != nil:
		return snapshot.Entry{}, fmt.Errorf("compare with the host directory: %s: %w", p, err)
	}
	return h, nil
}

// hostSize is the size of file e's origin in the host directory now: the
// workspace's own record of it shrinks when the file is truncated. A
// directory or link is 0; an origin gone meanwhile is the size it had when
// the workspace read it.
func (d *hostDiffer) hostSize(e snapshot.Entry) (uint64, error) {
	if e.Type != snapshot.TypeFile {
		return 0, nil
	}
	h, err := d.hostEntry(e.Origin)
	if err != nil {
		return 0, err
	}
	if h.Type == 0 {
		return e.OriginSize, nil
	}
	return h.Size, nil
}
