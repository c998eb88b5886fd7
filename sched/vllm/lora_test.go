package vllm

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestMaxLoRAs is a worked case of vLLM v1's rule: a waiting request whose adapter is not among the
// pass's adapters is passed over, keeping its place, once max-loras distinct ones are scheduled; requests
// behind it (of those adapters or of the base model) are admitted. Adapters load once each until evicted
// from the max-cpu-loras LRU.
func TestMaxLoRAs(t *testing.T) {
	o := Options{BlockSize: 4, NumBlocks: 64, MaxNumSeqs: 8, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true, MaxLoRAs: 2}
	h := newHarness(t, o)
	for i, lora := range []string{"a", "b", "c", "a", "", "b", "c"} {
		h.EnqueueLoRA(uint64(i+1), schedtest.Prompt(100*i, 4), 2, lora)
	}
	h.LoRAPasses(
		schedtest.LoRAPass{Admitted: []uint64{1, 2, 4, 5, 6}, Loads: 2, Running: "a,b", Waiting: "c"}, // 3 and 7 (c) passed over: a and b are the pass's two
		schedtest.LoRAPass{Waiting: "c"},                                     // the five decode their last token; c still waits
		schedtest.LoRAPass{Admitted: []uint64{3, 7}, Loads: 1, Running: "c"}, // c loads; a (least recently used) is unloaded
	)
	h.Step() // 3 and 7 finish
	// b is still resident, a was unloaded: only a loads again.
	for i, lora := range []string{"b", "a"} {
		h.EnqueueLoRA(uint64(10+i), schedtest.Prompt(1000+100*i, 4), 1, lora)
	}
	if p := h.Step(); !slices.Equal(schedtest.Admitted(p), []uint64{10, 11}) || p.LoRALoads != 1 {
		t.Fatalf("admitted %v with %d loads, want [10 11] with 1 (a)", schedtest.Admitted(p), p.LoRALoads)
	}
	if m := h.S.Metrics(); m.LoRALoads != 4 || m.RunningLoRAs != "" || m.WaitingLoRAs != "" {
		t.Fatalf("metrics %+v: want 4 loads in all and no adapters left", m)
	}
	if !h.S.Idle() || h.S.book.WithLoRA != 0 {
		t.Fatalf("idle %v, %d requests with adapters left", h.S.Idle(), h.S.book.WithLoRA)
	}
}

// TestMaxLoRAsUnbounded: without max-loras every adapter is admitted at once, each loaded once.
func TestMaxLoRAsUnbounded(t *testing.T) {
	h := newHarness(t, Options{BlockSize: 4, NumBlocks: 64, MaxNumSeqs: 8, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true})
	for i, lora := range []string{"a", "b", "c", "a"} {
		h.EnqueueLoRA(uint64(i+1), schedtest.Prompt(100*i, 4), 1, lora)
	}
	if p := h.Step(); !slices.Equal(schedtest.Admitted(p), []uint64{1, 2, 3, 4}) || p.LoRALoads != 3 {
		t.Fatalf("admitted %v with %d loads, want [1 2 3 4] with 3", schedtest.Admitted(p), p.LoRALoads)
	}
}

// TestLoRAsShareNoBlocks: the same prompt under another adapter finds nothing cached; under the same
// adapter, its whole blocks.
func TestLoRAsShareNoBlocks(t *testing.T) {
	newHarness(t, Options{BlockSize: 4, NumBlocks: 64, MaxNumSeqs: 8, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true}).LoRAsShareNothing(12)
}

// TestLoRASourceSeeded: a request that waits as its prompt source has its prompt made with its adapter's
// seed too.
func TestLoRASourceSeeded(t *testing.T) {
	h := newHarness(t, Options{BlockSize: 4, NumBlocks: 64, MaxNumSeqs: 8, MaxBatchedTokens: 64, ChunkedPrefill: true, PrefixCaching: true})
	src := &schedtest.CountingSource{Toks: schedtest.Prompt(1, 13)}
	for i, c := range []struct {
		lora   string
		cached int
	}{{"a", 0}, {"b", 0}, {"a", 12}} {
		if err := h.S.Enqueue(&sched.Request{ID: uint64(i + 1), Source: src, MaxTokens: 1, LoRA: c.lora}); err != nil {
			t.Fatal(err)
		}
		if pass := h.Step(); len(pass.Admitted) != 1 || pass.Admitted[0].Cached != c.cached {
			t.Fatalf("request %d (adapter %q): admitted %+v, want %d cached tokens", i+1, c.lora, pass.Admitted, c.cached)
		}
	}
	if src.Calls != 3 {
		t.Fatalf("prompt made %d times, want 3 (each request waited as its source)", src.Calls)
	}
}

func TestMaxLoRAsValidate(t *testing.T) {
	o := refOpts()
	o.MaxLoRAs, o.MaxCPULoRAs = 4, 2
	if _, err := New(o); err == nil || err.Error() != "max-cpu-loras 2: must be at least max-loras 4" {
		t.Fatalf("New: %v", err)
	}
}
