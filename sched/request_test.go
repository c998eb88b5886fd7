package sched

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// TestMovePrompt: a Seq given up (GiveSeq) that AppendPrompt would copy whole is swapped with the
// scheduler's empty sequence, the caller getting that one back; otherwise (not given up, another block
// size, no tokens where the scheduler keeps them) the prompt is made as AppendPrompt makes it and the
// caller keeps its Seq. Either way the scheduler's prompt is AppendPrompt's.
func TestMovePrompt(t *testing.T) {
	prompt := make([]uint32, 100)
	for i := range prompt {
		prompt[i] = uint32(i / 7)
	}
	hashed := func(bs int, keep bool) *tokens.Sequence {
		s := tokens.NewSequence(bs)
		if keep {
			s.KeepTokens()
		}
		s.AddItems(tokens.Item{Key: 9, Start: 20, Len: 10})
		s.Append(prompt...)
		return s
	}
	for _, tc := range []struct {
		name             string
		give             bool
		bs               int  // of the caller's Seq
		keep, schedKeeps bool // tokens kept by the caller's Seq, by the scheduler's
		swap             bool
	}{
		{"given up", true, 16, false, false, true},
		{"given up, both keeping tokens", true, 16, true, true, true},
		{"kept by the caller", false, 16, false, false, false},
		{"another block size", true, 8, false, false, false},
		{"no tokens for a scheduler that keeps them", true, 16, false, true, false},
	} {
		r := &Request{ID: 1, Prompt: prompt, Images: []tokens.Item{{Key: 9, Start: 20, Len: 10}}, Seq: hashed(tc.bs, tc.keep), GiveSeq: tc.give}
		newSched := func() *tokens.Sequence {
			s := tokens.NewSequence(16)
			if tc.schedKeeps {
				s.KeepTokens()
			}
			return s
		}
		want := newSched()
		(&Request{ID: 1, Prompt: prompt, Images: r.Images, Seq: r.Seq}).AppendPrompt(want)

		given, empty := r.Seq, newSched()
		seq := empty
		r.MovePrompt(&seq)
		if swapped := seq == given && r.Seq == empty; swapped != tc.swap || !swapped && r.Seq != given {
			t.Errorf("%s: the scheduler holds the caller's Seq %v, the caller its empty one %v; want swapped %v", tc.name, seq == given, r.Seq == empty, tc.swap)
		}
		if !slices.Equal(seq.Blocks(), want.Blocks()) || seq.Len() != want.Len() || !slices.Equal(seq.Tail(), want.Tail()) ||
			!slices.Equal(seq.Tokens(), want.Tokens()) || seq.Seed() != want.Seed() {
			t.Errorf("%s: the scheduler's prompt is not AppendPrompt's", tc.name)
		}
		if tc.swap && r.Seq.Len() != 0 {
			t.Errorf("%s: the caller got back a sequence of %d tokens, want an empty one", tc.name, r.Seq.Len())
		}
	}
}
