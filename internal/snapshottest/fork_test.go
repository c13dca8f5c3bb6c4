package snapshottest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/snapshot"
)

// TestThreeForksMountedAtOnce: three forks of one snapshot, open at the
// same time (three engines, three cache directories), each writing
// different files concurrently: each sees only its own changes, the base
// and main are unchanged, and the store grows by the changes only.
func TestThreeForksMountedAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		store, repo := InitVolume(t, url)
		base := OpenWorkspace(t, repo, "main")
		for i := range 30 {
			base.WriteFile(fmt.Sprintf("pkg%d/file%d.txt", i%5, i), randBytes(uint64(100+i), 20000))
		}
		base.Sync()
		baseManifest := base.Manifest()
		base.Close()
		if _, err := repo.SaveSnapshot(ctx, "base", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		_, before := PackBytes(t, store)

		const n = 3
		ws := make([]*Workspace, n)
		for i := range n {
			b := fmt.Sprintf("attempt-%d", i)
			if _, err := repo.Fork(ctx, "base", b, snapshot.ForkOptions{}); err != nil {
				t.Fatal(err)
			}
			ws[i] = OpenWorkspace(t, repo, b)
		}
		changeSize := 50000
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := w.WriteFileErr(fmt.Sprintf("pkg%d/file%d.txt", i, i), randBytes(uint64(1000+i), changeSize)); err != nil {
					errs <- err
					return
				}
				if err := w.WriteFileErr(fmt.Sprintf("result-%d.txt", i), []byte(fmt.Sprintf("attempt %d\n", i))); err != nil {
					errs <- err
					return
				}
				if err := w.RemoveErr(fmt.Sprintf("pkg%d/file%d.txt", (11+i)%5, 11+i)); err != nil {
					errs <- err
					return
				}
				errs <- w.V.Sync(ctx)
			}()
		}
		wg.Wait()
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for i, w := range ws {
			got := w.Manifest()
			// What fork i must see: the base, plus its own three changes.
			want := maps.Clone(baseManifest)
			changed := fmt.Sprintf("pkg%d/file%d.txt", i, i)
			added := fmt.Sprintf("result-%d.txt", i)
			removed := fmt.Sprintf("pkg%d/file%d.txt", (11+i)%5, 11+i)
			delete(want, removed)
			ce := want[changed]
			ce.Size, ce.SHA256 = int64(changeSize), hashHex(randBytes(uint64(1000+i), changeSize))
			want[changed] = ce
			ae, ok := got[added]
			if !ok || ae.SHA256 != hashHex([]byte(fmt.Sprintf("attempt %d\n", i))) {
				t.Errorf("fork %d: %s is %+v", i, added, ae)
			}
			delete(got, added)
			if d := posixtest.Diff(want, got, posixtest.IgnoreAtime, posixtest.IgnoreMtime, posixtest.IgnoreCtime); len(d) > 0 {
				t.Errorf("fork %d sees more than its own changes:\n%s", i, strings.Join(d, "\n"))
			}
			if got := w.ReadFile(changed); string(got) != string(randBytes(uint64(1000+i), changeSize)) {
				t.Errorf("fork %d reads wrong content for %s", i, changed)
			}
		}
		for _, w := range ws {
			w.Close()
		}
		// The base snapshot and main are unchanged.
		s, err := repo.GetSnapshot(ctx, "base")
		if err != nil {
			t.Fatal(err)
		}
		sm, err := ManifestOfTree(ctx, repo, s.Tree())
		if err != nil {
			t.Fatal(err)
		}
		diffManifests(t, "base snapshot", sm, baseManifest)
		head, err := repo.Head(ctx, "main")
		if err != nil {
			t.Fatal(err)
		}
		mm, err := ManifestOfTree(ctx, repo, snapshot.CommitTree(head))
		if err != nil {
			t.Fatal(err)
		}
		diffManifests(t, "main", mm, baseManifest)
		// Storage grew by the changes: three incompressible 50,000-byte
		// files, plus small files, trees and commits — not by copies of
		// the 600,000-byte base.
		_, after := PackBytes(t, store)
		grown := after - before
		if grown < int64(n*changeSize) || grown > int64(n*changeSize)+n*16<<10 {
			t.Fatalf("store grew by %d bytes for %d bytes of changes", grown, n*changeSize)
		}
		MustFsck(t, repo)
	})
}
