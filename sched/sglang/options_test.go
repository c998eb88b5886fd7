package sglang

import (
	"math"
	"testing"

	"github.com/mocker-sim/mocker/sched"
)

// TestParsePolicy: fcfs (and its alias fifo) and lpm parse; anything else, "" included, is refused
// naming the flag and every value it takes, the alias included.
func TestParsePolicy(t *testing.T) {
	for s, want := range map[string]Policy{"fcfs": FCFS, "fifo": FCFS, "lpm": LPM} {
		if got, err := ParsePolicy(s); got != want || err != nil {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := ParsePolicy(""); err == nil || err.Error() != "sglang-schedule-policy : want fcfs (or its alias fifo) or lpm" {
		t.Errorf(`ParsePolicy("") = %v`, err)
	}
	if _, err := ParsePolicy("dfs-weight"); err == nil || err.Error() != "sglang-schedule-policy dfs-weight: want fcfs (or its alias fifo) or lpm" {
		t.Errorf("ParsePolicy(dfs-weight) = %v", err)
	}
}

// TestValidate: each invalid option is refused with a message that starts with its flag.
func TestValidate(t *testing.T) {
	ok := Options{PageSize: 16, NumPages: 100, MaxRunning: 8, MaxPrefillTokens: 512, ChunkedPrefillSize: 256,
		ClipMaxNewTokens: 4096, ReservedDecode: 64, Conservativeness: 1, MaxModelLen: 4096,
		Spec: sched.Spec{Tokens: 1, AcceptRates: []float64{0.7}}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.PageSize = 0 }, "page-size 0: must be at least 1"},
		{func(o *Options) { o.NumPages = 0 }, "num-gpu-blocks 0: must be at least 1"},
		{func(o *Options) { o.MaxRunning = -1 }, "max-num-seqs -1: must not be negative"},
		{func(o *Options) { o.MaxPrefillTokens = 0 }, "sglang-max-prefill-tokens 0: must be at least 1"},
		{func(o *Options) { o.ChunkedPrefillSize = 8 }, "sglang-chunked-prefill-size 8: must be at least one page (16)"},
		{func(o *Options) { o.ReservedDecode = -1 }, "sglang-num-reserved-decode-tokens -1: must not be negative"},
		{func(o *Options) { o.ClipMaxNewTokens = 0 }, "sglang-clip-max-new-tokens 0: must be at least 1"},
		{func(o *Options) { o.Conservativeness = 1.5 }, "sglang-schedule-conservativeness 1.5: must be in [0, 1]"},
		{func(o *Options) { o.Conservativeness = math.NaN() }, "sglang-schedule-conservativeness NaN: must be in [0, 1]"},
		{func(o *Options) { o.Policy = LPM + 1 }, "schedule policy 2: unknown"},
		{func(o *Options) { o.MaxModelLen = -1 }, "max-model-len -1: must not be negative"},
		{func(o *Options) { o.Spec.AcceptRates = []float64{-0.1} }, "spec-accept-rates [-0.1]: each rate must be in [0, 1]"},
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
	// A chunk budget <= 0 turns chunking off, whatever the page size.
	o := ok
	o.ChunkedPrefillSize = -1
	if err := o.Validate(); err != nil {
		t.Errorf("chunked prefill off: %v", err)
	}
}
