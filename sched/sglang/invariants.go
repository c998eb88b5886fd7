package sglang

import (
	"fmt"
	"slices"
)

// CheckInvariants verifies the radix cache and that requests and pages agree: every page is free, in the
// tree, or held privately by exactly the requests that say so; a request with computed tokens holds
// exactly the pages they need, the tree owns and locks its leading full pages, and a waiting request holds
// nothing (an activated transfer waiting for a running slot holds its prompt's; one onboarding from a
// lower tier holds its locked hits and its copies' pages). The radix cache checks its lower tiers.
func (s *Scheduler) CheckInvariants() error {
	if err := s.cache.CheckInvariants(); err != nil {
		return err
	}
	n := len(s.running) + len(s.waiting) + len(s.arrivals) + len(s.deferred) + len(s.activated) + s.tier.Len()
	if s.chunked != nil {
		n++
	}
	if n != len(s.book.Live) {
		return fmt.Errorf("sglang: %d running + %d waiting (+ chunked), but %d live requests", len(s.running), n-len(s.running), len(s.book.Live))
	}
	if s.opt.MaxRunning > 0 && len(s.running) > s.opt.MaxRunning {
		return fmt.Errorf("sglang: %d running, max %d", len(s.running), s.opt.MaxRunning)
	}
	private := 0
	holders := slices.Concat(s.running, s.activated, s.waiting, s.arrivals, s.deferred)
	if s.chunked != nil {
		holders = append(holders, s.chunked)
	}
	for _, r := range holders {
		if s.book.Live[r.ID] != r {
			return fmt.Errorf("sglang: request %d is not live", r.ID)
		}
		if want := s.pagesFor(r.Computed); r.held() != want {
			return fmt.Errorf("sglang: request %d computed %d tokens but holds %d pages, want %d", r.ID, r.Computed, r.held(), want)
		}
		if r.Generated > r.MaxTokens || r.Computed > r.Length() {
			return fmt.Errorf("sglang: request %d generated %d of %d, computed %d of %d tokens", r.ID, r.Generated, r.MaxTokens, r.Computed, r.Length())
		}
		private += len(r.pages)
	}
	for r := range s.tier.All() {
		if s.book.Live[r.ID] != r || r.Computed != 0 || len(r.pages) == 0 || r.node == nil {
			return fmt.Errorf("sglang: onboarding request %d (live %v) computed %d, locks %d pages and loads %d", r.ID, s.book.Live[r.ID] == r, r.Computed, r.locked, len(r.pages))
		}
		private += len(r.pages)
	}
	for _, r := range slices.Concat(s.waiting, s.arrivals, s.deferred) {
		if r.held() != 0 || r.Computed != 0 {
			return fmt.Errorf("sglang: waiting request %d holds %d pages", r.ID, r.held())
		}
		if (r.Src == nil) == (r.Seq == nil) || r.Src != nil && (r.Preemptions > 0 || cap(r.pages) != 0) {
			return fmt.Errorf("sglang: waiting request %d holds a sequence %v and a source %v (retracted %d times, a page list of %d)",
				r.ID, r.Seq != nil, r.Src != nil, r.Preemptions, cap(r.pages))
		}
	}
	for _, m := range []map[uint64]*request{s.book.Held, s.book.Reserved} {
		for _, r := range m {
			if s.book.Live[r.ID] != nil {
				return fmt.Errorf("sglang: held or reserved request %d is live", r.ID)
			}
			private += len(r.pages)
		}
	}
	if private != s.private {
		return fmt.Errorf("sglang: requests hold %d private pages, counted %d", private, s.private)
	}
	if got := s.cache.FreePages() + s.cache.CachedPages() + private; got != s.cache.Capacity() {
		return fmt.Errorf("sglang: free %d + cached %d + private %d != capacity %d", s.cache.FreePages(), s.cache.CachedPages(), private, s.cache.Capacity())
	}
	return nil
}
