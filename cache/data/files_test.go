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

func TestKeepOnly(t *testing.T) {
	d, err := NewFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const bs, ino = 4096, 300
	f, err := d.Open(ino, true)
	if err != nil {
		t.Fatal(err)
	}
	all := bytes.Repeat([]byte{'x'}, 5*bs-10) // the last block short
	if _, err := f.Write(all); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := d.KeepOnly(ino, []uint64{1, 3}, bs); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(d.Path(ino))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, len(all))
	copy(want[bs:2*bs], all[bs:2*bs])
	copy(want[3*bs:4*bs], all[3*bs:4*bs])
	if !bytes.Equal(got, want) {
		t.Errorf("after KeepOnly(1, 3): %d bytes differ from blocks 1 and 3 kept, the rest zeros", countDiff(got, want))
	}
	inos, err := d.Inodes()
	if err != nil || len(inos) != 1 || inos[0] != ino {
		t.Errorf("Inodes() = %v, %v; want [%d]", inos, err, ino)
	}
	if err := d.KeepOnly(ino+1, nil, bs); err != nil {
		t.Errorf("KeepOnly of a file without a data file: %v", err)
	}
}

func countDiff(a, b []byte) int {
	n := 0
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n + max(len(a), len(b)) - min(len(a), len(b))
}

// TestWriteZeros: KeepOnly's fallback where holes cannot be punched
// writes zeros over exactly the range, in pieces.
func TestWriteZeros(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	all := bytes.Repeat([]byte{'x'}, 3<<20)
	if err := os.WriteFile(p, all, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const off, end = 100, 5<<19 + 7
	if err := writeZeros(f, off, end); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(all)
	clear(want[off:end])
	if !bytes.Equal(got, want) {
		t.Errorf("after writeZeros(%d, %d): %d bytes differ", off, end, countDiff(got, want))
	}
}
