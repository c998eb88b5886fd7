package vllm

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// tierHarness drives a scheduler over 4 blocks of 4 tokens with a CPU tier of 8 blocks whose link moves
// a block in 1 ms. The tier tests use the scheduler's exported API only.
func tierHarness(t *testing.T) *schedtest.Harness[*Scheduler] {
	return newHarness(t, Options{BlockSize: 4, NumBlocks: 4, PrefixCaching: true, Events: true,
		Tiers: kvcache.TierOptions{CPUBlocks: 8, CPUBandwidth: 1, BlockBytes: 1e6}})
}

// TestLowerTierHitOnboardsBeforePrefill: a prompt whose blocks were evicted to the CPU tier is onboarded
// (2 blocks at 1 ms each) while another request runs; its blocks are announced on the GPU only when they
// have arrived, and then it is admitted with them as cached. The copies take a free block and b2's.
func TestLowerTierHitOnboardsBeforePrefill(t *testing.T) {
	tierHarness(t).LoadBack("GPU removed b2; CPU stored b2; GPU removed b1; CPU stored b1; ",
		kvcache.TierStats{CPUHits: 2, Offloaded: 4, OnboardTime: 2 * time.Millisecond, CPUUsed: 4})
}

// TestCancelOnboarding: a request cancelled while its blocks arrive gives them back.
func TestCancelOnboarding(t *testing.T) {
	h := tierHarness(t)
	h.StartLoadBack()
	if !h.S.Cancel(3) || !h.S.Idle() || h.S.Pool().Active() != 0 {
		t.Fatalf("cancel: idle %v, %d active blocks", h.S.Idle(), h.S.Pool().Active())
	}
	if err := h.S.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
