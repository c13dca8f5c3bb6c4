package data

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
)

// An Evictor drops the clean blocks of one file when the block cache is
// over its limit, and reports the change through Cache.Add or Cache.Drop.
// It is called with Cache.evictMu held (so one eviction runs at a time) and
// never with Cache.mu held.
type Evictor interface {
	// EvictFile drops the clean blocks of file ino that are not about to
	// be read. A file that is gone is no error (it should Drop ino).
	EvictFile(ino uint64) error
}

// Cache accounts for the clean blocks kept in data files, per file with
// the time of its last access, and evicts the least recently used files'
// clean blocks when their total exceeds the limit. Dirty blocks are never
// counted nor evicted (they wait for upload).
//
// Invariants (CheckInvariants): total is the sum of the entries' bytes;
// every entry has bytes > 0; no entry was used later than the clock.
type Cache struct {
	limit   int64
	evictor Evictor
	log     *slog.Logger
	wake    chan struct{}

	// evictMu serializes evictions (the evict loop's and a reader's).
	evictMu sync.Mutex

	mu      sync.Mutex
	total   int64             // guarded by mu
	entries map[uint64]*entry // guarded by mu
	clock   uint64            // guarded by mu
}

type entry struct {
	bytes int64
	used  uint64 // clock value of the last access
}

// NewCache returns an empty cache of limit bytes that evicts through ev
// and logs to log the files it fails to evict.
func NewCache(limit int64, ev Evictor, log *slog.Logger) *Cache {
	return &Cache{limit: limit, evictor: ev, log: log, wake: make(chan struct{}, 1), entries: map[uint64]*entry{}}
}

// Load counts bytes for file ino as when the volume opens: not accessed
// yet, so first in line for eviction. Call it before the cache is used.
func (c *Cache) Load(ino uint64, bytes int64) {
	if bytes <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[ino]
	if e == nil {
		e = &entry{}
		c.entries[ino] = e
	}
	e.bytes += bytes
	c.total += bytes
}

// Add changes ino's cached bytes by delta, counts an access to it, and
// wakes the evict loop when the cache is over its limit.
func (c *Cache) Add(ino uint64, delta int64) {
	c.mu.Lock()
	e := c.entries[ino]
	if e == nil {
		e = &entry{}
		c.entries[ino] = e
	}
	e.bytes += delta
	c.clock++
	e.used = c.clock
	c.total += delta
	over := c.total > c.limit
	if e.bytes <= 0 {
		c.total -= e.bytes
		delete(c.entries, ino)
	}
	c.mu.Unlock()
	if over {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// Touch counts an access to ino.
func (c *Cache) Touch(ino uint64) {
	c.mu.Lock()
	if e := c.entries[ino]; e != nil {
		c.clock++
		e.used = c.clock
	}
	c.mu.Unlock()
}

// Drop forgets ino (its clean blocks are gone).
func (c *Cache) Drop(ino uint64) {
	c.mu.Lock()
	if e := c.entries[ino]; e != nil {
		c.total -= e.bytes
		delete(c.entries, ino)
	}
	c.mu.Unlock()
}

// Bytes returns the bytes counted for file ino.
func (c *Cache) Bytes(ino uint64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[ino]; e != nil {
		return e.bytes
	}
	return 0
}

// Counted returns the bytes counted for each file (a copy), for checks of
// the accounting against the files' present blocks.
func (c *Cache) Counted() map[uint64]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[uint64]int64, len(c.entries))
	for ino, e := range c.entries {
		m[ino] = e.bytes
	}
	return m
}

// Used returns the bytes of clean cached blocks.
func (c *Cache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// OverHard reports whether the cache exceeds its limit by half: a reader
// then evicts itself rather than leave it to the evict loop, which lags
// behind fast readers on a busy machine.
func (c *Cache) OverHard() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total > c.limit+c.limit/2
}

// Run evicts whenever the cache goes over its limit, until ctx ends: the
// volume's evict loop.
func (c *Cache) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		c.Evict(ctx)
	}
}

// Access counts an access to file ino and, if the cache is far over its
// limit (OverHard), evicts in the caller, a reader that outran the evict
// loop. The caller holds no lock the Evictor takes.
func (c *Cache) Access(ctx context.Context, ino uint64) {
	c.Touch(ino)
	if c.OverHard() {
		c.Evict(ctx)
	}
}

// Evict asks the Evictor to drop least recently used files' clean blocks
// until the cache is 10% under its limit (or ctx ends). A file that fails
// is logged and passed over.
func (c *Cache) Evict(ctx context.Context) {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	target := c.limit - c.limit/10
	c.mu.Lock()
	type cand struct {
		ino  uint64
		used uint64
	}
	cands := make([]cand, 0, len(c.entries))
	for ino, e := range c.entries {
		cands = append(cands, cand{ino, e.used})
	}
	over := c.total > target
	c.mu.Unlock()
	if !over {
		return
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].used < cands[j].used })
	for _, cd := range cands {
		if c.Used() <= target || ctx.Err() != nil {
			return
		}
		if err := c.evictor.EvictFile(cd.ino); err != nil {
			c.log.Warn("cache eviction failed", "ino", cd.ino, "err", err)
		}
	}
}

// CheckInvariants returns what of the Cache's invariants does not hold.
func (c *Cache) CheckInvariants() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum int64
	for ino, e := range c.entries {
		if e.bytes <= 0 {
			return fmt.Errorf("file %d counts %d bytes", ino, e.bytes)
		}
		if e.used > c.clock {
			return fmt.Errorf("file %d used at %d, after the clock (%d)", ino, e.used, c.clock)
		}
		sum += e.bytes
	}
	if sum != c.total {
		return fmt.Errorf("total %d, files sum to %d", c.total, sum)
	}
	return nil
}
