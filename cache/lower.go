package cache

import (
	"context"
	"io"

	"github.com/agentfs/agentfs/snapshot"
)

// Lower is a read-only directory tree that a virtual workspace reads
// through to: a directory on the host (overlay.HostDir). Paths are
// '/'-separated and relative to the lower's root; "" is the root.
//
// The engine never writes to a Lower. Its errors should wrap ErrNotFound
// for missing paths (reported as such) and anything else is an I/O error.
type Lower interface {
	// ReadDir returns the entries of the directory at path, sorted by name.
	// Each entry carries the attributes of its name (not following
	// symlinks); Nlink is 1 for non-directories (host hard links are not
	// tracked) and Chunks, Tree and LinkID are empty.
	ReadDir(ctx context.Context, path string) ([]snapshot.Entry, error)
	// Stat returns the attributes of path as ReadDir would (Name is its
	// last element; "" for the root).
	Stat(ctx context.Context, path string) (snapshot.Entry, error)
	// Open opens the regular file at path for reading.
	Open(ctx context.Context, path string) (LowerFile, error)
}

// LowerFile is an open file of a Lower.
type LowerFile interface {
	io.ReaderAt
	io.Closer
}

// joinOrigin returns the origin of name inside directory origin dir.
func joinOrigin(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// lowerEntries lists a not-materialized directory of the lower as tree
// entries that read through to it.
func (v *Volume) lowerEntries(ctx context.Context, origin string) ([]snapshot.Entry, error) {
	entries, err := v.opts.Lower.ReadDir(ctx, origin)
	if err != nil {
		return nil, err
	}
	for i := range entries {
		e := &entries[i]
		e.HasOrigin = true
		e.Origin = joinOrigin(origin, e.Name)
		e.Modified = false
		e.LinkID, e.Chunks, e.Tree = 0, nil, snapshot.BlobRef{}
		if e.Type == snapshot.TypeFile {
			e.OriginSize = e.Size
		} else {
			e.OriginSize = 0
		}
		if e.Type != snapshot.TypeDir {
			e.Nlink = 1
		}
	}
	return entries, nil
}
