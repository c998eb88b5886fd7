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

// Item is a span of a sequence's tokens whose blocks carry an extra key: a multimodal item (an image)
// whose Key is its content hash, at tokens [Start, Start+Len) of the prompt. Every full block overlapping
// the span has the key folded into its tokens hash (ExtraHash), so two prompts with the same tokens but
// different images share no block from the first one the image touches.
type Item struct {
	Key        uint64
	Start, Len int
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
	seed      uint64 // of the tokens hashes (Seed, or LoRASeed of the request's adapter)

	// The tokens hash of the last block made of one repeated token: traces synthesise prompts as long
	// runs of one token per hash id, so consecutive blocks are often identical and need hashing once.
	uniformTok  uint32
	uniformHash uint64
	uniformOK   bool
	scratch     []uint32

	items []Item   // sorted by Start, not overlapping (AddItems)
	item  int      // the first item that may overlap the next full block
	keys  []uint64 // scratch: the keys of one block
}

// NewSequence returns an empty sequence cut into blocks of blockSize tokens.
func NewSequence(blockSize int) *Sequence {
	if blockSize <= 0 {
		panic(fmt.Sprintf("tokens: block size %d", blockSize))
	}
	return &Sequence{blockSize: blockSize, seed: Seed}
}

// SetSeed makes the empty sequence hash its blocks' tokens with seed (LoRASeed of the request's adapter)
// instead of Seed, until Reset.
func (s *Sequence) SetSeed(seed uint64) {
	if s.n != 0 {
		panic(fmt.Sprintf("tokens: SetSeed on a sequence of %d tokens", s.n))
	}
	s.seed, s.uniformOK = seed, false
}

// Seed is the seed of the sequence's tokens hashes.
func (s *Sequence) Seed() uint64 { return s.seed }

// KeepTokens makes the sequence retain every token id (for consumers that publish token ids, such as
// vLLM-format KV events). It must be called before the first Append.
func (s *Sequence) KeepTokens() { s.keep = true }

// Reset empties the sequence, keeping its buffers for reuse; its seed is Seed again.
func (s *Sequence) Reset() {
	s.n, s.seed = 0, Seed
	s.uniformOK = false
	s.blocks = s.blocks[:0]
	s.tail = s.tail[:0]
	s.all = s.all[:0]
	s.items, s.item = s.items[:0], 0
}

// Grow makes room for n more tokens, so that appending them allocates the sequence's arrays once rather
// than growing them run by run.
func (s *Sequence) Grow(n int) {
	s.blocks = slices.Grow(s.blocks, (s.n+n)/s.blockSize-len(s.blocks))
	if s.keep {
		s.all = slices.Grow(s.all, n)
	}
}

// AddItems declares the items of the sequence, sorted by Start and not overlapping, before the tokens
// they cover are appended (the blocks already full are not hashed again).
func (s *Sequence) AddItems(items ...Item) {
	for _, it := range items {
		if n := len(s.items); it.Len <= 0 || it.Start < 0 || n > 0 && it.Start < s.items[n-1].Start+s.items[n-1].Len {
			panic(fmt.Sprintf("tokens: item %+v out of order or empty", it))
		}
		s.items = append(s.items, it)
	}
}

// Items returns the declared items. The slice is owned by the sequence.
func (s *Sequence) Items() []Item { return s.items }

// Keeping reports whether the sequence keeps its token ids (KeepTokens).
func (s *Sequence) Keeping() bool { return s.keep }

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
	if len(toks) == 1 && len(s.tail)+1 < s.blockSize && s.tail != nil {
		// A decode step's token that completes no block: most of what is appended, one at a time.
		if s.keep {
			s.all = append(s.all, toks[0])
		}
		s.n++
		s.tail = append(s.tail, toks[0])
		return
	}
	if s.keep {
		s.all = append(s.all, toks...)
	}
	s.n += len(toks)
	if len(s.tail)+len(toks) >= s.blockSize { // some block completes (a division per token shows in profiles)
		if want := s.n / s.blockSize; want > cap(s.blocks) {
			s.blocks = slices.Grow(s.blocks, want-len(s.blocks))
		}
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

func (s *Sequence) push(block []uint32) {
	uniform := true
	for _, t := range block[1:] {
		if t != block[0] {
			uniform = false
			break
		}
	}
	if uniform {
		s.pushHash(s.uniformBlockHash(block[0]))
		return
	}
	s.pushHash(BlockHashSeed(block, s.seed))
}

// uniformBlockHash is the tokens hash of a block of blockSize copies of tok, remembered for the next one.
func (s *Sequence) uniformBlockHash(tok uint32) uint64 {
	if !s.uniformOK || s.uniformTok != tok {
		s.scratch = slices.Grow(s.scratch[:0], s.blockSize)[:s.blockSize]
		for i := range s.scratch {
			s.scratch[i] = tok
		}
		s.uniformTok, s.uniformHash, s.uniformOK = tok, BlockHashSeed(s.scratch, s.seed), true
	}
	return s.uniformHash
}

// pushHash appends a full block with tokens hash th, chaining its sequence hash.
func (s *Sequence) pushHash(th uint64) {
	if s.item < len(s.items) {
		th = s.extra(th)
	}
	h := th
	if n := len(s.blocks); n > 0 {
		h = SeqHash(s.blocks[n-1].Hash, th)
	}
	s.blocks = append(s.blocks, Block{Hash: h, TokensHash: th})
}

// pushUniform appends k full blocks of tokens hash th, none overlapping an item: pushHash k times, in one
// loop (every block of a trace's prompt comes this way; its sequence hashes chain, so that loop is the
// time they take).
func (s *Sequence) pushUniform(th uint64, k int) {
	n := len(s.blocks)
	s.blocks = slices.Grow(s.blocks, k)[:n+k]
	var h uint64 // the sequence hash of the block before block i
	if n > 0 {
		h = s.blocks[n-1].Hash
	}
	for i := n; i < n+k; i++ {
		if i == 0 {
			h = th // the first block's sequence hash is its tokens hash
		} else {
			h = SeqHash(h, th)
		}
		s.blocks[i] = Block{Hash: h, TokensHash: th}
	}
}

// extra folds into th the keys of the items overlapping the block about to be pushed.
func (s *Sequence) extra(th uint64) uint64 {
	lo := len(s.blocks) * s.blockSize
	hi := lo + s.blockSize
	for s.item < len(s.items) && s.items[s.item].Start+s.items[s.item].Len <= lo {
		s.item++
	}
	s.keys = s.keys[:0]
	for _, it := range s.items[s.item:] {
		if it.Start >= hi {
			break
		}
		s.keys = append(s.keys, it.Key)
	}
	return ExtraHash(th, s.keys...)
}

// AppendRun appends n copies of tok. Whole blocks inside the run are hashed without looking at their
// tokens (their tokens hash is computed once): traces synthesise prompts as such runs, one per hash id.
func (s *Sequence) AppendRun(tok uint32, n int) {
	if s.keep {
		for range n {
			s.all = append(s.all, tok)
		}
	}
	if s.tail == nil {
		s.tail = make([]uint32, 0, s.blockSize)
	}
	s.n += n
	if want := s.n / s.blockSize; want > cap(s.blocks) {
		s.blocks = slices.Grow(s.blocks, want-len(s.blocks))
	}
	for n > 0 {
		if len(s.tail) == 0 && n >= s.blockSize {
			if s.item < len(s.items) { // an item may overlap the block: its key joins the tokens hash
				s.pushHash(s.uniformBlockHash(tok))
				n -= s.blockSize
				continue
			}
			k := n / s.blockSize
			s.pushUniform(s.uniformBlockHash(tok), k)
			n -= k * s.blockSize
			continue
		}
		s.tail = append(s.tail, tok)
		n--
		if len(s.tail) == s.blockSize {
			s.push(s.tail)
			s.tail = s.tail[:0]
		}
	}
}

// AppendSequence appends src to the empty s by copying src's identities: the same tokens, hashed once.
// Both must have the same block size; s keeps tokens only if src does, and takes src's seed.
func (s *Sequence) AppendSequence(src *Sequence) {
	if s.n != 0 || s.blockSize != src.blockSize {
		panic(fmt.Sprintf("tokens: AppendSequence of %d-token blocks to %d tokens in %d-token blocks", src.blockSize, s.n, s.blockSize))
	}
	if s.keep {
		if src.all == nil && src.n > 0 {
			panic("tokens: AppendSequence: the source does not keep its tokens")
		}
		s.all = append(s.all, src.all...)
	}
	s.blocks = append(s.blocks, src.blocks...)
	s.seed, s.uniformOK = src.seed, false
	s.items = append(s.items, src.items...)
	s.item = src.item
	if s.tail == nil {
		s.tail = make([]uint32, 0, s.blockSize)
	}
	s.tail = append(s.tail, src.tail...)
	s.n = src.n
}
