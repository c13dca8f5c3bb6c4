package snapshot_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/snapshot"
)

// TestWritersCheckVolumeIdentity: with the store directory moved away, or
// another volume (or a broken volume.json) in its place, lease renewal and
// release, commits, snapshot saves and removals fail with an error matching
// ErrVolumeChanged that names the URL, the volume and what was found, and
// write nothing: no directory is recreated, the other volume gets nothing.
// Moved back, everything works again.
func TestWritersCheckVolumeIdentity(t *testing.T) {
	ctx := context.Background()
	url := storeURL(t, "file")
	dir := strings.TrimPrefix(url, "file://")
	v := newVol(t, url)
	id := v.r.Config().VolumeID
	lease, err := v.r.AcquireLease(ctx, "main", snapshot.Holder{ID: "w1", Host: "h", PID: 1}, time.Minute, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	head, err := v.r.Head(ctx, "main")
	if err != nil {
		t.Fatal(err)
	}
	next := head
	next.ID.Seq++
	next.Parent = &head.ID

	writes := map[string]func() error{
		"renew":           func() error { return lease.Renew(ctx, time.Now()) },
		"commit":          func() error { return v.r.WriteCommit(ctx, next) },
		"save snapshot":   func() error { _, err := v.r.SaveSnapshot(ctx, "s1", head.ID, snapshot.SaveOptions{}); return err },
		"remove snapshot": func() error { return v.r.DeleteSnapshot(ctx, "s0") },
		"remove branch":   func() error { _, err := v.r.DeleteBranch(ctx, "other", snapshot.DeleteBranchOptions{}); return err },
		"release":         func() error { return lease.Release(ctx) },
	}
	if _, err := v.r.SaveSnapshot(ctx, "s0", head.ID, snapshot.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	refused := func(state, found string) {
		t.Helper()
		for name, w := range writes {
			err := w()
			if name == "save snapshot" && err != nil && !errors.Is(err, snapshot.ErrVolumeChanged) {
				continue // it reads the commit first, which is not there either
			}
			if !errors.Is(err, snapshot.ErrVolumeChanged) {
				t.Errorf("%s: %s = %v, want ErrVolumeChanged", state, name, err)
				continue
			}
			for _, s := range []string{url, id, found} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: %s error %q does not mention %q", state, name, err, s)
				}
			}
		}
	}

	away := dir + ".away"
	if err := os.Rename(dir, away); err != nil {
		t.Fatal(err)
	}
	refused("store moved away", "found no volume.json")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a writer recreated the moved-away store directory: %v", err)
	}

	// Another volume at the URL (an empty directory where the store was,
	// then init): it gets no commit, lease or snapshot of ours.
	other, err := blobstore.Open(ctx, url, blobstore.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	oc := snapshot.NewConfig(time.Now())
	if _, err := snapshot.Init(ctx, other, oc); err != nil {
		t.Fatal(err)
	}
	refused("another volume at the URL", "found volume "+oc.VolumeID)
	var keys []string
	if err := other.Walk(ctx, "", func(o blobstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0] != snapshot.VolumeKey {
		t.Errorf("the other volume got writes: %v", keys)
	}

	if err := other.Put(ctx, snapshot.VolumeKey, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	refused("a broken volume.json", "found an unreadable volume.json")

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(away, dir); err != nil {
		t.Fatal(err)
	}
	if err := v.r.CheckVolume(ctx); err != nil {
		t.Fatalf("CheckVolume with the store back: %v", err)
	}
	for _, name := range []string{"renew", "commit", "save snapshot", "remove snapshot", "release"} {
		if err := writes[name](); err != nil {
			t.Errorf("store back: %s: %v", name, err)
		}
	}
	if seq, err := v.r.HeadSeq(ctx, "main"); err != nil || seq != next.ID.Seq {
		t.Errorf("head %d, %v; want %d", seq, err, next.ID.Seq)
	}
}
