package cache

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func TestBasicRoundTrip(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	v := openVolume(t, url, "")
	ctx := context.Background()
	d := must[Attr](t)(v.Mkdir(ctx, RootIno, "src", 0o755, Cred{Uid: 5, Gid: 6}))
	a := writeFile(t, v, d.Ino, "main.go", []byte("package main\n"))
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB: two chunks
	writeFile(t, v, RootIno, "big.bin", big)
	if _, err := v.Symlink(ctx, RootIno, "link", "src/main.go", Cred{}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, v, a.Ino); string(got) != "package main\n" {
		t.Fatalf("read = %q", got)
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := must[Status](t)(v.Status(ctx))
	if st.HeadSeq != 2 || st.DirtyDirs != 0 || st.DirtyFiles != 0 {
		t.Fatalf("status after sync: %+v", st)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}

	w := openVolume(t, url, "")
	d2 := must[Attr](t)(w.Lookup(ctx, RootIno, "src"))
	if d2.Uid != 5 || d2.Gid != 6 || d2.Mode != 0o755 {
		t.Fatalf("dir attrs: %+v", d2)
	}
	a2 := must[Attr](t)(w.Lookup(ctx, d2.Ino, "main.go"))
	if got := readFile(t, w, a2.Ino); string(got) != "package main\n" {
		t.Fatalf("fresh read = %q", got)
	}
	b2 := must[Attr](t)(w.Lookup(ctx, RootIno, "big.bin"))
	if b2.Size != uint64(len(big)) {
		t.Fatalf("big size %d", b2.Size)
	}
	if got := readFile(t, w, b2.Ino); !bytes.Equal(got, big) {
		t.Fatalf("big content differs")
	}
	l := must[Attr](t)(w.Lookup(ctx, RootIno, "link"))
	if target := must[string](t)(w.Readlink(ctx, l.Ino)); target != "src/main.go" {
		t.Fatalf("link = %q", target)
	}
	ents := must[[]DirEntry](t)(w.ReadDir(ctx, RootIno))
	if len(ents) != 3 || ents[0].Name != "big.bin" || ents[1].Name != "link" || ents[2].Name != "src" {
		t.Fatalf("readdir = %+v", ents)
	}
	if _, err := w.Lookup(ctx, RootIno, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lookup missing: %v", err)
	}
}
