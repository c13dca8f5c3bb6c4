package commit

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/blobstore/faulty"
	"github.com/agentfs/agentfs/snapshot"
)

var storeSeq atomic.Int64

// testRepo returns a fresh plain volume in a memory store, with 1 MiB
// packs.
func testRepo(t *testing.T) *snapshot.Repo {
	r, _ := faultyRepo(t)
	return r
}

// faultyRepo is testRepo with the store's driver, which can be set down,
// and no retries.
func faultyRepo(t *testing.T) (*snapshot.Repo, *faulty.Driver) {
	t.Helper()
	ctx := context.Background()
	var fd *faulty.Driver
	s, err := blobstore.Open(ctx, fmt.Sprintf("mem://commit-test-%d-%d", os.Getpid(), storeSeq.Add(1)), blobstore.Options{
		Retry: blobstore.RetryPolicy{MaxAttempts: 1},
		WrapDriver: func(d blobstore.Driver) blobstore.Driver {
			fd = faulty.New(d, faulty.Options{})
			return fd
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := snapshot.NewConfig(time.Now())
	cfg.PackSize = 1 << 20
	r, err := snapshot.Init(ctx, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r, fd
}

func randBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// readBlob reads ref back from r's store.
func readBlob(t *testing.T, r *snapshot.Repo, ref snapshot.BlobRef) []byte {
	t.Helper()
	b, err := r.ReadBlob(context.Background(), ref)
	if err != nil {
		t.Fatalf("read %v: %v", ref, err)
	}
	return b
}

func TestUploaderBlocksAndHoles(t *testing.T) {
	ctx := context.Background()
	r := testRepo(t)
	u := NewUploader(ctx, r, 2, time.Now())

	data := randBytes(t, 4096)
	zeros := make([]byte, 4096)
	u.AddBlock(BlockKey{1, 0}, 7, data, false)
	u.AddBlock(BlockKey{1, 1}, 8, zeros, false) // a hole
	u.AddBlock(BlockKey{2, 0}, 9, zeros, true)  // zeros over a host origin: stored
	if err := u.Finish(); err != nil {
		t.Fatal(err)
	}

	b, ok := u.Block(BlockKey{1, 0})
	if !ok || b.Gen != 7 || b.Zero || !bytes.Equal(readBlob(t, r, b.Ref), data) {
		t.Errorf("block 1/0 = %+v, %v; want generation 7 with its bytes", b, ok)
	}
	if b, ok := u.Block(BlockKey{1, 1}); !ok || b.Gen != 8 || !b.Zero || !b.Ref.IsZero() {
		t.Errorf("all-zero block 1/1 = %+v, %v; want a hole of generation 8", b, ok)
	}
	b, ok = u.Block(BlockKey{2, 0})
	if !ok || b.Zero || !bytes.Equal(readBlob(t, r, b.Ref), zeros) {
		t.Errorf("kept zero block 2/0 = %+v, %v; want its zeros stored", b, ok)
	}
	if _, ok := u.Block(BlockKey{3, 0}); ok {
		t.Error("a block never added is reported captured")
	}
	files := u.Files()
	if len(files) != 2 || len(files[1]) != 2 || len(files[2]) != 1 {
		t.Errorf("Files() = %v; want file 1 with 2 blocks, file 2 with 1", files)
	}
	if puts, n := u.Stats(); puts != 1 || n <= 4096 {
		t.Errorf("Stats() = %d packs, %d bytes; want one data pack holding both stored blocks", puts, n)
	}
}

// A recapture (a block written again after phase A) replaces the copy.
func TestUploaderRecapture(t *testing.T) {
	r := testRepo(t)
	u := NewUploader(context.Background(), r, 1, time.Now())
	u.AddBlock(BlockKey{1, 0}, 1, randBytes(t, 100), false)
	newer := randBytes(t, 100)
	u.AddBlock(BlockKey{1, 0}, 2, newer, false)
	if err := u.Finish(); err != nil {
		t.Fatal(err)
	}
	b, _ := u.Block(BlockKey{1, 0})
	if b.Gen != 2 || !bytes.Equal(readBlob(t, r, b.Ref), newer) {
		t.Errorf("recaptured block = generation %d; want 2 with the newer bytes", b.Gen)
	}
}

// Full packs go up before Finish, and trees never share a pack with data.
func TestUploaderPacks(t *testing.T) {
	r := testRepo(t)
	u := NewUploader(context.Background(), r, 2, time.Now())
	var refs []snapshot.BlobRef
	for i := range 3 {
		u.AddBlock(BlockKey{1, uint64(i)}, 1, randBytes(t, 600<<10), false)
		b, _ := u.Block(BlockKey{1, uint64(i)})
		refs = append(refs, b.Ref)
	}
	tree := u.Add(snapshot.BlobTree, snapshot.EmptyTree)
	if err := u.Finish(); err != nil {
		t.Fatal(err)
	}
	if refs[0].Pack != refs[1].Pack || refs[1].Pack == refs[2].Pack {
		t.Errorf("blocks' packs %v %v %v; want the first two in one (1 MiB reached), the third in the next", refs[0].Pack, refs[1].Pack, refs[2].Pack)
	}
	for _, ref := range refs {
		if tree.Pack == ref.Pack {
			t.Errorf("the tree shares pack %v with data", tree.Pack)
		}
	}
	if !bytes.Equal(readBlob(t, r, tree), snapshot.EmptyTree) {
		t.Error("the tree reads back other bytes")
	}
	if puts, _ := u.Stats(); puts != 3 {
		t.Errorf("%d packs uploaded; want 3 (two of data, one of trees)", puts)
	}
}

// An upload's failure is Finish's and Wait's, and Err tells the capture
// to stop.
func TestUploaderFailure(t *testing.T) {
	r, fd := faultyRepo(t)
	u := NewUploader(context.Background(), r, 1, time.Now())
	if u.Err() != nil {
		t.Fatalf("Err() = %v before any upload", u.Err())
	}
	fd.SetDown(true)
	u.AddBlock(BlockKey{1, 0}, 1, randBytes(t, 100), false)
	if err := u.Finish(); !errors.Is(err, faulty.ErrDown) {
		t.Errorf("Finish with the store down = %v; want faulty.ErrDown", err)
	}
	if u.Err() == nil {
		t.Error("Err() = nil after an upload failed")
	}
	if err := u.Wait(); !errors.Is(err, faulty.ErrDown) {
		t.Errorf("Wait() = %v; want the same failure", err)
	}
}

func TestCheckPacks(t *testing.T) {
	ctx := context.Background()
	r := testRepo(t)
	start := time.Now()
	u := NewUploader(ctx, r, 1, start)
	u.AddBlock(BlockKey{1, 0}, 1, randBytes(t, 100), false)
	if err := u.Finish(); err != nil {
		t.Fatal(err)
	}
	b, _ := u.Block(BlockKey{1, 0})
	slow := start.Add(snapshot.UploadGrace)
	if err := u.CheckPacks(ctx, slow); err != nil {
		t.Fatalf("CheckPacks with every pack there = %v", err)
	}
	if err := r.Store().Delete(ctx, snapshot.PackKey(b.Ref.Pack)); err != nil {
		t.Fatal(err)
	}
	if err := u.CheckPacks(ctx, start.Add(time.Second)); err != nil {
		t.Errorf("CheckPacks of a fast checkpoint = %v; want nil (nothing checked)", err)
	}
	if err := u.CheckPacks(ctx, slow); !errors.Is(err, snapshot.ErrMissing) {
		t.Errorf("CheckPacks of a slow checkpoint whose pack vanished = %v; want snapshot.ErrMissing", err)
	}
}

func TestGens(t *testing.T) {
	var g Gens
	if got := g.Get(1, 0); got != 0 {
		t.Errorf("generation of an unwritten block = %d; want 0", got)
	}
	g.Bump(1, 0)
	first := g.Get(1, 0)
	g.Bump(2, 0)
	g.Bump(1, 0)
	if second := g.Get(1, 0); first == 0 || second <= first || g.Get(2, 0) == second {
		t.Errorf("generations %d then %d (other block %d); want nonzero, increasing, unique", first, second, g.Get(2, 0))
	}
	g.Forget(1, 0)
	if got := g.Get(1, 0); got != 0 {
		t.Errorf("generation after Forget = %d; want 0", got)
	}
}

func TestIsZero(t *testing.T) {
	for n := range 20 {
		b := make([]byte, n)
		if !IsZero(b) {
			t.Errorf("IsZero(%d zeros) = false", n)
		}
		for i := range n {
			b[i] = 1
			if IsZero(b) {
				t.Errorf("IsZero with byte %d of %d set = true", i, n)
			}
			b[i] = 0
		}
	}
}
