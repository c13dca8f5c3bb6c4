package fs_test

import (
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentfs/agentfs/fs/fstest"
)

// TestEncryptedTamperIsEIO: a byte changed in a sealed pack of an
// encrypted volume reads as EIO through a mount with a fresh cache, never
// as other data, and fsck --full names the file it damages.
func TestEncryptedTamperIsEIO(t *testing.T) {
	m := fstest.Start(t, fstest.Options{Encrypted: true})
	data := make([]byte, 200<<10)
	_, _ = rand.Read(data)
	if err := os.WriteFile(filepath.Join(m.Dir, "big.bin"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(m.Dir, "small.txt"), []byte("fine"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Unmount(t)

	// The largest pack holds big.bin's chunks (trees go to packs of their own).
	var biggest string
	var size int64
	root := strings.TrimPrefix(m.URL, "file://")
	err := filepath.WalkDir(filepath.Join(root, "packs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.Size() > size {
			biggest, size = p, fi.Size()
		}
		return nil
	})
	if err != nil || size < 200<<10 {
		t.Fatalf("data pack: %v (largest %d bytes)", err, size)
	}
	b, err := os.ReadFile(biggest)
	if err != nil {
		t.Fatal(err)
	}
	b[100] ^= 1
	if err := os.WriteFile(biggest, b, 0o644); err != nil {
		t.Fatal(err)
	}

	ro := fstest.Start(t, fstest.Options{URL: m.URL, Encrypted: true, ReadOnly: true, Dir: filepath.Join(t.TempDir(), "ro")})
	if _, err := os.ReadFile(filepath.Join(ro.Dir, "big.bin")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of the tampered file: %v, want EIO", err)
	}
	if got, err := os.ReadFile(filepath.Join(ro.Dir, "small.txt")); err != nil || string(got) != "fine" {
		t.Fatalf("untouched file: %q %v", got, err)
	}
	out, err := ro.Agentfs("fsck", "--full", m.URL)
	if err == nil || !strings.Contains(out, "big.bin") || !strings.Contains(out, "authenticate") {
		t.Fatalf("fsck --full: %v\n%s", err, out)
	}
}
