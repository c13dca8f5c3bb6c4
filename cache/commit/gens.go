package commit

import (
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
