package tokens

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Seed is the XXH3 seed of every block hash (Dynamo's salt).
const Seed = 1337

// littleEndian reports whether uint32s in memory are already in the byte order the hash is defined on.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// BlockHash is the tokens hash of one block: XXH3-64, seed 1337, over the tokens as little-endian uint32s.
func BlockHash(toks []uint32) uint64 {
	if len(toks) == 0 {
		return xxh3.HashSeed(nil, Seed)
	}
	if littleEndian {
		// The tokens' memory is the byte string to hash: no copy on the hot path.
		return xxh3.HashSeed(unsafe.Slice((*byte)(unsafe.Pointer(&toks[0])), 4*len(toks)), Seed)
	}
	buf := make([]byte, 0, 4*len(toks))
	for _, t := range toks {
		buf = binary.LittleEndian.AppendUint32(buf, t)
	}
	return xxh3.HashSeed(buf, Seed)
}

// SeqHash chains a block's tokens hash onto its parent's sequence hash: XXH3-64, seed 1337, over the
// little-endian pair [parent, block]. It is XXH3's 9-to-16-byte case written out for exactly 16 bytes
// (xxh3.HashSeed of the same bytes; a test compares them): every block of every prompt is chained, and the
// general entry point's length dispatch and byte loads cost more than the arithmetic.
func SeqHash(parent, block uint64) uint64 {
	lo := parent ^ (secret24 ^ secret32 + Seed)
	hi := block ^ (secret40 ^ secret48 - Seed)
	mh, ml := bits.Mul64(lo, hi)
	x := 16 + bits.ReverseBytes64(lo) + hi + (mh ^ ml)
	// XXH3's avalanche.
	x ^= x >> 37
	x *= 0x165667919e3779f9
	return x ^ x>>32
}

// Bytes 24 to 56 of XXH3's default secret, as little-endian uint64s.
const (
	secret24 = 0x1f67b3b7a4a44072
	secret32 = 0x78e5c0cc4ee679cb
	secret40 = 0x2172ffcc7dd05a82
	secret48 = 0x8e2443f7744608b8
)
