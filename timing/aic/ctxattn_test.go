package aic

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/timing"
)

// contextMs is the context-attention part of a pass that prefills one prompt of n tokens.
func contextMs(t *testing.T, m *Model, n int) float64 {
	t.Helper()
	for _, p := range m.Parts(&timing.Batch{Seqs: []timing.Seq{{New: n, Prefill: true, Samples: true}}}) {
		if p.Op == "context_attention" {
			return p.Ms
		}
	}
	t.Fatalf("no context_attention part")
	return 0
}

// TestCtxPairs: causal attention over s tokens scores s(s+1)/2 query-key pairs; with a window w < s,
// the first w queries score 1..w keys and the other s−w score w each.
func TestCtxPairs(t *testing.T) {
	for _, tc := range []struct{ s, w, want float64 }{
		{1, 0, 1}, {4, 0, 10}, {4, 4, 10}, {4, 8, 10}, {6, 2, 3 + 4*2}, {8192, 128, 8256 + 8064*128},
	} {
		if got := ctxPairs(tc.s, tc.w); got != tc.want {
			t.Errorf("ctxPairs(%v, %v) = %v, want %v", tc.s, tc.w, got, tc.want)
		}
	}
}

// TestImpossibleContextRows: a context row of the synthetic GPU (bf16 peak 1e15 FLOP/s) is
// impossible when it is faster than batch × 4 · heads · head_dim · pairs / peak. 4 heads of 64 over
// 1,023 tokens (523,776 pairs) need 5.36e8 FLOP, 0.000536 ms: 0.0005 ms is impossible, 0.0006 is not;
// a row of a dtype without a peak is not checked, and decode rows (step > 0) are not context rows.
func TestImpossibleContextRows(t *testing.T) {
	rf, err := newRoofline(testSystem)
	if err != nil {
		t.Fatal(err)
	}
	rows := attnRows{}
	k := attnKey{heads: 4, kvHeads: 2, headDim: 64, attnDtype: "bfloat16", kvDtype: "bfloat16"}
	rows.add(k, false, 1, 1023, 0, 0.0006)
	rows.add(k, false, 2, 1023, 0, 0.0011) // twice the work: 0.001073 ms needed
	rows.add(k, false, 1, 1023, 5, 1e-9)   // a step > 0 row is no context row
	if bad, n := rows.impossibleCtx(rf); bad != 0 || n != 2 {
		t.Errorf("physical rows: %d impossible of %d, want 0 of 2", bad, n)
	}
	rows.add(k, false, 4, 1023, 0, 0.002) // 0.002146 ms needed
	noPeak := k
	noPeak.attnDtype = "int4"
	rows.add(noPeak, false, 1, 1023, 0, 1e-9)
	if bad, n := rows.impossibleCtx(rf); bad != 1 || n != 3 {
		t.Errorf("with a fast row: %d impossible of %d, want 1 of 3", bad, n)
	}
}

// TestImpossibleContextTableReplaced: the synthetic database's version 0.5.0 has a context table
// timed 10,000× too fast (0.000005 ms for 4 heads over 1,023 tokens, which need 0.000536 ms at the
// peak), so its prompts are priced from the nearest version with a physical table, 0.4.0 (0.2.0's
// rows through reuse.yaml): 2 layers × 0.5 × (0.01 + 1e-8 · 4 · 1,023²) = 0.05186116 ms for a
// 1,023-token prompt, as on 0.2.0 itself; decode attention stays 0.5.0's own, and the sources name
// 0.2.0's context table, not 0.5.0's.
func TestImpossibleContextTableReplaced(t *testing.T) {
	root := testDB(t)
	sys := filepath.Join(root, "testgpu")
	writeText(t, filepath.Join(sys, "gemm/vllm/0.5.0/reuse.yaml"), "reuse:\n- table: gemm_perf\n  from_version: 0.1.0\n")
	write(t, filepath.Join(sys, "attention/vllm/0.5.0/context_attention_perf.parquet"), synthAttn(1e-4, false))
	write(t, filepath.Join(sys, "attention/vllm/0.5.0/generation_attention_perf.parquet"), synthAttn(1, true))
	const want = 0.05186116
	for _, v := range []string{"0.5.0", "0.2.0"} {
		m, err := newTest(t, root, func(o *Options) { o.Version = v })
		if err != nil {
			t.Fatal(err)
		}
		if got := contextMs(t, m, 1023); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: context attention %.8f ms, want %.8f", v, got, want)
		}
	}
	m, err := newTest(t, root, func(o *Options) { o.Version = "0.5.0" })
	if err != nil {
		t.Fatal(err)
	}
	if !hasSource(m, "attention/vllm/0.2.0/context_attention_perf.parquet") ||
		hasSource(m, "attention/vllm/0.5.0/context_attention_perf.parquet") ||
		!hasSource(m, "attention/vllm/0.5.0/generation_attention_perf.parquet") {
		t.Errorf("Sources() = %v, want 0.2.0's context table in place of 0.5.0's, and 0.5.0's generation table", m.Sources())
	}
}

// TestImpossibleContextRowsH200: of the H200 context-attention tables only vLLM 0.19.0's holds rows
// faster than the GPU's peak (7,147 of 37,432).
func TestImpossibleContextRowsH200(t *testing.T) {
	needData(t)
	d := db{root: aicRoot, system: "h200_sxm"}
	rf := h200Roofline(t)
	var bad []string
	for _, backend := range []string{"vllm", "sglang"} {
		for _, v := range d.versions("attention", backend) {
			ref := ctxAttnTable
			ref.backend = backend
			paths, err := d.sources(ref, v)
			if err != nil {
				t.Fatal(err)
			}
			if len(paths) == 0 {
				continue
			}
			rows, err := loadAttention(paths, false)
			if err != nil {
				t.Fatal(err)
			}
			if n, of := rows.impossibleCtx(rf); n > 0 {
				bad = append(bad, backend+" "+v)
				if v == "0.19.0" && (n != 7147 || of != 37432) {
					t.Errorf("vllm 0.19.0: %d of %d rows impossible, want 7147 of 37432", n, of)
				}
			}
		}
	}
	if !slices.Equal(bad, []string{"vllm 0.19.0"}) {
		t.Errorf("tables with impossible rows: %v, want [vllm 0.19.0]", bad)
	}
}

// TestGptOssTP2Context: gpt-oss-120b at TP 2 on vLLM 0.19.0 (the version its TP 2 rows replay)
// prices an 8,192-token prompt's attention from 0.22.0's table: 11.28 ms where 0.19.0's own rows
// gave 2.11 ms, under the 5.16 ms the arithmetic takes at the H200's peak.
func TestGptOssTP2Context(t *testing.T) {
	m, err := onH200(t, "gpt-oss-120b", Options{Backend: "vllm", Version: "0.19.0", TP: 2, GEMMQuant: "bf16", MoEQuant: "mxfp4"})
	if err != nil {
		t.Fatal(err)
	}
	if got := contextMs(t, m, 8192); math.Abs(got-11.28) > 0.005 {
		t.Errorf("context attention %.4f ms, want 11.28", got)
	}
	if !hasSource(m, "attention/vllm/0.22.0/context_attention_perf.parquet") || hasSource(m, "attention/vllm/0.19.0/context_attention_perf.parquet") {
		t.Errorf("Sources() = %v, want 0.22.0's context table in place of 0.19.0's", m.Sources())
	}
}
