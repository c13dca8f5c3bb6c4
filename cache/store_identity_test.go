package cache

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/testservices"
	"github.com/agentfs/agentfs/snapshot"
)

// TestStoreSwapKeepsChanges: the store goes away under an open volume (its
// file:// directory moved away, or replaced by an empty directory as an
// unmounted filesystem leaves it; its bucket deleted and recreated). Sync
// and lease renewal fail with an error matching snapshot.ErrVolumeChanged
// that names the store and the volume and says nothing is lost; nothing is
// written where the store was; Status shows the backlog and the error.
// Once the original store is back, Sync commits the changes as the next
// commit, and a fresh cache reads them.
func TestStoreSwapKeepsChanges(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		dir := t.TempDir()
		away := dir + ".away"
		url := "file://" + dir
		storeSwap(t, url,
			func() {
				if err := os.Rename(dir, away); err != nil {
					t.Fatal(err)
				}
			},
			func() {
				if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the store directory was recreated while it was away: %v", err)
				}
			},
			func() {
				if err := os.Rename(away, dir); err != nil {
					t.Fatal(err)
				}
			})
	})
	// A filesystem unmounted from under the store leaves its empty mount
	// point directory behind.
	t.Run("file-unmounted", func(t *testing.T) {
		dir := t.TempDir()
		away := dir + ".away"
		storeSwap(t, "file://"+dir,
			func() {
				if err := os.Rename(dir, away); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			},
			func() {
				if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
					t.Errorf("written to the empty directory where the store was: %v, %v", ents, err)
				}
			},
			func() {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(away, dir); err != nil {
					t.Fatal(err)
				}
			})
	})
	t.Run("minio", func(t *testing.T) {
		url := testservices.StartMinIO(t)
		s, err := blobstore.Open(context.Background(), url, blobstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		saved := map[string][]byte{}
		storeSwap(t, url,
			func() {
				// Keep a copy of the bucket to bring it back later.
				ctx := context.Background()
				err := s.Walk(ctx, "", func(o blobstore.ObjectInfo) error {
					b, err := s.Get(ctx, o.Key)
					saved[o.Key] = b
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				testservices.RecreateMinIOBucket(t, url)
			},
			func() {
				var keys []string
				if err := s.Walk(context.Background(), "", func(o blobstore.ObjectInfo) error {
					keys = append(keys, o.Key)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if len(keys) != 0 {
					t.Errorf("written to the recreated bucket: %v", keys)
				}
			},
			func() {
				for k, b := range saved {
					if err := s.Put(context.Background(), k, b); err != nil {
						t.Fatal(err)
					}
				}
			})
	})
}

// storeSwap runs the scenario of TestStoreSwapKeepsChanges on a fresh
// volume at url: away takes the store away, checkNothing checks that
// nothing was written where it was, back brings it back.
func storeSwap(t *testing.T, url string, away, checkNothing, back func()) {
	ctx := context.Background()
	initVolume(t, url)
	v := openVolume(t, url, "", func(o *Options) { o.LeaseTTL = 600 * time.Millisecond })
	id := v.repo.Config().VolumeID
	writeFile(t, v, RootIno, "before", []byte("committed before the store went away"))
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	seq := v.getState().Seq

	away()
	data := bytes.Repeat([]byte("written while the store was away\n"), 1000)
	writeFile(t, v, RootIno, "during", data)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := v.Sync(sctx)
	cancel()
	if !errors.Is(err, snapshot.ErrVolumeChanged) {
		t.Fatalf("sync with the store away = %v, want ErrVolumeChanged", err)
	}
	for _, s := range []string{blobstore.DisplayURL(url), id, "nothing is lost"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("sync error %q does not mention %q", err, s)
		}
	}
	// Let the lease renewal (every 200ms) run into it too.
	deadline := time.Now().Add(5 * time.Second)
	var st Status
	for {
		if st, err = v.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(st.LeaseError, "no longer holds volume "+id) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(st.LeaseError, "no longer holds volume "+id) {
		t.Errorf("status lease error %q, want the identity error", st.LeaseError)
	}
	if st.DirtyFiles == 0 || !strings.Contains(st.LastError, "no longer holds volume "+id) || st.HeadSeq != seq {
		t.Errorf("status with the store away: %d dirty files, head %d, last error %q; want the backlog, head %d and the identity error",
			st.DirtyFiles, st.HeadSeq, st.LastError, seq)
	}
	checkNothing()

	back()
	if err := v.Sync(ctx); err != nil {
		t.Fatalf("sync with the store back: %v", err)
	}
	if st, _ := v.Status(ctx); st.HeadSeq != seq+1 || st.DirtyFiles != 0 || st.LastError != "" {
		t.Errorf("status with the store back: head %d, %d dirty files, last error %q; want head %d, none, none",
			st.HeadSeq, st.DirtyFiles, st.LastError, seq+1)
	}
	if err := v.Close(ctx); err != nil {
		t.Fatal(err)
	}

	w := openVolume(t, url, "", func(o *Options) { o.ReadOnly = true })
	for name, want := range map[string][]byte{"before": []byte("committed before the store went away"), "during": data} {
		a := must[Attr](t)(w.Lookup(ctx, RootIno, name))
		if got := readFile(t, w, a.Ino); !bytes.Equal(got, want) {
			t.Errorf("%s from a fresh cache: %d bytes, want %d", name, len(got), len(want))
		}
	}
	if h, err := w.repo.HeadSeq(ctx, snapshot.DefaultBranch); err != nil || h != seq+1 {
		t.Errorf("branch head %d, %v; want %d (no commit lost or skipped)", h, err, seq+1)
	}
}
