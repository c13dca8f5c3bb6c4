package snapshot_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/snapshot"
)

// baseFiles is a small workspace: 20 files in 4 directories.
func baseFiles() map[string]fspec {
	m := map[string]fspec{}
	for d := range 4 {
		for f := range 5 {
			m[fmt.Sprintf("d%d/f%d.txt", d, f)] = fspec{Data: fmt.Sprintf("file %d/%d\n%s", d, f, strings.Repeat("z", 3000+d*100+f))}
		}
	}
	return m
}

func TestThreeForksOfOneSnapshot(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		ctx := v.ctx
		base := baseFiles()
		v.commit("main", base)
		s, err := v.r.SaveSnapshot(ctx, "base", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		baseManifest := manifest(t, v.r, s.Tree())
		_, bytesBefore := packBytes(t, v.store)

		forks := []string{"try-1", "try-2", "try-3"}
		for _, f := range forks {
			c, err := v.r.Fork(ctx, "base", f, snapshot.ForkOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if c.ID.Seq != 1 || c.Kind != "fork" || c.Parent == nil || *c.Parent != s.Commit || c.Root.Tree != s.Root.Tree {
				t.Fatalf("fork commit %+v", c)
			}
		}
		if _, after := packBytes(t, v.store); after != bytesBefore {
			t.Fatalf("forking stored %d bytes", after-bytesBefore)
		}
		// Each fork changes different files.
		var newBytes int64
		for i, f := range forks {
			files := maps.Clone(base)
			p := fmt.Sprintf("d%d/f%d.txt", i, i)
			files[p] = fspec{Data: "changed by " + f}
			files[f+".log"] = fspec{Data: "log of " + f}
			_, b0 := packBytes(t, v.store)
			v.commit(f, files)
			_, b1 := packBytes(t, v.store)
			newBytes += b1 - b0
		}
		for i, f := range forks {
			head, err := v.r.Head(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var changes []string
			err = v.r.Diff(ctx, s.Tree(), snapshot.CommitTree(head), func(c snapshot.Change) error {
				changes = append(changes, fmt.Sprintf("%c %s", c.Op, c.Path))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := []string{fmt.Sprintf("M d%d/f%d.txt", i, i), "A " + f + ".log"}
			if strings.Join(changes, ";") != strings.Join(want, ";") {
				t.Errorf("fork %s sees %v, want %v", f, changes, want)
			}
			if got := readPath(t, v.r, snapshot.CommitTree(head), fmt.Sprintf("d%d/f%d.txt", i, i)); got != "changed by "+f {
				t.Errorf("fork %s reads %q", f, got)
			}
		}
		// The base is unchanged, and so is main.
		s2, err := v.r.GetSnapshot(ctx, "base")
		if err != nil {
			t.Fatal(err)
		}
		if got := manifest(t, v.r, s2.Tree()); !maps.Equal(got, baseManifest) {
			t.Fatal("base snapshot changed")
		}
		mainHead, err := v.r.Head(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		if got := manifest(t, v.r, snapshot.CommitTree(mainHead)); !maps.Equal(got, baseManifest) {
			t.Fatal("main changed")
		}
		// Storage grew by the changes only: each fork's commit stored its
		// two new small files, the directory trees on their paths and
		// its root tree — far less than a copy of the 20 base files.
		var baseData int64
		for _, f := range base {
			baseData += int64(len(f.Data))
		}
		if newBytes > 3*4096 || newBytes <= 0 {
			t.Fatalf("three forks' changes stored %d bytes (base data %d)", newBytes, baseData)
		}
		mustFsck(t, v.r)
	})
}

func TestForkErrors(t *testing.T) {
	v := newVol(t, stores(t)["mem"])
	ctx := v.ctx
	v.commit("main", map[string]fspec{"a": {Data: "1"}})
	v.commit("main", map[string]fspec{"a": {Data: "2"}})
	c, err := v.r.Fork(ctx, "main@2", "old", snapshot.ForkOptions{Message: "from 2"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Message != "from 2" || readPath(t, v.r, snapshot.CommitTree(c), "a") != "1" { // main@1 is the empty init commit
		t.Fatalf("fork of main@2: %+v", c)
	}
	if _, err := v.r.Fork(ctx, "main", "old", snapshot.ForkOptions{}); !errors.Is(err, snapshot.ErrBranchExists) {
		t.Fatalf("fork onto an existing branch: %v", err)
	}
	if _, err := v.r.Fork(ctx, "nope", "x", snapshot.ForkOptions{}); !errors.Is(err, snapshot.ErrNoRef) {
		t.Fatalf("fork of nothing: %v", err)
	}
	if _, err := v.r.Fork(ctx, "main", "bad/name", snapshot.ForkOptions{}); !errors.Is(err, snapshot.ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	// Racing forks to one name: exactly one wins.
	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := v.r.Fork(ctx, "main", "race", snapshot.ForkOptions{})
			errs <- err
		}()
	}
	wins := 0
	for range n {
		if err := <-errs; err == nil {
			wins++
		} else if !errors.Is(err, snapshot.ErrBranchExists) {
			t.Errorf("racing fork: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d racing forks won", wins)
	}
}

func TestBranchListAndRemove(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		v := newVol(t, url)
		ctx := v.ctx
		v.commit("main", map[string]fspec{"a": {Data: "main"}})
		if _, err := v.r.Fork(ctx, "main", "feature", snapshot.ForkOptions{}); err != nil {
			t.Fatal(err)
		}
		v.commit("feature", map[string]fspec{"a": {Data: "main"}, "only-feature": {Data: strings.Repeat("F", 7000)}})
		h := snapshot.Holder{ID: "writer-9", Host: "box", PID: 7}
		if _, err := v.r.AcquireLease(ctx, "feature", h, time.Hour, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
		list, err := v.r.Branches(ctx, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].Name != "feature" || list[0].Head.ID.Seq != 2 || list[0].Lease == nil || !list[0].Lease.Live ||
			list[1].Name != "main" || list[1].Head.ID.Seq != 2 || list[1].Lease != nil {
			t.Fatalf("branches: %+v", list)
		}
		if _, err := v.r.DeleteBranch(ctx, "main", snapshot.DeleteBranchOptions{}); !errors.Is(err, snapshot.ErrDefaultBranch) {
			t.Fatalf("rm main: %v", err)
		}
		_, err = v.r.DeleteBranch(ctx, "feature", snapshot.DeleteBranchOptions{})
		var lh *snapshot.LeaseHeldError
		if !errors.As(err, &lh) || lh.Holder.ID != "writer-9" {
			t.Fatalf("rm of a held branch: %v", err)
		}
		if _, err := v.r.DeleteBranch(ctx, "nope", snapshot.DeleteBranchOptions{}); !errors.Is(err, snapshot.ErrNoCommits) {
			t.Fatalf("rm of a missing branch: %v", err)
		}
		// gc keeps the branch's data while it exists.
		rep, err := v.r.GC(ctx, snapshot.GCOptions{Grace: time.Minute, Now: future(time.Minute)})
		if err != nil || rep.PacksSwept != 0 {
			t.Fatalf("gc before rm: %+v %v", rep, err)
		}
		n, err := v.r.DeleteBranch(ctx, "feature", snapshot.DeleteBranchOptions{Force: true})
		if err != nil || n != 2 {
			t.Fatalf("forced rm: %d %v", n, err)
		}
		list, err = v.r.Branches(ctx, time.Now())
		if err != nil || len(list) != 1 || list[0].Name != "main" {
			t.Fatalf("branches after rm: %+v %v", list, err)
		}
		if _, err := v.r.CurrentLease(ctx, "feature", time.Now()); err != nil {
			t.Fatal(err)
		}
		if li, _ := v.r.CurrentLease(ctx, "feature", time.Now()); li != nil {
			t.Fatalf("lease left after rm: %+v", li)
		}
		// The next gc frees the branch's own pack.
		rep, err = v.r.GC(ctx, snapshot.GCOptions{Grace: time.Minute, Now: future(time.Minute)})
		if err != nil || rep.PacksSwept != 1 || rep.BytesFreed <= 0 {
			t.Fatalf("gc after rm: %+v %v", rep, err)
		}
		mustFsck(t, v.r)
		if _, err := v.r.Fork(ctx, "main", "feature", snapshot.ForkOptions{}); err != nil {
			t.Fatalf("reuse the removed name: %v", err)
		}
	})
}
