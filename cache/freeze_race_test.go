package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentfs/agentfs/snapshot"
)

// TestCheckpointWhileWriting: checkpoints run while another goroutine
// writes new blocks of open files (each write dirties a block that no
// capture has seen yet) and creates files in the same directory, so that
// the directory's tree is rebuilt by most checkpoints. No checkpoint may
// fail, and the last sync must hold every byte written.
func TestCheckpointWhileWriting(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 4096; c.PackSize = 1 << 20 })
	ctx := context.Background()
	v := openVolume(t, url, "")
	bs := v.chunkSize
	const files = 4
	inos := make([]uint64, files)
	for i := range inos {
		a, err := v.Create(ctx, RootIno, "f"+string(rune('a'+i)), 0o644, Cred{}, false, true)
		if err != nil {
			t.Fatal(err)
		}
		inos[i] = a.Ino
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 512)
		for b := uint64(0); !stop.Load(); b++ {
			for i, ino := range inos {
				buf[0] = byte(b)
				if _, err := v.Write(ctx, ino, buf, (b%64)*bs+uint64(i)); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
			if b%8 == 0 {
				writeFile(t, v, RootIno, "n"+string(rune('a'+b%26))+string(rune('a'+(b/26)%26)), []byte("x"))
			}
		}
	}()
	var failed int
	var first error
	for range 200 {
		if err := v.checkpoint(ctx, "sync", ""); err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if failed > 0 {
		t.Errorf("%d of 200 checkpoints failed while files were written; the first: %v", failed, first)
	}
}
