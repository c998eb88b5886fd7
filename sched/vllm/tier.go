package vllm

import (
	"slices"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/tokens"
)

// tierState is what the scheduler keeps of its lower KV tiers' onboardings: the requests whose prefix is
// being copied back to the GPU (vLLM's WAITING_FOR_REMOTE_KVS), in the order they started, with when
// their copies arrive; and the engine's clock, which only prices those transfers.
type tierState struct {
	loading []*request
	ready   []time.Duration // by loading's index
	landed  []*request      // loaded's scratch
	now     time.Duration
}

// SetNow tells the scheduler the time of its next pass; only its lower KV tiers' transfers read it.
func (s *Scheduler) SetNow(now time.Duration) {
	s.tier.now = now
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
	s.tier.loading = append(s.tier.loading, r)
	s.tier.ready = append(s.tier.ready, ready)
	return loadStarted
}

// loaded returns the requests whose onboarding has ended to the front of the queue, in the order they
// started: their copies become cached GPU blocks (announced now, not before) that they no longer hold, so
// their admission finds them as prefix hits; a copy evicted before it is onboarded again.
func (s *Scheduler) loaded() {
	t := &s.tier
	if len(t.loading) == 0 {
		return
	}
	t.landed = t.landed[:0]
	k := 0
	for i, r := range t.loading {
		if t.ready[i] > t.now {
			t.loading[k], t.ready[k] = r, t.ready[i]
			k++
			continue
		}
		s.pool.Commit(r.table, r.Seq.Blocks(), r.committed, len(r.table))
		s.pool.Release(r.table)
		r.table, r.committed = r.table[:0], 0
		t.landed = append(t.landed, r)
	}
	clear(t.loading[k:])
	t.loading, t.ready = t.loading[:k], t.ready[:k]
	for i := len(t.landed) - 1; i >= 0; i-- {
		s.waiting.pushFront(t.landed[i])
	}
	clear(t.landed)
}

// awaitLoads makes a pass that runs nothing while onboardings are in flight last until the first ends.
func (s *Scheduler) awaitLoads(p *sched.Pass) {
	if len(p.Batch.Seqs) > 0 || len(s.tier.ready) == 0 {
		return
	}
	p.Until = slices.Min(s.tier.ready)
}

// unload forgets r's onboarding, if any (it was cancelled).
func (s *Scheduler) unload(r *request) {
	if i := slices.Index(s.tier.loading, r); i >= 0 {
		s.tier.loading = slices.Delete(s.tier.loading, i, i+1)
		s.tier.ready = slices.Delete(s.tier.ready, i, i+1)
	}
}
