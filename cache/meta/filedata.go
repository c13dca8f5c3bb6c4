package meta

import (
	"errors"

	"github.com/dgraph-io/badger/v4"

	"github.com/agentfs/agentfs/snapshot"
)

// FileLayout is a regular file's record as the data side (cache/data)
// reads it: it implements data.Layout, which package cache checks (this
// package does not import cache/data). The caller holds whatever lock
// guards R.
type FileLayout struct{ R *Inode }

// Size is the file's size in bytes.
func (l FileLayout) Size() uint64 { return l.R.Size }

// Inline reports whether the file's local bytes are its inline record.
func (l FileLayout) Inline() bool { return l.R.Inline }

// IsDirty reports whether block b is dirty.
func (l FileLayout) IsDirty(b uint64) bool { return l.R.IsDirty(b) }

// Dirty reports whether any block is dirty.
func (l FileLayout) Dirty() bool { return len(l.R.Dirty) > 0 }

// Chunk returns block b's committed chunk, if it has one.
func (l FileLayout) Chunk(b uint64) (snapshot.BlobRef, bool) { return l.R.Chunk(b) }

// Origin is the path of the file's origin in the lower layer.
func (l FileLayout) Origin() string { return l.R.Origin }

// OriginSize is how many of the file's first bytes read through to its
// origin: 0 for a file without one (HasOrigin false).
func (l FileLayout) OriginSize() uint64 {
	if !l.R.HasOrigin {
		return 0
	}
	return l.R.OriginSize
}

// FileRecords are a regular file's two data records, its inline bytes
// (PrefixInline) and its presence record (PrefixPresence), in transaction
// Txn: it implements data.Records and data.Stored. A nil value deletes
// the record; a read returns a copy, or false if the record is absent.
type FileRecords struct{ Txn *Txn }

// Inline returns the inline bytes of file ino.
func (r FileRecords) Inline(ino uint64) ([]byte, bool, error) {
	return r.get(Key64(PrefixInline, ino))
}

// Presence returns the presence record of file ino.
func (r FileRecords) Presence(ino uint64) ([]byte, bool, error) {
	return r.get(Key64(PrefixPresence, ino))
}

// SetInline stores (nil: deletes) the inline bytes of file ino.
func (r FileRecords) SetInline(ino uint64, b []byte) error {
	return r.set(Key64(PrefixInline, ino), b)
}

// SetPresence stores (nil: deletes) the presence record of file ino.
func (r FileRecords) SetPresence(ino uint64, b []byte) error {
	return r.set(Key64(PrefixPresence, ino), b)
}

func (r FileRecords) get(key []byte) ([]byte, bool, error) {
	it, err := r.Txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	b, err := it.ValueCopy(nil)
	return b, err == nil, err
}

func (r FileRecords) set(k, b []byte) error {
	if b == nil {
		return r.Txn.Delete(k)
	}
	return r.Txn.Set(k, b)
}
