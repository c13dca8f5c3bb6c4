package cache

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// walkAttrs returns every path's attributes (inode numbers replaced by the
// first path naming the inode), xattrs, symlink target and content hash.
func walkAttrs(t *testing.T, v *Volume) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	firstName := map[uint64]string{}
	var walk func(dir uint64, prefix string)
	walk = func(dir uint64, prefix string) {
		ents, err := v.ReadDir(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			p := prefix + "/" + e.Name
			a, err := v.Lookup(ctx, dir, e.Name)
			if err != nil {
				t.Fatal(err)
			}
			link := firstName[a.Ino]
			if link == "" {
				firstName[a.Ino] = p
				link = p
			}
			a.Ino, a.Parent = 0, 0 // numbers differ between volumes
			desc := fmt.Sprintf("%+v link=%s", a, link)
			if names, _ := v.ListXattr(ctx, a.Ino); names != nil {
				desc += fmt.Sprint(" xattrs=", names)
			}
			switch a.Type {
			case snapshot.TypeSymlink:
				ta, _ := v.Lookup(ctx, dir, e.Name)
				target, _ := v.Readlink(ctx, ta.Ino)
				desc += " -> " + target
			case snapshot.TypeFile:
				ta, _ := v.Lookup(ctx, dir, e.Name)
				desc += fmt.Sprintf(" sha=%x", snapshot.HashOf(readFile(t, v, ta.Ino)))
				xs, _ := v.ListXattr(ctx, ta.Ino)
				for _, x := range xs {
					val, _ := v.GetXattr(ctx, ta.Ino, x)
					desc += fmt.Sprintf(" %s=%q", x, val)
				}
			case snapshot.TypeDir:
				walk(must[Attr](t)(v.Lookup(ctx, dir, e.Name)).Ino, p)
			}
			out[p] = desc
		}
	}
	walk(RootIno, "")
	ra := must[Attr](t)(v.GetAttr(ctx, RootIno))
	ra.Ino, ra.Parent = 0, 0
	out["/"] = fmt.Sprintf("%+v", ra)
	return out
}

// TestFidelity: after Sync, a fresh cache directory sees exactly the same
// tree: bytes, types, modes, owners, times to the nanosecond, link counts,
// hard-link structure, symlink targets, device numbers and xattrs.
func TestFidelity(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url)
	v := openVolume(t, url, "")
	ctx := context.Background()
	u := func(n uint32) *uint32 { return &n }
	ns := func(n int64) *int64 { return &n }
	d := must[Attr](t)(v.Mkdir(ctx, RootIno, "dir", 0o2775, Cred{Uid: 1000, Gid: 1000}))
	f := writeFile(t, v, d.Ino, "file", []byte("hello"))
	must[Attr](t)(v.SetAttr(ctx, f.Ino, SetAttrIn{Mode: u(0o4750), Uid: u(1234), Gid: u(5678),
		Atime: ns(-1_500_000_000_123_456_789), Mtime: ns(4_200_000_000_987_654_321)}))
	if err := v.SetXattr(ctx, f.Ino, "user.mime", []byte("text/plain"), 0); err != nil {
		t.Fatal(err)
	}
	if err := v.SetXattr(ctx, f.Ino, "trusted.bin", []byte{0, 1, 2, 255}, 0); err != nil {
		t.Fatal(err)
	}
	must[Attr](t)(v.Link(ctx, f.Ino, RootIno, "hardlink"))
	must[Attr](t)(v.Link(ctx, f.Ino, d.Ino, "hardlink2"))
	must[Attr](t)(v.Symlink(ctx, d.Ino, "sym", "../hardlink", Cred{Uid: 7, Gid: 8}))
	must[Attr](t)(v.Mknod(ctx, RootIno, "fifo", ModeFIFO|0o600, 0, Cred{}))
	must[Attr](t)(v.Mknod(ctx, RootIno, "null", ModeCharDev|0o666, 0x0103, Cred{}))
	must[Attr](t)(v.Mknod(ctx, RootIno, "sock", ModeSocket|0o644, 0, Cred{}))
	sparse := writeFile(t, v, RootIno, "sparse", nil)
	if _, err := v.Open(ctx, sparse.Ino, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Write(ctx, sparse.Ino, []byte("end"), 64<<20); err != nil {
		t.Fatal(err)
	}
	_ = v.Release(ctx, sparse.Ino)
	must[Attr](t)(v.Mkdir(ctx, d.Ino, "empty", 0o700, Cred{}))
	must[Attr](t)(v.SetAttr(ctx, RootIno, SetAttrIn{Mode: u(0o1777), Mtime: ns(42)}))
	if err := v.SetXattr(ctx, RootIno, "user.root", []byte("r"), 0); err != nil {
		t.Fatal(err)
	}
	before := walkAttrs(t, v)
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after := walkAttrs(t, openVolume(t, url, ""))
	if !reflect.DeepEqual(before, after) {
		for p := range before {
			if before[p] != after[p] {
				t.Errorf("%s:\n before %s\n after  %s", p, before[p], after[p])
			}
		}
		for p := range after {
			if _, ok := before[p]; !ok {
				t.Errorf("%s: appeared", p)
			}
		}
	}
	if len(before) != 11 {
		t.Fatalf("walked %d paths: %v", len(before), before)
	}
}
