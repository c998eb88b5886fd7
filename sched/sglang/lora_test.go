package sglang

import (
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestLoRAsShareNoPages: the same prompt under another adapter matches nothing in the radix cache; under
// the same adapter, its whole pages but for the last token's.
func TestLoRAsShareNoPages(t *testing.T) {
	h := newHarness(t, opts(4, 64))
	p := schedtest.Prompt(1, 13)
	for i, c := range []struct {
		lora   string
		cached int
	}{{"a", 0}, {"b", 0}, {"", 0}, {"a", 12}, {"b", 12}, {"", 12}} {
		if err := h.S.Enqueue(&sched.Request{ID: uint64(i + 1), Prompt: p, MaxTokens: 1, LoRA: c.lora}); err != nil {
			t.Fatal(err)
		}
		pass := h.Step()
		for !h.S.Idle() {
			h.Step()
		}
		if len(pass.Admitted) != 1 || pass.Admitted[0].Cached != c.cached {
			t.Fatalf("request %d (adapter %q): admitted %+v, want %d cached tokens", i+1, c.lora, pass.Admitted, c.cached)
		}
	}
}
