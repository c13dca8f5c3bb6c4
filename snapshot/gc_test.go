package snapshot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/snapshot"
)

// orphanPack stores a pack that nothing references and returns its key's
// modification time.
func orphanPack(t *testing.T, v *vol, data string) (snapshot.PackID, time.Time) {
	t.Helper()
	w := v.r.NewPackWriter()
	w.Add(v.r.EncodeBlob(snapshot.BlobData, []byte(data)))
	if err := v.r.PutPack(v.ctx, w); err != nil {
		t.Fatal(err)
	}
	a, err := v.store.Stat(v.ctx, snapshot.PackKey(w.ID()))
	if err != nil {
		t.Fatal(err)
	}
	return w.ID(), a.ModTime
}

func packExists(t *testing.T, v *vol, id snapshot.PackID) bool {
	t.Helper()
	_, err := v.store.Stat(v.ctx, snapshot.PackKey(id))
	return err == nil
}

func TestGCSweepsOnlyOldUnreferencedPacks(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		v.commit("main", map[string]fspec{"a": {Data: "referenced"}})
		old, oldMod := orphanPack(t, v, "old garbage")
		// Ages are compared with a second of slack for stores whose
		// times are truncated to the second: space the packs further.
		time.Sleep(2100 * time.Millisecond)
		young, youngMod := orphanPack(t, v, "an upload in progress")
		grace := time.Hour
		now := youngMod.Add(grace)
		if youngMod.Sub(oldMod) <= time.Second {
			t.Fatalf("packs written %v apart", youngMod.Sub(oldMod))
		}
		nPacks, _ := packBytes(t, v.store)

		opts := snapshot.GCOptions{Grace: grace, Now: func() time.Time { return now }, DryRun: true}
		dry, err := v.r.GC(v.ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := packBytes(t, v.store); n != nPacks {
			t.Fatalf("dry run deleted %d packs", nPacks-n)
		}
		opts.DryRun = false
		rep, err := v.r.GC(v.ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if rep.PacksSwept != 1 || rep.PacksYoung != 1 || rep.PacksLive != nPacks-2 || rep.PacksTotal != nPacks || rep.Clock != "injected" {
			t.Fatalf("gc: %+v", rep)
		}
		if dry.PacksSwept != rep.PacksSwept || dry.BytesFreed != rep.BytesFreed || !dry.DryRun {
			t.Fatalf("dry run %+v differs from the real one %+v", dry, rep)
		}
		if packExists(t, v, old) || !packExists(t, v, young) {
			t.Fatalf("old pack exists: %v, young pack exists: %v", packExists(t, v, old), packExists(t, v, young))
		}
		mustFsck(t, v.r)
		// With the store's clock (the default), the young pack is kept.
		rep, err = v.r.GC(v.ctx, snapshot.GCOptions{})
		if err != nil || rep.Clock != "store" || rep.PacksSwept != 0 || !packExists(t, v, young) {
			t.Fatalf("gc with the store clock: %+v %v", rep, err)
		}
		// No clock probe object is left behind.
		page, err := v.store.List(v.ctx, "gc/", "", 10)
		if err != nil || len(page.Objects) != 0 {
			t.Fatalf("gc/ holds %v (%v)", page.Objects, err)
		}
	})
}

func TestGCRetention(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		ctx := v.ctx
		for i := 2; i <= 6; i++ {
			v.commit("main", map[string]fspec{"f": {Data: fmt.Sprintf("version %d %s", i, strings.Repeat("v", 100*i))}})
		}
		seqs := func() []uint64 {
			s, err := v.r.ListCommits(ctx, "main")
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		grace := time.Minute
		// Superseded less than the grace period ago: kept whatever the
		// policy says.
		rep, err := v.r.GC(ctx, snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 1}, Grace: time.Hour, Now: time.Now})
		if err != nil || rep.CommitsPruned != 0 || len(seqs()) != 6 {
			t.Fatalf("gc within grace: %+v %v %v", rep, err, seqs())
		}
		// Keep within a window that covers everything.
		rep, err = v.r.GC(ctx, snapshot.GCOptions{Policy: snapshot.Retention{KeepWithin: 2 * time.Hour}, Grace: grace, Now: future(grace)})
		if err != nil || rep.CommitsPruned != 0 {
			t.Fatalf("keep within 2h: %+v %v", rep, err)
		}
		// Keep the last 3: commits 1..3 go, and the packs only they used.
		rep, err = v.r.GC(ctx, snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 3}, Grace: grace, Now: future(grace)})
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(seqs()); got != "[4 5 6]" || rep.CommitsPruned != 3 || rep.CommitsKept != 3 || rep.PacksSwept != 3 {
			t.Fatalf("keep last 3: commits %s, %+v", got, rep)
		}
		// Parents of the oldest kept commit are gone; readers tolerate it.
		c4, err := v.r.ReadCommit(ctx, snapshot.CommitID{Branch: "main", Seq: 4})
		if err != nil || c4.Parent == nil || c4.Parent.Seq != 3 {
			t.Fatalf("commit 4: %+v %v", c4, err)
		}
		// A tiny window keeps only the head.
		rep, err = v.r.GC(ctx, snapshot.GCOptions{Policy: snapshot.Retention{KeepWithin: time.Millisecond}, Grace: grace, Now: future(grace)})
		if err != nil || fmt.Sprint(seqs()) != "[6]" || rep.CommitsPruned != 2 {
			t.Fatalf("keep within 1ms: %v %+v %v", seqs(), rep, err)
		}
		head, err := v.r.Head(ctx, "main")
		if err != nil || readPath(t, v.r, snapshot.CommitTree(head), "f") != fmt.Sprintf("version 6 %s", strings.Repeat("v", 600)) {
			t.Fatalf("head after gc: %v", err)
		}
		mustFsck(t, v.r)
	})
}

func TestGCAbortsOnDamage(t *testing.T) {
	v := newVol(t, stores(t)["mem"])
	v.splitTrees = true
	v.commit("main", map[string]fspec{"d/x": {Data: "x"}})
	garbage, _ := orphanPack(t, v, "garbage")
	head, err := v.r.Head(v.ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	// Lose the pack of the head's trees.
	if err := v.store.Delete(v.ctx, snapshot.PackKey(head.Root.Tree.Pack)); err != nil {
		t.Fatal(err)
	}
	rep, err := v.r.GC(v.ctx, snapshot.GCOptions{Grace: time.Minute, Now: future(time.Minute)})
	if !errors.Is(err, snapshot.ErrMissing) || !strings.Contains(err.Error(), "fsck") {
		t.Fatalf("gc on a damaged volume: %v", err)
	}
	if rep.PacksSwept != 0 || !packExists(t, v, garbage) {
		t.Fatalf("gc swept on a damaged volume: %+v", rep)
	}
}

func TestGCProgress(t *testing.T) {
	v := newVol(t, stores(t)["mem"])
	for i := range 3 {
		v.commit("main", map[string]fspec{"f": {Data: fmt.Sprint(i)}})
	}
	phases := map[string]bool{}
	_, err := v.r.GC(context.Background(), snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 1}, Grace: time.Minute, Now: future(time.Minute),
		Progress: func(p snapshot.Progress) { phases[p.Phase] = true }})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range []string{"list", "prune", "recheck", "sweep", "scan"} {
		if !phases[ph] {
			t.Errorf("no progress for phase %s (got %v)", ph, phases)
		}
	}
}

// TestGCDefaultRetention applies the default policy on real stores: within
// the hour it removes nothing; a week and a day later only the branch
// heads and the snapshots are left, their data intact, and fsck --full
// finds nothing wrong.
func TestGCDefaultRetention(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		ctx := v.ctx
		for i := range 5 {
			v.commit("main", map[string]fspec{"f": {Data: fmt.Sprintf("main %d %s", i, strings.Repeat("m", 500))}})
			v.commit("side", map[string]fspec{"g": {Data: fmt.Sprintf("side %d %s", i, strings.Repeat("s", 500))}})
			if i == 1 {
				if _, err := v.r.SaveSnapshot(ctx, "old", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		gc := func(ahead time.Duration) snapshot.GCReport {
			t.Helper()
			rep, err := v.r.GC(ctx, snapshot.GCOptions{Policy: snapshot.DefaultRetention(), Grace: time.Minute,
				Now: func() time.Time { return time.Now().Add(ahead) }})
			if err != nil {
				t.Fatal(err)
			}
			return rep
		}
		if rep := gc(30 * time.Minute); rep.CommitsPruned != 0 || rep.CommitsKept != 11 {
			t.Fatalf("within the hour: %+v", rep)
		}
		if n, err := v.r.Prunable(ctx, snapshot.DefaultRetention(), time.Now().Add(8*24*time.Hour), time.Minute); err != nil || n != 9 {
			t.Fatalf("prunable a week later: %d %v", n, err)
		}
		rep := gc(8 * 24 * time.Hour)
		if rep.CommitsKept != 2 || rep.CommitsPruned != 9 || rep.PacksSwept == 0 {
			t.Fatalf("a week later: %+v", rep)
		}
		for branch, want := range map[string]string{"main": "main 4", "side": "side 4"} {
			seqs, err := v.r.ListCommits(ctx, branch)
			if err != nil || len(seqs) != 1 {
				t.Fatalf("%s: commits %v %v", branch, seqs, err)
			}
			head, err := v.r.Head(ctx, branch)
			if err != nil {
				t.Fatal(err)
			}
			if got := readPath(t, v.r, snapshot.CommitTree(head), map[string]string{"main": "f", "side": "g"}[branch]); !strings.HasPrefix(got, want) {
				t.Fatalf("%s head reads %q", branch, got[:10])
			}
		}
		s, err := v.r.GetSnapshot(ctx, "old")
		if err != nil || !strings.HasPrefix(readPath(t, v.r, s.Tree(), "f"), "main 1") {
			t.Fatalf("snapshot old: %v", err)
		}
		mustFsck(t, v.r)
	})
}
