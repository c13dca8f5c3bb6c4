package overlay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentfs/agentfs/snapshot"
)

// surgeon rewrites trees along paths: it replaces (or removes) the entry at
// a path and stores the directories above it anew, leaving every other
// subtree shared. New trees go into one pack, stored by finish.
type surgeon struct {
	repo  *snapshot.Repo
	host  *HostDir // reads not-materialized directories of a host base
	pw    *snapshot.PackWriter
	links snapshot.LinkTable // the link table of the tree being rewritten
	// src resolves link IDs of entries brought in from another tree.
	src snapshot.LinkTable
	// written holds the trees stored so far, which are not in the store
	// before finish: a second path through the same directory reads them.
	written map[snapshot.BlobRef][]snapshot.Entry
	// mkdir, when set, supplies a missing parent directory of an entry
	// being put in place (path relative to the root): the directory's
	// entry, whose contents are ignored (it starts empty), or false.
	mkdir func(ctx context.Context, path string) (snapshot.Entry, bool, error)
	full  []string // the path being replaced, split
}

func newSurgeon(repo *snapshot.Repo, host *HostDir, links, src snapshot.LinkTable) *surgeon {
	lt := snapshot.LinkTable{}
	for id, e := range links {
		lt[id] = e
	}
	return &surgeon{repo: repo, host: host, pw: repo.NewPackWriter(), links: lt, src: src, written: map[snapshot.BlobRef][]snapshot.Entry{}}
}

// list returns the entries of directory entry d: its tree, or, for a
// not-materialized directory of a host base, the host's listing.
func (s *surgeon) list(ctx context.Context, d snapshot.Entry) ([]snapshot.Entry, error) {
	if entries, ok := s.written[d.Tree]; ok {
		return slices.Clone(entries), nil
	}
	if d.Tree.IsZero() {
		if !d.HasOrigin || s.host == nil {
			return nil, nil
		}
		return s.host.Entries(ctx, d.Origin)
	}
	return s.repo.ReadTree(ctx, d.Tree)
}

// replace sets the entry at path (below root) to e, or removes it when e
// is nil, and returns the new root. Missing parents are an error unless
// the entry is being removed.
func (s *surgeon) replace(ctx context.Context, root snapshot.Entry, path string, e *snapshot.Entry) (snapshot.Entry, error) {
	parts := strings.Split(path, "/")
	s.full = parts
	return s.rewrite(ctx, root, parts, e)
}

func (s *surgeon) rewrite(ctx context.Context, dir snapshot.Entry, parts []string, e *snapshot.Entry) (snapshot.Entry, error) {
	entries, err := s.list(ctx, dir)
	if err != nil {
		return dir, err
	}
	name := parts[0]
	i, found := slices.BinarySearchFunc(entries, name, func(x snapshot.Entry, n string) int { return strings.Compare(x.Name, n) })
	if len(parts) == 1 {
		if e == nil && !found {
			return dir, nil // nothing there
		}
		// The names of hard-link groups that go and come change the
		// groups' link counts.
		if found {
			if err := s.countLinks(ctx, entries[i], -1); err != nil {
				return dir, err
			}
		}
		if e != nil {
			if err := s.countLinks(ctx, *e, +1); err != nil {
				return dir, err
			}
		}
		if e == nil {
			entries = slices.Delete(entries, i, i+1)
		} else {
			ne := *e
			ne.Name = name
			if ne.LinkID != 0 {
				ne = snapshot.Entry{Name: name, Type: ne.Type, LinkID: ne.LinkID}
			}
			if found {
				entries[i] = ne
			} else {
				entries = slices.Insert(entries, i, ne)
			}
		}
	} else {
		if !found {
			if e == nil {
				return dir, nil
			}
			missing := fmt.Errorf("%s: the parent directory is missing: %w", strings.Join(parts, "/"), snapshot.ErrNoEntry)
			if s.mkdir == nil {
				return dir, missing
			}
			nd, ok, err := s.mkdir(ctx, strings.Join(s.full[:len(s.full)-len(parts)+1], "/"))
			if err != nil {
				return dir, err
			}
			if !ok || nd.Type != snapshot.TypeDir {
				return dir, missing
			}
			nd.Name, nd.LinkID = name, 0
			if nd, err = s.store(nd, nil); err != nil {
				return dir, err
			}
			entries = slices.Insert(entries, i, nd)
		}
		child := entries[i]
		if child.Type != snapshot.TypeDir {
			return dir, fmt.Errorf("%s is no longer a directory (discard or commit it first): %w", name, snapshot.ErrNoEntry)
		}
		nc, err := s.rewrite(ctx, child, parts[1:], e)
		if err != nil {
			return dir, fmt.Errorf("%s/%w", name, err)
		}
		entries[i] = nc
	}
	return s.store(dir, entries)
}

// countLinks adds delta to the link count of every hard-link group that
// entry e names (e itself, or names below it when it is a directory). A
// group that comes
// in is taken from s.src with this name as its only one; a group whose
// count reaches zero leaves the link table.
func (s *surgeon) countLinks(ctx context.Context, e snapshot.Entry, delta int) error {
	if len(s.links) == 0 && len(s.src) == 0 {
		return nil // no hard links anywhere
	}
	if e.LinkID != 0 {
		le, ok := s.links[e.LinkID]
		if !ok {
			if delta < 0 {
				return nil
			}
			if le, ok = s.src[e.LinkID]; !ok {
				return fmt.Errorf("%s: hard link %s not in its link table: %w", e.Name, snapshot.LinkName(e.LinkID), snapshot.ErrCorrupt)
			}
			le.Nlink = 0
		}
		n := int64(le.Nlink) + int64(delta)
		if n <= 0 {
			delete(s.links, e.LinkID)
			return nil
		}
		le.Nlink = uint32(n)
		s.links[e.LinkID] = le
		return nil
	}
	if e.Type != snapshot.TypeDir || e.Tree.IsZero() {
		return nil // a host directory's own entries have no links
	}
	children, err := s.list(ctx, e)
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := s.countLinks(ctx, c, delta); err != nil {
			return err
		}
	}
	return nil
}

// store encodes entries as dir's new tree and recomputes its counts.
func (s *surgeon) store(dir snapshot.Entry, entries []snapshot.Entry) (snapshot.Entry, error) {
	raw, err := snapshot.EncodeTree(entries)
	if err != nil {
		return dir, err
	}
	dir.Tree = s.pw.Add(s.repo.EncodeBlob(snapshot.BlobTree, raw))
	s.written[dir.Tree] = slices.Clone(entries)
	dir.SubFiles, dir.SubBytes = 0, 0
	dir.Nlink = 2
	for _, e := range entries {
		switch {
		case e.Type == snapshot.TypeDir:
			dir.Nlink++
			dir.SubFiles += e.SubFiles
			dir.SubBytes += e.SubBytes
		case e.LinkID != 0:
			dir.SubFiles++
			if le, ok := s.links[e.LinkID]; ok && le.Type == snapshot.TypeFile {
				dir.SubBytes += le.Size
			}
		default:
			dir.SubFiles++
			if e.Type == snapshot.TypeFile {
				dir.SubBytes += e.Size
			}
		}
	}
	if dir.HasOrigin {
		dir.Modified = true
	}
	return dir, nil
}

// finish stores the new trees and the link table, and returns the link
// table's reference (nil when empty).
func (s *surgeon) finish(ctx context.Context) (*snapshot.BlobRef, error) {
	var lref *snapshot.BlobRef
	if len(s.links) > 0 {
		entries := make([]snapshot.Entry, 0, len(s.links))
		for id, e := range s.links {
			e.Name, e.LinkID = snapshot.LinkName(id), id
			entries = append(entries, e)
		}
		raw, err := snapshot.EncodeTree(entries)
		if err != nil {
			return nil, err
		}
		ref := s.pw.Add(s.repo.EncodeBlob(snapshot.BlobTree, raw))
		lref = &ref
	}
	if s.pw.Count() > 0 {
		if err := s.repo.PutPack(ctx, s.pw); err != nil {
			return nil, err
		}
	}
	return lref, nil
}

// rootEntry and rootDir convert between a commit's root and a directory
// entry, for the surgeon.
func rootEntry(r snapshot.RootDir) snapshot.Entry {
	return snapshot.Entry{Type: snapshot.TypeDir, Mode: r.Mode, Uid: r.Uid, Gid: r.Gid, Atime: r.Atime, Mtime: r.Mtime,
		Ctime: r.Ctime, Nlink: r.Nlink, Xattrs: r.Xattrs, Tree: r.Tree, SubFiles: r.SubFiles, SubBytes: r.SubBytes,
		HasOrigin: r.HasOrigin, Modified: r.Modified}
}

func rootDir(e snapshot.Entry) snapshot.RootDir {
	return snapshot.RootDir{Mode: e.Mode, Uid: e.Uid, Gid: e.Gid, Atime: e.Atime, Mtime: e.Mtime, Ctime: e.Ctime,
		Nlink: e.Nlink, Xattrs: e.Xattrs, Tree: e.Tree, SubFiles: e.SubFiles, SubBytes: e.SubBytes,
		HasOrigin: e.HasOrigin, Modified: e.Modified}
}

func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func isNotFound(err error) bool {
	return errors.Is(err, errNotFound)
}
