package vllm

import (
	"testing"

	"github.com/mocker-sim/mocker/sched/schedtest"
)

func factory(c Capacity) schedtest.Factory {
	return func(s schedtest.Shape) (schedtest.Scheduler, error) {
		return New(Options{BlockSize: s.BlockSize, NumBlocks: s.NumBlocks, MaxNumSeqs: s.MaxNumSeqs, MaxBatchedTokens: s.MaxBatchedTokens,
			ChunkedPrefill: true, PrefixCaching: true, Events: true, Capacity: c, Role: s.Role})
	}
}

// TestConformance: vLLM's scheduler, and TensorRT-LLM's (its guaranteed-no-evict capacity policy), pass
// the schedulers' conformance suite.
func TestConformance(t *testing.T) {
	t.Run("vllm", func(t *testing.T) { schedtest.Run(t, factory(0)) })
	t.Run("trtllm", func(t *testing.T) { schedtest.Run(t, factory(GuaranteedNoEvict)) })
}
