package snapshot

import (
	"fmt"

	"github.com/agentfs/agentfs/internal/binenc"
)

func encodeRef(e *binenc.Encoder, r BlobRef) {
	e.Raw(r.Pack[:])
	e.Uvarint(r.Offset)
	e.Uvarint(uint64(r.Length))
	e.Uvarint(uint64(r.RawLen))
	e.Raw(r.Hash[:])
}

func decodeRef(d *binenc.Decoder) BlobRef {
	var r BlobRef
	copy(r.Pack[:], d.Raw(len(r.Pack)))
	r.Offset = d.Uvarint()
	r.Length = d.Uint32()
	r.RawLen = d.Uint32()
	copy(r.Hash[:], d.Raw(HashSize))
	return r
}

// EncodeRef appends the binary form of r (as trees store it) to b.
func EncodeRef(b []byte, r BlobRef) []byte {
	e := binenc.Encoder{B: b}
	encodeRef(&e, r)
	return e.B
}

// DecodeRef reads a binary BlobRef from d (for other packages' records).
func DecodeRef(d *binenc.Decoder) BlobRef { return decodeRef(d) }

// corrupt wraps a decode error as ErrCorrupt.
func corrupt(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, ErrCorrupt, err)
}
