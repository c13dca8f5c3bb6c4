package data

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// fakeEvictor drops a file whole, as the engine does for a closed file,
// and records the order of its calls.
type fakeEvictor struct {
	c      *Cache
	order  []uint64
	fail   map[uint64]bool
	failed []uint64 // the files it failed to evict
}

func (e *fakeEvictor) EvictFile(ino uint64) error {
	e.order = append(e.order, ino)
	if e.fail[ino] {
		e.failed = append(e.failed, ino)
		return errors.New("boom")
	}
	e.c.Drop(ino)
	return nil
}

// TestCacheInvariants runs random accounting operations and evictions and
// checks the Cache's invariants after each, and that an eviction leaves the
// cache at or under its target (10% under the limit; for the evictable
// bytes, 10% under the limit less the pinned bytes, up to the pin budget)
// unless a file failed.
func TestCacheInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.Int64Range(1, 1<<20).Draw(rt, "limit")
		ev := &fakeEvictor{fail: map[uint64]bool{}}
		c := NewCache(limit, ev, discard)
		ev.c = c
		ino := rapid.Uint64Range(1, 8)
		rt.Repeat(map[string]func(*rapid.T){
			"load": func(rt *rapid.T) { c.Load(ino.Draw(rt, "ino"), rapid.Int64Range(-10, 1<<18).Draw(rt, "bytes")) },
			"add":  func(rt *rapid.T) { c.Add(ino.Draw(rt, "ino"), rapid.Int64Range(-(1<<18), 1<<18).Draw(rt, "delta")) },
			"touch": func(rt *rapid.T) {
				c.Touch(ino.Draw(rt, "ino"))
			},
			"drop":  func(rt *rapid.T) { c.Drop(ino.Draw(rt, "ino")) },
			"pin":   func(rt *rapid.T) { c.Pin(ino.Draw(rt, "ino"), rapid.Int64Range(0, 1<<18).Draw(rt, "size")) },
			"unpin": func(rt *rapid.T) { c.Unpin(ino.Draw(rt, "ino")) },
			"fail":  func(rt *rapid.T) { ev.fail[ino.Draw(rt, "ino")] = rapid.Bool().Draw(rt, "fail") },
			"evict": func(rt *rapid.T) {
				ev.failed = nil
				c.Evict(context.Background())
				files, pinned := c.Pinned()
				if target := limit - limit/10; len(ev.failed) == 0 && files == 0 && c.Used() > target {
					rt.Fatalf("after eviction %d bytes cached, target %d", c.Used(), target)
				}
				soft := limit - min(pinned, c.PinBudget())
				if target := soft - soft/10; len(ev.failed) == 0 && c.Used()-pinned > target {
					rt.Fatalf("after eviction %d bytes evictable (%d pinned), target %d", c.Used()-pinned, pinned, target)
				}
			},
			"": func(rt *rapid.T) {
				if err := c.CheckInvariants(); err != nil {
					rt.Fatal(err)
				}
			},
		})
	})
}

// TestCacheEvictsLeastRecentlyUsed: files go in the order of their last
// access, and eviction stops once under 90% of the limit.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	ev := &fakeEvictor{}
	c := NewCache(100, ev, discard)
	ev.c = c
	c.Load(9, 10) // loaded at open: never accessed, so first
	c.Add(1, 35)
	c.Add(2, 35)
	c.Add(3, 35)
	c.Touch(1)
	c.Evict(context.Background())
	if len(ev.failed) > 0 {
		t.Errorf("evicting %v failed", ev.failed)
	}
	if want := []uint64{9, 2}; !equal(ev.order, want) {
		t.Fatalf("evicted %v, want %v", ev.order, want)
	}
	if got := c.Used(); got != 70 {
		t.Fatalf("used %d, want 70", got)
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestCacheRunWakesOnOverflow: the evict loop runs when an Add goes over
// the limit, not before.
func TestCacheRunWakesOnOverflow(t *testing.T) {
	evicted := make(chan uint64, 4)
	c := NewCache(100, evictFunc(func(ino uint64) error { evicted <- ino; return nil }), discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	c.Add(1, 50)
	c.Add(2, 60)
	if got := <-evicted; got != 1 {
		t.Fatalf("evicted %d first, want 1", got)
	}
	cancel()
	<-done
}

type evictFunc func(ino uint64) error

func (f evictFunc) EvictFile(ino uint64) error { return f(ino) }

func equal(a, b []uint64) bool { return slices.Equal(a, b) }

// discard is a logger that drops everything.
var discard = slog.New(slog.DiscardHandler)
