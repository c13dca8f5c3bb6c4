package data

import (
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
