package snapshot_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

// keys lists every key under the store.
func keys(t *testing.T, v *vol) []string {
	t.Helper()
	var out []string
	if err := v.store.Walk(v.ctx, "", func(o blobstore.ObjectInfo) error { out = append(out, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestVolumeInfoAndRemove describes a volume with two branches, a
// snapshot, a policy and a live writer, then removes it: refused while the
// writer holds its lease, done once it released it, every object of the
// volume gone and a foreign object under the URL left alone. On file://,
// MinIO and the GCS emulator.
func TestVolumeInfoAndRemove(t *testing.T) {
	for _, kind := range []string{"file", "minio", "gcs"} {
		t.Run(kind, func(t *testing.T) {
			v := newVol(t, storeURL(t, kind))
			ctx := v.ctx
			v.commit("main", map[string]fspec{"a": {Data: "one"}})
			v.commit("side", map[string]fspec{"b": {Data: "two"}})
			if _, err := v.r.SaveSnapshot(ctx, "s1", snapshot.CommitID{Branch: "main"}, snapshot.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := v.r.SetRetention(ctx, snapshot.Retention{KeepLast: 7}); err != nil {
				t.Fatal(err)
			}
			if err := v.store.Put(ctx, "notes/readme.txt", []byte("not the volume's")); err != nil {
				t.Fatal(err)
			}
			h := snapshot.Holder{ID: "w1", Host: "box", PID: 42, Mount: "/ws"}
			l, err := v.r.AcquireLease(ctx, "main", h, time.Minute, time.Now(), nil)
			if err != nil {
				t.Fatal(err)
			}

			info, err := v.r.Info(ctx, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			all := keys(t, v)
			if info.Objects != len(all)-1 || info.Foreign != 1 || info.Bytes <= 0 || info.Config != v.r.Config() || info.URL != v.store.URL() {
				t.Errorf("info: %d objects (%d keys), foreign %d, %d bytes, %+v", info.Objects, len(all), info.Foreign, info.Bytes, info.Config)
			}
			var sum int
			kinds := map[string]int{}
			for _, k := range info.Kinds {
				sum += k.Objects
				kinds[k.Kind] = k.Objects
			}
			// main: init + 1 commit, side: 1; heads: 2; a lease; volume.json and retention.json.
			if sum != info.Objects || kinds["commits"] != 3 || kinds["heads"] != 2 || kinds["snapshots"] != 1 || kinds["leases"] != 1 || kinds["other"] != 2 || kinds["packs"] == 0 {
				t.Errorf("kinds: %+v", info.Kinds)
			}
			if len(info.Branches) != 2 || info.Branches[0].Name != "main" || info.Branches[0].Head.ID.Seq != 2 ||
				info.Branches[0].Lease == nil || !info.Branches[0].Lease.Live || info.Branches[0].Lease.Holder != h || info.Branches[1].Lease != nil {
				t.Errorf("branches: %+v", info.Branches)
			}
			if !slices.Equal(info.Snapshots, []string{"s1"}) || !info.RetentionStored || info.Retention.KeepLast != 7 || !info.LastGC.IsZero() {
				t.Errorf("snapshots %v, retention %+v %v, last gc %v", info.Snapshots, info.Retention, info.RetentionStored, info.LastGC)
			}

			// A live writer: refused, nothing deleted.
			_, err = snapshot.RemoveVolume(ctx, v.store, snapshot.RemoveOptions{})
			var held *snapshot.LeaseHeldError
			if !errors.As(err, &held) || held.Holder != h || !strings.Contains(err.Error(), "force") {
				t.Fatalf("remove under a live lease: %v", err)
			}
			if got := keys(t, v); !slices.Equal(got, all) {
				t.Fatalf("a refused removal deleted %d objects", len(all)-len(got))
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			var phases int
			rep, err := snapshot.RemoveVolume(ctx, v.store, snapshot.RemoveOptions{Progress: func(p snapshot.Progress) {
				if p.Phase == "delete" && p.Total > 0 {
					phases++
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(t, v); !slices.Equal(got, []string{"notes/readme.txt"}) {
				t.Fatalf("left after removal: %v", got)
			}
			if rep.Objects != info.Objects || rep.Bytes <= 0 || rep.Foreign != 1 || phases == 0 {
				t.Errorf("removal: %+v (info counted %d objects), %d progress calls", rep, info.Objects, phases)
			}
			if _, err := snapshot.Open(ctx, v.store); !errors.Is(err, snapshot.ErrNoVolume) {
				t.Errorf("open after removal: %v", err)
			}
			if _, err := snapshot.RemoveVolume(ctx, v.store, snapshot.RemoveOptions{}); !errors.Is(err, snapshot.ErrNoVolume) {
				t.Errorf("second removal: %v", err)
			}
		})
	}
}

// TestRemoveVolumeForced: --force removes a volume under a live writer,
// whose next commit then fails instead of writing into the removed volume,
// and finishes an interrupted removal.
func TestRemoveVolumeForced(t *testing.T) {
	v := newVol(t, storeURL(t, "file"))
	ctx := v.ctx
	v.commit("main", map[string]fspec{"a": {Data: "one"}})
	if _, err := v.r.AcquireLease(ctx, "main", snapshot.Holder{ID: "w1"}, time.Minute, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshot.RemoveVolume(ctx, v.store, snapshot.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, v); len(got) != 0 {
		t.Fatalf("left: %v", got)
	}
	head := snapshot.Commit{ID: snapshot.CommitID{Branch: "main", Seq: 3}, Parent: &snapshot.CommitID{Branch: "main", Seq: 2}, Time: time.Now(), Kind: "test"}
	if err := v.r.WriteCommit(ctx, head); !errors.Is(err, snapshot.ErrVolumeChanged) {
		t.Errorf("a writer's commit after the removal: %v", err)
	}

	// An interrupted removal: volume.json gone, the rest still there.
	v = newVol(t, storeURL(t, "file"))
	v.commit("main", map[string]fspec{"a": {Data: "one"}})
	if err := v.store.Delete(ctx, snapshot.VolumeKey); err != nil {
		t.Fatal(err)
	}
	n := len(keys(t, v))
	if _, err := snapshot.RemoveVolume(ctx, v.store, snapshot.RemoveOptions{}); !errors.Is(err, snapshot.ErrNoVolume) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("leftovers without force: %v", err)
	}
	rep, err := snapshot.RemoveVolume(ctx, v.store, snapshot.RemoveOptions{Force: true})
	if err != nil || rep.Objects != n || len(keys(t, v)) != 0 {
		t.Fatalf("leftovers with force: %+v %v, %d left", rep, err, len(keys(t, v)))
	}
}
