// Package binenc holds the binary primitives shared by agentfs's encoded
// objects (on-blob trees and pack footers in snapshot/, inode records in
// cache/): varints, length-prefixed bytes, fixed raw fields.
//
// A Decoder never panics and never allocates more than its input's size on
// hostile input: the first error sticks, later reads return zero values, and
// every count is checked against the bytes that remain.
package binenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is the error of every failed decode.
var ErrMalformed = errors.New("malformed encoding")

// Encoder appends primitives to B.
type Encoder struct{ B []byte }

// Byte appends one byte.
func (e *Encoder) Byte(v byte) { e.B = append(e.B, v) }

// Raw appends v as is (a fixed-size field).
func (e *Encoder) Raw(v []byte) { e.B = append(e.B, v...) }

// Uvarint appends an unsigned varint.
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Varint appends a zig-zag signed varint.
func (e *Encoder) Varint(v int64) { e.B = binary.AppendVarint(e.B, v) }

// Bytes appends a length-prefixed byte string.
func (e *Encoder) Bytes(v []byte) { e.Uvarint(uint64(len(v))); e.B = append(e.B, v...) }

// String appends a length-prefixed string.
func (e *Encoder) String(v string) { e.Uvarint(uint64(len(v))); e.B = append(e.B, v...) }

// Bool appends 0 or 1.
func (e *Encoder) Bool(v bool) {
	if v {
		e.Byte(1)
	} else {
		e.Byte(0)
	}
}

// Decoder reads what Encoder wrote from B.
type Decoder struct {
	B   []byte
	err error
}

// Err returns the first error, wrapping ErrMalformed, or nil.
func (d *Decoder) Err() error { return d.err }

// Fail records an error (if none is recorded yet).
func (d *Decoder) Fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.B) < 1 {
		d.Fail("truncated")
		return 0
	}
	v := d.B[0]
	d.B = d.B[1:]
	return v
}

// Raw reads n bytes; the result aliases the input. On error it returns n
// zero bytes.
func (d *Decoder) Raw(n int) []byte {
	if d.err == nil && (n < 0 || len(d.B) < n) {
		d.Fail("truncated")
	}
	if d.err != nil {
		return make([]byte, max(n, 0))
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.Fail("bad varint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Uint32 reads an unsigned varint that must fit 32 bits.
func (d *Decoder) Uint32() uint32 {
	v := d.Uvarint()
	if v > math.MaxUint32 {
		d.Fail("value %d overflows 32 bits", v)
		return 0
	}
	return uint32(v)
}

// Count reads an element count and checks that at least minSize bytes per
// element remain.
func (d *Decoder) Count(minSize int) int {
	v := d.Uvarint()
	if d.err == nil && v > uint64(len(d.B)/max(minSize, 1)) {
		d.Fail("count %d exceeds input", v)
		return 0
	}
	return int(v)
}

// Bytes reads a length-prefixed byte string into a new slice.
func (d *Decoder) Bytes() []byte {
	n := d.Count(1)
	if d.err != nil {
		return nil
	}
	return append([]byte{}, d.Raw(n)...)
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	n := d.Count(1)
	if d.err != nil {
		return ""
	}
	return string(d.Raw(n))
}

// Bool reads 0 or 1.
func (d *Decoder) Bool() bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail("bad bool")
	return false
}

// End fails if input remains.
func (d *Decoder) End() {
	if d.err == nil && len(d.B) != 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
}
