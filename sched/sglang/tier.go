package sglang

import (
	"slices"
	"time"

	"github.com/mocker-sim/mocker/radix"
)

// SetNow tells the scheduler the time of its next pass; only its lower KV tiers' transfers read it.
func (s *Scheduler) SetNow(now time.Duration) {
	s.tier.SetNow(now)
	if t := s.cache.Tiers(); t != nil {
		t.SetNow(now)
	}
}

// onboard starts loading back the pages of r's prompt (at the front of the queue) that follow its hits
// pages matched in the tree (ending at node) and that a lower tier holds, up to limit pages in all, as
// HiCache's init_load_back does before the prefill can use them: r locks its hits, takes fresh pages for
// the copies and waits outside the queue while others run (see loaded). It reports whether the load started
// (r left the queue) and, if not, whether r can be admitted as usual (nothing to load) or must wait at
// the front (the pool cannot hold the copies now).
func (s *Scheduler) onboard(r *request, node *radix.Node, hits, limit int) (started, wait bool) {
	t := s.cache.Tiers()
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
	r.pages, _ = s.cache.Alloc(n, r.pages[:0])
	r.locked, r.node = hits, node
	s.private += n
	s.tier.Start(r, ready)
	return true, false
}

// loaded returns the requests whose onboarding has ended to the front of the queue, in the order they
// started: their copies join the tree (announced now, not before), unlocked, so their admission finds
// them as prefix hits; a copy evicted before then is loaded again.
func (s *Scheduler) loaded() {
	landed := s.tier.Landed()
	for _, r := range landed {
		n := len(r.pages)
		s.cache.Extend(r.node, r.Seq.Blocks()[r.locked:r.held()], r.pages, 0) // unlocked next: nothing grows it
		s.private -= n
		if r.node != nil {
			s.cache.Unlock(r.node)
		}
		r.pages, r.locked, r.node = r.pages[:0], 0, nil
	}
	s.waiting = slices.Insert(s.waiting, 0, landed...)
}
