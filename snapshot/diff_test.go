package snapshot_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

func diffLines(t *testing.T, v *vol, a, b snapshot.TreeRoot) []string {
	t.Helper()
	var out []string
	err := v.r.Diff(v.ctx, a, b, func(c snapshot.Change) error {
		old, nw := c.Sizes()
		s := fmt.Sprintf("%c %s %s %d->%d", c.Op, c.Path, c.Entry().Type, old, nw)
		if c.Op == snapshot.Modified {
			s += " " + c.What.String()
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDiff(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		a := map[string]fspec{
			"same/deep/f":    {Data: "unchanged"},
			"mod.txt":        {Data: "old content"},
			"grow.bin":       {Data: strings.Repeat("g", 5000)},
			"del.txt":        {Data: "bye"},
			"gone/x":         {Data: "x"},
			"gone/sub/y":     {Data: "yy"},
			"chmod.sh":       {Data: "#!/bin/sh\n", Mode: 0o644},
			"xattr":          {Data: "x", Xattrs: map[string]string{"user.a": "1"}},
			"link":           {Target: "mod.txt"},
			"becomes-dir":    {Data: "file"},
			"becomes-link":   {Data: "file"},
			"owner":          {Data: "o"},
			"emptydir":       {Dir: true},
			"hl/one":         {Data: "linked v1", Link: "g"},
			"same2/deep/two": {Data: "linked v1", Link: "g"},
		}
		b := maps.Clone(a)
		b["mod.txt"] = fspec{Data: "new content!"}
		b["grow.bin"] = fspec{Data: strings.Repeat("g", 9000)}
		delete(b, "del.txt")
		delete(b, "gone/x")
		delete(b, "gone/sub/y")
		b["new/dir/n.txt"] = fspec{Data: "new"}
		b["chmod.sh"] = fspec{Data: "#!/bin/sh\n", Mode: 0o755}
		b["xattr"] = fspec{Data: "x", Xattrs: map[string]string{"user.a": "2"}}
		b["link"] = fspec{Target: "grow.bin"}
		delete(b, "becomes-dir")
		b["becomes-dir/inside"] = fspec{Data: "i"}
		b["becomes-link"] = fspec{Target: "mod.txt"}
		b["owner"] = fspec{Data: "o", Uid: 1000}
		// The hard-linked file changes: only the link table differs, its
		// names' directories (same2/deep is otherwise unchanged) do not.
		b["hl/one"] = fspec{Data: "linked v2", Link: "g"}
		b["same2/deep/two"] = fspec{Data: "linked v2", Link: "g"}
		ta, tb := v.build(a), v.build(b)
		got := diffLines(t, v, ta, tb)
		want := []string{
			"M becomes-dir dir 4->0 type,mode",
			"A becomes-dir/inside file 0->1",
			"M becomes-link symlink 4->7 type,mode",
			"M chmod.sh file 10->10 mode",
			"D del.txt file 3->0",
			"D gone dir 0->0",
			"D gone/sub dir 0->0",
			"D gone/sub/y file 2->0",
			"D gone/x file 1->0",
			"M grow.bin file 5000->9000 content",
			"M hl/one file 9->9 content",
			"M link symlink 7->8 target",
			"M mod.txt file 11->12 content",
			"A new dir 0->0",
			"A new/dir dir 0->0",
			"A new/dir/n.txt file 0->3",
			"M owner file 1->1 owner",
			"M same2/deep/two file 9->9 content",
			"M xattr file 1->1 xattrs",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// Reverse direction mirrors it.
		rev := diffLines(t, v, tb, ta)
		if len(rev) != len(want) {
			t.Fatalf("reverse diff has %d changes: %v", len(rev), rev)
		}
		// A directory that becomes a file: one modification, then what was
		// below the directory, deleted.
		if rev[0] != "M becomes-dir file 0->4 type,mode" || rev[1] != "D becomes-dir/inside file 1->0" {
			t.Fatalf("reverse diff of a directory that becomes a file: %v", rev[:2])
		}
		// Equal trees: no change.
		if d := diffLines(t, v, ta, ta); len(d) != 0 {
			t.Fatalf("self diff: %v", d)
		}
		// Root attributes.
		tc := ta
		tc.Root.Mode = 0o700
		if d := diffLines(t, v, ta, tc); len(d) != 1 || d[0] != "M . dir 0->0 mode" {
			t.Fatalf("root mode diff: %v", d)
		}
		// fn's error stops the diff.
		stop := errors.New("stop")
		n := 0
		err := v.r.Diff(v.ctx, ta, tb, func(snapshot.Change) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Fatalf("stop: %v after %d", err, n)
		}
	})
}

// TestDiffSkipsEqualSubtrees checks that a diff of two large trees that
// differ in a few files reads only the trees on the changed paths.
func TestDiffSkipsEqualSubtrees(t *testing.T) {
	v := newVol(t, stores(t)["mem"])
	files := map[string]fspec{}
	for d := range 100 {
		for f := range 20 {
			files[fmt.Sprintf("dir%03d/sub/f%02d", d, f)] = fspec{Data: fmt.Sprintf("%d-%d", d, f)}
		}
	}
	ta := v.build(files)
	files["dir007/sub/f03"] = fspec{Data: "changed"}
	files["dir042/sub/new"] = fspec{Data: "new"}
	tb := v.build(files)
	before := v.store.Metrics().Snapshot(blobstore.OpGet).Calls
	got := diffLines(t, v, ta, tb)
	reads := v.store.Metrics().Snapshot(blobstore.OpGet).Calls - before
	if len(got) != 2 || !strings.HasPrefix(got[0], "M dir007/sub/f03") || !strings.HasPrefix(got[1], "A dir042/sub/new") {
		t.Fatalf("diff: %v", got)
	}
	// Root, dir007, dir007/sub, dir042, dir042/sub on each side.
	if reads != 10 {
		t.Fatalf("diff read %d objects, want 10 (2 sides x 5 trees)", reads)
	}
}

func TestLookupAndReadEntry(t *testing.T) {
	v := newVol(t, stores(t)["mem"])
	big := strings.Repeat("0123456789", 1000) // 3 chunks of 4 KiB
	tr := v.build(map[string]fspec{"a/b/big": {Data: big}, "a/l": {Target: "b/big"}, "h1": {Data: "hh", Link: "x"}, "a/h2": {Data: "hh", Link: "x"}})
	if got := readPath(t, v.r, tr, "/a/b/big"); got != big {
		t.Fatalf("big: %d bytes", len(got))
	}
	if got := readPath(t, v.r, tr, "a/h2"); got != "hh" {
		t.Fatalf("hard link: %q", got)
	}
	e, err := v.r.LookupPath(v.ctx, tr, "a/b/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.r.ReadEntry(v.ctx, e, 100); !errors.Is(err, snapshot.ErrTooLarge) {
		t.Fatalf("limit: %v", err)
	}
	for _, p := range []string{"nope", "a/nope", "a/b/big/x", "a/l/x"} {
		if _, err := v.r.LookupPath(v.ctx, tr, p); !errors.Is(err, snapshot.ErrNoEntry) {
			t.Errorf("lookup %s: %v", p, err)
		}
	}
	root, err := v.r.LookupPath(v.ctx, tr, ".")
	if err != nil || root.Type != snapshot.TypeDir || root.SubFiles != 4 {
		t.Fatalf("root: %+v %v", root, err)
	}
	if _, err := v.r.ReadEntry(v.ctx, root, -1); !errors.Is(err, snapshot.ErrNoEntry) {
		t.Fatalf("read a dir: %v", err)
	}
	// A sparse file: a hole between chunks reads as zeros.
	sparse := snapshot.Entry{Name: "s", Type: snapshot.TypeFile, Size: 3 * 4096}
	eb, err := v.r.LookupPath(v.ctx, tr, "a/b/big")
	if err != nil {
		t.Fatal(err)
	}
	sparse.Chunks = []snapshot.Chunk{{Index: 2, Ref: eb.Chunks[0].Ref}}
	b, err := v.r.ReadEntry(v.ctx, sparse, -1)
	if err != nil || len(b) != 3*4096 || strings.Trim(string(b[:8192]), "\x00") != "" || string(b[8192:]) != big[:4096] {
		t.Fatalf("sparse read: %d bytes, %v", len(b), err)
	}
}

func TestIsBinary(t *testing.T) {
	cases := []struct {
		in   string
		want bool
	}{
		{"", false},
		{"plain text\n", false},
		{"ünïcödé ✓\n", false},
		{"nul\x00inside", true},
		{"\xff\xfe bad utf8", true},
		{strings.Repeat("a", 7999) + "é" + strings.Repeat("b", 100), false}, // rune cut at 8000
		{strings.Repeat("a", 9000) + "\x00", false},                         // NUL after the sniffed prefix
	}
	for _, c := range cases {
		if got := snapshot.IsBinary([]byte(c.in)); got != c.want {
			t.Errorf("IsBinary(%.20q) = %v", c.in, got)
		}
	}
}
