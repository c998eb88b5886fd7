package sglang

import (
	"math"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestParsePolicy: fcfs (and its alias fifo) and lpm parse; anything else, "" included, is refused
// naming the flag and every value it takes, the alias included.
func TestParsePolicy(t *testing.T) {
	schedtest.CheckParse(t, ParsePolicy, map[string]Policy{"fcfs": FCFS, "fifo": FCFS, "lpm": LPM}, map[string]string{
		"":           "sglang-schedule-policy : want fcfs (or its alias fifo) or lpm",
		"dfs-weight": "sglang-schedule-policy dfs-weight: want fcfs (or its alias fifo) or lpm",
	})
}

// TestValidate: each invalid option is refused with a message that starts with its flag.
func TestValidate(t *testing.T) {
	ok := Options{PageSize: 16, NumPages: 100, MaxRunning: 8, MaxPrefillTokens: 512, ChunkedPrefillSize: 256,
		ClipMaxNewTokens: 4096, ReservedDecode: 64, Conservativeness: 1, MaxModelLen: 4096,
		Spec: sched.Spec{Tokens: 1, AcceptRates: []float64{0.7}}}
	schedtest.CheckOptions(t, ok, Options.Validate, build, map[string]func(*Options){
		"page-size 0: must be at least 1":                               func(o *Options) { o.PageSize = 0 },
		"num-gpu-blocks 0: must be at least 1":                          func(o *Options) { o.NumPages = 0 },
		"max-num-seqs -1: must not be negative":                         func(o *Options) { o.MaxRunning = -1 },
		"sglang-max-prefill-tokens 0: must be at least 1":               func(o *Options) { o.MaxPrefillTokens = 0 },
		"sglang-chunked-prefill-size 8: must be at least one page (16)": func(o *Options) { o.ChunkedPrefillSize = 8 },
		"sglang-num-reserved-decode-tokens -1: must not be negative":    func(o *Options) { o.ReservedDecode = -1 },
		"sglang-clip-max-new-tokens 0: must be at least 1":              func(o *Options) { o.ClipMaxNewTokens = 0 },
		"sglang-schedule-conservativeness 1.5: must be in [0, 1]":       func(o *Options) { o.Conservativeness = 1.5 },
		"sglang-schedule-conservativeness NaN: must be in [0, 1]":       func(o *Options) { o.Conservativeness = math.NaN() },
		"schedule policy 2: unknown":                                    func(o *Options) { o.Policy = LPM + 1 },
		"max-model-len -1: must not be negative":                        func(o *Options) { o.MaxModelLen = -1 },
		"spec-accept-rates [-0.1]: each rate must be in [0, 1]":         func(o *Options) { o.Spec.AcceptRates = []float64{-0.1} },
	})
	// A chunk budget <= 0 turns chunking off, whatever the page size.
	o := ok
	o.ChunkedPrefillSize = -1
	if err := o.Validate(); err != nil {
		t.Errorf("chunked prefill off: %v", err)
	}
}

// build is New for CheckOptions.
func build(o Options) error {
	_, err := New(o)
	return err
}
