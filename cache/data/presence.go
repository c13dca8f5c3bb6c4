package data

import (
	"slices"

	"github.com/agentfs/agentfs/internal/binenc"
)

// EncodePresence encodes the set of blocks a file holds clean (its
// presence record) as their indexes in increasing order.
func EncodePresence(p map[uint64]bool) []byte {
	idx := make([]uint64, 0, len(p))
	for b := range p {
		idx = append(idx, b)
	}
	slices.Sort(idx)
	var e binenc.Encoder
	for _, b := range idx {
		e.Uvarint(b)
	}
	return e.B
}

// DecodePresence returns the block indexes of a presence record written by
// EncodePresence; it stops at the first undecodable byte.
func DecodePresence(b []byte) []uint64 {
	d := binenc.Decoder{B: b}
	var out []uint64
	for len(d.B) > 0 && d.Err() == nil {
		out = append(out, d.Uvarint())
	}
	return out
}
