package vllmevents

import (
	"crypto/sha256"
	"encoding/binary"
)

// DefaultSeed is the seed recent vLLM derives NONE_HASH from when PYTHONHASHSEED is unset and the hash is
// cryptographic (DEFAULT_NONE_HASH_SEED). Older vLLM used 32 random bytes instead, so its hashes could not
// be reproduced at all; give such a fleet an explicit PYTHONHASHSEED and the mocker the same seed.
const DefaultSeed = "vllm-none-hash"

// CBOR major types, already shifted into the initial byte.
const (
	cborUint  = 0 << 5
	cborBytes = 2 << 5
	cborText  = 3 << 5
	cborArray = 4 << 5
	cborNull  = 0xf6
)

// A Hasher computes vLLM's sha256_cbor block hashes for one seed. It reuses one encoding buffer, so a
// block costs no allocation; for the same reason it is not safe for concurrent use.
type Hasher struct {
	none [32]byte
	buf  []byte
}

// NewHasher returns a Hasher for the given PYTHONHASHSEED value. The seed is hashed as it is, "" included
// (which is what vLLM does with PYTHONHASHSEED set but empty, and what llm-d's indexer does with an empty
// hashSeed); pass DefaultSeed to match recent vLLM run without PYTHONHASHSEED.
func NewHasher(seed string) *Hasher {
	h := &Hasher{buf: appendSeed(nil, seed)}
	h.none = sha256.Sum256(h.buf)
	return h
}

// NoneHash returns vLLM's NONE_HASH for the seed: the parent of every chain's first block.
func (h *Hasher) NoneHash() [32]byte { return h.none }

// Block returns the hash of one full block of tokens whose parent block hashed to parent (NoneHash for
// the first block).
func (h *Hasher) Block(parent [32]byte, tokens []uint32) [32]byte {
	h.buf = appendBlock(h.buf[:0], &parent, tokens)
	return sha256.Sum256(h.buf)
}

// LoRABlock is Block for a request served by LoRA adapter lora: vLLM puts the adapter's name in the
// block's extra keys, (lora,) ("" is the base model: no extra keys).
func (h *Hasher) LoRABlock(parent [32]byte, tokens []uint32, lora string) [32]byte {
	if lora == "" {
		return h.Block(parent, tokens)
	}
	return h.BlockExtra(parent, tokens, []string{lora})
}

// BlockExtra is Block with extra_keys: the identifiers of the multimodal items the block overlaps, in
// order (vLLM's mm hashes), hashed as the tuple (parent, tokens, (key, ...)); none is Block.
func (h *Hasher) BlockExtra(parent [32]byte, tokens []uint32, extra []string) [32]byte {
	if len(extra) == 0 {
		return h.Block(parent, tokens)
	}
	h.buf = appendBlock(h.buf[:0], &parent, tokens)
	h.buf = appendHead(h.buf[:len(h.buf)-1], cborArray, uint64(len(extra))) // in place of the None
	for _, k := range extra {
		h.buf = append(appendHead(h.buf, cborText, uint64(len(k))), k...)
	}
	return sha256.Sum256(h.buf)
}

// AppendChain appends to dst the hashes of the full blocks of tokens, a sequence from its start, cut
// every blockSize tokens; a trailing partial block has no hash. blockSize must be positive.
func (h *Hasher) AppendChain(dst [][32]byte, tokens []uint32, blockSize int) [][32]byte {
	if blockSize <= 0 {
		panic("vllmevents: non-positive block size")
	}
	parent := h.none
	for ; len(tokens) >= blockSize; tokens = tokens[blockSize:] {
		parent = h.Block(parent, tokens[:blockSize])
		dst = append(dst, parent)
	}
	return dst
}

// External returns the 64-bit form of a block hash that vLLM puts in KV events: the digest as a big-endian
// integer masked to 64 bits, which is its last 8 bytes.
func External(h [32]byte) uint64 { return binary.BigEndian.Uint64(h[24:]) }

// appendSeed appends the canonical CBOR of the seed string: the text NONE_HASH is the SHA-256 of.
func appendSeed(b []byte, seed string) []byte {
	return append(appendHead(b, cborText, uint64(len(seed))), seed...)
}

// appendBlock appends the canonical CBOR of hash_block_tokens' tuple (parent, tokens, None).
func appendBlock(b []byte, parent *[32]byte, tokens []uint32) []byte {
	b = appendHead(b, cborArray, 3)
	b = appendHead(b, cborBytes, 32)
	b = append(b, parent[:]...)
	b = appendHead(b, cborArray, uint64(len(tokens)))
	for _, t := range tokens {
		b = appendHead(b, cborUint, uint64(t))
	}
	return append(b, cborNull)
}

// appendHead appends a CBOR initial byte for major type major with argument n in its shortest form, which
// is what canonical CBOR requires.
func appendHead(b []byte, major byte, n uint64) []byte {
	switch {
	case n < 24:
		return append(b, major|byte(n))
	case n <= 0xff:
		return append(b, major|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, major|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, major|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, major|27), n)
}
