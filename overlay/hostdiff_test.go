package overlay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHostEntryErrors: an entry gone from the host is "gone" (zero, no
// error); any other failure to stat it fails the diff, naming the path,
// instead of passing for a deletion.
func TestHostEntryErrors(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "f"), []byte("12345"), 0o644); err != nil {
		t.Fatal(err)
	}
	hd, err := OpenHostDir(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hd.Close() })
	d := &hostDiffer{w: &Workspace{host: hd}, ctx: context.Background()}

	if e, err := d.hostEntry("f"); err != nil || e.Size != 5 {
		t.Errorf("hostEntry(f) = %+v, %v; want size 5", e, err)
	}
	for _, p := range []string{"missing", "f/below-a-file"} {
		if e, err := d.hostEntry(p); err != nil || e.Type != 0 {
			t.Errorf("hostEntry(%s) = %+v, %v; want the zero entry (gone)", p, e, err)
		}
	}
	long := strings.Repeat("n", 300) // ENAMETOOLONG: not "gone"
	_, err = d.hostEntry(long)
	if !errors.Is(err, syscall.ENAMETOOLONG) || !strings.Contains(err.Error(), long) {
		t.Errorf("hostEntry(300-byte name) = %v, want ENAMETOOLONG naming the path", err)
	}
}
