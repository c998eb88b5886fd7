package engine

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

// TestLoRALoadCharged: a pass that first uses an adapter waits its load time, once per load: the
// adapter's second pass and a resident adapter cost nothing more, and an unloaded one loads again.
func TestLoRALoadCharged(t *testing.T) {
	e, err := New(Options{
		VLLM:     vllm.Options{BlockSize: 4, NumBlocks: 64, MaxNumSeqs: 4, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true, MaxLoRAs: 1},
		Timing:   timing.Fixed{PrefillMs: 10, DecodeMs: 3},
		LoRALoad: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(id uint64, lora string, maxTokens int) {
		if err := e.Enqueue(&sched.Request{ID: id, Prompt: []uint32{uint32(id), 1, 2, 3}, MaxTokens: maxTokens, LoRA: lora}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Duration(0)
	step := func(want time.Duration) {
		t.Helper()
		p := e.Step(now)
		if got := p.End - p.Start; got != want {
			t.Fatalf("pass at %v lasted %v, want %v", now, got, want)
		}
		now = p.End
	}
	enqueue(1, "a", 2)
	step(63 * time.Millisecond) // load a (50) + prefill (10) + first token (3)
	step(3 * time.Millisecond)  // a is resident: a plain decode
	enqueue(2, "a", 1)
	step(13 * time.Millisecond) // still resident
	enqueue(3, "b", 1)          // max-cpu-loras = max-loras = 1: b replaces a
	step(63 * time.Millisecond)
	enqueue(4, "a", 1)
	step(63 * time.Millisecond) // a loads again
	enqueue(5, "", 1)
	step(13 * time.Millisecond) // the base model loads nothing
	if m := e.Metrics()[0]; m.LoRALoads != 3 {
		t.Fatalf("%d loads, want 3", m.LoRALoads)
	}
}
