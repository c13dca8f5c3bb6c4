package cache

import (
	"context"
	"reflect"
	"testing"
)

// TestSnapshotAndRestoreLive: a snapshot of a live volume is the state at
// the call; a restore brings it back in place (inode numbers of unchanged
// paths kept), and the state before the restore is an automatic snapshot.
func TestSnapshotAndRestoreLive(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	ctx := context.Background()
	v := openVolume(t, url, "")
	d := must[Attr](t)(v.Mkdir(ctx, RootIno, "src", 0o755, Cred{}))
	writeFile(t, v, d.Ino, "main.go", []byte("v1"))
	want := walkAttrs(t, v)
	s, err := v.SaveSnapshot(ctx, "good", "before the agent")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, v, d.Ino, "main.go", []byte("v2 broken"))
	writeFile(t, v, RootIno, "junk", []byte("junk"))
	broken := walkAttrs(t, v)
	res, err := v.Restore(ctx, "good", "undo")
	if err != nil {
		t.Fatal(err)
	}
	if got := walkAttrs(t, v); !reflect.DeepEqual(got, want) {
		t.Fatalf("after restore:\n%v\nwant\n%v", got, want)
	}
	if a := must[Attr](t)(v.Lookup(ctx, RootIno, "src")); a.Ino != d.Ino {
		t.Fatalf("src inode %d -> %d", d.Ino, a.Ino)
	}
	if res.Saved == nil {
		t.Fatal("no automatic snapshot of the state before the restore")
	}
	// The automatic snapshot holds the broken state; a fresh mount of the
	// branch holds the restored one.
	r2 := openVolume(t, url, "", func(o *Options) { o.ReadOnly = true; o.Branch = "main" })
	if got := walkAttrs(t, r2); !reflect.DeepEqual(got, want) {
		t.Fatalf("fresh mount after restore:\n%v", got)
	}
	if _, err := v.Restore(ctx, res.Saved.Name, "redo"); err != nil {
		t.Fatal(err)
	}
	if got := walkAttrs(t, v); !reflect.DeepEqual(got, broken) {
		t.Fatalf("restore of the automatic snapshot:\n%v\nwant\n%v", got, broken)
	}
	if s.Commit.Seq == 0 {
		t.Fatalf("snapshot record: %+v", s)
	}
}
