package commit

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentfs/agentfs/cache/data"
	"github.com/agentfs/agentfs/cache/meta"
	"github.com/agentfs/agentfs/snapshot"
)

// memFile is a File over a record and its bytes in memory.
type memFile struct {
	mu    sync.RWMutex
	r     *meta.Inode
	bytes []byte
	views int
}

func (f *memFile) View(fn func(r *meta.Inode, read func(p []byte, off uint64) error) error) error {
	f.mu.Lock()
	f.views++
	f.mu.Unlock()
	f.mu.RLock()
	defer f.mu.RUnlock()
	return fn(f.r, func(p []byte, off uint64) error { copy(p, f.bytes[off:]); return nil })
}

// newCapture returns a Capture into a fresh volume, with 4 KiB blocks.
func newCapture(t *testing.T) (*Capture, *snapshot.Repo) {
	t.Helper()
	r := testRepo(t)
	return &Capture{Up: NewUploader(context.Background(), r, 2, time.Now()), Gens: &Gens{}, ChunkSize: testChunk}, r
}

// dirtyFile returns a file of n blocks and a half of random bytes, all of
// them dirty (the last block short), with generations in g.
func dirtyFile(t *testing.T, g *Gens, ino uint64, n int) *memFile {
	t.Helper()
	f := &memFile{r: &meta.Inode{Ino: ino, Type: snapshot.TypeFile, Nlink: 1}, bytes: randBytes(t, n*testChunk+testChunk/2)}
	f.r.Size = uint64(len(f.bytes))
	for b := range uint64(n + 1) {
		f.r.AddDirty(b)
		g.Bump(ino, b)
	}
	return f
}

// checkCaptured fails unless c holds block b of f at generation gen with
// f's bytes.
func checkCaptured(t *testing.T, c *Capture, repo *snapshot.Repo, f *memFile, b, gen uint64) {
	t.Helper()
	ub, ok := c.Up.Block(BlockKey{f.r.Ino, b})
	if !ok || ub.Gen != gen {
		t.Fatalf("block %d: captured %v at generation %d; want generation %d", b, ok, ub.Gen, gen)
	}
	end := min((b+1)*testChunk, f.r.Size)
	if got := readBlob(t, repo, ub.Ref); !bytes.Equal(got, f.bytes[b*testChunk:end]) {
		t.Errorf("block %d: captured %d bytes that differ from the file's %d", b, len(got), end-b*testChunk)
	}
}

func TestCaptureBlocks(t *testing.T) {
	c, repo := newCapture(t)
	f := dirtyFile(t, c.Gens, 3, 2)
	f.r.AddDirty(9) // past the end: skipped
	if err := c.Blocks(f); err != nil {
		t.Fatal(err)
	}
	if f.views != 1+4 {
		t.Errorf("%d holds of the file; want one for the dirty list and one per dirty block", f.views)
	}
	if _, ok := c.Up.Block(BlockKey{3, 9}); ok {
		t.Error("a dirty block past the end was captured")
	}
	// Block 1 is written again: only it is captured again.
	copy(f.bytes[testChunk:], randBytes(t, 10))
	c.Gens.Bump(3, 1)
	before := len(c.Up.Files()[3])
	if err := c.Frozen(f); err != nil {
		t.Fatal(err)
	}
	if err := c.Up.Finish(); err != nil {
		t.Fatal(err)
	}
	for b := range uint64(3) {
		checkCaptured(t, c, repo, f, b, c.Gens.Get(3, b))
	}
	if got := len(c.Up.Files()[3]); got != before {
		t.Errorf("%d blocks captured after the recapture, %d before", got, before)
	}

	// An orphan (no name left) is part of no tree.
	c2, _ := newCapture(t)
	o := dirtyFile(t, c2.Gens, 4, 1)
	o.r.Nlink = 0
	if err := c2.Blocks(o); err != nil {
		t.Fatal(err)
	}
	if err := c2.Frozen(o); err != nil {
		t.Fatal(err)
	}
	if files := c2.Up.Files(); len(files) != 0 {
		t.Errorf("an orphan's blocks were captured: %v", files)
	}
}

func TestCaptureClean(t *testing.T) {
	c, _ := newCapture(t)
	f := dirtyFile(t, c.Gens, 5, 3) // blocks 0..3, 3 short
	copy(f.bytes[2*testChunk:3*testChunk], make([]byte, testChunk))
	old := snapshot.BlobRef{Offset: 1}
	f.r.Chunks = []snapshot.Chunk{{Index: 2, Ref: old}}
	if err := c.Frozen(f); err != nil {
		t.Fatal(err)
	}
	c.Gens.Bump(5, 1) // written after the capture: stays dirty
	r := f.r.Clone()
	present := map[uint64]bool{}
	changed, cached := c.Clean(r, present, []uint64{0, 1, 2, 3})
	if slices.Sort(cached); !changed || !slices.Equal(cached, []uint64{0, 3}) {
		t.Errorf("Clean = %v, blocks %v cached; want a change, blocks 0 and 3 cached", changed, cached)
	}
	// What the block cache counts for them (data.File.AddPresent): their
	// extents in the file, block 3 short.
	if n := data.Extent(0, r.Size, testChunk) + data.Extent(3, r.Size, testChunk); n != testChunk+testChunk/2 {
		t.Errorf("blocks 0 and 3 extend over %d bytes; want %d", n, testChunk+testChunk/2)
	}
	if !slices.Equal(r.Dirty, []uint64{1}) {
		t.Errorf("dirty after Clean %v; want block 1 alone (written since its capture)", r.Dirty)
	}
	if !present[0] || present[1] || present[2] || !present[3] {
		t.Errorf("present after Clean %v; want blocks 0 and 3 (2 became a hole)", present)
	}
	if len(r.Chunks) != 2 || r.Chunks[0].Index != 0 || r.Chunks[1].Index != 3 {
		t.Errorf("chunks after Clean %v; want blocks 0 and 3 (2's chunk dropped for a hole)", r.Chunks)
	}
	c.Forget(r, []uint64{0, 1, 2, 3})
	if c.Gens.Get(5, 0) != 0 || c.Gens.Get(5, 1) == 0 {
		t.Error("Forget dropped the generation of a dirty block, or kept a clean one's")
	}
	if changed, _ := c.Clean(r, present, []uint64{0, 2, 3}); changed {
		t.Error("a second Clean of the same blocks changed the record")
	}
}
