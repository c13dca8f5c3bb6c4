package snapshot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/agentfs/agentfs/blobstore"
	"github.com/agentfs/agentfs/internal/binenc"
)

// Pack layout (see FORMAT.md):
//
//	"AFSPACK1"                      8-byte magic
//	stored blob, stored blob, ...   each: codec byte + payload
//	footer                          uvarint count, then per blob:
//	                                type(1) hash(32) uvarint offset,
//	                                uvarint length, uvarint rawlen
//	trailer                         footer length (uint32 LE),
//	                                CRC-32C of footer (uint32 LE), "AFSPEND1"
const (
	packMagic    = "AFSPACK1"
	packEndMagic = "AFSPEND1"
	trailerSize  = 16
)

// Codecs of a stored blob (its first byte).
const (
	codecRaw  = 0
	codecZstd = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodedBlob is a blob hashed and compressed (and sealed, on an encrypted
// volume), ready to be appended to a pack.
type EncodedBlob struct {
	Type   BlobType
	Hash   Hash
	RawLen uint32
	Stored []byte // codec byte + payload; sealed on an encrypted volume
}

// EncodeBlob hashes (Repo.HashOf), compresses and, on an encrypted volume,
// seals raw. It may be called concurrently; it is the CPU-heavy half of
// adding a blob to a pack.
func (r *Repo) EncodeBlob(t BlobType, raw []byte) EncodedBlob {
	eb := EncodedBlob{Type: t, Hash: r.HashOf(raw), RawLen: uint32(len(raw))}
	// On an encrypted volume the stored form is built after room for the
	// nonce, with room for the tag, and sealed where it lies.
	hdr, tag := 0, 0
	if r.seal != nil {
		hdr, tag = sealNonceSize, sealTagSize
	}
	var out []byte
	if r.worthCompressing(raw) {
		out = make([]byte, hdr+1, hdr+1+len(raw)/2+16+tag)
		out[hdr] = codecZstd
		out = r.enc.EncodeAll(raw, out)
	}
	if out == nil || len(out)-hdr-1 >= len(raw) {
		if cap(out) < hdr+1+len(raw)+tag {
			out = make([]byte, hdr+1, hdr+1+len(raw)+tag)
		}
		out = append(out[:hdr], codecRaw)
		out = append(out, raw...)
	}
	if r.seal != nil {
		out = sealInPlace(r.seal.aead, out, blobAD(eb.Hash))
	}
	eb.Stored = out
	return eb
}

// The compression probe of EncodeBlob.
const (
	probeMin     = 256 << 10 // shorter blobs are compressed without a probe
	probeSamples = 4         // samples, spread evenly from the blob's start
	probeSample  = 16 << 10  // bytes per sample
)

// worthCompressing reports whether zstd is worth running over raw: always
// for a blob shorter than probeMin; for a longer one, only if samples of
// it (probeSamples × probeSample bytes, at its start and evenly after)
// compress together by at least 1/32. Incompressible data (compressed
// media and archives, encrypted or random bytes) then costs a 64 KiB trial
// instead of compressing 4 MiB to throw the result away. Whatever the
// answer, the stored form is one FORMAT.md allows (raw or zstd).
func (r *Repo) worthCompressing(raw []byte) bool {
	if len(raw) < probeMin {
		return true
	}
	sample := make([]byte, 0, probeSamples*probeSample)
	for i := range probeSamples {
		at := i * (len(raw) / probeSamples)
		sample = append(sample, raw[at:at+probeSample]...)
	}
	z := r.enc.EncodeAll(sample, make([]byte, 0, len(sample)))
	return len(z) < len(sample)-len(sample)/32
}

// DecodeStored turns the stored form of a blob back into its raw bytes and
// checks them against ref's length and hash (and, on an encrypted volume,
// authenticates them): anything else is ErrCorrupt.
func (r *Repo) DecodeStored(ref BlobRef, stored []byte) ([]byte, error) {
	if len(stored) != int(ref.Length) || len(stored) == 0 {
		return nil, fmt.Errorf("blob %s: stored length %d, want %d: %w", ref.Hash, len(stored), ref.Length, ErrCorrupt)
	}
	if r.seal != nil {
		var err error
		if stored, err = r.seal.open("blob "+ref.Hash.String()+" in pack "+ref.Pack.String(), stored, blobAD(ref.Hash)); err != nil {
			return nil, err
		}
		if len(stored) == 0 {
			return nil, fmt.Errorf("blob %s: empty: %w", ref.Hash, ErrCorrupt)
		}
	}
	var raw []byte
	switch stored[0] {
	case codecRaw:
		raw = stored[1:]
	case codecZstd:
		var err error
		raw, err = r.dec.DecodeAll(stored[1:], make([]byte, 0, ref.RawLen))
		if err != nil {
			return nil, fmt.Errorf("blob %s: %w: %w", ref.Hash, ErrCorrupt, err)
		}
	default:
		return nil, fmt.Errorf("blob %s: unknown codec %d: %w", ref.Hash, stored[0], ErrCorrupt)
	}
	if len(raw) != int(ref.RawLen) || r.HashOf(raw) != ref.Hash {
		return nil, fmt.Errorf("blob %s in pack %s: bytes do not match their hash: %w", ref.Hash, ref.Pack, ErrCorrupt)
	}
	return raw, nil
}

// PackEntry describes one blob of a pack, as its footer lists it.
type PackEntry struct {
	Type   BlobType
	Hash   Hash
	Offset uint64
	Length uint32
	RawLen uint32
}

// Ref returns the reference of e in pack id.
func (e PackEntry) Ref(id PackID) BlobRef {
	return BlobRef{Pack: id, Offset: e.Offset, Length: e.Length, RawLen: e.RawLen, Hash: e.Hash}
}

// PackWriter accumulates blobs into one pack. It is not safe for concurrent
// use; EncodeBlob is, so callers encode in parallel and append here.
type PackWriter struct {
	seal    *sealer // nil on a plain volume
	id      PackID
	buf     bytes.Buffer
	entries []PackEntry
	raw     int64
}

// NewPackWriter starts a pack with a fresh random ID.
func (r *Repo) NewPackWriter() *PackWriter {
	w := &PackWriter{seal: r.seal}
	_, _ = rand.Read(w.id[:])
	w.buf.WriteString(packMagic)
	return w
}

// ID returns the pack's ID.
func (w *PackWriter) ID() PackID { return w.id }

// Add appends an encoded blob and returns its reference, valid once the pack
// is stored.
func (w *PackWriter) Add(eb EncodedBlob) BlobRef {
	e := PackEntry{Type: eb.Type, Hash: eb.Hash, Offset: uint64(w.buf.Len()), Length: uint32(len(eb.Stored)), RawLen: eb.RawLen}
	w.buf.Write(eb.Stored)
	w.entries = append(w.entries, e)
	w.raw += int64(eb.RawLen)
	return e.Ref(w.id)
}

// Len returns the pack's size so far in bytes: without the footer before
// Finish (or PutPack), the whole stored pack after.
func (w *PackWriter) Len() int { return w.buf.Len() }

// Count returns the number of blobs added.
func (w *PackWriter) Count() int { return len(w.entries) }

// RawBytes returns the total raw size of the blobs added.
func (w *PackWriter) RawBytes() int64 { return w.raw }

// Finish appends the footer (sealed, on an encrypted volume) and trailer
// and returns the pack's bytes. The writer must not be used afterwards.
func (w *PackWriter) Finish() []byte {
	footer := encodePackFooter(w.entries)
	if w.seal != nil {
		footer = seal(w.seal.aead, nil, footer, footerAD(w.id))
	}
	w.buf.Write(footer)
	var tr [trailerSize]byte
	binary.LittleEndian.PutUint32(tr[0:], uint32(len(footer)))
	binary.LittleEndian.PutUint32(tr[4:], crc32.Checksum(footer, castagnoli))
	copy(tr[8:], packEndMagic)
	w.buf.Write(tr[:])
	return w.buf.Bytes()
}

// PutPack finishes w and stores it. After it returns nil, every reference
// Add returned is readable.
func (r *Repo) PutPack(ctx context.Context, w *PackWriter) error {
	key := PackKey(w.id)
	if err := r.store.Put(ctx, key, w.Finish()); err != nil {
		return fmt.Errorf("store pack %s: %w", w.id, err)
	}
	return nil
}

// HasPack reports whether pack id is in the store (one Stat). A pack the
// store does not have is false with a nil error; any other failure of the
// store is returned, wrapped.
func (r *Repo) HasPack(ctx context.Context, id PackID) (bool, error) {
	_, err := r.store.Stat(ctx, PackKey(id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, blobstore.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("stat pack %s: %w", id, err)
}

func encodePackFooter(entries []PackEntry) []byte {
	var e binenc.Encoder
	e.Uvarint(uint64(len(entries)))
	for _, en := range entries {
		e.Byte(byte(en.Type))
		e.Raw(en.Hash[:])
		e.Uvarint(en.Offset)
		e.Uvarint(uint64(en.Length))
		e.Uvarint(uint64(en.RawLen))
	}
	return e.B
}

// DecodePackFooter parses a pack footer (without the trailer).
func DecodePackFooter(b []byte) ([]PackEntry, error) {
	d := binenc.Decoder{B: b}
	n := d.Count(1 + HashSize + 3)
	out := make([]PackEntry, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		var e PackEntry
		e.Type = BlobType(d.Byte())
		copy(e.Hash[:], d.Raw(HashSize))
		e.Offset = d.Uvarint()
		e.Length = d.Uint32()
		e.RawLen = d.Uint32()
		if e.Type != BlobData && e.Type != BlobTree && d.Err() == nil {
			d.Fail("unknown blob type %d", e.Type)
		}
		out = append(out, e)
	}
	d.End()
	if d.Err() != nil {
		return nil, corrupt("pack footer", d.Err())
	}
	return out, nil
}

// ParsePack checks a whole pack's framing and returns its entries. It does
// not verify blob hashes (ReadBlob and fsck do). It reads packs of plain
// volumes; Repo.ParsePack reads those of the repo's volume.
func ParsePack(b []byte) ([]PackEntry, error) {
	return parsePack(b, func(f []byte) ([]byte, error) { return f, nil })
}

// ParsePack is the package's ParsePack for a pack id of r's volume: on an
// encrypted volume, it opens the sealed footer.
func (r *Repo) ParsePack(id PackID, b []byte) ([]PackEntry, error) {
	return parsePack(b, func(f []byte) ([]byte, error) { return r.openFooter(id, f) })
}

// openFooter returns the footer of pack id from its stored form.
func (r *Repo) openFooter(id PackID, f []byte) ([]byte, error) {
	if r.seal == nil {
		return f, nil
	}
	return r.seal.open("footer of pack "+id.String(), f, footerAD(id))
}

func parsePack(b []byte, openFooter func([]byte) ([]byte, error)) ([]PackEntry, error) {
	if len(b) < len(packMagic)+trailerSize || string(b[:len(packMagic)]) != packMagic {
		return nil, fmt.Errorf("pack: bad header: %w", ErrCorrupt)
	}
	tr := b[len(b)-trailerSize:]
	if string(tr[8:]) != packEndMagic {
		return nil, fmt.Errorf("pack: bad trailer: %w", ErrCorrupt)
	}
	flen := int(binary.LittleEndian.Uint32(tr[0:]))
	if flen > len(b)-len(packMagic)-trailerSize {
		return nil, fmt.Errorf("pack: footer length %d too large: %w", flen, ErrCorrupt)
	}
	footer := b[len(b)-trailerSize-flen : len(b)-trailerSize]
	if crc32.Checksum(footer, castagnoli) != binary.LittleEndian.Uint32(tr[4:]) {
		return nil, fmt.Errorf("pack: footer checksum mismatch: %w", ErrCorrupt)
	}
	limit := uint64(len(b) - trailerSize - flen)
	footer, err := openFooter(footer)
	if err != nil {
		return nil, err
	}
	entries, err := DecodePackFooter(footer)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if e.Offset < uint64(len(packMagic)) || e.Offset+uint64(e.Length) > limit {
			return nil, fmt.Errorf("pack: blob %s out of bounds: %w", e.Hash, ErrCorrupt)
		}
	}
	return entries, nil
}

// ReadPackIndex reads only the footer of pack id and returns its entries.
func (r *Repo) ReadPackIndex(ctx context.Context, id PackID) ([]PackEntry, error) {
	key := PackKey(id)
	a, err := r.store.Stat(ctx, key)
	if err != nil {
		return nil, r.missing(key, err)
	}
	if a.Size < int64(len(packMagic)+trailerSize) {
		return nil, fmt.Errorf("pack %s: too short: %w", id, ErrCorrupt)
	}
	tr, err := r.store.GetRange(ctx, key, a.Size-trailerSize, trailerSize)
	if err != nil {
		return nil, r.missing(key, err)
	}
	if len(tr) != trailerSize || string(tr[8:]) != packEndMagic {
		return nil, fmt.Errorf("pack %s: bad trailer: %w", id, ErrCorrupt)
	}
	flen := int64(binary.LittleEndian.Uint32(tr[0:]))
	if flen > a.Size-int64(len(packMagic)+trailerSize) {
		return nil, fmt.Errorf("pack %s: footer length %d too large: %w", id, flen, ErrCorrupt)
	}
	footer, err := r.store.GetRange(ctx, key, a.Size-trailerSize-flen, flen)
	if err != nil {
		return nil, r.missing(key, err)
	}
	if crc32.Checksum(footer, castagnoli) != binary.LittleEndian.Uint32(tr[4:]) {
		return nil, fmt.Errorf("pack %s: footer checksum mismatch: %w", id, ErrCorrupt)
	}
	if footer, err = r.openFooter(id, footer); err != nil {
		return nil, err
	}
	entries, err := DecodePackFooter(footer)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", id, err)
	}
	return entries, nil
}

// ReadBlobStored fetches the stored form of ref (no decoding).
func (r *Repo) ReadBlobStored(ctx context.Context, ref BlobRef) ([]byte, error) {
	key := PackKey(ref.Pack)
	b, err := r.store.GetRange(ctx, key, int64(ref.Offset), int64(ref.Length))
	if err != nil {
		return nil, r.missing(key, err)
	}
	return b, nil
}

// ReadBlob fetches, decompresses and verifies the blob ref points to. A
// missing pack gives ErrMissing; bytes that do not match the hash give
// ErrCorrupt — never wrong data.
func (r *Repo) ReadBlob(ctx context.Context, ref BlobRef) ([]byte, error) {
	stored, err := r.ReadBlobStored(ctx, ref)
	if err != nil {
		return nil, err
	}
	return r.DecodeStored(ref, stored)
}

// missing maps a store not-found error to ErrMissing, keeping the cause.
func (r *Repo) missing(key string, err error) error {
	if errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("%s: %w: %w", key, ErrMissing, err)
	}
	return err
}
