package sglang

import (
	"testing"

	"github.com/mocker-sim/mocker/sched/schedtest"
)

func factory(policy Policy, mixed, overlap bool, reservedDecode int) schedtest.Factory {
	return func(s schedtest.Shape) (schedtest.Scheduler, error) {
		return New(Options{PageSize: s.BlockSize, NumPages: s.NumBlocks, MaxRunning: s.MaxNumSeqs, MaxPrefillTokens: s.MaxBatchedTokens,
			ChunkedPrefillSize: s.MaxBatchedTokens, ClipMaxNewTokens: 4096, Conservativeness: 1, Policy: policy,
			MixedChunk: mixed, PrefixCaching: true, Events: true, Overlap: overlap, ReservedDecode: reservedDecode, Role: s.Role})
	}
}

// TestConformance: SGLang's scheduler passes the schedulers' conformance suite with its defaults
// (first-come first-served, the overlap scheduler), without the overlap scheduler, with the
// longest-prefix-match policy, with mixed chunks, and with the decode worker's preallocation rule.
func TestConformance(t *testing.T) {
	t.Run("fcfs-overlap", func(t *testing.T) { schedtest.Run(t, factory(FCFS, false, true, 0)) })
	t.Run("fcfs", func(t *testing.T) { schedtest.Run(t, factory(FCFS, false, false, 0)) })
	t.Run("lpm-overlap", func(t *testing.T) { schedtest.Run(t, factory(LPM, false, true, 0)) })
	t.Run("lpm-mixed-chunk", func(t *testing.T) { schedtest.Run(t, factory(LPM, true, true, 0)) })
	t.Run("reserved-decode", func(t *testing.T) { schedtest.Run(t, factory(FCFS, false, true, 64)) })
}
