package aic

import (
	"testing"

	"github.com/mocker-sim/mocker/timing"
)

// realisticBatch is one 2048-token prefill chunk over a 2048-token cached prefix beside 64 decodes.
func realisticBatch() *timing.Batch {
	seqs := []timing.Seq{{New: 2048, Cached: 2048, Prefill: true}}
	for i := range 64 {
		seqs = append(seqs, timing.Seq{New: 1, Cached: 500 + 61*i, Samples: true})
	}
	return &timing.Batch{Seqs: seqs}
}

func BenchmarkCost(b *testing.B) {
	m := llama8B(b, "fp8")
	batch := realisticBatch()
	b.ReportAllocs()
	for b.Loop() {
		m.Cost(batch)
	}
}
