package engine

import (
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

// BenchmarkDecodeStep measures one decode pass of a vLLM engine with 8 running requests, the common pass
// of a replay (a new request replaces each one that finishes).
func BenchmarkDecodeStep(b *testing.B) {
	benchDecode(b, Options{VLLM: vllm.Options{BlockSize: 64, NumBlocks: 16384, MaxNumSeqs: 256, MaxBatchedTokens: 8192,
		ChunkedPrefill: true, PrefixCaching: true}, Timing: timing.Polynomial{}})
}

// BenchmarkSGLangDecodeStep is BenchmarkDecodeStep on SGLang's scheduler with its default one-token
// pages: each decode step allocates every running request a page and each finished request caches one
// per token.
func BenchmarkSGLangDecodeStep(b *testing.B) {
	benchDecode(b, Options{Backend: SGLang, SGLang: sglang.Options{PageSize: 1, NumPages: 1 << 20, MaxRunning: 256,
		MaxPrefillTokens: 16384, ChunkedPrefillSize: 8192, ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true},
		Timing: timing.Polynomial{}})
}

func benchDecode(b *testing.B, o Options) {
	e, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	next := uint64(0)
	prompt := make([]uint32, 2000)
	add := func() {
		for i := range prompt {
			prompt[i] = uint32(next*7919 + uint64(i))
		}
		e.Enqueue(&sched.Request{ID: next, Prompt: prompt, MaxTokens: 300})
		next++
	}
	for range 8 {
		add()
	}
	now := time.Duration(0)
	for b.Loop() {
		p := e.Step(now)
		now = p.End
		for _, rp := range p.Ranks {
			for _, o := range rp.Outputs {
				if o.Done {
					add()
				}
			}
		}
	}
}
