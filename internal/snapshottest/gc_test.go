package snapshottest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/internal/posixtest"
	"github.com/agentfs/agentfs/snapshot"
)

// files returns path -> content hash of the regular files of m.
func files(m posixtest.Manifest) map[string]string {
	out := map[string]string{}
	for p, e := range m {
		if e.Type == posixtest.TypeFile {
			out[p] = e.SHA256
		}
	}
	return out
}

func modelHashes(model map[string][]byte) map[string]string {
	out := make(map[string]string, len(model))
	for p, b := range model {
		out[p] = hashHex(b)
	}
	return out
}

func compareFiles(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	var d []string
	for p, h := range want {
		if got[p] != h {
			d = append(d, fmt.Sprintf("%s: got %.12s want %.12s", p, got[p], h))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			d = append(d, p+": unexpected")
		}
	}
	slices.Sort(d)
	t.Fatalf("%s differs:\n%s", what, strings.Join(d, "\n"))
}

// TestGCRacingLiveWriter runs gc in a loop (retention keep-last 1, a grace
// period of a few seconds on the store's clock) while a writer overwrites,
// adds and removes files, syncs, saves and removes snapshots and forks.
// Afterwards fsck is clean and every branch, snapshot and fork reads back
// exactly what the writer's model says — and gc did delete commits and
// packs along the way, so the race was real.
func TestGCRacingLiveWriter(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		_, repo := InitVolume(t, url)
		w := OpenWorkspace(t, repo, "main")
		const grace = 4 * time.Second
		runFor := 10 * time.Second

		var mu sync.Mutex
		var gcRuns, pruned, swept int
		var gcErr error
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := repo.GC(ctx, snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 1}, Grace: grace})
				mu.Lock()
				gcRuns++
				pruned += rep.CommitsPruned
				swept += rep.PacksSwept
				if err != nil && gcErr == nil {
					gcErr = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()

		rng := rand.New(rand.NewPCG(7, uint64(len(url))))
		model := map[string][]byte{}
		snaps := map[string]map[string]string{} // snapshot -> files
		var order []string                      // snapshots, oldest first
		forks := map[string]map[string]string{} // branch -> files
		start := time.Now()
		for op := 0; time.Since(start) < runFor; op++ {
			p := fmt.Sprintf("d%d/f%d", rng.IntN(4), rng.IntN(25))
			switch k := rng.IntN(10); {
			case k < 6:
				data := randBytes(rng.Uint64(), 1+rng.IntN(150<<10))
				if err := w.WriteFileErr(p, data); err != nil {
					t.Fatal(err)
				}
				model[p] = data
			case k < 8:
				if _, ok := model[p]; ok {
					if err := w.RemoveErr(p); err != nil {
						t.Fatal(err)
					}
					delete(model, p)
				}
			default:
				w.Sync()
			}
			if op%15 == 14 {
				w.Sync()
				name := fmt.Sprintf("race-%d", op)
				if _, err := repo.SaveSnapshot(ctx, name, snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{}); err != nil {
					t.Fatal(err)
				}
				snaps[name] = modelHashes(model)
				order = append(order, name)
				// Keep the two newest snapshots: older ones become garbage.
				if len(order) > 2 {
					if err := repo.DeleteSnapshot(ctx, order[0]); err != nil {
						t.Fatal(err)
					}
					delete(snaps, order[0])
					order = order[1:]
				}
			}
			if op%40 == 39 {
				w.Sync()
				b := fmt.Sprintf("side-%d", op)
				if _, err := repo.Fork(ctx, "main", b, snapshot.ForkOptions{}); err != nil {
					t.Fatal(err)
				}
				forks[b] = modelHashes(model)
			}
		}
		w.Sync()
		final := w.Manifest()
		w.Close()
		close(stop)
		<-done
		if gcErr != nil {
			t.Fatalf("gc during the race: %v", gcErr)
		}
		// One more gc after the writer is gone.
		rep, err := repo.GC(ctx, snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 1}, Grace: grace})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%d gc runs during the race: %d commits pruned, %d packs swept; final gc: %+v", gcRuns, pruned, swept, rep)
		if pruned == 0 || swept == 0 {
			t.Fatalf("gc deleted nothing during the race (%d commits, %d packs): the test did not race", pruned, swept)
		}
		MustFsck(t, repo)
		compareFiles(t, "writer's last manifest vs model", files(final), modelHashes(model))
		w2 := OpenWorkspace(t, repo, "main")
		compareFiles(t, "fresh mount of main", files(w2.Manifest()), modelHashes(model))
		for name, want := range snaps {
			s, err := repo.GetSnapshot(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ManifestOfTree(ctx, repo, s.Tree())
			if err != nil {
				t.Fatalf("snapshot %s: %v", name, err)
			}
			compareFiles(t, "snapshot "+name, files(m), want)
		}
		for b, want := range forks {
			head, err := repo.Head(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			m, err := ManifestOfTree(ctx, repo, snapshot.CommitTree(head))
			if err != nil {
				t.Fatalf("fork %s: %v", b, err)
			}
			compareFiles(t, "fork "+b, files(m), want)
		}
	})
}

// TestGCAfterSnapshotRmFreesUniqueBytes: once a snapshot is the only thing
// that reaches some data, list reports those bytes as unique to it, and
// removing it and running gc frees them.
func TestGCAfterSnapshotRmFreesUniqueBytes(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		store, repo := InitVolume(t, url)
		w := OpenWorkspace(t, repo, "main")
		w.WriteFile("keep.txt", []byte("kept by every commit"))
		w.Sync()
		big := randBytes(42, 5*ChunkSize+7)
		w.WriteFile("model.bin", big)
		w.Sync()
		if _, err := repo.SaveSnapshot(ctx, "with-model", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		w.Remove("model.bin")
		w.Sync()
		w.Close()
		now := func() time.Time { return time.Now().Add(2 * time.Minute) }
		opts := snapshot.GCOptions{Policy: snapshot.Retention{KeepLast: 1}, Grace: time.Minute, Now: now}
		if _, err := repo.GC(ctx, opts); err != nil {
			t.Fatal(err)
		}
		list, err := repo.ListSnapshots(ctx, snapshot.ListOptions{Unique: true, Policy: opts.Policy, Grace: opts.Grace, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 || list[0].UniqueBytes < int64(len(big)) {
			t.Fatalf("unique bytes of the snapshot: %+v (model.bin is %d incompressible bytes)", list, len(big))
		}
		unique := list[0].UniqueBytes
		_, before := PackBytes(t, store)
		if err := repo.DeleteSnapshot(ctx, "with-model"); err != nil {
			t.Fatal(err)
		}
		rep, err := repo.GC(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		_, after := PackBytes(t, store)
		// The pack held the file's chunks and that commit's trees (all
		// unique to the snapshot) plus the pack's framing.
		if rep.BytesFreed != before-after || rep.BytesFreed < unique || rep.BytesFreed > unique+1024 {
			t.Fatalf("gc freed %d bytes (store %d -> %d), unique %d: %+v", rep.BytesFreed, before, after, unique, rep)
		}
		MustFsck(t, repo)
		w2 := OpenWorkspace(t, repo, "main")
		if got := string(w2.ReadFile("keep.txt")); got != "kept by every commit" {
			t.Fatalf("keep.txt = %q", got)
		}
		if _, err := w2.Lookup("model.bin"); err == nil {
			t.Fatal("model.bin is back")
		}
	})
}

// TestFsckOnEngineVolume: on a volume the engine wrote, fsck --full names
// the file whose chunk was flipped, and fsck names the commit whose pack
// was deleted (the engine stores a checkpoint's trees with its data, so
// losing that pack loses the commit's root).
func TestFsckOnEngineVolume(t *testing.T) {
	ctx := context.Background()
	store, repo := InitVolume(t, fmt.Sprintf("mem://snapshottest-fsck-%d", urlSeq.Add(1)))
	w := OpenWorkspace(t, repo, "main")
	w.WriteFile("src/a.txt", []byte("a"))
	w.Sync()
	w.WriteFile("lib/big.bin", randBytes(3, 2*ChunkSize))
	w.Sync()
	w.Close()
	head, err := repo.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	e, err := repo.LookupPath(ctx, snapshot.CommitTree(head), "lib/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	summary := func(rep snapshot.FsckReport) []string {
		var out []string
		for _, p := range rep.Problems {
			for _, a := range p.Affected {
				out = append(out, a.Path+"@"+strings.Join(a.From, ","))
			}
		}
		return out
	}
	ref := e.Chunks[1].Ref
	key := snapshot.PackKey(ref.Pack)
	data, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data[ref.Offset+uint64(ref.Length)-1] ^= 1
	if err := store.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	rep, err := repo.Fsck(ctx, snapshot.FsckOptions{Full: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := summary(rep); len(rep.Problems) != 1 || !errors.Is(rep.Problems[0].Err, snapshot.ErrCorrupt) || !slices.Equal(got, []string{"lib/big.bin@main@3"}) {
		t.Fatalf("flipped chunk: %+v", rep.Problems)
	}
	if err := store.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	rep, err = repo.Fsck(ctx, snapshot.FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Data and trees are in separate packs: the deleted pack holds the
	// file's chunks (and maybe other files' in the same checkpoint), so
	// the problem names the file, not the root.
	if got := summary(rep); len(rep.Problems) != 1 || !errors.Is(rep.Problems[0].Err, snapshot.ErrMissing) || !slices.Contains(got, "lib/big.bin@main@3") {
		t.Fatalf("deleted pack: %+v", rep.Problems)
	}
}
