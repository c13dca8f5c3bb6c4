package data

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestFilePin: only a whole file pins; a pinned file's data file has the
// file's size, grows with it, is passed over by eviction, and its present
// blocks and holes are adoptable; the invariants catch a pinned file that
// stops being whole or whose data file is short.
func TestFilePin(t *testing.T) {
	const bs = 4
	s := newSources(t, bs, nil)
	d := NewFile(s, 5, nil, nil)
	t.Cleanup(d.Close)
	l := &testLayout{size: 10, dirty: map[uint64]bool{}, chunks: map[uint64]bool{1: true}}
	if err := d.Install(l, 0, []byte("abcd")); err != nil {
		t.Fatal(err)
	}
	if f, err := d.Pin(l, false); f != nil || err != nil || d.Pinned() {
		t.Fatalf("pin with block 1 remote: %v, %v", f, err)
	}
	if err := d.Install(l, 1, []byte("efgh")); err != nil {
		t.Fatal(err)
	}
	f, err := d.Pin(l, false) // block 2 is a hole
	if err != nil || f == nil || !d.Pinned() {
		t.Fatalf("pin of a whole file: %v, %v", f, err)
	}
	t.Cleanup(func() { f.Close() })
	if st, err := f.Stat(); err != nil || st.Size() != 10 {
		t.Fatalf("pinned data file: %v, %v; want 10 bytes", st, err)
	}
	if err := d.CheckInvariants(l); err != nil {
		t.Fatal(err)
	}
	if err := d.Evict(l, 0, func() error { t.Error("eviction persisted a pinned file"); return nil }); err != nil {
		t.Fatal(err)
	}
	if !d.IsPresent(0) || !d.IsPresent(1) {
		t.Fatal("eviction dropped blocks of a pinned file")
	}
	l.dirty[0] = true
	d.Unpresent(0, l.size)
	if got := d.Adoptable(l); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Errorf("adoptable %v, want [0 1 2] (dirty, present, hole)", got)
	}
	l.size = 20
	if err := d.CheckInvariants(l); err == nil || !strings.Contains(err.Error(), "data file has 10 bytes") {
		t.Errorf("short pinned data file: %v", err)
	}
	if err := d.GrowPinned(l); err != nil {
		t.Fatal(err)
	}
	if st, err := f.Stat(); err != nil || st.Size() != 20 {
		t.Fatalf("grown pinned data file: %v, %v; want 20 bytes", st, err)
	}
	if err := d.CheckInvariants(l); err != nil {
		t.Fatal(err)
	}
	l.chunks[3] = true // a remote block that nothing fetched
	if err := d.CheckInvariants(l); err == nil || !strings.Contains(err.Error(), "not whole") {
		t.Errorf("pinned file with a remote block: %v", err)
	}
	if err := d.Refill(l, map[uint64][]byte{3: []byte("mnop")}); err != nil {
		t.Fatal(err)
	}
	if err := d.CheckInvariants(l); err != nil {
		t.Fatalf("after refill: %v", err)
	}
	d.Unpin()
	if d.Pinned() {
		t.Fatal("pinned after Unpin")
	}
	if got := d.Adoptable(l); got != nil {
		t.Errorf("adoptable of a file not pinned: %v", got)
	}
}

// TestCachePinBudget: the block cache pins a file only within the pin
// budget (half the limit), each pinned file taken at its size when pinned
// or its bytes, the larger, and at most MaxPinnedFiles files; an unpin
// frees its share; a File's first pin asks the cache and its last unpin
// ends the cache's pin.
func TestCachePinBudget(t *testing.T) {
	c := NewCache(100, nil, discard)
	if !c.Pin(1, 30) {
		t.Fatal("a file of 30 bytes refused by a budget of 50")
	}
	if c.Pin(2, 30) {
		t.Fatal("30 more bytes pinned: 60 past a budget of 50 (nothing counted yet: the sizes reserve)")
	}
	if !c.Pin(1, 500) || !c.Pin(2, 20) {
		t.Fatal("a pinned file, or 20 more bytes within the budget, refused")
	}
	c.Add(2, 40) // grew past its size at the pin: its bytes count
	if c.Pin(3, 1) {
		t.Fatal("a file pinned past the budget: 30 + 40 + 1 > 50")
	}
	c.Unpin(2)
	if !c.Pin(3, 20) {
		t.Fatal("the budget freed by an unpin refused")
	}
	if files, bytes := c.Pinned(); files != 2 || bytes != 0 {
		t.Fatalf("pinned %d files, %d bytes; want 2, 0", files, bytes)
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}

	many := NewCache(1<<40, nil, discard)
	for ino := range uint64(MaxPinnedFiles) {
		if !many.Pin(ino, 1) {
			t.Fatalf("file %d of %d refused", ino, MaxPinnedFiles)
		}
	}
	if many.Pin(MaxPinnedFiles, 1) {
		t.Fatalf("more than %d files pinned", MaxPinnedFiles)
	}

	s := newSources(t, 4, nil)
	s.Cache = NewCache(16, nil, discard) // a budget of 8 bytes
	l := &testLayout{size: 10, dirty: map[uint64]bool{0: true, 1: true, 2: true}, chunks: map[uint64]bool{}}
	d := NewFile(s, 5, nil, nil)
	t.Cleanup(d.Close)
	if f, err := d.Pin(l, false); f != nil || err != nil || d.Pinned() {
		t.Fatalf("a whole file of 10 bytes pinned within a budget of 8: %v, %v", f, err)
	}
	l.size = 8
	f, err := d.Pin(l, false)
	if err != nil || f == nil || !s.Cache.IsPinned(5) {
		t.Fatalf("a whole file within the budget: %v, %v, pinned in the cache %v", f, err, s.Cache.IsPinned(5))
	}
	f.Close()
	g, err := d.Pin(l, true)
	if err != nil || g == nil {
		t.Fatalf("second pin: %v, %v", g, err)
	}
	g.Close()
	d.Unpin()
	if !s.Cache.IsPinned(5) {
		t.Fatal("the cache's pin ended before the file's last unpin")
	}
	d.Unpin()
	if s.Cache.IsPinned(5) {
		t.Fatal("the cache's pin outlived the file's last unpin")
	}
}

// TestCachePinnedNotEvicted: pinned bytes count in the total but are never
// evicted, and pinned bytes alone, however many, make no eviction run (not
// from the evict loop's wake-up, not in a reader: Access); the evictable
// bytes are held to the limit less the pinned bytes (up to the budget), so
// the total keeps within the limit.
func TestCachePinnedNotEvicted(t *testing.T) {
	ev := &fakeEvictor{}
	c := NewCache(100, ev, discard)
	ev.c = c
	if !c.Pin(1, 0) {
		t.Fatal("pin refused")
	}
	c.Add(1, 400) // a pinned file grown past four times the limit
	c.Access(context.Background(), 1)
	c.Access(context.Background(), 2)
	if len(ev.order) != 0 {
		t.Fatalf("eviction ran for pinned bytes alone: evicted %v", ev.order)
	}
	select {
	case <-c.wake:
		t.Fatal("the evict loop was woken for pinned bytes alone")
	default:
	}
	c.Unpin(1)
	c.Evict(context.Background())
	if want := []uint64{1}; !equal(ev.order, want) {
		t.Fatalf("evicted %v after the unpin, want %v", ev.order, want)
	}

	ev.order = nil
	if !c.Pin(2, 40) {
		t.Fatal("pin refused")
	}
	c.Add(2, 40)
	c.Add(3, 30)
	c.Add(4, 35) // 65 evictable > 100 - 40
	c.Evict(context.Background())
	if want := []uint64{3}; !equal(ev.order, want) {
		t.Fatalf("evicted %v, want %v (the pinned file passed over)", ev.order, want)
	}
	if got := c.Used(); got != 75 {
		t.Fatalf("used %d, want 75", got)
	}
	if err := c.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
