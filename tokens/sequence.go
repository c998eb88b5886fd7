package tokens

import (
	"fmt"
	"slices"
)

// Block is the identity of one full block.
type Block struct {
	Hash       uint64 // sequence hash: identifies the block and its whole prefix
	TokensHash uint64 // hash of this block's tokens alone
}

// Sequence is a growing token sequence reduced to the hashes of its full blocks and the tokens of its
// trailing partial block. The zero value is not usable; call NewSequence.
type Sequence struct {
	blockSize int
	n         int
	blocks    []Block
	tail      []uint32 // tokens after the last full block; len < blockSize
	all       []uint32 // every token, only when kept (see KeepTokens)
	keep      bool

	// The tokens hash of the last block made of one repeated token: traces synthesise prompts as long
	// runs of one token per hash id, so consecutive blocks are often identical and need hashing once.
	uniformTok  uint32
	uniformHash uint64
	uniformOK   bool
}

// NewSequence returns an empty sequence cut into blocks of blockSize tokens.
func NewSequence(blockSize int) *Sequence {
	if blockSize <= 0 {
		panic(fmt.Sprintf("tokens: block size %d", blockSize))
	}
	return &Sequence{blockSize: blockSize}
}

// KeepTokens makes the sequence retain every token id (for consumers that publish token ids, such as
// vLLM-format KV events). It must be called before the first Append.
func (s *Sequence) KeepTokens() { s.keep = true }

// Reset empties the sequence, keeping its buffers for reuse.
func (s *Sequence) Reset() {
	s.n = 0
	s.uniformOK = false
	s.blocks = s.blocks[:0]
	s.tail = s.tail[:0]
	s.all = s.all[:0]
}

// BlockSize is the number of tokens per block.
func (s *Sequence) BlockSize() int { return s.blockSize }

// Len is the number of tokens in the sequence.
func (s *Sequence) Len() int { return s.n }

// Blocks returns the identities of the full blocks. The slice is owned by the sequence.
func (s *Sequence) Blocks() []Block { return s.blocks }

// Tail returns the tokens of the trailing partial block. The slice is owned by the sequence.
func (s *Sequence) Tail() []uint32 { return s.tail }

// Tokens returns every token id if KeepTokens was called, else nil.
func (s *Sequence) Tokens() []uint32 { return s.all }

// Append adds tokens to the end of the sequence, hashing each block as it fills.
func (s *Sequence) Append(toks ...uint32) {
	if s.keep {
		s.all = append(s.all, toks...)
	}
	s.n += len(toks)
	if want := s.n / s.blockSize; want > cap(s.blocks) {
		s.blocks = slices.Grow(s.blocks, want-len(s.blocks))
	}
	if s.tail == nil {
		s.tail = make([]uint32, 0, s.blockSize)
	}
	for len(toks) > 0 {
		if len(s.tail) == 0 && len(toks) >= s.blockSize {
			// A whole block straight from the input: hash it without copying.
			s.push(toks[:s.blockSize])
			toks = toks[s.blockSize:]
			continue
		}
		k := min(s.blockSize-len(s.tail), len(toks))
		s.tail = append(s.tail, toks[:k]...)
		toks = toks[k:]
		if len(s.tail) == s.blockSize {
			s.push(s.tail)
			s.tail = s.tail[:0]
		}
	}
}

// AppendHashed adds toks to an empty sequence whose full blocks were already hashed: blocks are their
// identities, as another Sequence of the same block size computed them. It costs a copy instead of hashing
// every token again.
func (s *Sequence) AppendHashed(blocks []Block, toks []uint32) {
	full := len(blocks) * s.blockSize
	if s.n != 0 || len(toks) < full || len(toks)-full >= s.blockSize {
		panic(fmt.Sprintf("tokens: AppendHashed of %d blocks and %d tokens (block size %d) to %d tokens", len(blocks), len(toks), s.blockSize, s.n))
	}
	if s.keep {
		s.all = append(s.all, toks[:full]...)
	}
	s.blocks = append(s.blocks, blocks...)
	s.n = full
	s.Append(toks[full:]...)
}

func (s *Sequence) push(block []uint32) {
	th, uniform := uint64(0), true
	for _, t := range block[1:] {
		if t != block[0] {
			uniform = false
			break
		}
	}
	switch {
	case uniform && s.uniformOK && s.uniformTok == block[0]:
		th = s.uniformHash
	case uniform:
		th = BlockHash(block)
		s.uniformTok, s.uniformHash, s.uniformOK = block[0], th, true
	default:
		th = BlockHash(block)
	}
	h := th
	if n := len(s.blocks); n > 0 {
		h = SeqHash(s.blocks[n-1].Hash, th)
	}
	s.blocks = append(s.blocks, Block{Hash: h, TokensHash: th})
}
