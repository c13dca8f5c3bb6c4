package data

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFilesOpenPunchRemove(t *testing.T) {
	d, err := NewFiles(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := d.Open(300, false); f != nil || err != nil {
		t.Fatalf("open of a missing file without create: %v, %v; want nil, nil", f, err)
	}
	f, err := d.Open(300, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Name(), filepath.Join(d.Dir(), "2c", "300"); got != want {
		t.Fatalf("data file %s, want %s", got, want)
	}
	const bs = 4096
	if _, err := f.Write(bytes.Repeat([]byte{7}, 3*bs)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := d.PunchFile(300, []uint64{1}, bs, true, 2*bs+10); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(d.Path(300))
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(bytes.Repeat([]byte{7}, bs), make([]byte, bs), bytes.Repeat([]byte{7}, 10))
	if !bytes.Equal(b, want) {
		t.Fatalf("after punching block 1 and cutting: %d bytes, not the expected %d", len(b), len(want))
	}
	if err := d.Remove(300); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(300); err != nil {
		t.Fatalf("removing a missing file: %v", err)
	}
	if err := d.PunchFile(300, []uint64{0}, bs, true, 0); err != nil {
		t.Fatalf("punching a missing file: %v", err)
	}
}

func TestPresenceRoundTrip(t *testing.T) {
	p := map[uint64]bool{5: true, 0: true, 1 << 40: true}
	got := DecodePresence(EncodePresence(p))
	if want := []uint64{0, 5, 1 << 40}; !slices.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
}
