package snapshot_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/snapshot"
)

func TestSnapshotSaveGetListDelete(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		ctx := v.ctx
		c2 := v.commit("main", map[string]fspec{"a.txt": {Data: "hello"}, "d/b.txt": {Data: strings.Repeat("x", 9000)}})
		opts := snapshot.SaveOptions{Message: "first", Host: "h1", Now: v.now}
		s, err := v.r.SaveSnapshot(ctx, "base", snapshot.CommitID{Branch: "main"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		if s.Commit != c2.ID || s.Root.Tree != c2.Root.Tree || s.Files() != 2 || s.Bytes() != 9005 || s.Kind != snapshot.KindManual {
			t.Fatalf("saved %+v", s)
		}
		if _, err := v.r.SaveSnapshot(ctx, "base", snapshot.CommitID{Branch: "main"}, opts); !errors.Is(err, snapshot.ErrSnapshotExists) {
			t.Fatalf("duplicate save: %v", err)
		}
		for _, bad := range []string{"", ".hidden", "-x", "a/b", "sp ace", strings.Repeat("n", 101)} {
			if _, err := v.r.SaveSnapshot(ctx, bad, snapshot.CommitID{Branch: "main"}, opts); !errors.Is(err, snapshot.ErrBadName) {
				t.Errorf("name %q: %v", bad, err)
			}
		}
		if _, err := v.r.SaveSnapshot(ctx, "x", snapshot.CommitID{Branch: "nobranch"}, opts); !errors.Is(err, snapshot.ErrNoCommits) {
			t.Fatalf("save of a missing branch: %v", err)
		}
		if _, err := v.r.SaveSnapshot(ctx, "x", snapshot.CommitID{Branch: "main", Seq: 9}, opts); !errors.Is(err, snapshot.ErrMissing) {
			t.Fatalf("save of a missing commit: %v", err)
		}
		s1, err := v.r.SaveSnapshot(ctx, "empty", snapshot.CommitID{Branch: "main", Seq: 1}, snapshot.SaveOptions{Now: v.now})
		if err != nil {
			t.Fatal(err)
		}
		if s1.Files() != 0 || s1.Commit.Seq != 1 {
			t.Fatalf("snapshot of main@1: %+v", s1)
		}

		// Another process sees them.
		r2 := v.reopen()
		got, err := r2.GetSnapshot(ctx, "base")
		if err != nil || got.Message != "first" || got.Host != "h1" || got.Root.Tree != s.Root.Tree {
			t.Fatalf("get: %+v %v", got, err)
		}
		list, err := r2.ListSnapshots(ctx, snapshot.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "base" || list[1].Name != "empty" || list[0].UniqueBytes != -1 {
			t.Fatalf("list: %+v", list)
		}
		if nb, ns, err := r2.RefCounts(ctx); err != nil || nb != 1 || ns != 2 {
			t.Fatalf("RefCounts = %d branches, %d snapshots, %v", nb, ns, err)
		}
		if err := r2.DeleteSnapshot(ctx, "base"); err != nil {
			t.Fatal(err)
		}
		if _, err := v.r.GetSnapshot(ctx, "base"); !errors.Is(err, snapshot.ErrNoSnapshot) {
			t.Fatalf("get after rm: %v", err)
		}
		if err := v.r.DeleteSnapshot(ctx, "base"); !errors.Is(err, snapshot.ErrNoSnapshot) {
			t.Fatalf("rm twice: %v", err)
		}
		// The name is free again.
		if _, err := v.r.SaveSnapshot(ctx, "base", snapshot.CommitID{Branch: "main"}, opts); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSnapshotConcurrentSavesOneWins(t *testing.T) {
	v := newVol(t, stores(t)["mem"])
	v.commit("main", map[string]fspec{"f": {Data: "1"}})
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := v.r.SaveSnapshot(v.ctx, "race", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{})
			errs <- err
		}()
	}
	wins := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, snapshot.ErrSnapshotExists):
			t.Errorf("unexpected error: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d saves won", wins)
	}
}

func TestSnapshotReadableAfterCommitPruned(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		files := map[string]fspec{"keep.txt": {Data: "v1"}, "gone.txt": {Data: strings.Repeat("g", 5000)}}
		v.commit("main", files)
		s, err := v.r.SaveSnapshot(v.ctx, "old", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := manifest(t, v.r, s.Tree())
		v.commit("main", map[string]fspec{"keep.txt": {Data: "v2"}})
		v.commit("main", map[string]fspec{"keep.txt": {Data: "v3"}})
		rep, err := v.r.GC(v.ctx, snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 1}, Grace: time.Minute, Now: future(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if rep.CommitsPruned != 3 || rep.CommitsKept != 1 {
			t.Fatalf("gc: %+v", rep)
		}
		if _, err := v.r.ReadCommit(v.ctx, s.Commit); !errors.Is(err, snapshot.ErrMissing) {
			t.Fatalf("snapshot's commit still there: %v", err)
		}
		if got := manifest(t, v.r, s.Tree()); !maps.Equal(got, want) {
			t.Fatalf("snapshot changed:\n%v\nwant\n%v", got, want)
		}
		mustFsck(t, v.r)
		// A snapshot whose commit was pruned still forks and restores.
		if _, err := v.r.Fork(v.ctx, "old", "from-old", snapshot.ForkOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := v.r.Restore(v.ctx, "old", "main", snapshot.RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		head, err := v.r.Head(v.ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if got := manifest(t, v.r, snapshot.CommitTree(head)); !maps.Equal(got, want) {
			t.Fatalf("restored tree differs")
		}
	})
}

func TestListUniqueBytes(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		ctx := v.ctx
		shared := strings.Repeat("shared ", 2000)
		// Branch tmp: commit 1 = shared + a-only, snapshot A; commit 2 =
		// shared + b-only, snapshot B; then the branch goes away.
		c1 := v.commit("tmp", map[string]fspec{"shared.txt": {Data: shared}, "a.txt": {Data: strings.Repeat("A", 10000)}})
		if _, err := v.r.SaveSnapshot(ctx, "A", c1.ID, snapshot.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		c2 := v.commit("tmp", map[string]fspec{"shared.txt": {Data: shared}, "b.txt": {Data: strings.Repeat("B", 20000)}})
		if _, err := v.r.SaveSnapshot(ctx, "B", c2.ID, snapshot.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		// While tmp's commits are retained, nothing is unique to A or B.
		list, err := v.r.ListSnapshots(ctx, snapshot.ListOptions{Unique: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.UniqueBytes != 0 {
				t.Fatalf("%s unique %d while its commit is retained", s.Name, s.UniqueBytes)
			}
		}
		if _, err := v.r.DeleteBranch(ctx, "tmp", snapshot.DeleteBranchOptions{}); err != nil {
			t.Fatal(err)
		}
		list, err = v.r.ListSnapshots(ctx, snapshot.ListOptions{Unique: true})
		if err != nil {
			t.Fatal(err)
		}
		// A's unique blobs: the chunks of a.txt and A's root tree.
		wantA := uniqueOf(t, v, c1, c2)
		wantB := uniqueOf(t, v, c2, c1)
		got := map[string]int64{}
		for _, s := range list {
			got[s.Name] = s.UniqueBytes
		}
		if got["A"] != wantA || got["B"] != wantB || wantA == 0 || wantB == 0 {
			t.Fatalf("unique = %v, want A=%d B=%d", got, wantA, wantB)
		}
		// rm A, gc: A's unique bytes become dead (its pack also holds the
		// shared chunk, so it is kept whole and reported partial).
		if err := v.r.DeleteSnapshot(ctx, "A"); err != nil {
			t.Fatal(err)
		}
		rep, err := v.r.GC(ctx, snapshot.GCOptions{Grace: time.Minute, Now: future(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if rep.DeadBytes != wantA || rep.PartialPacks != 1 || rep.PacksSwept != 0 {
			t.Fatalf("gc after rm A: %+v (want %d dead bytes)", rep, wantA)
		}
		// rm B, gc: both packs of tmp now hold only dead blobs: they are
		// freed whole, and only main's first pack is left.
		_, before := packBytes(t, v.store)
		if err := v.r.DeleteSnapshot(ctx, "B"); err != nil {
			t.Fatal(err)
		}
		rep, err = v.r.GC(ctx, snapshot.GCOptions{Grace: time.Minute, Now: future(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		n, after := packBytes(t, v.store)
		if rep.PacksSwept != 2 || rep.BytesFreed != before-after || rep.BytesFreed < wantB+wantA || n != 1 || rep.DeadBytes != 0 {
			t.Fatalf("gc after rm B: %+v; packs %d -> %d bytes (%d left); unique A %d B %d", rep, before, after, n, wantA, wantB)
		}
		mustFsck(t, v.r)
	})
}

// uniqueOf sums the stored lengths of the blobs reachable from a and not
// from b (a test oracle independent of the reach walker: full walks).
func uniqueOf(t *testing.T, v *vol, a, b snapshot.Commit) int64 {
	t.Helper()
	locs := func(c snapshot.Commit) map[snapshot.BlobLoc]uint32 {
		m := map[snapshot.BlobLoc]uint32{snapshot.LocOf(c.Root.Tree): c.Root.Tree.Length}
		if c.Links != nil {
			m[snapshot.LocOf(*c.Links)] = c.Links.Length
		}
		err := v.r.Walk(context.Background(), snapshot.CommitTree(c), func(_ string, e snapshot.Entry) error {
			for _, ch := range e.Chunks {
				m[snapshot.LocOf(ch.Ref)] = ch.Ref.Length
			}
			if e.Type == snapshot.TypeDir {
				m[snapshot.LocOf(e.Tree)] = e.Tree.Length
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ma, mb := locs(a), locs(b)
	var n int64
	for k, l := range ma {
		if _, ok := mb[k]; !ok {
			n += int64(l)
		}
	}
	return n
}

func TestResolve(t *testing.T) {
	v := newVol(t, stores(t)["mem"])
	ctx := v.ctx
	c2 := v.commit("main", map[string]fspec{"f": {Data: "2"}})
	v.commit("main", map[string]fspec{"f": {Data: "3"}})
	if _, err := v.r.SaveSnapshot(ctx, "snap", c2.ID, snapshot.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.r.SaveSnapshot(ctx, "main", c2.ID, snapshot.SaveOptions{}); err != nil {
		t.Fatal(err) // a snapshot named like a branch
	}
	cases := []struct {
		ref    string
		commit snapshot.CommitID
		snap   string
		err    error
	}{
		{ref: "snap", commit: c2.ID, snap: "snap"},
		{ref: "snapshot:snap", commit: c2.ID, snap: "snap"},
		{ref: "main@2", commit: c2.ID},
		{ref: "main@head", commit: snapshot.CommitID{Branch: "main", Seq: 3}},
		{ref: "branch:main", commit: snapshot.CommitID{Branch: "main", Seq: 3}},
		{ref: "branch:main@1", commit: snapshot.CommitID{Branch: "main", Seq: 1}},
		{ref: "snapshot:main", commit: c2.ID, snap: "main"},
		{ref: "main", err: snapshot.ErrAmbiguousRef},
		{ref: "nothing", err: snapshot.ErrNoRef},
		{ref: "main@9", err: snapshot.ErrNoRef},
		{ref: "main@0", err: snapshot.ErrBadName},
		{ref: "main@x", err: snapshot.ErrBadName},
		{ref: "bad name", err: snapshot.ErrBadName},
		{ref: "snapshot:nothing", err: snapshot.ErrNoRef},
	}
	for _, c := range cases {
		src, err := v.r.Resolve(ctx, c.ref)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("Resolve(%q) = %v, want %v", c.ref, err, c.err)
			}
			continue
		}
		if err != nil || src.Commit != c.commit || src.Snapshot != c.snap {
			t.Errorf("Resolve(%q) = %+v, %v; want %v %q", c.ref, src, err, c.commit, c.snap)
		}
	}
}

func TestRestore(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		ctx := v.ctx
		v1 := map[string]fspec{
			"a.txt":  {Data: "version one", Xattrs: map[string]string{"user.k": "v"}},
			"dir/b":  {Data: strings.Repeat("b", 5000), Mode: 0o600},
			"ln":     {Target: "a.txt"},
			"h1":     {Data: "linked", Link: "g"},
			"dir/h2": {Data: "linked", Link: "g"},
		}
		c1 := v.commit("main", v1)
		want := manifest(t, v.r, snapshot.CommitTree(c1))
		if _, err := v.r.SaveSnapshot(ctx, "good", c1.ID, snapshot.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		broken := v.commit("main", map[string]fspec{"a.txt": {Data: "agent broke it"}, "junk": {Data: "junk"}})
		brokenManifest := manifest(t, v.r, snapshot.CommitTree(broken))

		res, err := v.r.Restore(ctx, "good", "main", snapshot.RestoreOptions{Now: v.now})
		if err != nil {
			t.Fatal(err)
		}
		if res.Commit.ID.Seq != broken.ID.Seq+1 || res.Commit.Kind != "restore" || *res.Commit.Parent != broken.ID {
			t.Fatalf("restore commit %+v", res.Commit)
		}
		head, err := v.r.Head(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if got := manifest(t, v.r, snapshot.CommitTree(head)); !maps.Equal(got, want) {
			t.Fatalf("restored:\n%v\nwant\n%v", got, want)
		}
		// The pre-restore state is an automatic snapshot.
		if res.Saved == nil || !strings.HasPrefix(res.Saved.Name, "auto-pre-restore-main-") || res.Saved.Kind != snapshot.KindAuto || res.Saved.Commit != broken.ID {
			t.Fatalf("auto snapshot %+v", res.Saved)
		}
		auto, err := v.r.GetSnapshot(ctx, res.Saved.Name)
		if err != nil {
			t.Fatal(err)
		}
		if got := manifest(t, v.r, auto.Tree()); !maps.Equal(got, brokenManifest) {
			t.Fatalf("auto snapshot differs from the pre-restore state")
		}
		// Restoring twice in the same millisecond gives distinct names.
		fixed := func() time.Time { return time.Unix(1800000000, 0) }
		r1, err := v.r.Restore(ctx, "main@1", "main", snapshot.RestoreOptions{Now: fixed})
		if err != nil {
			t.Fatal(err)
		}
		r2, err := v.r.Restore(ctx, "good", "main", snapshot.RestoreOptions{Now: fixed})
		if err != nil {
			t.Fatal(err)
		}
		if r1.Saved.Name == r2.Saved.Name {
			t.Fatalf("auto snapshot names collide: %s", r1.Saved.Name)
		}

		// A live writer of another holder blocks a restore; its own holder
		// may restore.
		h := snapshot.Holder{ID: "w1", Host: "hostx", PID: 42, Mount: "/mnt/ws"}
		l, err := v.r.AcquireLease(ctx, "main", h, time.Hour, time.Now(), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.r.Restore(ctx, "good", "main", snapshot.RestoreOptions{})
		var lh *snapshot.LeaseHeldError
		if !errors.As(err, &lh) || lh.Holder.ID != "w1" || !strings.Contains(err.Error(), "hostx") {
			t.Fatalf("restore under a live lease: %v", err)
		}
		if _, err := v.r.Restore(ctx, "good", "main", snapshot.RestoreOptions{Writer: "w1"}); err != nil {
			t.Fatalf("restore by the holder: %v", err)
		}
		_ = l.Release(ctx)

		// Restore onto a branch without commits creates it.
		res, err = v.r.Restore(ctx, "good", "fresh", snapshot.RestoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Saved != nil || res.Commit.ID.Seq != 1 || res.Commit.Parent != nil {
			t.Fatalf("restore onto a new branch: %+v", res)
		}
		if _, err := v.r.Restore(ctx, "nothing", "main", snapshot.RestoreOptions{}); !errors.Is(err, snapshot.ErrNoRef) {
			t.Fatalf("restore of nothing: %v", err)
		}
		mustFsck(t, v.r)
	})
}
