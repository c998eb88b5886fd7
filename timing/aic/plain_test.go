package aic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// TestPlainPricerBits: the plain pricer, which keeps the table rows its generation attention reads while
// a coast's batch size stays, prices random coasts (runs of passes whose contexts grow by a token a pass,
// their sizes from one request to beyond the tables' largest batch, one after another) with the same
// float bits of generation attention as the batch priced afresh, and so the same Cost; on models with
// one kind of attention layer and two (gpt-oss: sliding-window and full), dense, MoE, MLA, attention
// data parallelism (groups), and heads per GPU between two tables' (attnOp.hi: a Llama-3.1-70B with 80
// heads at TP 2, 40 heads and 4 KV heads a GPU, a quarter of the way from the 32-head table to the
// 64-head one). All from the embedded tables.
func TestPlainPricerBits(t *testing.T) {
	for _, tc := range []struct {
		model string
		o     Options
		heads int // > 0: the model with this many attention heads instead of its own
	}{
		{"llama-3.1-8b", Options{Backend: "vllm"}, 0},
		{"llama-3.1-70b", Options{Backend: "sglang", TP: 4, GEMMQuant: "fp8"}, 0},
		{"qwen3-30b-a3b", Options{Backend: "vllm", TP: 2, AttentionDP: 4}, 0},
		{"deepseek-v3", Options{Backend: "sglang", TP: 8, GEMMQuant: "fp8_block"}, 0},
		{"gpt-oss-120b", Options{Backend: "vllm", Version: "0.24.0", TP: 2, GEMMQuant: "bf16", MoEQuant: "mxfp4"}, 0},
		{"llama-3.1-70b", Options{Backend: "vllm", TP: 2}, 80},
	} {
		t.Run(fmt.Sprintf("%s-heads%d-%s-tp%d-dp%d", tc.model, tc.heads, tc.o.Backend, tc.o.TP, tc.o.AttentionDP), func(t *testing.T) {
			m, err := model.Lookup(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if tc.heads > 0 {
				mm := *m
				mm.Heads = tc.heads
				m = &mm
			}
			o := tc.o
			o.Model, o.System, o.Root = m, h200(t), EmbeddedRoot
			mdl, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if tc.heads > 0 {
				headBlend(t, mdl)
			}
			dp := max(1, o.AttentionDP)
			largest := 0.0
			for _, a := range mdl.attn {
				for _, g := range []*attnGrid{a.gen.lo, a.gen.hi} {
					if g != nil {
						largest = max(largest, g.batches[len(g.batches)-1])
					}
				}
			}
			price := mdl.PlainPricer()
			rows := make([]opRows, len(mdl.attn))
			hints := make([][4]int, len(mdl.attn))
			rng := rand.New(rand.NewPCG(17, 3))
			var b timing.Batch
			for coast := range 300 {
				n := 1 + rng.IntN(int(largest)+64) // beyond the largest measured batch too
				if coast%5 == 0 {
					n = 1 + rng.IntN(3)
				}
				b.Seqs = b.Seqs[:0]
				pp := timing.PlainPass{Requests: n}
				for range n {
					s := timing.Seq{New: 1, Cached: rng.IntN(1 << rng.IntN(18)), Samples: true}
					b.Seqs = append(b.Seqs, s)
					pp.Cached += s.Cached
				}
				if dp > 1 {
					pp.Group = timing.Group{Ranks: dp, Tokens: n * dp, MaxTokens: n}
				}
				b.Group = pp.Group
				for j := range mdl.attn {
					rows[j] = mdl.attn[j].gen.rowsAt(float64(n))
				}
				for range 1 + rng.IntN(200) {
					p := shapeOf(&b)
					want := mdl.generationAttention(p)
					if got := mdl.generationRows(rows, float64(pp.Cached)/float64(n), hints); math.Float64bits(got) != math.Float64bits(want) {
						t.Fatalf("coast %d: %d requests over %d cached tokens: generation attention %v from the kept rows, %v afresh", coast, n, pp.Cached, got, want)
					}
					if got, want := price(&pp), mdl.Cost(&b); got != want {
						t.Fatalf("coast %d: %d requests over %d cached tokens: the pricer says %+v, Cost %+v", coast, n, pp.Cached, got, want)
					}
					for i := range b.Seqs {
						b.Seqs[i].Cached++
					}
					pp.Cached += n
				}
			}
		})
	}
}

// headBlend checks that mdl's one kind of attention layer reads two head counts' generation tables
// (attnOp.hi), a quarter of the way from the lower to the higher, and that the kept rows price the point
// both tables measured where they differ most at that blend of the two measurements: the coasts compare
// the kept rows with the batch priced afresh, which share attnOp.atRows, so this pins what they share.
func headBlend(t *testing.T, mdl *Model) {
	t.Helper()
	if len(mdl.attn) != 1 {
		t.Fatalf("%d kinds of attention layer, want 1", len(mdl.attn))
	}
	a := &mdl.attn[0]
	op := a.gen
	if op.hi == nil || op.t != 0.25 || op.scale != 1 {
		t.Fatalf("generation attention: hi %v, weight %v, scale %v; want two tables blended by 0.25, unscaled", op.hi != nil, op.t, op.scale)
	}
	var b, x, yLo, yHi float64
	for i, bb := range op.lo.batches {
		j := slices.Index(op.hi.batches, bb)
		if j < 0 {
			continue
		}
		lo, hi := &op.lo.rows[i], &op.hi.rows[j]
		for k, xx := range lo.x {
			if l := slices.Index(hi.x, xx); l >= 0 && math.Abs(hi.y[l]-lo.y[k]) > math.Abs(yHi-yLo) {
				b, x, yLo, yHi = bb, xx, lo.y[k], hi.y[l]
			}
		}
	}
	if b == 0 {
		t.Fatalf("no (batch, step) measured with both %v and %v heads", op.lo.shape.heads, op.hi.shape.heads)
	}
	want := a.layers * (0.75*yLo + 0.25*yHi)
	got := mdl.generationRows([]opRows{op.rowsAt(b)}, x, make([][4]int, 1))
	if math.Abs(got-want) > 1e-12*want {
		t.Errorf("%v requests at step %v: generation attention %v from the kept rows, want %v (%v layers × ¾ of %v ms + ¼ of %v ms)",
			b, x, got, want, a.layers, yLo, yHi)
	}
}

// BenchmarkPlainPricer prices coasts of Llama-3.1-8B on vLLM as an engine does, pass after pass: of 1, 2, 4
// and 32 requests at a mean context of about 12,000 tokens (the conversation trace's), 200 passes each.
func BenchmarkPlainPricer(b *testing.B) {
	m, err := model.Lookup("llama-3.1-8b")
	if err != nil {
		b.Fatal(err)
	}
	mdl, err := New(Options{Model: m, System: h200(b), Root: EmbeddedRoot, Backend: "vllm"})
	if err != nil {
		b.Fatal(err)
	}
	price := mdl.PlainPricer()
	var sink time.Duration
	for b.Loop() {
		for _, n := range []int{1, 2, 4, 32} {
			pp := timing.PlainPass{Requests: n, Cached: n * 12000}
			for range 200 {
				sink += price(&pp).Total()
				pp.Cached += n
			}
		}
	}
	if sink == 0 {
		b.Fatal("every pass was free")
	}
}
