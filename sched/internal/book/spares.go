package book

import "github.com/mocker-sim/mocker/tokens"

// Spares is a free list of the buffers finished requests leave for the prompts made next (a request that
// waits as its source holds none). Max > 0 bounds how many are kept; otherwise all are.
type Spares[T any] struct {
	free []T
	Max  int
}

// Put keeps x unless Max are kept already, and reports whether it did.
func (s *Spares[T]) Put(x T) bool {
	if s.Max > 0 && len(s.free) >= s.Max {
		return false
	}
	s.free = append(s.free, x)
	return true
}

// Take returns the buffer kept last, or the zero value when none is.
func (s *Spares[T]) Take() (x T) {
	if n := len(s.free); n > 0 {
		x, s.free = s.free[n-1], s.free[:n-1]
	}
	return x
}

// Len is how many buffers are kept.
func (s *Spares[T]) Len() int { return len(s.free) }

// MaxSeqBlocks bounds the blocks the spare sequences have room for between them (2 MiB of block hashes):
// each has room for the longest prompt it held (2 MiB for a 126k-token prompt at block size 1), and eight
// SGLang workers' spares, bounded in number alone, held ~130 MiB of the conversation replay's peak.
const MaxSeqBlocks = 1 << 17

// SeqSpares are spare token sequences, kept while they have room for MaxSeqBlocks blocks at most between
// them: a sequence that would take them past it is dropped, rather than kept for every short prompt after it.
type SeqSpares struct {
	Spares[*tokens.Sequence]
	blocks int // the blocks the kept sequences have room for
}

// Put keeps seq unless Max are kept already or its room would take the spares past MaxSeqBlocks.
func (s *SeqSpares) Put(seq *tokens.Sequence) {
	if c := cap(seq.Blocks()); s.blocks+c <= MaxSeqBlocks && s.Spares.Put(seq) {
		s.blocks += c
	}
}

// Take returns an empty sequence of blockSize-token blocks for a new prompt: a finished request's, reset,
// or a new one when none is kept.
func (s *SeqSpares) Take(blockSize int) *tokens.Sequence {
	seq := s.Spares.Take()
	if seq == nil {
		return tokens.NewSequence(blockSize)
	}
	s.blocks -= cap(seq.Blocks())
	seq.Reset()
	return seq
}

// Blocks is the blocks the kept sequences have room for.
func (s *SeqSpares) Blocks() int { return s.blocks }
