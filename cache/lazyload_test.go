package cache

import (
	"context"
	"errors"
	"testing"
)

// TestChangesInUnloadedDirectories: in a fresh cache, directories of the
// base commit are loaded on first use. Lookups and every kind of namespace
// change whose directories are not loaded yet load them first and then
// behave as in loaded ones.
func TestChangesInUnloadedDirectories(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	v := openVolume(t, url, "")
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		di := must[Attr](t)(v.Mkdir(ctx, RootIno, d, 0o755, Cred{}))
		writeFile(t, v, di.Ino, "old", []byte("old "+d))
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}

	w := openVolume(t, url, "")
	dir := map[string]uint64{}
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		dir[d] = must[Attr](t)(w.Lookup(ctx, RootIno, d)).Ino
	}
	// Each change below is the first use of its directories.
	if _, err := w.Lookup(ctx, dir["a"], "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("lookup of a missing name in an unloaded directory: %v", err)
	}
	writeFile(t, w, dir["b"], "new", []byte("new"))
	if _, err := w.Create(ctx, dir["b"], "old", 0o644, Cred{}, true, false); !errors.Is(err, ErrExists) {
		t.Errorf("O_EXCL create over a name of the base: %v", err)
	}
	if err := w.Unlink(ctx, dir["c"], "old"); err != nil {
		t.Errorf("unlink in an unloaded directory: %v", err)
	}
	if err := w.Rename(ctx, dir["d"], "old", dir["e"], "moved", 0); err != nil {
		t.Errorf("rename between unloaded directories: %v", err)
	}
	for d, want := range map[string][]string{"a": {"old"}, "b": {"new", "old"}, "c": nil, "d": nil, "e": {"moved", "old"}} {
		es := must[[]DirEntry](t)(w.ReadDir(ctx, dir[d]))
		var got []string
		for _, e := range es {
			got = append(got, e.Name)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", d, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", d, got, want)
				break
			}
		}
	}
	moved := must[Attr](t)(w.Lookup(ctx, dir["e"], "moved"))
	if got := readFile(t, w, moved.Ino); string(got) != "old d" {
		t.Errorf("moved file reads %q", got)
	}
}
