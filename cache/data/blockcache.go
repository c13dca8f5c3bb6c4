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
// A pinned file (Pin: its data file is a passthrough backing file, see
// pin.go) counts in the total but cannot be evicted. Pins are bounded: at
// most MaxPinnedFiles files, and a file is pinned only if it fits in the
// pin budget, half the limit (PinBudget), beside the pinned files, each
// taken at its size when pinned or the bytes it counts, the larger (a
// file's clean bytes may be counted only after its pin, once a
// checkpoint makes its dirty blocks clean). Eviction looks at the
// evictable bytes only, against the limit less the pinned bytes (at most
// the budget): so the total stays within the limit while the pinned
// bytes do (a pinned file that grows can take them past the budget; then
// the evictable bytes keep within the limit less the budget), and no
// eviction runs for pinned bytes alone, which it could not drop.
//
// Invariants (CheckInvariants): total is the sum of the entries' bytes;
// every entry has bytes > 0; no entry was used later than the clock;
// pinnedBytes is the sum of the pinned files' entries' bytes, and at most
// MaxPinnedFiles files are pinned.
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

	pinned      map[uint64]int64 // files pinned (Pin), with their size then; guarded by mu
	pinnedBytes int64            // bytes of the pinned files' entries; guarded by mu
}

// MaxPinnedFiles bounds the files pinned at once (Cache.Pin): each keeps an
// engine open and a descriptor of its data file in the server.
const MaxPinnedFiles = 1024

type entry struct {
	bytes int64
	used  uint64 // clock value of the last access
}

// NewCache returns an empty cache of limit bytes that evicts through ev
// and logs to log the files it fails to evict.
func NewCache(limit int64, ev Evictor, log *slog.Logger) *Cache {
	return &Cache{limit: limit, evictor: ev, log: log, wake: make(chan struct{}, 1), entries: map[uint64]*entry{}, pinned: map[uint64]int64{}}
}

// PinBudget returns the bytes the pinned files may hold: half the limit.
func (c *Cache) PinBudget() int64 { return c.limit / 2 }

// Pin marks file ino, of size bytes, pinned: its blocks count in the total
// but are never evicted, until Unpin. It refuses (false) if MaxPinnedFiles
// files are pinned or size would not fit in the pin budget beside the
// pinned files (each its size when pinned or its bytes, the larger).
// Pinning a pinned file succeeds and changes nothing.
func (c *Cache) Pin(ino uint64, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pinned[ino]; ok {
		return true
	}
	if len(c.pinned) >= MaxPinnedFiles || c.pinUse()+size > c.PinBudget() {
		return false
	}
	c.pinned[ino] = size
	if e := c.entries[ino]; e != nil {
		c.pinnedBytes += e.bytes
	}
	return true
}

// pinUse returns what the pinned files take of the pin budget: each its
// size when pinned or the bytes it counts, the larger. Caller holds c.mu.
func (c *Cache) pinUse() int64 {
	var use int64
	for ino, size := range c.pinned {
		if e := c.entries[ino]; e != nil {
			size = max(size, e.bytes)
		}
		use += size
	}
	return use
}

// Unpin ends the pin of file ino: its blocks become evictable.
func (c *Cache) Unpin(ino uint64) {
	c.mu.Lock()
	if _, ok := c.pinned[ino]; !ok {
		c.mu.Unlock()
		return
	}
	delete(c.pinned, ino)
	if e := c.entries[ino]; e != nil {
		c.pinnedBytes -= e.bytes
	}
	over := c.over()
	c.mu.Unlock()
	if over {
		c.kick()
	}
}

// IsPinned reports whether file ino is pinned.
func (c *Cache) IsPinned(ino uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pinned[ino]
	return ok
}

// Pinned returns the number of pinned files and their bytes.
func (c *Cache) Pinned() (files int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pinned), c.pinnedBytes
}

// evictLimit returns the bound on the evictable bytes: the limit less the
// pinned bytes, up to the pin budget. Caller holds c.mu.
func (c *Cache) evictLimit() int64 {
	return c.limit - min(c.pinnedBytes, c.PinBudget())
}

// evictable returns the bytes eviction may drop: those of files not
// pinned. Caller holds c.mu.
func (c *Cache) evictable() int64 { return c.total - c.pinnedBytes }

// over reports whether the evictable bytes exceed their bound. Caller
// holds c.mu.
func (c *Cache) over() bool { return c.evictable() > c.evictLimit() }

// kick wakes the evict loop.
func (c *Cache) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// count changes ino's entry, e, by delta bytes, and drops it if it holds
// none. Caller holds c.mu.
func (c *Cache) count(ino uint64, e *entry, delta int64) {
	e.bytes += delta
	c.total += delta
	if _, ok := c.pinned[ino]; ok {
		c.pinnedBytes += delta
	}
	if e.bytes <= 0 {
		c.forget(ino, e)
	}
}

// forget drops ino's entry, e, from the counts. Caller holds c.mu.
func (c *Cache) forget(ino uint64, e *entry) {
	c.total -= e.bytes
	if _, ok := c.pinned[ino]; ok {
		c.pinnedBytes -= e.bytes
	}
	delete(c.entries, ino)
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
	c.count(ino, e, bytes)
}

// Add changes ino's cached bytes by delta, counts an access to it, and
// wakes the evict loop when the evictable bytes are over their bound (the
// limit less the pinned bytes, up to the pin budget).
func (c *Cache) Add(ino uint64, delta int64) {
	c.mu.Lock()
	e := c.entries[ino]
	if e == nil {
		e = &entry{}
		c.entries[ino] = e
	}
	c.clock++
	e.used = c.clock
	c.count(ino, e, delta)
	over := c.over()
	c.mu.Unlock()
	if over {
		c.kick()
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
		c.forget(ino, e)
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

// Used returns the bytes of clean cached blocks, pinned files' included.
func (c *Cache) Used() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// OverHard reports whether the evictable bytes exceed their bound by half:
// a reader then evicts itself rather than leave it to the evict loop,
// which lags behind fast readers on a busy machine. Pinned bytes alone
// never make it true.
func (c *Cache) OverHard() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.evictLimit()
	return c.evictable() > l+l/2
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

// Evict asks the Evictor to drop least recently used files' clean blocks,
// pinned files passed over, until the evictable bytes are 10% under their
// bound (the limit less the pinned bytes, up to the pin budget), or ctx
// ends. A file that fails is logged and passed over.
func (c *Cache) Evict(ctx context.Context) {
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	c.mu.Lock()
	type cand struct {
		ino  uint64
		used uint64
	}
	cands := make([]cand, 0, len(c.entries))
	for ino, e := range c.entries {
		if _, ok := c.pinned[ino]; !ok {
			cands = append(cands, cand{ino, e.used})
		}
	}
	c.mu.Unlock()
	if c.underTarget() {
		return
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].used < cands[j].used })
	for _, cd := range cands {
		if c.underTarget() || ctx.Err() != nil {
			return
		}
		if err := c.evictor.EvictFile(cd.ino); err != nil {
			c.log.Warn("cache eviction failed", "ino", cd.ino, "err", err)
		}
	}
}

// underTarget reports whether the evictable bytes are 10% under their
// bound, where an eviction stops.
func (c *Cache) underTarget() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.evictLimit()
	return c.evictable() <= l-l/10
}

// CheckInvariants returns what of the Cache's invariants does not hold.
func (c *Cache) CheckInvariants() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum, pinned int64
	for ino, e := range c.entries {
		if e.bytes <= 0 {
			return fmt.Errorf("file %d counts %d bytes", ino, e.bytes)
		}
		if e.used > c.clock {
			return fmt.Errorf("file %d used at %d, after the clock (%d)", ino, e.used, c.clock)
		}
		sum += e.bytes
		if _, ok := c.pinned[ino]; ok {
			pinned += e.bytes
		}
	}
	if sum != c.total {
		return fmt.Errorf("total %d, files sum to %d", c.total, sum)
	}
	if pinned != c.pinnedBytes {
		return fmt.Errorf("pinned bytes %d, pinned files sum to %d", c.pinnedBytes, pinned)
	}
	if len(c.pinned) > MaxPinnedFiles {
		return fmt.Errorf("%d files pinned, more than %d", len(c.pinned), MaxPinnedFiles)
	}
	return nil
}
