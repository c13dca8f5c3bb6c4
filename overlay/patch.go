package overlay

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/agentfs/agentfs/internal/udiff"
	"github.com/agentfs/agentfs/snapshot"
)

// FilePatch is the content change of one file of a Diff: line counts and,
// when asked for, a unified diff. A side that is not a regular file (an
// added directory, a deleted symlink) counts as empty.
type FilePatch struct {
	// Binary: a side holds a NUL byte or is not UTF-8 text; only the
	// sizes are known, no lines.
	Binary bool `json:"binary,omitempty"`
	// TooLarge: a side is larger than the limit Patch was given; nothing
	// was compared.
	TooLarge bool `json:"too_large,omitempty"`
	// Added and Deleted count the lines the change adds and removes.
	Added   int `json:"added"`
	Deleted int `json:"deleted"`
	// Text is the unified diff (three lines of context, "--- a/PATH",
	// "+++ b/PATH", "/dev/null" for a missing side); empty when the
	// contents are equal, binary, too large, or not asked for.
	Text string `json:"text,omitempty"`
}

// Patch compares the contents of c (a change Diff returned) in the base
// (at c.From when set: a rename, or inside a renamed directory) and in
// the workspace, reading at most maxBytes
// of either side; withText asks for the unified diff as well as the line
// counts. Directories have no content: their patch is empty.
func (w *Workspace) Patch(ctx context.Context, c Change, maxBytes int64, withText bool) (FilePatch, error) {
	var p FilePatch
	basePath := c.basePath()
	var before, after []byte
	var hasBefore, hasAfter bool
	var err error
	if c.Op != Added {
		before, hasBefore, err = w.ReadBase(ctx, basePath, maxBytes)
		if errors.Is(err, snapshot.ErrTooLarge) {
			p.TooLarge = true
			return p, nil
		}
		if err != nil {
			return p, err
		}
	}
	if c.Op != Deleted {
		after, hasAfter, err = w.ReadLive(ctx, c.Path, maxBytes)
		if errors.Is(err, snapshot.ErrTooLarge) {
			p.TooLarge = true
			return p, nil
		}
		if err != nil {
			return p, err
		}
	}
	if string(before) == string(after) && hasBefore == hasAfter {
		return p, nil
	}
	if snapshot.IsBinary(before) || snapshot.IsBinary(after) {
		p.Binary = true
		return p, nil
	}
	for _, op := range udiff.Edits(udiff.Lines(before), udiff.Lines(after)) {
		switch op.Kind {
		case '+':
			p.Added++
		case '-':
			p.Deleted++
		}
	}
	if withText {
		aName, bName := "a/"+basePath, "b/"+c.Path
		if !hasBefore {
			aName = "/dev/null"
		}
		if !hasAfter {
			bName = "/dev/null"
		}
		p.Text = udiff.Unified(aName, bName, before, after, 3)
	}
	return p, nil
}

// ReadBase returns the contents of the base's regular file at path (ok
// false, and no error, when the base has no regular file there), or an
// error matching snapshot.ErrTooLarge if it is larger than maxBytes. A host
// directory base is read as it is now.
func (w *Workspace) ReadBase(ctx context.Context, path string, maxBytes int64) (data []byte, ok bool, err error) {
	if w.host != nil {
		e, err := w.host.Stat(ctx, path)
		if isNotFound(err) {
			return nil, false, nil
		}
		if err != nil || e.Type != snapshot.TypeFile {
			return nil, false, err
		}
		if int64(e.Size) > maxBytes {
			return nil, false, fmt.Errorf("%s: %d bytes: %w", path, e.Size, snapshot.ErrTooLarge)
		}
		f, err := w.host.Open(ctx, path)
		if err != nil {
			return nil, false, err
		}
		defer func() { _ = f.Close() }()
		data, err = io.ReadAll(io.NewSectionReader(f, 0, maxBytes+1))
		if err != nil {
			return nil, false, fmt.Errorf("read %s in host directory %s: %w", path, w.host.Root(), err)
		}
		if int64(len(data)) > maxBytes {
			return nil, false, fmt.Errorf("%s: %w", path, snapshot.ErrTooLarge)
		}
		return data, true, nil
	}
	vb, err := w.Base(ctx)
	if err != nil {
		return nil, false, err
	}
	base, err := w.repo.ReadCommit(ctx, *vb.Commit)
	if err != nil {
		return nil, false, fmt.Errorf("base %v: %w", *vb.Commit, err)
	}
	e, ok, err := w.baseEntry(ctx, snapshot.CommitTree(base), path)
	if err != nil || !ok || e.Type != snapshot.TypeFile {
		return nil, false, err
	}
	data, err = w.repo.ReadEntry(ctx, e, maxBytes)
	if err != nil {
		return nil, false, err
	}
	return data, true, nil
}

// ReadLive returns the contents of the workspace's regular file at path
// (ok false, and no error, when the workspace has no regular file there),
// or an error matching snapshot.ErrTooLarge if it is larger than maxBytes.
func (w *Workspace) ReadLive(ctx context.Context, path string, maxBytes int64) (data []byte, ok bool, err error) {
	a, err := lookupPath(ctx, w.vol, path)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil || a.Type != snapshot.TypeFile {
		return nil, false, err
	}
	if int64(a.Size) > maxBytes {
		return nil, false, fmt.Errorf("%s: %d bytes: %w", path, a.Size, snapshot.ErrTooLarge)
	}
	data, a, err = w.readLive(ctx, path)
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > maxBytes {
		return nil, false, fmt.Errorf("%s: %d bytes: %w", path, a.Size, snapshot.ErrTooLarge)
	}
	return data, true, nil
}
