package tokens

import (
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Seed is the XXH3 seed of every block hash (Dynamo's salt).
const Seed = 1337

// littleEndian reports whether uint32s in memory are already in the byte order the hash is defined on.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// LoRASeed is the block-hash seed of requests served by LoRA adapter name: 1337 + XXH3-64(name), wrapping,
// as Dynamo's router seeds compute_block_hash_for_seq, so that two adapters (or an adapter and the base
// model, name "") never share a block. Only tokens hashes take it; the chain (SeqHash) keeps 1337.
func LoRASeed(name string) uint64 {
	if name == "" {
		return Seed
	}
	return Seed + xxh3.HashString(name)
}

// BlockHash is the tokens hash of one block: XXH3-64, seed 1337, over the tokens as little-endian uint32s.
func BlockHash(toks []uint32) uint64 { return BlockHashSeed(toks, Seed) }

// BlockHashSeed is BlockHash with another seed (LoRASeed).
func BlockHashSeed(toks []uint32, seed uint64) uint64 {
	if len(toks) == 0 {
		return xxh3.HashSeed(nil, seed)
	}
	if littleEndian {
		// The tokens' memory is the byte string to hash: no copy on the hot path.
		return xxh3.HashSeed(unsafe.Slice((*byte)(unsafe.Pointer(&toks[0])), 4*len(toks)), seed)
	}
	buf := make([]byte, 0, 4*len(toks))
	for _, t := range toks {
		buf = binary.LittleEndian.AppendUint32(buf, t)
	}
	return xxh3.HashSeed(buf, seed)
}

// SeqHash chains a block's tokens hash onto its parent's sequence hash: XXH3-64, seed 1337, over the
// little-endian pair [parent, block].
func SeqHash(parent, block uint64) uint64 {
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], parent)
	binary.LittleEndian.PutUint64(buf[8:], block)
	return xxh3.HashSeed(buf[:], Seed)
}

// ExtraHash folds a block's extra keys into its tokens hash, as vLLM's block hash takes extra_keys beside
// the tokens (multimodal items' hashes of the items the block overlaps): XXH3-64, seed 1337, over the
// little-endian uint64s [tokens hash, key 0, key 1, ...]. With no keys it is the tokens hash unchanged, so
// text-only blocks keep their identities.
func ExtraHash(tokensHash uint64, keys ...uint64) uint64 {
	if len(keys) == 0 {
		return tokensHash
	}
	var scratch [32]byte // the tokens hash and up to three keys without a heap allocation
	buf := scratch[:0]
	buf = binary.LittleEndian.AppendUint64(buf, tokensHash)
	for _, k := range keys {
		buf = binary.LittleEndian.AppendUint64(buf, k)
	}
	return xxh3.HashSeed(buf, Seed)
}
