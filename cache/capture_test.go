package cache

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// TestCheckpointsDuringWrites: checkpoints capture an open file's dirty
// blocks one at a time while a writer keeps rewriting them, growing and
// shrinking the file. Whatever each checkpoint picked up, the last one,
// after the writer stopped, commits exactly the file's final bytes: a
// fresh cache reads them back.
func TestCheckpointsDuringWrites(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096; c.PackSize = 1 << 20 })
	v := openVolume(t, url, "")
	ctx := context.Background()
	a, err := v.Create(ctx, RootIno, "f", 0o644, Cred{}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 64
	want := make([]byte, 0, blocks*4096)
	var mu sync.Mutex // guards want
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			// Rewrite a run of blocks with bytes of round i; every 7th
			// round truncates to a length that cuts a block in two.
			mu.Lock()
			if i%7 == 6 {
				size := uint64(len(want)) / 2
				if _, err := v.SetAttr(ctx, a.Ino, SetAttrIn{Size: &size}); err != nil {
					werr = err
					mu.Unlock()
					return
				}
				want = want[:size]
				mu.Unlock()
				continue
			}
			off := (i * 5 % blocks) * 4096
			data := bytes.Repeat([]byte(fmt.Sprintf("%07d|", i)), 3*4096/8)
			if _, err := v.Write(ctx, a.Ino, data, uint64(off)); err != nil {
				werr = err
				mu.Unlock()
				return
			}
			if end := off + len(data); end > len(want) {
				want = append(want, make([]byte, end-len(want))...)
			}
			copy(want[off:], data)
			mu.Unlock()
		}
	})
	for range 20 {
		if err := v.Sync(ctx); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if err := v.Release(ctx, a.Ino); err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	fresh := openVolume(t, url, "", func(o *Options) { o.ReadOnly = true })
	got := readFile(t, fresh, must[Attr](t)(fresh.Lookup(ctx, RootIno, "f")).Ino)
	if !bytes.Equal(got, want) {
		t.Fatalf("committed file differs from what was written: %d bytes, want %d", len(got), len(want))
	}
}
