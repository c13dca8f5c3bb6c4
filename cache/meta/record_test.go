package meta

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// TestReadDir lists a directory's dentries, sorted by name, with the
// writes of the listing's own transaction and neither another directory's
// nor a deleted one; a dentry whose value does not decode is an error.
func TestReadDir(t *testing.T) {
	k := openKV(t, 0)
	err := k.Update(func(txn *Txn) error {
		for _, d := range []struct {
			dir  uint64
			name string
			ino  uint64
			t    snapshot.EntryType
		}{{2, "b", 5, snapshot.TypeDir}, {2, "a", 4, snapshot.TypeFile}, {3, "x", 6, snapshot.TypeFile}, {1, "y", 2, snapshot.TypeDir}, {2, "gone", 7, snapshot.TypeFile}} {
			if err := txn.Set(DentryKey(d.dir, d.name), DentryValue(d.ino, d.t)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Dentry{{"a", 4, snapshot.TypeFile}, {"b", 5, snapshot.TypeDir}, {"c", 8, snapshot.TypeSymlink}}
	err = k.Update(func(txn *Txn) error {
		if err := txn.Delete(DentryKey(2, "gone")); err != nil {
			return err
		}
		if err := txn.Set(DentryKey(2, "c"), DentryValue(8, snapshot.TypeSymlink)); err != nil {
			return err
		}
		got, err := ReadDir(txn, 2)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			t.Errorf("ReadDir: %v, want %v", got, want)
		}
		if got, err := ReadDir(txn, 9); err != nil || len(got) != 0 {
			t.Errorf("ReadDir of a directory with no dentries: %v, %v", got, err)
		}
		if err := txn.Set(DentryKey(2, "bad"), []byte{1, 2}); err != nil {
			return err
		}
		if _, err := ReadDir(txn, 2); err == nil || !strings.Contains(err.Error(), "value of 2 bytes") {
			t.Errorf("ReadDir over a dentry of 2 bytes: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
