package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors returned by this package; check them with errors.Is.
var (
	// ErrNoVolume: the store holds no volume.json.
	ErrNoVolume = errors.New("no agentfs volume at this URL")
	// ErrVolumeExists: Init found a volume already there.
	ErrVolumeExists = errors.New("an agentfs volume already exists at this URL")
	// ErrFormatTooNew: the volume was written by a newer agentfs.
	ErrFormatTooNew = errors.New("volume format is newer than this agentfs supports")
	// ErrCorrupt: an object does not decode, or a blob's bytes do not match
	// its hash. Never returned for a missing object (that is ErrMissing).
	ErrCorrupt = errors.New("corrupt object")
	// ErrMissing: an object that a reference points to does not exist.
	ErrMissing = errors.New("referenced object is missing")
	// ErrNoCommits: the branch has no commits (it does not exist).
	ErrNoCommits = errors.New("branch has no commits")
	// ErrCommitExists: another writer created this commit number first.
	ErrCommitExists = errors.New("commit number already taken")
	// ErrLeaseHeld: another live writer holds the branch. The error is a
	// *LeaseHeldError naming the holder.
	ErrLeaseHeld = errors.New("branch is held by another writer")
	// ErrBadName: a branch or snapshot name is not valid.
	ErrBadName = errors.New("invalid name")
	// ErrSnapshotExists: a snapshot of that name exists.
	ErrSnapshotExists = errors.New("snapshot already exists")
	// ErrNoSnapshot: no snapshot of that name.
	ErrNoSnapshot = errors.New("no such snapshot")
	// ErrVolumeChanged: the store no longer holds the volume a Repo opened
	// (its volume.json is gone, unreadable, or names another volume), so
	// nothing is written to it. The error is a *VolumeChangedError.
	ErrVolumeChanged = errors.New("the store no longer holds the volume that was opened")
)

// HashSize is the size of a content hash (SHA-256).
const HashSize = sha256.Size

// Hash is the SHA-256 of a blob's raw (uncompressed) bytes.
type Hash [HashSize]byte

// HashOf returns the content hash of b.
func HashOf(b []byte) Hash { return sha256.Sum256(b) }

// String returns the lowercase hex form.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is the zero hash (no blob).
func (h Hash) IsZero() bool { return h == Hash{} }

// PackID names a pack: the first 16 bytes of the SHA-256 of the pack's bytes.
type PackID [16]byte

// String returns the lowercase hex form (32 characters).
func (p PackID) String() string { return hex.EncodeToString(p[:]) }

// IsZero reports whether p is the zero ID.
func (p PackID) IsZero() bool { return p == PackID{} }

// ParsePackID parses the hex form.
func ParsePackID(s string) (PackID, error) {
	var p PackID
	if len(s) != 2*len(p) {
		return p, fmt.Errorf("pack id %q: %w", s, ErrCorrupt)
	}
	if _, err := hex.Decode(p[:], []byte(s)); err != nil {
		return p, fmt.Errorf("pack id %q: %w", s, ErrCorrupt)
	}
	return p, nil
}

// PackKey returns the store key of a pack: packs/<first 2 hex>/<id>.pack.
func PackKey(p PackID) string {
	s := p.String()
	return "packs/" + s[:2] + "/" + s + ".pack"
}

// BlobType tells what a blob holds.
type BlobType uint8

// Blob types.
const (
	BlobData BlobType = 1 // a chunk of file data
	BlobTree BlobType = 2 // an encoded directory tree
)

// BlobRef locates a blob: which pack, where in it, how long it is stored,
// how long it is raw, and the hash of its raw bytes. References are what
// trees and commits store; reading a blob needs nothing else.
type BlobRef struct {
	Pack   PackID
	Offset uint64 // of the stored form within the pack
	Length uint32 // stored length (codec byte + payload)
	RawLen uint32 // length after decompression
	Hash   Hash   // SHA-256 of the raw bytes
}

// IsZero reports whether r is the zero reference.
func (r BlobRef) IsZero() bool { return r == BlobRef{} }

// String returns the text form used in JSON objects:
// <pack>:<offset>:<length>:<rawlen>:<hash>.
func (r BlobRef) String() string {
	return fmt.Sprintf("%s:%d:%d:%d:%s", r.Pack, r.Offset, r.Length, r.RawLen, r.Hash)
}

// ParseBlobRef parses the text form of String.
func ParseBlobRef(s string) (BlobRef, error) {
	var r BlobRef
	f := strings.Split(s, ":")
	if len(f) != 5 {
		return r, fmt.Errorf("blob ref %q: want 5 fields: %w", s, ErrCorrupt)
	}
	var err error
	if r.Pack, err = ParsePackID(f[0]); err != nil {
		return r, err
	}
	off, err1 := strconv.ParseUint(f[1], 10, 64)
	ln, err2 := strconv.ParseUint(f[2], 10, 32)
	raw, err3 := strconv.ParseUint(f[3], 10, 32)
	if err := errors.Join(err1, err2, err3); err != nil {
		return r, fmt.Errorf("blob ref %q: %w: %w", s, ErrCorrupt, err)
	}
	r.Offset, r.Length, r.RawLen = off, uint32(ln), uint32(raw)
	if len(f[4]) != 2*HashSize {
		return r, fmt.Errorf("blob ref %q: bad hash: %w", s, ErrCorrupt)
	}
	if _, err := hex.Decode(r.Hash[:], []byte(f[4])); err != nil {
		return r, fmt.Errorf("blob ref %q: bad hash: %w", s, ErrCorrupt)
	}
	return r, nil
}

// MarshalText implements encoding.TextMarshaler.
func (r BlobRef) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *BlobRef) UnmarshalText(b []byte) error {
	v, err := ParseBlobRef(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ValidateName checks a branch or snapshot name: 1–100 characters from
// [A-Za-z0-9._-], not starting with '.' or '-'.
func ValidateName(kind, name string) error {
	if name == "" || len(name) > 100 {
		return fmt.Errorf("%s name %q: must be 1 to 100 characters: %w", kind, name, ErrBadName)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("%s name %q: must not start with '.' or '-': %w", kind, name, ErrBadName)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%s name %q: only letters, digits, '.', '_' and '-' are allowed: %w", kind, name, ErrBadName)
		}
	}
	return nil
}
