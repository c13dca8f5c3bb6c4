package bench

import (
	"encoding/binary"
	"math/rand/v2"
)

// dataGen makes incompressible, non-repeating file content cheaply: a
// random pool XORed word by word with a per-block key, so that no two
// blocks share content (compression and deduplication in the filesystem
// under test gain nothing).
type dataGen struct {
	pool []byte // len is a multiple of 8
}

const poolSize = 1 << 20

func newDataGen(seed uint64) *dataGen {
	r := rand.New(rand.NewPCG(seed, 0xda7a))
	p := make([]byte, poolSize)
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], r.Uint64())
	}
	return &dataGen{pool: p}
}

// fill writes the content of block key into dst.
func (g *dataGen) fill(dst []byte, key uint64) {
	k := splitmix(key)
	off := int(k>>40) % (poolSize / 8) * 8
	for i := 0; i < len(dst); {
		if off+8 > len(g.pool) {
			off = 0
		}
		if len(dst)-i >= 8 {
			binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(g.pool[off:])^k)
			i += 8
		} else {
			dst[i] = g.pool[off] ^ byte(k)
			i++
		}
		off += 8
	}
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// blockKey combines a stream id and a block index into a fill key.
func blockKey(stream, index int) uint64 { return uint64(stream)<<40 ^ uint64(index) }
