package vllm

import (
	"slices"
	"time"

	"github.com/mocker-sim/mocker/tokens"
)

// SetNow tells the scheduler the time of its next pass; only its lower KV tiers' transfers read it.
func (s *Scheduler) SetNow(now time.Duration) {
	s.tier.SetNow(now)
	s.pool.SetNow(now)
}

// loadStart is what admission does with a request whose prefix continues in a lower KV tier.
type loadStart uint8

const (
	loadNone    loadStart = iota // nothing to onboard: admit as usual
	loadStarted                  // onboarding: the request left the queue until its blocks arrive
	loadNoRoom                   // the GPU cannot hold the blocks now: the request waits at the front
)

// onboard starts copying back the blocks of r's prompt (waiting at index at) that follow its GPU hits
// (s.hits) and that a lower tier holds, as vLLM's offloading connector loads them asynchronously: the request holds its GPU hits
// and fresh blocks for the copies, and waits outside the queue while others run (see loaded). A prompt's
// last block is never onboarded: its last token is recomputed for its logits.
func (s *Scheduler) onboard(r *request, at int, blocks []tokens.Block, length int) loadStart {
	hits := len(s.hits)
	limit := (length-1)/s.opt.BlockSize - hits
	if limit <= 0 {
		return loadNone
	}
	n := s.pool.MatchLower(blocks[hits : hits+limit])
	if n == 0 {
		return loadNone
	}
	if !s.pool.CanAllocate(s.hits, n) {
		return loadNoRoom
	}
	s.waiting.removeAt(at)
	// Onboard first: the write-backs of the blocks Allocate evicts must not push these out of their tier.
	ready := s.pool.Onboard(blocks[hits : hits+n])
	r.table = s.pool.Acquire(slices.Grow(r.table[:0], hits+n), s.hits)
	r.table = s.pool.Allocate(r.table, n)
	r.committed = hits
	s.tier.Start(r, ready)
	return loadStarted
}

// loaded returns the requests whose onboarding has ended to the front of the queue, in the order they
// started: their copies become cached GPU blocks (announced now, not before) that they no longer hold, so
// their admission finds them as prefix hits; a copy evicted before it is onboarded again.
func (s *Scheduler) loaded() {
	landed := s.tier.Landed()
	for _, r := range landed {
		s.pool.Commit(r.table, r.Seq.Blocks(), r.committed, len(r.table))
		s.pool.Release(r.table)
		r.table, r.committed = r.table[:0], 0
	}
	for i := len(landed) - 1; i >= 0; i-- {
		s.waiting.pushFront(landed[i])
	}
}
