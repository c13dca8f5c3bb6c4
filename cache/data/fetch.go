package data

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/agentfs/agentfs/snapshot"
)

// ChunkSource supplies the bytes of a committed chunk (a *snapshot.Repo);
// it verifies them, and its errors wrap snapshot's kinds.
type ChunkSource interface {
	ReadBlob(ctx context.Context, ref snapshot.BlobRef) ([]byte, error)
}

// ChunkError is a chunk that its source failed to supply.
type ChunkError struct {
	Ref snapshot.BlobRef
	Err error
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("read chunk %s of pack %s: %v", e.Ref.Hash, e.Ref.Pack, e.Err)
}

func (e *ChunkError) Unwrap() error { return e.Err }

// Held is one open file as the fetch mechanism reaches it in the engine
// that owns it (in package cache, a node): the lock that guards its record
// and its File, the record as a Layout, and a hold that keeps the file open
// while a background fetch runs.
type Held interface {
	// Lock and Unlock take and release the file's lock exclusively;
	// RLock and RUnlock shared.
	Lock()
	Unlock()
	RLock()
	RUnlock()
	// Layout returns the file's record; the caller holds the lock.
	Layout() Layout
	// Data returns the file's data state; the caller holds the lock.
	Data() *File
	// Hold counts one more user of the open file, so that it stays open
	// until Release; false (and nothing to release) if its last user is
	// releasing it.
	Hold() bool
	// Release ends a Hold.
	Release()
}

// Fetcher fetches chunks from a ChunkSource, once for concurrent callers,
// makes blocks of open files present (Block), reads open files (Read), and
// after a sequential read fetches the blocks that follow in the background
// (read-ahead), with a bound on the fetches running at once.
type Fetcher struct {
	src    ChunkSource
	log    *slog.Logger
	group  singleflight.Group
	ctx    context.Context // the background's: read-ahead, a reader's eviction
	window int             // blocks read ahead of a sequential reader (<= 0: none)
	slots  chan struct{}   // one per read-ahead fetch running
	wg     sync.WaitGroup  // read-ahead fetches running
}

// NewFetcher returns a fetcher from src that, after a read that began
// where the file's previous one ended, fetches the remote blocks among the
// window blocks that follow it in the background (none if window <= 0),
// with at most slots such fetches running at once, each until it is done
// or ctx ends (ctx is also the one a reader's eviction runs under:
// File.NoteRead). It logs to log the chunks it fails to read.
func NewFetcher(ctx context.Context, src ChunkSource, window, slots int, log *slog.Logger) *Fetcher {
	return &Fetcher{src: src, log: log, ctx: ctx, window: window, slots: make(chan struct{}, slots)}
}

// Chunk returns the bytes of chunk ref. Concurrent calls for one chunk share
// one read, which goes on when a caller's ctx ends (the others may still
// want it): that caller gets ctx.Err(). A failed read is a *ChunkError,
// logged.
func (f *Fetcher) Chunk(ctx context.Context, ref snapshot.BlobRef) ([]byte, error) {
	ch := f.group.DoChan(ref.String(), func() (any, error) {
		return f.src.ReadBlob(context.WithoutCancel(ctx), ref)
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			f.log.Error("reading chunk failed", "chunk", ref.Hash.String(), "pack", ref.Pack.String(), "err", res.Err)
			return nil, &ChunkError{Ref: ref, Err: res.Err}
		}
		return res.Val.([]byte), nil
	}
}

// Block makes block b of open file h present, if it is remote or reads
// through to the lower layer. A remote block's chunk is fetched (Chunk)
// without h's lock held, then installed under it unless the block changed
// meanwhile (File.InstallChunk). A lower block is copied up from the
// origin with the lock held throughout, so that the origin cannot change
// meanwhile (File.CopyUp). The caller holds no lock of h. Errors are
// Chunk's, and the origin's (wrapping ErrOrigin).
func (f *Fetcher) Block(ctx context.Context, h Held, b uint64) error {
	h.RLock()
	l := h.Layout()
	ref, _ := l.Chunk(b)
	src := h.Data().Source(l, b)
	h.RUnlock()
	switch src {
	case Lower:
		h.Lock()
		defer h.Unlock()
		if l, d := h.Layout(), h.Data(); d.Source(l, b) == Lower {
			return d.CopyUp(ctx, l, b)
		}
		return nil
	case Remote:
	default:
		return nil
	}
	p, err := f.Chunk(ctx, ref)
	if err != nil {
		return err
	}
	h.Lock()
	defer h.Unlock()
	return h.Data().InstallChunk(h.Layout(), b, ref, p)
}

// Read reads p at off from open file h, each block from where its bytes
// are (File.ReadRange), and returns how many bytes it read: fewer than
// len(p) only at the end of the file. Remote blocks are made present
// first (Block, without h's lock), and the data file and the origin file
// are opened, under h's lock held exclusively, if the blocks read need
// them; then the bytes are read under h's lock held shared, with no
// block remote. A read of at least one byte is then noted (File.NoteRead:
// an access in the block cache, which may evict in the caller) and, if it
// began where the file's previous read ended, starts read-ahead of the
// window blocks after it (readAhead). The caller holds no lock of h.
// Errors are Block's, the data file's and the origin's (wrapping
// ErrOrigin).
func (f *Fetcher) Read(ctx context.Context, h Held, p []byte, off uint64) (int, error) {
	opened := false
	for {
		h.RLock()
		l, d := h.Layout(), h.Data()
		if off >= l.Size() || len(p) == 0 {
			h.RUnlock()
			return 0, nil
		}
		end := min(off+uint64(len(p)), l.Size())
		if b, ok := d.firstFrom(l, off, end, Remote); ok {
			h.RUnlock()
			if err := f.Block(ctx, h, b); err != nil {
				return 0, err
			}
			continue
		}
		_, lower := d.firstFrom(l, off, end, Lower)
		lower = lower && !d.HasOrigin()
		if !opened && (d.NeedsData(l) || lower) {
			h.RUnlock()
			h.Lock()
			err := h.Data().open(ctx, h.Layout(), lower)
			h.Unlock()
			if err != nil {
				return 0, err
			}
			opened = true
			continue
		}
		n := int(end - off)
		err := d.ReadRange(l, p[:n], off)
		h.RUnlock()
		if err != nil {
			return 0, err
		}
		if d.NoteRead(f.ctx, off, end) && f.window > 0 {
			f.readAhead(h, (end-1)/d.bs+1)
		}
		return n, nil
	}
}

// LockToWrite takes lock, the lock under which h's blocks are written
// (h's own, or one that takes it after others), once no block that a
// write of [off, end) covers only in part (not every byte of it within
// the file) is remote or still in the lower layer: each such block is
// made present first (Block: its chunk fetched, or copied up), with lock
// released, and the blocks are looked at again. It returns with lock
// held, or with an error (Block's) and lock released. The caller holds
// no lock of h.
func (f *Fetcher) LockToWrite(ctx context.Context, h Held, lock sync.Locker, off, end uint64) error {
	return f.lockFetched(ctx, h, lock, func(l Layout, d *File) (uint64, bool) { return d.partial(l, off, end) })
}

// LockToCut is LockToWrite for a truncation to size: the block that size
// cuts in two, if the file is longer, is made present first (what a write
// of [size, the file's end) covers only in part).
func (f *Fetcher) LockToCut(ctx context.Context, h Held, lock sync.Locker, size uint64) error {
	return f.lockFetched(ctx, h, lock, func(l Layout, d *File) (uint64, bool) { return d.partial(l, size, l.Size()) })
}

// lockFetched takes lock once need, asked under it, names no block: each
// block it names is made present (Block) with lock released first.
func (f *Fetcher) lockFetched(ctx context.Context, h Held, lock sync.Locker, need func(Layout, *File) (uint64, bool)) error {
	for {
		lock.Lock()
		b, ok := need(h.Layout(), h.Data())
		if !ok {
			return nil
		}
		lock.Unlock()
		if err := f.Block(ctx, h, b); err != nil {
			return err
		}
	}
}

// readAhead fetches, in the background, the remote blocks among the
// window blocks of open file h from b on (File.RemoteFrom), each with
// Block and each holding h open (Held.Hold) until it is done. It starts no
// more than the free read-ahead slots allow, without waiting for one, and
// never for an inline file. The fetches run until done or the fetcher's
// ctx ends; their errors are dropped (a reader fetches the block again).
// The caller holds no lock of h; Wait waits for the fetches.
func (f *Fetcher) readAhead(h Held, b uint64) {
	h.RLock()
	var todo []uint64
	if l := h.Layout(); !l.Inline() {
		todo = h.Data().RemoteFrom(l, b, f.window)
	}
	h.RUnlock()
	for _, blk := range todo {
		if !f.startReadAhead() {
			return
		}
		if !h.Hold() {
			f.endReadAhead()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.endReadAhead()
			defer h.Release()
			_ = f.Block(f.ctx, h, blk)
		}()
	}
}

// Wait waits for the read-ahead fetches that Read started.
func (f *Fetcher) Wait() { f.wg.Wait() }

// startReadAhead takes a read-ahead slot without waiting: false if all are
// taken. Each true is paired with one endReadAhead.
func (f *Fetcher) startReadAhead() bool {
	select {
	case f.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

// endReadAhead gives back a slot taken by startReadAhead.
func (f *Fetcher) endReadAhead() { <-f.slots }
