package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// fsckVol is a volume with history, a snapshot, a fork and hard links:
// main@2 adds docs/ (its data in a pack of its own), main@3 changes
// src/a.go.
func fsckVol(t *testing.T, url string) (*vol, snapshot.Commit) {
	t.Helper()
	v := newVol(t, url)
	v.splitTrees = true
	files := map[string]fspec{
		"src/a.go":    {Data: "package a\n"},
		"src/b.go":    {Data: "package b\n" + strings.Repeat("// b\n", 2000)},
		"docs/guide":  {Data: strings.Repeat("read me ", 1000)},
		"docs/h1":     {Data: "hard linked", Link: "g"},
		"src/deep/h2": {Data: "hard linked", Link: "g"},
		"link":        {Target: "src/a.go"},
	}
	c2 := v.commit("main", files)
	if _, err := v.r.SaveSnapshot(v.ctx, "s2", c2.ID, snapshot.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	files["src/a.go"] = fspec{Data: "package a // v3\n"}
	v.commit("main", files)
	if _, err := v.r.Fork(v.ctx, "main", "fork", snapshot.ForkOptions{}); err != nil {
		t.Fatal(err)
	}
	return v, c2
}

func fsck(t *testing.T, v *vol, full bool) snapshot.FsckReport {
	t.Helper()
	rep, err := v.r.Fsck(context.Background(), snapshot.FsckOptions{Full: full})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// affected flattens a problem's paths: "path<from1,from2>".
func affected(p snapshot.Problem) []string {
	var out []string
	for _, a := range p.Affected {
		out = append(out, a.Path+"<"+strings.Join(a.From, ",")+">")
	}
	return out
}

func TestFsckClean(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v, _ := fsckVol(t, url)
		orphanPack(t, v, "not referenced")
		rep := fsck(t, v, true)
		if !rep.OK() || rep.Branches != 2 || rep.Commits != 4 || rep.Snapshots != 1 || rep.PacksUnreferenced != 1 || rep.BytesVerified == 0 || rep.Trees == 0 {
			t.Fatalf("fsck of a clean volume: %+v", rep)
		}
	})
}

func TestFsckFindsDeletedPack(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v, c2 := fsckVol(t, url)
		e, err := v.r.LookupPath(v.ctx, snapshot.CommitTree(c2), "docs/guide")
		if err != nil {
			t.Fatal(err)
		}
		pack := e.Chunks[0].Ref.Pack
		if err := v.store.Delete(v.ctx, snapshot.PackKey(pack)); err != nil {
			t.Fatal(err)
		}
		for _, full := range []bool{false, true} {
			rep := fsck(t, v, full)
			if len(rep.Problems) != 1 {
				t.Fatalf("full=%v: problems %+v", full, rep.Problems)
			}
			p := rep.Problems[0]
			if p.Object != "pack "+pack.String() || !errors.Is(p.Err, snapshot.ErrMissing) {
				t.Fatalf("problem %+v", p)
			}
			// That pack held every chunk main@2 added: all of main@2's
			// files but the unchanged-later src/a.go rewrite.
			got := affected(p)
			want := []string{
				"docs/guide<fork@1,main@2,main@3,snapshot s2>",
				"docs/h1<fork@1,main@2,main@3,snapshot s2>",
				"src/a.go<main@2,snapshot s2>",
				"src/b.go<fork@1,main@2,main@3,snapshot s2>",
				"src/deep/h2<fork@1,main@2,main@3,snapshot s2>",
			}
			if !slices.Equal(got, want) {
				t.Fatalf("full=%v affected:\n%s\nwant\n%s", full, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
	})
}

func TestFsckFindsFlippedChunk(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v, c2 := fsckVol(t, url)
		e, err := v.r.LookupPath(v.ctx, snapshot.CommitTree(c2), "src/b.go")
		if err != nil {
			t.Fatal(err)
		}
		ref := e.Chunks[1].Ref
		key := snapshot.PackKey(ref.Pack)
		data, err := v.store.Get(v.ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		data[ref.Offset+uint64(ref.Length)/2] ^= 0x40
		if err := v.store.Put(v.ctx, key, data); err != nil {
			t.Fatal(err)
		}
		// Without --full only structure is checked: the footer is intact.
		if rep := fsck(t, v, false); !rep.OK() {
			t.Fatalf("quick fsck: %+v", rep.Problems)
		}
		rep := fsck(t, v, true)
		if len(rep.Problems) != 1 {
			t.Fatalf("problems %+v", rep.Problems)
		}
		p := rep.Problems[0]
		wantObj := fmt.Sprintf("blob %s in pack %s at offset %d", ref.Hash, ref.Pack, ref.Offset)
		if p.Object != wantObj || !errors.Is(p.Err, snapshot.ErrCorrupt) {
			t.Fatalf("problem %s (%v), want %s", p.Object, p.Err, wantObj)
		}
		if got := affected(p); !slices.Equal(got, []string{"src/b.go<fork@1,main@2,main@3,snapshot s2>"}) {
			t.Fatalf("affected %v", got)
		}
		// Reading the file fails the same way (never wrong bytes).
		if _, err := v.r.ReadEntry(v.ctx, e, -1); !errors.Is(err, snapshot.ErrCorrupt) {
			t.Fatalf("read of the flipped chunk: %v", err)
		}
	})
}

func TestFsckFindsMissingTreesAndBadRecords(t *testing.T) {
	v, c2 := fsckVol(t, stores(t)["mem"])
	ctx := v.ctx
	// main@3 and the fork share main@3's trees; remove their pack.
	head, err := v.r.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	if head.Root.Tree.Pack == c2.Root.Tree.Pack {
		t.Fatal("fixture: main@2 and main@3 trees share a pack")
	}
	if err := v.store.Delete(ctx, snapshot.PackKey(head.Root.Tree.Pack)); err != nil {
		t.Fatal(err)
	}
	// A commit that does not decode, and a snapshot record likewise.
	if err := v.store.Put(ctx, snapshot.CommitKey(snapshot.CommitID{Branch: "main", Seq: 4}), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if err := v.store.Put(ctx, snapshot.SnapshotKey("broken"), []byte(`{"name":"broken"}`)); err != nil {
		t.Fatal(err)
	}
	// A commit whose tree names a hard link its link table lacks.
	lonely := v.build(map[string]fspec{"x": {Data: "x", Link: "g2"}, "y": {Data: "y"}})
	lonely.Links = nil
	v.commitTree("nolinks", lonely)

	rep := fsck(t, v, false)
	var got []string
	for _, p := range rep.Problems {
		got = append(got, p.Object+": "+strings.Join(affected(p), " "))
	}
	want := []string{
		"commit main@4: ",
		"link table of nolinks@1: x (link " + linkNameOf("g2") + ")<nolinks@1>",
		"pack " + head.Root.Tree.Pack.String() + ": .<fork@1,main@3>",
		"snapshot broken: ",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// linkNameOf is the link ID the fixture gives to group g.
func linkNameOf(g string) string {
	h := uint64(14695981039346656037)
	for _, c := range []byte(g) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return snapshot.LinkName(h | 1)
}
