package meta

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// DB is the cache database: Badger behind an in-memory write-behind layer.
//
// A committed transaction lands in the pending table, which readers consult
// before Badger, and returns at once: no FUSE request waits for Badger's
// writer. A background flusher writes the pending table to Badger a few
// milliseconds later, as one Badger transaction holding the commits in the
// order they were made (split at commit boundaries only when Badger's
// transaction limit forces it), so the database always holds a prefix of
// the commits: a crash loses at most the last few milliseconds of
// unsynced changes and never leaves a state that did not exist. Sync (what
// fsync calls) and SyncUpdate flush and wait; Close flushes.
//
// Hooks registered with AfterFlush run once every earlier commit is in
// Badger — for side effects that must not reach the disk before the
// metadata that justifies them (removing a deleted file's data). They run
// with the flush lock held and must not take any lock of the engine.
//
// Reads see, in order: the transaction's own writes, the pending table and
// the table being flushed (the current ones, then those of the
// transaction's start, which a flush may have swapped out since), the read
// cache, and a Badger snapshot no older than the last completed flush. So a
// read sees every commit made before it: the engine relies on that when a
// namespace change finds no open node of a file and reads the record the
// file's last release committed (possibly after the change's transaction
// began).
//
// The read cache keeps recently read or written inode records and dentries
// (and their absence) as Badger has them, so that a stat or a lookup does
// not search Badger's tables: each flush stores the keys it writes, and a
// value read from Badger is kept only if no flush completed since the
// snapshot it was read from was taken.
type DB struct {
	db  *badger.DB
	log *slog.Logger

	mu       sync.RWMutex // guards pending, inflight, err, closed
	pending  *memtab      // commits not yet handed to Badger
	inflight *memtab      // commits being written to Badger (nil: none)
	err      error        // the last flush's error, until one succeeds
	closed   bool

	rcMu sync.Mutex         // guards rc, gen
	rc   map[string]rcEntry // read cache, of keys cachedKey admits
	gen  uint64             // flushes completed

	flushMu sync.Mutex // one flush at a time
	kick    chan struct{}
	urgent  chan struct{}
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Write-behind tuning. flushDelay bounds how long a change stays only in
// memory (the window a kill -9 may lose without fsync); the limits bound
// the memory the pending table holds.
const (
	flushDelay       = 5 * time.Millisecond
	flushSoftEntries = 8 << 10  // flush without waiting for flushDelay
	flushSoftBytes   = 4 << 20  //
	flushHardEntries = 64 << 10 // commits wait for a flush beyond this
	flushHardBytes   = 32 << 20 //
	BatchCommitOps   = 8 << 10  // a batch commits every so many writes
	readCacheEntries = 64 << 10 // inode records and dentries the read cache keeps
)

// rcEntry is a read-cache entry: a value, or the key's absence.
type rcEntry struct {
	val    []byte
	absent bool
}

// cachedKey says whether the read cache keeps key: inode records and
// dentries, the keys of every lookup and stat.
func cachedKey(key string) bool {
	return len(key) > 0 && (key[0] == PrefixInode || key[0] == PrefixDentry)
}

// NewDB wraps an open Badger database and starts its flusher; Close
// stops it and closes db.
func NewDB(db *badger.DB, log *slog.Logger) *DB {
	k := &DB{db: db, log: log, pending: newMemtab(), rc: map[string]rcEntry{},
		kick: make(chan struct{}, 1), urgent: make(chan struct{}, 1), stop: make(chan struct{})}
	k.wg.Add(1)
	go k.flushLoop()
	return k
}

// wentry is one write: a value, or a deletion.
type wentry struct {
	key string
	val []byte
	del bool
}

// memtab holds committed writes that are not in Badger yet: the last write
// of every key for reads, and every commit in order for the flush.
type memtab struct {
	last   map[string]wentry
	groups map[string]map[string]struct{} // key[:9] → keys, for prefix scans
	log    [][]wentry                     // commits, oldest first
	after  []func()                       // run once the table is in Badger
	n      int                            // writes in log
	bytes  int
}

func newMemtab() *memtab {
	return &memtab{last: map[string]wentry{}, groups: map[string]map[string]struct{}{}}
}

func groupOf(key string) string { return key[:min(len(key), 9)] }

func (m *memtab) empty() bool { return len(m.log) == 0 && len(m.after) == 0 }

// add appends one commit.
func (m *memtab) add(ws []wentry, after []func()) {
	if len(ws) > 0 {
		m.log = append(m.log, ws)
	}
	m.after = append(m.after, after...)
	for _, w := range ws {
		m.last[w.key] = w
		g := groupOf(w.key)
		s := m.groups[g]
		if s == nil {
			s = map[string]struct{}{}
			m.groups[g] = s
		}
		s[w.key] = struct{}{}
		m.n++
		m.bytes += len(w.key) + len(w.val) + 16
	}
}

// absorb appends newer's commits after m's.
func (m *memtab) absorb(newer *memtab) {
	for _, c := range newer.log {
		m.add(c, nil)
	}
	m.after = append(m.after, newer.after...)
}

// collect adds to into the last writes of keys with prefix that into does
// not hold yet.
func (m *memtab) collect(prefix string, into map[string]wentry) {
	scan := func(keys map[string]struct{}) {
		for k := range keys {
			if _, ok := into[k]; !ok && strings.HasPrefix(k, prefix) {
				into[k] = m.last[k]
			}
		}
	}
	if len(prefix) >= 9 {
		scan(m.groups[prefix[:9]])
		return
	}
	for g, keys := range m.groups {
		if strings.HasPrefix(g, prefix) {
			scan(keys)
		}
	}
}

// NewTransaction begins a transaction; update says whether it may write.
//
// The Badger snapshot is taken when first needed: a read served by the
// tables or the read cache costs no Badger transaction. Every read sees
// the commits made before it, so possibly newer than the transaction's
// start, never older: the transaction is not a snapshot. (Namespace
// readers hold the engine's namespace lock (cache.Volume.mu), so what can be newer is file data state, whose
// records are each complete.)
func (k *DB) NewTransaction(update bool) *Txn {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return &Txn{DB: k, update: update, p: k.pending, i: k.inflight}
}

// badger returns the transaction's Badger snapshot, taking it on first use
// and again once a flush completed since it was taken (the flushed table
// may be neither current nor the transaction's). A replaced snapshot stays
// open for its iterators until Discard.
func (t *Txn) badger() *badger.Txn {
	// The generation is read before the snapshot is taken: a flush in
	// between makes it stale, never the value read newer than it.
	t.DB.rcMu.Lock()
	gen := t.DB.gen
	t.DB.rcMu.Unlock()
	if t.bt != nil && t.gen == gen {
		return t.bt
	}
	if t.bt != nil {
		t.old = append(t.old, t.bt)
	}
	t.gen = gen
	t.bt = t.DB.db.NewTransaction(false)
	return t.bt
}

// View runs fn in a read-only transaction.
func (k *DB) View(fn func(*Txn) error) error {
	t := k.NewTransaction(false)
	defer t.Discard()
	return fn(t)
}

// Update runs fn in a read-write transaction and commits it (write-behind).
func (k *DB) Update(fn func(*Txn) error) error {
	t := k.NewTransaction(true)
	defer t.Discard()
	if err := fn(t); err != nil {
		return err
	}
	return t.Commit()
}

// SyncUpdate is Update, returning once the writes (and every earlier
// commit) are in Badger: for records a crash must not lose once later
// changes depend on them (the inode reservation, the clean-close marker,
// the commit a checkpoint recorded).
func (k *DB) SyncUpdate(fn func(*Txn) error) error {
	if err := k.Update(fn); err != nil {
		return err
	}
	return k.Flush()
}

// Flush writes every commit made before it to Badger.
func (k *DB) Flush() error {
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	return k.flushLocked()
}

// Sync flushes and then syncs Badger's files to disk.
func (k *DB) Sync() error {
	if err := k.Flush(); err != nil {
		return err
	}
	return k.db.Sync()
}

// DropPrefix deletes every key with one of the prefixes. The caller keeps
// writers of those keys out while it runs.
func (k *DB) DropPrefix(prefixes ...[]byte) error {
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	if err := k.flushLocked(); err != nil {
		return err
	}
	err := k.db.DropPrefix(prefixes...)
	// After the drop: a read that began before it fills nothing.
	k.rcMu.Lock()
	clear(k.rc)
	k.gen++
	k.rcMu.Unlock()
	return err
}

// RunValueLogGC runs Badger's value-log garbage collection.
func (k *DB) RunValueLogGC(ratio float64) error { return k.db.RunValueLogGC(ratio) }

// Close stops the flusher, flushes what is pending and closes Badger.
func (k *DB) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	k.mu.Unlock()
	close(k.stop)
	k.wg.Wait()
	err := k.Flush()
	return errors.Join(err, k.db.Close())
}

func (k *DB) flushLoop() {
	defer k.wg.Done()
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-k.stop:
			return
		case <-k.kick:
		case <-k.urgent:
		}
		t.Reset(flushDelay)
		select {
		case <-k.stop:
			t.Stop()
			return
		case <-t.C:
		case <-k.urgent:
			t.Stop()
		}
		if err := k.Flush(); err != nil {
			k.log.Error("cache database: write-behind flush failed; changes are kept in memory and retried", "err", err)
			t.Reset(100 * time.Millisecond) // back off before the retry
			select {
			case <-k.stop:
				t.Stop()
				return
			case <-t.C:
			}
			k.wake(false)
		}
	}
}

func (k *DB) wake(urgent bool) {
	ch := k.kick
	if urgent {
		ch = k.urgent
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// cacheLocked puts e in the read cache, evicting an arbitrary eighth of it
// when full. Caller holds k.rcMu.
func (k *DB) cacheLocked(key string, e rcEntry) {
	if _, ok := k.rc[key]; !ok && len(k.rc) >= readCacheEntries {
		for old := range k.rc {
			delete(k.rc, old)
			if len(k.rc) < readCacheEntries*7/8 {
				break
			}
		}
	}
	k.rc[key] = e
}

// flushLocked is Flush with k.flushMu held.
func (k *DB) flushLocked() error {
	k.mu.Lock()
	m := k.pending
	if m.empty() {
		k.mu.Unlock()
		return nil
	}
	k.pending, k.inflight = newMemtab(), m
	k.mu.Unlock()

	err := k.write(m)

	k.mu.Lock()
	if err != nil {
		// Keep the writes visible and retry them with the next flush.
		k.inflight = nil
		m.absorb(k.pending)
		k.pending, k.err = m, err
		k.mu.Unlock()
		return fmt.Errorf("cache database: %w", err)
	}
	k.err = nil
	// The read cache and the generation change before the table stops
	// being visible: a read that misses the tables then finds the flushed
	// value in the cache, or knows its Badger snapshot is older than it.
	k.rcMu.Lock()
	for key, w := range m.last {
		if cachedKey(key) {
			k.cacheLocked(key, rcEntry{val: w.val, absent: w.del})
		}
	}
	k.gen++
	k.rcMu.Unlock()
	k.inflight = nil
	k.mu.Unlock()
	for _, f := range m.after {
		f()
	}
	return nil
}

// write stores m's commits in Badger, in order, in as few transactions as
// Badger's size limit allows, splitting between commits (within one only
// when it alone exceeds the limit).
func (k *DB) write(m *memtab) error {
	txn := k.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	apply := func(w wentry) error {
		if w.del {
			return txn.Delete([]byte(w.key))
		}
		return txn.Set([]byte(w.key), w.val)
	}
	// from is the first write in txn, as (commit, write) indexes.
	fromC, fromW := 0, 0
	for ci := 0; ci < len(m.log); ci++ {
		for wi := 0; wi < len(m.log[ci]); wi++ {
			err := apply(m.log[ci][wi])
			if err == nil {
				continue
			}
			if !errors.Is(err, badger.ErrTxnTooBig) {
				return err
			}
			if ci > fromC {
				// A commit boundary lies in txn: store everything
				// before it, then redo commit ci in a fresh one.
				txn.Discard()
				txn = k.db.NewTransaction(true)
				for c := fromC; c < ci; c++ {
					lo := 0
					if c == fromC {
						lo = fromW
					}
					for _, w := range m.log[c][lo:] {
						if err := apply(w); err != nil {
							return err
						}
					}
				}
				if err := txn.Commit(); err != nil {
					return err
				}
				txn = k.db.NewTransaction(true)
				fromC, fromW, wi = ci, 0, -1
				continue
			}
			// Commit ci alone exceeds a transaction: split it here.
			if err := txn.Commit(); err != nil {
				return err
			}
			txn = k.db.NewTransaction(true)
			fromW = wi
			if err := apply(m.log[ci][wi]); err != nil {
				return err
			}
		}
	}
	return txn.Commit()
}

// Txn is a transaction over DB, with the method set of the parts of
// badger.Txn the engine uses. Conflicts are not detected: the engine's
// locks order writers of the same key.
type Txn struct {
	DB     *DB
	bt     *badger.Txn   // read-only Badger snapshot, nil until badger()
	old    []*badger.Txn // snapshots badger() replaced, discarded with the transaction
	p, i   *memtab       // the pending and in-flight tables at the start
	gen    uint64        // DB.gen when bt was taken
	update bool
	writes []wentry
	own    map[string]int // key → index of its last write in writes
	done   bool
}

// Get returns the item of key, or badger.ErrKeyNotFound.
func (t *Txn) Get(key []byte) (*Item, error) {
	if i, ok := t.own[string(key)]; ok {
		return t.overlayItem(t.writes[i])
	}
	k := t.DB
	k.mu.RLock()
	var w wentry
	var ok bool
	for _, m := range t.tables() {
		if w, ok = m.last[string(key)]; ok {
			break
		}
	}
	k.mu.RUnlock()
	if ok {
		return t.overlayItem(w)
	}
	if !cachedKey(string(key)) {
		it, err := t.badger().Get(key)
		if err != nil {
			return nil, err
		}
		return &Item{bi: it}, nil
	}
	k.rcMu.Lock()
	e, ok := k.rc[string(key)]
	k.rcMu.Unlock()
	if ok {
		return t.overlayItem(wentry{key: string(key), val: e.val, del: e.absent})
	}
	it, err := t.badger().Get(key)
	switch {
	case errors.Is(err, badger.ErrKeyNotFound):
		e = rcEntry{absent: true}
	case err != nil:
		return nil, err
	default:
		if e.val, err = it.ValueCopy(nil); err != nil {
			return nil, err
		}
	}
	k.rcMu.Lock()
	if k.gen == t.gen {
		k.cacheLocked(string(key), e)
	}
	k.rcMu.Unlock()
	return t.overlayItem(wentry{key: string(key), val: e.val, del: e.absent})
}

// tables returns the tables a read consults, newest first: the current
// pending and in-flight ones, then those of the transaction's start. Caller
// holds DB.mu.
func (t *Txn) tables() []*memtab {
	ts := make([]*memtab, 0, 4)
	for _, m := range []*memtab{t.DB.pending, t.DB.inflight, t.p, t.i} {
		if m != nil && !slices.Contains(ts, m) {
			ts = append(ts, m)
		}
	}
	return ts
}

func (t *Txn) overlayItem(w wentry) (*Item, error) {
	if w.del {
		return nil, badger.ErrKeyNotFound
	}
	return &Item{key: []byte(w.key), val: w.val}, nil
}

// Set writes key=val when the transaction commits. Both are copied.
func (t *Txn) Set(key, val []byte) error {
	return t.write(wentry{key: string(key), val: bytes.Clone(val)})
}

// Delete deletes key when the transaction commits.
func (t *Txn) Delete(key []byte) error { return t.write(wentry{key: string(key), del: true}) }

func (t *Txn) write(w wentry) error {
	if !t.update {
		return badger.ErrReadOnlyTxn
	}
	if t.done {
		return badger.ErrDiscardedTxn
	}
	if w.val == nil && !w.del {
		w.val = []byte{}
	}
	if t.own == nil {
		t.own = map[string]int{}
	}
	t.own[w.key] = len(t.writes)
	t.writes = append(t.writes, w)
	return nil
}

// AfterFlush runs fn once every commit made so far is in Badger (at once
// if the database is closed).
func (k *DB) AfterFlush(fn func()) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		fn()
		return
	}
	k.pending.add(nil, []func(){fn})
	k.mu.Unlock()
	k.wake(false)
}

// Commit makes the writes visible to every later transaction and queues
// them for Badger. It waits only when the pending table is over its limit.
func (t *Txn) Commit() error {
	if t.done {
		return badger.ErrDiscardedTxn
	}
	t.Discard()
	if len(t.writes) == 0 {
		return nil
	}
	k := t.DB
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return badger.ErrDBClosed
	}
	k.pending.add(t.writes, nil)
	n, b := k.pending.n, k.pending.bytes
	k.mu.Unlock()
	switch {
	case n >= flushHardEntries || b >= flushHardBytes:
		return k.Flush()
	case n >= flushSoftEntries || b >= flushSoftBytes:
		k.wake(true)
	default:
		k.wake(false)
	}
	return nil
}

// Discard ends the transaction; after Commit it does nothing.
func (t *Txn) Discard() {
	if t.done {
		return
	}
	t.done = true
	if t.bt != nil {
		t.bt.Discard()
	}
	for _, bt := range t.old {
		bt.Discard()
	}
}

// NewIterator iterates over the keys with opts.Prefix in order, merging
// the transaction's view of the tables with Badger's snapshot. Only Prefix
// is honoured among the options' filters.
func (t *Txn) NewIterator(opts badger.IteratorOptions) *Iter {
	prefix := string(opts.Prefix)
	over := map[string]wentry{}
	for _, w := range t.writes {
		if strings.HasPrefix(w.key, prefix) {
			over[w.key] = t.writes[t.own[w.key]]
		}
	}
	k := t.DB
	k.mu.RLock()
	for _, m := range t.tables() {
		m.collect(prefix, over)
	}
	k.mu.RUnlock()
	ws := make([]wentry, 0, len(over))
	for _, w := range over {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b wentry) int { return strings.Compare(a.key, b.key) })
	return &Iter{bi: t.badger().NewIterator(opts), over: ws}
}

// Iter merges a sorted overlay with a Badger iterator; overlay entries
// replace Badger's keys, and deletions hide them.
type Iter struct {
	bi   *badger.Iterator
	over []wentry
	oi   int
	cur  *Item
}

// Rewind positions the iterator at the first key.
func (it *Iter) Rewind() {
	it.bi.Rewind()
	it.oi = 0
	it.settle()
}

// Valid reports whether the iterator is at a key.
func (it *Iter) Valid() bool { return it.cur != nil }

// Item returns the current item, valid until Next.
func (it *Iter) Item() *Item { return it.cur }

// Next moves to the next key.
func (it *Iter) Next() {
	if it.cur == nil {
		return
	}
	if it.cur.bi != nil {
		it.bi.Next()
	} else {
		it.oi++
	}
	it.settle()
}

// settle makes cur the smaller of the two heads, skipping Badger keys the
// overlay replaces and overlay deletions.
func (it *Iter) settle() {
	for {
		var bk []byte
		if it.bi.Valid() {
			bk = it.bi.Item().Key()
		}
		if it.oi < len(it.over) {
			w := it.over[it.oi]
			c := -1
			if bk != nil {
				c = strings.Compare(w.key, string(bk))
			}
			if c == 0 {
				it.bi.Next() // replaced by the overlay
				continue
			}
			if c < 0 {
				if w.del {
					it.oi++
					continue
				}
				it.cur = &Item{key: []byte(w.key), val: w.val}
				return
			}
		}
		if bk == nil {
			it.cur = nil
			return
		}
		it.cur = &Item{bi: it.bi.Item()}
		return
	}
}

// Close releases the iterator.
func (it *Iter) Close() { it.bi.Close() }

// Item is a key and its value, from Badger or from the overlay.
type Item struct {
	bi  *badger.Item
	key []byte
	val []byte
}

// Key returns the key, valid until the iterator moves.
func (i *Item) Key() []byte {
	if i.bi != nil {
		return i.bi.Key()
	}
	return i.key
}

// KeyCopy returns a copy of the key, in dst if it fits.
func (i *Item) KeyCopy(dst []byte) []byte { return append(dst[:0], i.Key()...) }

// Value calls fn with the value, valid only during the call.
func (i *Item) Value(fn func([]byte) error) error {
	if i.bi != nil {
		return i.bi.Value(fn)
	}
	return fn(i.val)
}

// ValueCopy returns a copy of the value, in dst if it fits.
func (i *Item) ValueCopy(dst []byte) ([]byte, error) {
	if i.bi != nil {
		return i.bi.ValueCopy(dst)
	}
	return append(dst[:0], i.val...), nil
}

// CheckInvariants returns what of the write-behind layer's invariants does
// not hold: no table is in flight outside a flush; in the pending table,
// every key's last write is the last in its commit log, the prefix groups
// index exactly its keys, and its write count matches the log; the read
// cache admits only cachedKey keys, stays within its bound, and every entry
// of a key that no table holds equals what Badger holds. It holds off
// flushes while it runs; tests call it (the engine's model test after every
// step).
func (k *DB) CheckInvariants() error {
	k.flushMu.Lock()
	defer k.flushMu.Unlock()
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.inflight != nil {
		return fmt.Errorf("cache database: a table is in flight outside a flush")
	}
	if err := k.pending.check(); err != nil {
		return fmt.Errorf("cache database: pending table: %w", err)
	}
	k.rcMu.Lock()
	defer k.rcMu.Unlock()
	if len(k.rc) > readCacheEntries {
		return fmt.Errorf("cache database: read cache holds %d entries, over its bound %d", len(k.rc), readCacheEntries)
	}
	txn := k.db.NewTransaction(false)
	defer txn.Discard()
	for key, e := range k.rc {
		if !cachedKey(key) {
			return fmt.Errorf("cache database: read cache holds %q, a key it does not admit", key)
		}
		if _, ok := k.pending.last[key]; ok {
			continue // reads find the table first
		}
		it, err := txn.Get([]byte(key))
		switch {
		case errors.Is(err, badger.ErrKeyNotFound):
			if !e.absent {
				return fmt.Errorf("cache database: read cache holds a value of %q, absent from Badger", key)
			}
		case err != nil:
			return fmt.Errorf("cache database: %w", err)
		default:
			val, err := it.ValueCopy(nil)
			if err != nil {
				return fmt.Errorf("cache database: %w", err)
			}
			if e.absent || !bytes.Equal(val, e.val) {
				return fmt.Errorf("cache database: read cache of %q (absent %v) differs from Badger's value", key, e.absent)
			}
		}
	}
	return nil
}

// check returns what of the table's own consistency does not hold.
func (m *memtab) check() error {
	last, n := map[string]wentry{}, 0
	for _, c := range m.log {
		for _, w := range c {
			last[w.key] = w
			n++
		}
	}
	if n != m.n {
		return fmt.Errorf("counts %d writes, its log holds %d", m.n, n)
	}
	if len(last) != len(m.last) {
		return fmt.Errorf("holds %d keys, its log writes %d", len(m.last), len(last))
	}
	for key, w := range last {
		got, ok := m.last[key]
		if !ok || got.del != w.del || !bytes.Equal(got.val, w.val) {
			return fmt.Errorf("last write of %q is not the log's last", key)
		}
		if _, ok := m.groups[groupOf(key)][key]; !ok {
			return fmt.Errorf("key %q missing from its prefix group", key)
		}
	}
	grouped := 0
	for _, keys := range m.groups {
		grouped += len(keys)
	}
	if grouped != len(m.last) {
		return fmt.Errorf("prefix groups index %d keys, the table holds %d", grouped, len(m.last))
	}
	return nil
}
