package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/cache/meta"
	"github.com/dgraph-io/badger/v4"
)

// TestReleaseRacesUnlink: the last Release of a written file racing the
// Unlink of its only name. Whichever wins, the inode ends deleted (no
// record left in the cache database) and the next checkpoint succeeds: a
// released node must never store the record of an inode unlinked
// meanwhile (it would stay dirty with its data gone, and every checkpoint
// would fail on it).
func TestReleaseRacesUnlink(t *testing.T) {
	url := "file://" + t.TempDir()
	initVolume(t, url)
	v := openVolume(t, url, "")
	ctx := context.Background()
	data := make([]byte, 100<<10) // a data file, not inline
	for i := range 200 {
		name := fmt.Sprintf("f%d", i)
		a, err := v.Create(ctx, RootIno, name, 0o644, Cred{}, true, false)
		if err != nil {
			t.Fatal(err)
		}
		data[0] = byte(i)
		if _, err := v.Write(ctx, a.Ino, data, 0); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Add(2)
		go func() { defer wg.Done(); errs[0] = v.Release(ctx, a.Ino) }()
		go func() { defer wg.Done(); errs[1] = v.Unlink(ctx, RootIno, name) }()
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		err = v.db.View(func(txn *meta.Txn) error {
			_, err := txn.Get(meta.Key64(meta.PrefixInode, a.Ino))
			return err
		})
		if !errors.Is(err, badger.ErrKeyNotFound) {
			t.Fatalf("round %d: inode %d still has a record after its last close and unlink (lookup: %v)", i, a.Ino, err)
		}
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := v.Sync(sctx); err != nil {
		t.Fatalf("sync after the races: %v", err)
	}
	if st := must[Status](t)(v.Status(ctx)); st.DirtyFiles != 0 || st.DirtyDirs != 0 || st.OpenFiles != 0 {
		t.Errorf("status after sync: %d dirty files, %d dirty dirs, %d open files", st.DirtyFiles, st.DirtyDirs, st.OpenFiles)
	}
}
