package commit

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
)

// Gens tracks the write generation of dirty blocks, across the lifetimes
// of open files. A write bumps its blocks' generations; a checkpoint
// records the generation of the copy it captured, and clears a block's
// dirty mark only if the generation is still the same (a block written
// meanwhile stays dirty). A generation is unique volume-wide; a block
// without one (after a restart) has generation 0. The zero value is ready
// to use; all methods are safe for concurrent use, and take a leaf lock.
type Gens struct {
	mu  sync.Mutex
	m   map[BlockKey]uint64 // guarded by mu
	seq atomic.Uint64
}

// Bump gives block b of file ino a new generation.
func (g *Gens) Bump(ino, b uint64) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[BlockKey]uint64{}
	}
	g.m[BlockKey{ino, b}] = g.seq.Add(1)
	g.mu.Unlock()
}

// Get returns the generation of block b of file ino (0 if it has none).
func (g *Gens) Get(ino, b uint64) uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[BlockKey{ino, b}]
}

// Forget drops the generation of block b of file ino (the block is clean,
// or gone).
func (g *Gens) Forget(ino, b uint64) {
	g.mu.Lock()
	delete(g.m, BlockKey{ino, b})
	g.mu.Unlock()
}

// CheckInvariants returns what of Gens' invariants does not hold: no two
// blocks share a generation, none is 0 or above the sequence they are drawn
// from, and each names a block that dirty (the caller's records) reports
// dirty; dirty's error is returned. dirty is called without Gens' lock.
func (g *Gens) CheckInvariants(dirty func(ino, b uint64) (bool, error)) error {
	g.mu.Lock()
	gens := maps.Clone(g.m)
	seq := g.seq.Load()
	g.mu.Unlock()
	seen := map[uint64]BlockKey{}
	for k, gen := range gens {
		if gen == 0 || gen > seq {
			return fmt.Errorf("block %d of file %d: generation %d, sequence at %d", k.Index, k.Ino, gen, seq)
		}
		if o, dup := seen[gen]; dup {
			return fmt.Errorf("block %d of file %d and block %d of file %d share generation %d", k.Index, k.Ino, o.Index, o.Ino, gen)
		}
		seen[gen] = k
		d, err := dirty(k.Ino, k.Index)
		if err != nil {
			return fmt.Errorf("generation of block %d of file %d: %w", k.Index, k.Ino, err)
		}
		if !d {
			return fmt.Errorf("block %d of file %d has generation %d and is not dirty", k.Index, k.Ino, gen)
		}
	}
	return nil
}
