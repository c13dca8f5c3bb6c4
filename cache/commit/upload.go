package commit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentfs/agentfs/snapshot"
)

// BlockKey names one block of one file.
type BlockKey struct {
	Ino   uint64
	Index uint64
}

// Block is a block captured by a checkpoint: the generation of the copy
// captured, and where its bytes went.
type Block struct {
	Gen  uint64
	Ref  snapshot.BlobRef // valid once Finish returned nil; zero for a hole
	Zero bool             // all zeros: stored as a hole
}

// Uploader packs the blobs of one checkpoint (the captured blocks, the
// trees) and uploads each pack, through snapshot.Repo.PutPack, as soon as
// it is full, at most a given number at once, in the background. Data and
// trees never share a pack. All methods are safe for concurrent use. The
// first failed upload cancels the others and is returned by Finish and
// Wait.
type Uploader struct {
	repo    *snapshot.Repo
	ctx     context.Context
	g       *errgroup.Group
	started time.Time

	mu     sync.Mutex
	pw     [3]*snapshot.PackWriter // guarded by mu; by blob type
	blocks map[BlockKey]Block      // guarded by mu
	packs  []snapshot.PackID       // guarded by mu
	puts   atomic.Int64
	bytes  atomic.Int64
}

// NewUploader starts the uploads of one checkpoint into repo, at most
// concurrency packs at once, until ctx ends. started is when the
// checkpoint began (see CheckPacks).
func NewUploader(ctx context.Context, repo *snapshot.Repo, concurrency int, started time.Time) *Uploader {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	return &Uploader{repo: repo, ctx: gctx, g: g, started: started, blocks: map[BlockKey]Block{}}
}

// AddBlock encodes one block's bytes, of generation gen, and records its
// reference (replacing a copy captured before). An all-zero block becomes
// a hole, uploaded as nothing, unless keepZero (a block of a host origin
// must override the host's bytes).
func (u *Uploader) AddBlock(k BlockKey, gen uint64, data []byte, keepZero bool) {
	if !keepZero && IsZero(data) {
		u.mu.Lock()
		u.blocks[k] = Block{Gen: gen, Zero: true}
		u.mu.Unlock()
		return
	}
	ref := u.Add(snapshot.BlobData, data)
	u.mu.Lock()
	u.blocks[k] = Block{Gen: gen, Ref: ref}
	u.mu.Unlock()
}

// Add encodes a blob into the current pack of its type and returns its
// reference, valid once Finish returned nil; a full pack is uploaded in
// the background.
func (u *Uploader) Add(t snapshot.BlobType, raw []byte) snapshot.BlobRef {
	eb := u.repo.EncodeBlob(t, raw)
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pw[t] == nil {
		u.pw[t] = u.repo.NewPackWriter()
	}
	ref := u.pw[t].Add(eb)
	if u.pw[t].Len() >= u.repo.Config().PackSize {
		u.flushLocked(t)
	}
	return ref
}

func (u *Uploader) flushLocked(t snapshot.BlobType) {
	pw := u.pw[t]
	u.pw[t] = nil
	if pw == nil || pw.Count() == 0 {
		return
	}
	u.packs = append(u.packs, pw.ID())
	u.g.Go(func() error {
		if err := u.repo.PutPack(u.ctx, pw); err != nil {
			return err
		}
		u.puts.Add(1)
		u.bytes.Add(int64(pw.Len()))
		return nil
	})
}

// Finish uploads the last packs and waits for every upload: after it
// returns nil, every reference Add and AddBlock returned is readable. The
// Uploader takes no blob after Finish.
func (u *Uploader) Finish() error {
	u.mu.Lock()
	u.flushLocked(snapshot.BlobData)
	u.flushLocked(snapshot.BlobTree)
	u.mu.Unlock()
	return u.g.Wait()
}

// Wait waits for the uploads in flight, without starting the last packs
// (a failed checkpoint returns after its uploads ended), and returns the
// first upload's error.
func (u *Uploader) Wait() error { return u.g.Wait() }

// Err returns non-nil once an upload failed or the context given to
// NewUploader ended: the checkpoint can stop capturing.
func (u *Uploader) Err() error { return u.ctx.Err() }

// Block returns the captured copy of block k, if there is one.
func (u *Uploader) Block(k BlockKey) (Block, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	b, ok := u.blocks[k]
	return b, ok
}

// Files returns the captured blocks' indexes by file, in no order.
func (u *Uploader) Files() map[uint64][]uint64 {
	byIno := map[uint64][]uint64{}
	u.mu.Lock()
	for k := range u.blocks {
		byIno[k.Ino] = append(byIno[k.Ino], k.Index)
	}
	u.mu.Unlock()
	return byIno
}

// Stats returns the packs uploaded so far and their bytes.
func (u *Uploader) Stats() (puts, bytes int64) { return u.puts.Load(), u.bytes.Load() }

// CheckPacks, called after Finish, verifies that no pack of a slow
// checkpoint was collected before its commit: if the checkpoint started
// more than half of snapshot.UploadGrace before now, it checks that every
// pack is still in the store (snapshot.Repo.HasPack, one Stat each), and
// fails, with an error matching snapshot.ErrMissing, if one vanished.
func (u *Uploader) CheckPacks(ctx context.Context, now time.Time) error {
	if now.Sub(u.started) <= snapshot.UploadGrace/2 {
		return nil
	}
	u.mu.Lock()
	packs := u.packs
	u.mu.Unlock()
	for _, p := range packs {
		ok, err := u.repo.HasPack(ctx, p)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("pack %s vanished before its commit (checkpoint outlived the gc grace period); retrying: %w", p, snapshot.ErrMissing)
		}
	}
	return nil
}

// IsZero reports whether every byte of b is zero.
func IsZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
