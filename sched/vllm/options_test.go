package vllm

import (
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
)

// TestParse: the flags' names parse to their policies, and anything else, "" included, is refused
// naming the flag and the values it takes.
func TestParse(t *testing.T) {
	schedtest.CheckParse(t, ParsePreemption, map[string]Preemption{"lifo": LIFO, "fifo": FIFO}, map[string]string{
		"":       "preemption-mode : want lifo or fifo",
		"random": "preemption-mode random: want lifo or fifo",
	})
	schedtest.CheckParse(t, ParseCapacity, map[string]Capacity{"prompt": MaxUtilization, "chunk": ChunkFit}, map[string]string{
		"":     "vllm-admission : want prompt or chunk",
		"half": "vllm-admission half: want prompt or chunk",
	})
}

// TestValidate: each invalid option is refused with a message that starts with its flag.
func TestValidate(t *testing.T) {
	ok := Options{BlockSize: 16, NumBlocks: 100, MaxNumSeqs: 8, MaxBatchedTokens: 512, MaxModelLen: 4096,
		Spec: sched.Spec{Tokens: 2, AcceptRates: []float64{0.8, 0.4}}}
	schedtest.CheckOptions(t, ok, Options.Validate, build, map[string]func(*Options){
		"block-size 0: must be at least 1":                         func(o *Options) { o.BlockSize = 0 },
		"num-gpu-blocks 0: must be at least 1":                     func(o *Options) { o.NumBlocks = 0 },
		"max-num-seqs -1: must not be negative":                    func(o *Options) { o.MaxNumSeqs = -1 },
		"max-num-batched-tokens -1: must not be negative":          func(o *Options) { o.MaxBatchedTokens = -1 },
		"max-model-len -1: must not be negative":                   func(o *Options) { o.MaxModelLen = -1 },
		"preemption mode 2: unknown":                               func(o *Options) { o.Preemption = FIFO + 1 },
		"capacity policy 3: unknown":                               func(o *Options) { o.Capacity = ChunkFit + 1 },
		"spec-num-tokens -1: must not be negative":                 func(o *Options) { o.Spec.Tokens = -1 },
		"spec-accept-rates [0.5 1.5]: each rate must be in [0, 1]": func(o *Options) { o.Spec.AcceptRates = []float64{0.5, 1.5} },
	})
}

// build is New for CheckOptions.
func build(o Options) error {
	_, err := New(o)
	return err
}
