package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// Lower is the layer a virtual workspace reads through to (overlay's host
// directory): the source of the listings, attributes and bytes of what the
// workspace has not changed. Paths in it (origins) are '/'-separated and
// relative to its root; "" is the root.
//
// The engine never writes to a Lower; what reading through means for a
// host directory (which entries it lists and how, how a name is resolved)
// is the Lower's. Its errors wrap ErrNotFound for missing paths, and
// anything else is an I/O error.
type Lower interface {
	// Entries lists the directory at origin, sorted by name, as entries
	// that read through to it: each carries the attributes of its name
	// (not following symlinks), HasOrigin and its Origin, OriginSize (a
	// file's size; 0 for the rest), Nlink 1 for non-directories, Modified
	// false, and no Chunks, Tree or LinkID. A directory the lower no
	// longer has lists as empty.
	Entries(ctx context.Context, origin string) ([]snapshot.Entry, error)
	// Stat returns the current attributes of origin as Entries lists
	// them, before the read-through fields are set (Name is its last
	// element; "" for the root).
	Stat(ctx context.Context, origin string) (snapshot.Entry, error)
	// Open opens the regular file at origin for reading its bytes.
	Open(ctx context.Context, origin string) (LowerFile, error)
}

// LowerFile is an open file of a Lower: a Lower is the data side's block
// source of origins (data.Origins), and opens them for data.File.
type LowerFile = data.OriginFile

// readsThrough reports whether the volume has a lower layer. Then every
// record says whether it differs from the lower (Mod, set by markModified
// on every change), the trees a checkpoint writes carry it
// (Entry.Modified), and a directory in which nothing differs is stored as
// its origin alone (a zero tree), reading through to the lower again.
func (v *Volume) readsThrough() bool { return v.lower != nil }

// markModified records that r differs from the lower layer, if the volume
// has one; it reports whether r.Mod changed.
func (v *Volume) markModified(r *meta.Inode) bool {
	if !v.readsThrough() || r.Mod {
		return false
	}
	r.Mod = true
	return true
}

// dirEntries returns the entries of a directory: its tree's, or, for a
// directory of the lower layer not materialized yet (a zero tree with an
// origin), the lower's listing of origin (empty if the lower no longer has
// it).
func (v *Volume) dirEntries(ctx context.Context, tree snapshot.BlobRef, hasOrigin bool, origin string) ([]snapshot.Entry, error) {
	if tree.IsZero() && hasOrigin && v.readsThrough() {
		return v.lower.Entries(ctx, origin)
	}
	b, err := v.repo.ReadBlob(ctx, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree: %w", err)
	}
	return snapshot.DecodeTree(b)
}

// refreshOrigin brings an unmodified file of the lower layer up to date
// with it: a file changed in the lower since it was listed shows the
// lower's current attributes and bytes from its next open on. Modified
// files keep their own, and so does a file gone from the lower or replaced
// by another type (what was listed stays). A failure to stat the origin
// other than "not found" (no permission, an I/O error) is ErrIO naming the
// origin. Called on a node not yet published.
func (v *Volume) refreshOrigin(ctx context.Context, n *node) error {
	r := n.rec
	if !v.readsThrough() || !r.HasOrigin || r.Mod {
		return nil
	}
	h, err := v.lower.Stat(ctx, r.Origin)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("%w: stat %q in the lower layer: %w", ErrIO, r.Origin, err)
	case h.Type != r.Type:
		return nil
	}
	if h.Size == r.Size && h.Mtime == r.Mtime && h.Ctime == r.Ctime && h.Mode == r.Mode && h.Uid == r.Uid && h.Gid == r.Gid {
		return nil
	}
	r.Size, r.OriginSize = h.Size, h.Size
	r.Mode, r.Uid, r.Gid = h.Mode, h.Uid, h.Gid
	r.Atime, r.Mtime, r.Ctime = h.Atime, h.Mtime, h.Ctime
	if r.Inline && r.Size > v.inlineMax {
		r.Inline = false
	}
	_ = n.d.Forget() // copies of the lower's old bytes, and their count
	return v.update(func(txn *meta.Txn, d *meta.Delta) error {
		if err := v.writeFileRec(txn, d, r, false); err != nil {
			return err
		}
		return n.d.ForgetRecords(meta.FileRecords{Txn: txn})
	})
}
