package blobstore

import (
	"context"
	"io"
	"time"
)

// Attrs describes a stored object.
type Attrs struct {
	// Size in bytes.
	Size int64
	// ModTime is the time the object was last written, as the provider reports it.
	ModTime time.Time
	// Version is an opaque, non-empty token that changes whenever the
	// object is rewritten with different bytes (S3 ETag, GCS generation,
	// mtime+size or ETag for file and mem stores). Rewriting identical bytes
	// may keep it (an S3 ETag is a content hash).
	Version string
}

// ObjectInfo is one entry of a listing.
type ObjectInfo struct {
	Key     string // relative to the store (prefix removed)
	Size    int64
	ModTime time.Time
}

// ListPage is one page of a listing in lexicographic key order.
type ListPage struct {
	Objects []ObjectInfo
	// Next is the token for the following page, empty when the listing is
	// complete.
	Next string
}

// PutOptions modify a Driver.Put.
type PutOptions struct {
	// IfAbsent makes the write conditional: it must fail with an error that
	// Classify maps to KindExists if the key already holds an object, and
	// exactly one of several concurrent conditional writers of a key may
	// succeed — across processes and machines, not just goroutines.
	IfAbsent bool
}

// Driver is the small interface a storage provider implements. Keys passed to
// a driver are full keys (any Store prefix already applied) and valid UTF-8.
// Drivers do not retry, limit or count: Store does.
type Driver interface {
	// NewRangeReader opens key for reading length bytes from offset; length
	// < 0 means to the end. Reading past the end yields the bytes that exist
	// (possibly none), not an error. A missing key is a KindNotFound error,
	// returned by NewRangeReader itself, not by the first Read.
	NewRangeReader(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Put stores the bytes of r under key. size is the exact length of r, or
	// -1 when unknown (the driver then streams, using multipart uploads
	// where the provider has them). A failed Put leaves no partial object.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) error
	// Stat returns the attributes of key.
	Stat(ctx context.Context, key string) (Attrs, error)
	// List returns up to pageSize objects whose keys start with prefix, in
	// lexicographic order, starting after the page identified by token ("" =
	// first page). Keys in ObjectInfo are full keys.
	List(ctx context.Context, prefix, token string, pageSize int) (ListPage, error)
	// Delete removes key. Deleting a missing key may return a KindNotFound
	// error or nil; Store makes Delete idempotent either way.
	Delete(ctx context.Context, key string) error
	// Classify maps an error returned by this driver to a Kind.
	Classify(err error) Kind
	// Close releases the driver's resources.
	Close() error
}
