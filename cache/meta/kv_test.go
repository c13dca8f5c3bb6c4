package meta

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// openKV opens a kv over a fresh Badger in a temporary directory. A small
// memtable makes Badger's transaction limit small enough to hit.
func openKV(t *testing.T, memtable int64) *DB {
	t.Helper()
	opts := badger.DefaultOptions(t.TempDir()).WithLogger(nil).WithDetectConflicts(false)
	if memtable > 0 {
		opts = opts.WithMemTableSize(memtable).WithValueThreshold(1 << 10)
	}
	db, err := badger.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	k := NewDB(db, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { _ = k.Close() })
	t.Cleanup(func() { checkKV(t, k) }) // before the close
	return k
}

// checkKV fails the test if k's invariants do not hold. It waits for a
// flush in progress: never call it with flushMu held.
func checkKV(t *testing.T, k *DB) {
	t.Helper()
	if err := k.CheckInvariants(); err != nil {
		t.Error(err)
	}
}

func kvGet(t *testing.T, txn *Txn, key string) (string, bool) {
	t.Helper()
	it, err := txn.Get([]byte(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := it.ValueCopy(nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

// badgerGet reads key from Badger itself, below the write-behind layer.
func badgerGet(t *testing.T, k *DB, key string) (string, bool) {
	t.Helper()
	var v []byte
	err := k.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get([]byte(key))
		if err != nil {
			return err
		}
		v, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v), true
}

func kvSet(t *testing.T, k *DB, kvs ...string) {
	t.Helper()
	err := k.Update(func(txn *Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			var err error
			if kvs[i+1] == "<del>" {
				err = txn.Delete([]byte(kvs[i]))
			} else {
				err = txn.Set([]byte(kvs[i]), []byte(kvs[i+1]))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func kvScan(t *testing.T, txn *Txn, prefix string) []string {
	t.Helper()
	var out []string
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		_ = it.Item().Value(func(b []byte) error {
			out = append(out, string(it.Item().Key())+"="+string(b))
			return nil
		})
	}
	return out
}

func TestKVReadYourWritesAndLayers(t *testing.T) {
	k := openKV(t, 0)
	kvSet(t, k, "a", "1", "b", "1")
	checkKV(t, k)
	if _, ok := badgerGet(t, k, "a"); ok {
		t.Fatal("a commit reached Badger before any flush")
	}
	txn := k.NewTransaction(true)
	if v, _ := kvGet(t, txn, "a"); v != "1" {
		t.Fatalf("pending value: got %q", v)
	}
	if err := txn.Set([]byte("a"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Delete([]byte("b")); err != nil {
		t.Fatal(err)
	}
	if v, _ := kvGet(t, txn, "a"); v != "2" {
		t.Fatalf("own write: got %q", v)
	}
	if _, ok := kvGet(t, txn, "b"); ok {
		t.Fatal("own delete not seen")
	}
	other := k.NewTransaction(false)
	if v, _ := kvGet(t, other, "a"); v != "1" {
		t.Fatalf("uncommitted write leaked to another transaction: got %q", v)
	}
	other.Discard()
	if err := txn.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, _ := badgerGet(t, k, "a"); v != "2" {
		t.Fatalf("after flush, Badger has a=%q", v)
	}
	if _, ok := badgerGet(t, k, "b"); ok {
		t.Fatal("after flush, Badger still has b")
	}
	err := k.View(func(txn *Txn) error {
		if err := txn.Set([]byte("x"), nil); !errors.Is(err, badger.ErrReadOnlyTxn) {
			return fmt.Errorf("write in a read-only transaction: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestKVIteratorMerges(t *testing.T) {
	k := openKV(t, 0)
	kvSet(t, k, "a1", "b", "a3", "b", "a5", "b", "b1", "b")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	kvSet(t, k, "a2", "p", "a3", "<del>", "a5", "p", "a0", "p")
	checkKV(t, k)
	txn := k.NewTransaction(true)
	defer txn.Discard()
	if err := txn.Set([]byte("a4"), []byte("own")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Delete([]byte("a0")); err != nil {
		t.Fatal(err)
	}
	got := kvScan(t, txn, "a")
	want := []string{"a1=b", "a2=p", "a4=own", "a5=p"}
	if !slices.Equal(got, want) {
		t.Fatalf("scan: got %v, want %v", got, want)
	}
	// The same through the in-flight table: swap it in by hand.
	k.flushMu.Lock()
	k.mu.Lock()
	k.inflight, k.pending = k.pending, newMemtab()
	k.mu.Unlock()
	kvSet(t, k, "a6", "newer")
	txn2 := k.NewTransaction(false)
	got = kvScan(t, txn2, "a")
	txn2.Discard()
	k.mu.Lock()
	k.inflight.absorb(k.pending)
	k.pending, k.inflight = k.inflight, nil
	k.mu.Unlock()
	k.flushMu.Unlock()
	want = []string{"a0=p", "a1=b", "a2=p", "a5=p", "a6=newer"}
	if !slices.Equal(got, want) {
		t.Fatalf("scan over in-flight and pending: got %v, want %v", got, want)
	}
}

// A flush larger than one Badger transaction splits between commits, and
// within a commit only when that commit alone is too large; either way
// every write arrives, last write winning.
func TestKVFlushSplits(t *testing.T) {
	k := openKV(t, 1<<20) // transactions of about 150 KB
	val := bytes.Repeat([]byte("v"), 500)
	want := map[string]string{}
	for c := range 200 {
		err := k.Update(func(txn *Txn) error {
			for i := range 20 {
				key := fmt.Sprintf("k%05d", (c*20+i)%3000)
				v := fmt.Sprintf("%d:%s", c, val)
				want[key] = v
				if err := txn.Set([]byte(key), []byte(v)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// One commit bigger than a transaction.
	err := k.Update(func(txn *Txn) error {
		for i := range 2000 {
			key := fmt.Sprintf("big%05d", i)
			want[key] = string(val)
			if err := txn.Set([]byte(key), val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	for key, v := range want {
		if got, ok := badgerGet(t, k, key); !ok || got != v {
			t.Fatalf("%s: Badger has %.20q (present %v), want %.20q", key, got, ok, v)
		}
	}
}

func TestKVAfterFlush(t *testing.T) {
	k := openKV(t, 0)
	ran := make(chan bool, 1)
	kvSet(t, k, "x", "1")
	checkKV(t, k)
	k.AfterFlush(func() { _, ok := badgerGet(t, k, "x"); ran <- ok })
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	if !<-ran {
		t.Fatal("a hook ran before the commit made before it was in Badger")
	}
}

// A reader whose Badger snapshot predates a flush reads the flushed value
// and leaves no old value in the read cache.
func TestKVReadCacheStaleFill(t *testing.T) {
	k := openKV(t, 0)
	key := string(Key64(PrefixInode, 7))
	kvSet(t, k, key, "old")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	// The reader's pending table gets flushed; the new value lands in the
	// next one, which the reader does not see.
	old := k.NewTransaction(false)
	if _, ok := kvGet(t, old, "unrelated"); ok { // takes old's Badger snapshot
		t.Fatal("unrelated key found")
	}
	kvSet(t, k, "other", "x")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	kvSet(t, k, key, "new")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	// The flush cached "new"; as if evicted since, old reads Badger, in a
	// snapshot newer than the flush (its own is older).
	k.rcMu.Lock()
	delete(k.rc, key)
	k.rcMu.Unlock()
	if v, _ := kvGet(t, old, key); v != "new" {
		t.Fatalf("a transaction older than the flush: got %q", v)
	}
	old.Discard()
	for range 2 { // the second read is served by the cache
		if v, _ := kvGet(t, k.NewTransaction(false), key); v != "new" {
			t.Fatalf("after a stale fill: got %q", v)
		}
	}
	// A cached entry follows later flushes, deletion included.
	kvSet(t, k, key, "<del>")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, ok := kvGet(t, k.NewTransaction(false), key); ok {
		t.Fatal("deleted key still read")
	}
	kvSet(t, k, key, "again")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, _ := kvGet(t, k.NewTransaction(false), key); v != "again" {
		t.Fatalf("after re-creation: got %q", v)
	}
	if err := k.DropPrefix([]byte{PrefixInode}); err != nil {
		t.Fatal(err)
	}
	if _, ok := kvGet(t, k.NewTransaction(false), key); ok {
		t.Fatal("dropped key still read")
	}
}

// Writers, readers and flushes at once (run with -race): every reader sees
// a committed state, and the end state equals the model.
func TestKVConcurrent(t *testing.T) {
	k := openKV(t, 1<<20)
	var mu sync.Mutex
	model := map[string]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := range 500 {
				key := string(Key64(PrefixInode, uint64(w*1000+rng.IntN(50))))
				val := fmt.Sprintf("%d-%d", w, i)
				del := rng.IntN(5) == 0
				mu.Lock() // one writer per key set at a time, as the engine's locks do
				err := k.Update(func(txn *Txn) error {
					if del {
						return txn.Delete([]byte(key))
					}
					return txn.Set([]byte(key), []byte(val))
				})
				if del {
					delete(model, key)
				} else {
					model[key] = val
				}
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					if err := k.Flush(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 300 {
				txn := k.NewTransaction(false)
				_ = kvScan(t, txn, string([]byte{PrefixInode}))
				txn.Discard()
			}
		})
	}
	wg.Wait()
	txn := k.NewTransaction(false)
	defer txn.Discard()
	for key, v := range model {
		if got, _ := kvGet(t, txn, key); got != v {
			t.Fatalf("%x: got %q, want %q", key, got, v)
		}
	}
	if n := len(kvScan(t, txn, string([]byte{PrefixInode}))); n != len(model) {
		t.Fatalf("scan: %d keys, model %d", n, len(model))
	}
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	for key, v := range model {
		if got, _ := badgerGet(t, k, key); got != v {
			t.Fatalf("Badger %x: got %q, want %q", key, got, v)
		}
	}
}

// A read sees every commit made before it, even one that went to a pending
// table created after the transaction began (the flush swapped the tables)
// and even once that table is in Badger after the transaction took its
// snapshot. The engine relies on it: a namespace change that finds no open
// node of a file reads the record the file's last release stored, and a
// stale one wrote a just-written git object back as empty.
func TestKVReadSeesCommitsAfterSwap(t *testing.T) {
	k := openKV(t, 0)
	rec := string(Key64(PrefixInode, 7))   // kept by the read cache
	data := string(Key64(PrefixInline, 7)) // not kept by it
	kvSet(t, k, rec, "old", data, "old")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	kvSet(t, k, "a", "1") // the pending table txn captures is not empty
	checkKV(t, k)
	txn := k.NewTransaction(true)
	defer txn.Discard()
	if err := k.Flush(); err != nil { // swaps in a new pending table
		t.Fatal(err)
	}
	if _, ok := kvGet(t, txn, "unrelated"); ok { // takes txn's Badger snapshot
		t.Fatal("unrelated key found")
	}
	k.flushMu.Lock() // the new table stays pending while read
	kvSet(t, k, rec, "new")
	v, _ := kvGet(t, txn, rec)
	k.flushMu.Unlock()
	if v != "new" {
		t.Errorf("a record committed to the pending table after a flush reads %q", v)
	}
	kvSet(t, k, data, "new")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	if v, _ := kvGet(t, txn, data); v != "new" {
		t.Errorf("a value flushed after the transaction's snapshot reads %q", v)
	}
	if got := kvScan(t, txn, string([]byte{PrefixInode})); !slices.Equal(got, []string{rec + "=new"}) {
		t.Errorf("a scan reads %q", got)
	}
}

// TestKVCheckInvariantsCatches shows that CheckInvariants sees a read cache
// that differs from Badger and a pending table whose index lies.
func TestKVCheckInvariantsCatches(t *testing.T) {
	k := openKV(t, 0)
	kvSet(t, k, "i1", "a", "d1x", "b")
	checkKV(t, k)
	if err := k.Flush(); err != nil {
		t.Fatal(err)
	}
	checkKV(t, k)
	_ = k.View(func(txn *Txn) error { kvGet(t, txn, "i2"); return nil }) // caches an absence

	k.rcMu.Lock()
	saved := k.rc["i1"]
	k.rc["i1"] = rcEntry{val: []byte("stale")}
	k.rcMu.Unlock()
	if err := k.CheckInvariants(); err == nil {
		t.Error("a stale read-cache value passed")
	}
	k.rcMu.Lock()
	k.rc["i1"] = saved
	k.rc["i2"] = rcEntry{val: []byte("ghost")}
	k.rcMu.Unlock()
	if err := k.CheckInvariants(); err == nil {
		t.Error("a read-cache value of an absent key passed")
	}
	k.rcMu.Lock()
	k.rc["i2"] = rcEntry{absent: true}
	k.rcMu.Unlock()
	checkKV(t, k)

	k.mu.Lock()
	k.pending.add([]wentry{{key: "i3", val: []byte("c")}}, nil)
	delete(k.pending.groups[groupOf("i3")], "i3")
	k.mu.Unlock()
	if err := k.CheckInvariants(); err == nil {
		t.Error("a key missing from its prefix group passed")
	}
	k.mu.Lock()
	k.pending.groups[groupOf("i3")]["i3"] = struct{}{}
	k.mu.Unlock()
}
