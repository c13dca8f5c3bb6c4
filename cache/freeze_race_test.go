package cache

import (
	"bytes"
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
// fail (a block dirtied between phase B's capture and its tree building
// failed one as "not captured"). TestCheckpointSizeMatchesChunk checks
// what the commits hold.
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
				name := "n" + string(rune('a'+b%26)) + string(rune('a'+(b/26)%26))
				if err := createWritten(ctx, v, name); err != nil {
					t.Errorf("%s: %v", name, err)
					return
				}
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

// createWritten creates name in the root with one byte, as writeFile does,
// but returns its error: it runs outside the test's goroutine.
func createWritten(ctx context.Context, v *Volume, name string) error {
	a, err := v.Create(ctx, RootIno, name, 0o644, Cred{}, false, true)
	if err != nil {
		return err
	}
	if _, err := v.Write(ctx, a.Ino, []byte("x"), 0); err != nil {
		return err
	}
	return v.Release(ctx, a.Ino)
}

// TestCheckpointSizeMatchesChunk: a writer appends one byte at a time
// inside block 0, which is dirty already (no fresh block, so no "not
// captured" failure), while checkpoints run. Every commit's entry for the
// file must have a chunk as long as the size it records: an entry of size
// S with a shorter chunk was cut between phase B's capture and its tree
// building (133 of 200 commits before lockData).
func TestCheckpointSizeMatchesChunk(t *testing.T) {
	url := testStoreURL(t)
	initVolume(t, url, func(c *snapshot.Config) { c.ChunkSize = 1 << 20; c.PackSize = 1 << 20 })
	ctx := context.Background()
	v := openVolume(t, url, "")
	a, err := v.Create(ctx, RootIno, "f", 0o644, Cred{}, false, true)
	if err != nil {
		t.Fatal(err)
	}
	// Past the inline limit: the file has a data file, and block 0 stays
	// dirty from here on.
	first := bytes.Repeat([]byte{'a'}, 100<<10)
	if _, err := v.Write(ctx, a.Ino, first, 0); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		off := uint64(len(first))
		for !stop.Load() {
			if off >= 1<<20-1 { // start over within the block
				off = uint64(len(first))
				if err := v.truncate(ctx, a.Ino, off); err != nil {
					t.Errorf("truncate: %v", err)
					return
				}
			}
			if _, err := v.Write(ctx, a.Ino, []byte{'x'}, off); err != nil {
				t.Errorf("write: %v", err)
				return
			}
			off++
		}
	}()
	torn, checked := 0, 0
	for range 200 {
		if err := v.checkpoint(ctx, "sync", ""); err != nil {
			t.Errorf("checkpoint: %v", err)
			continue
		}
		st := v.getState()
		c, err := v.repo.ReadCommit(ctx, snapshot.CommitID{Branch: st.Branch, Seq: st.Seq})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := v.repo.ReadBlob(ctx, c.Root.Tree)
		if err != nil {
			t.Fatal(err)
		}
		es, err := snapshot.DecodeTree(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Name != "f" || len(e.Chunks) == 0 {
				continue
			}
			b, err := v.repo.ReadBlob(ctx, e.Chunks[0].Ref)
			if err != nil {
				t.Fatal(err)
			}
			checked++
			if uint64(len(b)) != e.Size {
				if torn < 3 {
					t.Logf("commit %d: entry size %d, chunk of %d bytes", st.Seq, e.Size, len(b))
				}
				torn++
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if checked == 0 {
		t.Fatal("no commit had an entry for the file")
	}
	if torn > 0 {
		t.Errorf("%d of %d commits record a size their chunk does not hold", torn, checked)
	}
}
