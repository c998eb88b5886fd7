package sched

import (
	"fmt"
	"math/rand/v2"
)

// Spec configures speculative decoding (MTP / EAGLE-style draft tokens): each decode step verifies Tokens
// draft tokens, and draft j is accepted with probability AcceptRates[j] given that every draft before it
// was (missing rates are 0), as the reference's sampler (dynamo-mocker.md §6).
type Spec struct {
	Tokens      int
	AcceptRates []float64
	Seed        uint64 // seeds the acceptance draws
}

// Validate reports an invalid setting, named by its flag.
func (s Spec) Validate() error {
	if s.Tokens < 0 {
		return fmt.Errorf("spec-num-tokens %d: must not be negative", s.Tokens)
	}
	for _, r := range s.AcceptRates {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("spec-accept-rates %v: each rate must be in [0, 1]", s.AcceptRates)
		}
	}
	return nil
}

// Sampler draws speculative bursts. It is deterministic for a seed and the order of calls.
type Sampler struct {
	rates  []float64
	rng    *rand.Rand
	steps  int64
	tokens int64
}

// NewSampler returns a sampler for s.
func NewSampler(s Spec) *Sampler {
	return &Sampler{rates: s.AcceptRates, rng: rand.New(rand.NewPCG(s.Seed, 0x6d7470))}
}

// Burst returns how many tokens one decode step emits: the bonus token plus the run of accepted drafts
// among drafts, at most remaining (the tokens the request still has to generate, >= 1).
func (s *Sampler) Burst(drafts, remaining int) int {
	b := 1
	for j := 0; j < drafts && b < remaining; j++ {
		rate := 0.0
		if j < len(s.rates) {
			rate = s.rates[j]
		}
		if s.rng.Float64() >= rate {
			break
		}
		b++
	}
	s.steps++
	s.tokens += int64(b)
	return b
}

// Counts returns the speculative steps drawn and the tokens they emitted.
func (s *Sampler) Counts() (steps, tokens int64) { return s.steps, s.tokens }
