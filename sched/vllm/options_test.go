package vllm

import (
	"testing"

	"github.com/mocker-sim/mocker/sched"
)

// TestParse: the flags' names parse to their policies, and anything else, "" included, is refused
// naming the flag and the values it takes.
func TestParse(t *testing.T) {
	for s, want := range map[string]Preemption{"lifo": LIFO, "fifo": FIFO} {
		if got, err := ParsePreemption(s); got != want || err != nil {
			t.Errorf("ParsePreemption(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for s, want := range map[string]Capacity{"prompt": MaxUtilization, "chunk": ChunkFit} {
		if got, err := ParseCapacity(s); got != want || err != nil {
			t.Errorf("ParseCapacity(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParsePreemption(""); err == nil || err.Error() != "preemption-mode : want lifo or fifo" {
		t.Errorf(`ParsePreemption("") = %v`, err)
	}
	if _, err := ParseCapacity(""); err == nil || err.Error() != "vllm-admission : want prompt or chunk" {
		t.Errorf(`ParseCapacity("") = %v`, err)
	}
	if _, err := ParsePreemption("random"); err == nil || err.Error() != "preemption-mode random: want lifo or fifo" {
		t.Errorf("ParsePreemption(random) = %v", err)
	}
	if _, err := ParseCapacity("half"); err == nil || err.Error() != "vllm-admission half: want prompt or chunk" {
		t.Errorf("ParseCapacity(half) = %v", err)
	}
}

// TestValidate: each invalid option is refused with a message that starts with its flag.
func TestValidate(t *testing.T) {
	ok := Options{BlockSize: 16, NumBlocks: 100, MaxNumSeqs: 8, MaxBatchedTokens: 512, MaxModelLen: 4096,
		Spec: sched.Spec{Tokens: 2, AcceptRates: []float64{0.8, 0.4}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.BlockSize = 0 }, "block-size 0: must be at least 1"},
		{func(o *Options) { o.NumBlocks = 0 }, "num-gpu-blocks 0: must be at least 1"},
		{func(o *Options) { o.MaxNumSeqs = -1 }, "max-num-seqs -1: must not be negative"},
		{func(o *Options) { o.MaxBatchedTokens = -1 }, "max-num-batched-tokens -1: must not be negative"},
		{func(o *Options) { o.MaxModelLen = -1 }, "max-model-len -1: must not be negative"},
		{func(o *Options) { o.Preemption = FIFO + 1 }, "preemption mode 2: unknown"},
		{func(o *Options) { o.Capacity = ChunkFit + 1 }, "capacity policy 3: unknown"},
		{func(o *Options) { o.Spec.Tokens = -1 }, "spec-num-tokens -1: must not be negative"},
		{func(o *Options) { o.Spec.AcceptRates = []float64{0.5, 1.5} }, "spec-accept-rates [0.5 1.5]: each rate must be in [0, 1]"},
	} {
		o := ok
		tc.edit(&o)
		if err := o.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
		if _, err := New(o); err == nil || err.Error() != tc.want {
			t.Errorf("New() = %v, want %q", err, tc.want)
		}
	}
}
