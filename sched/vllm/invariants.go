package vllm

import (
	"fmt"

	"github.com/mocker-sim/mocker/kvcache"
)

// CheckInvariants verifies the pool's accounting and that requests and blocks agree: every live request
// is either running or waiting, a running request holds exactly the blocks its computed tokens need, a
// waiting one holds none (unless it is an activated transfer), and the pool's active blocks are exactly
// those the running, held and reserved requests reference.
func (s *Scheduler) CheckInvariants() error {
	if err := s.pool.CheckInvariants(); err != nil {
		return err
	}
	if n := len(s.running) + s.waiting.len() + s.tier.Len(); n != len(s.book.Live) {
		return fmt.Errorf("vllm: %d running + %d waiting + %d onboarding, but %d live requests", len(s.running), s.waiting.len(), s.tier.Len(), len(s.book.Live))
	}
	if s.opt.MaxNumSeqs > 0 && len(s.running) > s.opt.MaxNumSeqs {
		return fmt.Errorf("vllm: %d running, max-num-seqs %d", len(s.running), s.opt.MaxNumSeqs)
	}
	held := make(map[kvcache.BlockID]bool)
	for _, r := range s.running {
		if s.book.Live[r.ID] != r {
			return fmt.Errorf("vllm: running request %d is not live", r.ID)
		}
		if want := s.blocksFor(r.Computed); len(r.table) != want {
			return fmt.Errorf("vllm: request %d computed %d tokens but holds %d blocks, want %d", r.ID, r.Computed, len(r.table), want)
		}
		if r.Computed > r.Seq.Len() || r.Generated > r.MaxTokens {
			return fmt.Errorf("vllm: request %d computed %d of %d tokens, generated %d of %d", r.ID, r.Computed, r.Seq.Len(), r.Generated, r.MaxTokens)
		}
		for _, id := range r.table {
			held[id] = true
		}
	}
	transfers := 0
	for i := range s.waiting.len() {
		r := s.waiting.at(i)
		if len(r.table) > 0 {
			transfers++
		}
		// Only an activated transfer holds blocks while waiting, with all but its last prompt token computed.
		activated := len(r.table) > 0 && r.Computed == r.Length()-1
		if s.book.Live[r.ID] != r || !activated && (r.Computed != 0 || len(r.table) != 0) {
			return fmt.Errorf("vllm: waiting request %d holds %d blocks, computed %d", r.ID, len(r.table), r.Computed)
		}
		for _, id := range r.table {
			held[id] = true
		}
	}
	for r := range s.tier.All() {
		// Its GPU hits, then the blocks its lower-tier prefix is copied into, short of its last token.
		if s.book.Live[r.ID] != r || r.committed >= len(r.table) || len(r.table) > s.fullBlocks(r.Length()-1) {
			return fmt.Errorf("vllm: onboarding request %d holds %d blocks, %d of them cached, for %d tokens", r.ID, len(r.table), r.committed, r.Length())
		}
		for _, id := range r.table {
			held[id] = true
		}
	}
	if transfers != s.waiting.transfers {
		return fmt.Errorf("vllm: %d activated transfers waiting, the queue counts %d", transfers, s.waiting.transfers)
	}
	for _, m := range []map[uint64]*request{s.book.Held, s.book.Reserved} {
		for _, r := range m {
			if s.book.Live[r.ID] != nil {
				return fmt.Errorf("vllm: request %d is both live and held or reserved", r.ID)
			}
			for _, id := range r.table {
				held[id] = true
			}
		}
	}
	if len(held) != s.pool.Active() {
		return fmt.Errorf("vllm: running requests hold %d distinct blocks, pool has %d active", len(held), s.pool.Active())
	}
	return nil
}
