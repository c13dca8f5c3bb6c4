package commit

import (
	"cmp"
	"slices"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// A File is a file whose dirty blocks a checkpoint reads, as the facade
// holds it: an open file's node, or a file read from its records while
// the namespace is frozen.
type File interface {
	// View calls fn with the file's state locked shared, so that no write
	// changes it meanwhile: r is its current record, not to be changed or
	// kept past fn, and read reads its local bytes (those of its dirty
	// blocks) at an offset. A file with dirty blocks has its local data
	// open before fn runs.
	View(fn func(r *meta.Inode, read func(p []byte, off uint64) error) error) error
}

// Capture reads the dirty blocks of files into an Uploader, each at its
// current write generation, and, once the commit is written, marks the
// blocks it covers clean in a file's record.
type Capture struct {
	Up        *Uploader
	Gens      *Gens
	ChunkSize uint64
}

// Blocks captures the dirty blocks of f block by block (phase A, while
// the file may be written): each block's bytes and generation are read
// together under one hold of f's lock, and encoded after it is released,
// so that the file's writers wait for one block's read at most. A block
// written meanwhile has a new generation: phase B captures it again (and
// Clean does not take the stale copy). Blocks that Up holds at their
// current generation, that are no longer dirty or past the end, and those
// of a file without a name, are skipped.
func (c *Capture) Blocks(f File) error {
	var dirty []uint64
	err := f.View(func(r *meta.Inode, _ func([]byte, uint64) error) error {
		dirty = slices.Clone(r.Dirty)
		return nil
	})
	if err != nil {
		return err
	}
	for _, b := range dirty {
		if err := c.block(f, b); err != nil {
			return err
		}
	}
	return nil
}

// block captures block b of f (see Blocks).
func (c *Capture) block(f File, b uint64) error {
	var (
		k        BlockKey
		gen      uint64
		buf      []byte
		keepZero bool
	)
	err := f.View(func(r *meta.Inode, read func([]byte, uint64) error) error {
		if r.Nlink == 0 || !r.IsDirty(b) {
			return nil
		}
		k, gen = BlockKey{r.Ino, b}, c.Gens.Get(r.Ino, b)
		start := b * c.ChunkSize
		if have, ok := c.Up.Block(k); (ok && have.Gen == gen) || start >= r.Size {
			return nil
		}
		buf, keepZero = make([]byte, min(c.ChunkSize, r.Size-start)), r.HasOrigin
		return read(buf, start)
	})
	if err != nil || buf == nil {
		return err
	}
	c.Up.AddBlock(k, gen, buf, keepZero)
	return nil
}

// Frozen captures every dirty block of f that Up does not hold at its
// current generation, under one hold of f's lock (phase B: the namespace
// is frozen). An orphan's blocks are not captured: it is part of no tree.
func (c *Capture) Frozen(f File) error {
	return f.View(func(r *meta.Inode, read func([]byte, uint64) error) error {
		if r.Nlink == 0 {
			return nil
		}
		for _, b := range r.Dirty {
			k, gen := BlockKey{r.Ino, b}, c.Gens.Get(r.Ino, b)
			if have, ok := c.Up.Block(k); ok && have.Gen == gen {
				continue
			}
			start := b * c.ChunkSize
			if start >= r.Size {
				continue
			}
			buf := make([]byte, min(c.ChunkSize, r.Size-start))
			if err := read(buf, start); err != nil {
				return err
			}
			c.Up.AddBlock(k, gen, buf, r.HasOrigin)
		}
		return nil
	})
}

// Clean marks clean, in file record r and its present blocks, the blocks
// of the given ones that the commit covers: those still dirty at the
// generation captured, within the file's size. A covered block's chunk
// becomes its captured reference (a hole drops the chunk), and its local
// bytes stay as cache (present). Clean returns whether r changed and the
// blocks that became cache (for data.File.AddPresent). The caller holds
// the file still (its lock, or the namespace lock for a file not open)
// and stores r and present.
func (c *Capture) Clean(r *meta.Inode, present map[uint64]bool, blocks []uint64) (changed bool, cached []uint64) {
	for _, b := range blocks {
		ub, _ := c.Up.Block(BlockKey{r.Ino, b})
		if !r.IsDirty(b) || c.Gens.Get(r.Ino, b) != ub.Gen || b*c.ChunkSize >= r.Size {
			continue
		}
		if ub.Zero {
			i, found := slices.BinarySearchFunc(r.Chunks, b, func(c snapshot.Chunk, t uint64) int { return cmp.Compare(c.Index, t) })
			if found {
				r.Chunks = slices.Delete(r.Chunks, i, i+1)
			}
		} else {
			r.SetChunk(b, ub.Ref)
			present[b] = true
			cached = append(cached, b)
		}
		r.RemoveDirty(b)
		changed = true
	}
	return changed, cached
}

// Forget drops the generations of the given blocks of r that are clean.
func (c *Capture) Forget(r *meta.Inode, blocks []uint64) {
	for _, b := range blocks {
		if !r.IsDirty(b) {
			c.Gens.Forget(r.Ino, b)
		}
	}
}
