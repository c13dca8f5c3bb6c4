package data

import (
	"context"
	"fmt"

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

// Fetcher fetches chunks from a ChunkSource, once for concurrent callers,
// and bounds the read-ahead fetches running at once.
type Fetcher struct {
	src       ChunkSource
	group     singleflight.Group
	readAhead chan struct{}
}

// NewFetcher returns a fetcher from src that lets at most readAhead
// read-ahead fetches run at once.
func NewFetcher(src ChunkSource, readAhead int) *Fetcher {
	return &Fetcher{src: src, readAhead: make(chan struct{}, readAhead)}
}

// Chunk returns the bytes of chunk ref. Concurrent calls for one chunk share
// one read, which goes on when a caller's ctx ends (the others may still
// want it): that caller gets ctx.Err(). A failed read is a *ChunkError.
func (f *Fetcher) Chunk(ctx context.Context, ref snapshot.BlobRef) ([]byte, error) {
	ch := f.group.DoChan(ref.String(), func() (any, error) {
		return f.src.ReadBlob(context.WithoutCancel(ctx), ref)
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return nil, &ChunkError{Ref: ref, Err: res.Err}
		}
		return res.Val.([]byte), nil
	}
}

// StartReadAhead takes a read-ahead slot without waiting: false if all are
// taken. Each true is paired with one EndReadAhead.
func (f *Fetcher) StartReadAhead() bool {
	select {
	case f.readAhead <- struct{}{}:
		return true
	default:
		return false
	}
}

// EndReadAhead gives back a slot taken by StartReadAhead.
func (f *Fetcher) EndReadAhead() { <-f.readAhead }
