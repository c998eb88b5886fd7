package book

import "github.com/mocker-sim/mocker/tokens"

// Spares is a free list of the buffers finished requests leave for the prompts made next (a request that
// waits as its source holds none). Max > 0 bounds how many are kept; 0 keeps all.
type Spares[T any] struct {
	free []T
	Max  int
}

// Put keeps x unless Max are kept already.
func (s *Spares[T]) Put(x T) {
	if s.Max == 0 || len(s.free) < s.Max {
		s.free = append(s.free, x)
	}
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

// TakeSeq returns an empty sequence of blockSize-token blocks for a new prompt: a finished request's,
// reset, or a new one when none is kept.
func TakeSeq(s *Spares[*tokens.Sequence], blockSize int) *tokens.Sequence {
	if seq := s.Take(); seq != nil {
		seq.Reset()
		return seq
	}
	return tokens.NewSequence(blockSize)
}
