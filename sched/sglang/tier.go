package sglang

import (
	"slices"
	"time"

	"github.com/mocker-sim/mocker/radix"
	"github.com/mocker-sim/mocker/sched"
)

// tierState is what the scheduler keeps of its lower KV tiers' onboardings (SGLang's HiCache load-back):
// the requests whose prefix is being copied back from host memory, in the order they started, with when
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
	if t := s.cache.Tiers(); t != nil {
		t.SetNow(now)
	}
}

// onboard starts loading back the pages of r's prompt (at the front of the queue) that follow its tree
// hits (s.hits, under node) and that a lower tier holds, up to limit pages in all, as HiCache's
// init_load_back does before the prefill can use them: r locks its hits, takes fresh pages for the
// copies and waits outside the queue while others run (see loaded). It reports whether the load started
// (r left the queue) and, if not, whether r can be admitted as usual (nothing to load) or must wait at
// the front (the pool cannot hold the copies now).
func (s *Scheduler) onboard(r *request, node *radix.Node, limit int) (started, wait bool) {
	t := s.cache.Tiers()
	hits := len(s.hits)
	if t == nil || limit <= hits {
		return false, false
	}
	blocks := r.Seq.Blocks()[hits:limit]
	n := t.Match(blocks)
	if n == 0 {
		return false, false
	}
	s.cache.Lock(node) // before evicting, so the eviction cannot take the prefix
	if s.cache.FreePages()+s.cache.EvictablePages() < n {
		s.cache.Unlock(node)
		return false, true
	}
	// Onboard first: the write-backs of the pages reserve evicts must not push these out of their tier.
	ready := t.Onboard(blocks[:n])
	s.reserve(n)
	r.pages = append(r.pages[:0], s.hits...)
	r.pages, _ = s.cache.Alloc(n, r.pages)
	r.locked, r.node = hits, node
	s.private += n
	s.tier.loading = append(s.tier.loading, r)
	s.tier.ready = append(s.tier.ready, ready)
	return true, false
}

// loaded returns the requests whose onboarding has ended to the front of the queue, in the order they
// started: their copies join the tree (announced now, not before), unlocked, so their admission finds
// them as prefix hits; a copy evicted before then is loaded again.
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
		n := len(r.pages) - r.locked
		s.cache.Extend(r.node, r.Seq.Blocks()[r.locked:len(r.pages)], r.pages[r.locked:])
		s.private -= n
		if r.node != nil {
			s.cache.Unlock(r.node)
		}
		r.pages, r.locked, r.node = r.pages[:0], 0, nil
		t.landed = append(t.landed, r)
	}
	clear(t.loading[k:])
	t.loading, t.ready = t.loading[:k], t.ready[:k]
	s.waiting = slices.Insert(s.waiting, 0, t.landed...)
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
