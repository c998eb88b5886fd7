package aic

import (
	"encoding/csv"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// readCSV returns the rows of a CSV file as maps by header, skipping the test when it is absent.
func readCSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("shared data not present: %v", err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]string
	for _, r := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = r[i]
		}
		rows = append(rows, m)
	}
	return rows
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func prefillMs(m *Model, isl int) float64 {
	return ms(m.Cost(&timing.Batch{Seqs: []timing.Seq{{New: isl, Prefill: true, Samples: true}}}).Total())
}

func decodeMs(m *Model, batch, ctx int) float64 {
	seqs := make([]timing.Seq, batch)
	for i := range seqs {
		seqs[i] = timing.Seq{New: 1, Cached: ctx, Samples: true}
	}
	return ms(m.Cost(&timing.Batch{Seqs: seqs}).Total())
}

// TestPlannerPrefill compares single-request prefill of Llama-3.1-8B in FP8 on one H200 (vLLM 0.24.0
// tables) with the TTFT NVIDIA measured for Dynamo's SLA planner on vLLM with
// nvidia/Llama-3.1-8B-Instruct-FP8 (../shared/data/dynamo_planner_h200, README §3).
//
// TTFT is measured end to end through Dynamo's frontend: it carries a fixed cost no kernel table
// sees (HTTP, tokenisation, scheduling, detokenising the first token; AIConfigurator models the
// vLLM part of it as a per-request 0.8 ms × layers "dispatch overhead" on TTFT, which is not a pass
// cost and is not in Cost). At ISL 100, where compute is a few ms, TTFT is 19.5 ms. Two checks:
//
//   - the brief's anchor, ISL 4168 (87 ms), raw, within 25 %: the overhead is ~15-20 % of it;
//   - every ISL within 25 % once the fixed cost read off the ISL-100 point is added: what is left
//     is the GEMM and attention tables against the engine, plus kernels no table holds (rotary
//     embedding, activation quantisation). AIConfigurator's own leave-one-out errors are 5 %
//     median, 16 % p90 for GEMMs alone; the model is 5-15 % low from ISL 1k to 16k, 20 % at the
//     10270 point whose measured throughput dips below both neighbours'.
func TestPlannerPrefill(t *testing.T) {
	rows := readCSV(t, sharedData+"/dynamo_planner_h200/derived/prefill_profile.csv")
	m := llama8B(t, "fp8")
	overhead := num(t, rows[0]["prefill_ttft_ms"]) - prefillMs(m, int(num(t, rows[0]["prefill_isl"])))
	t.Logf("fixed TTFT overhead read off ISL %s: %.1f ms", rows[0]["prefill_isl"], overhead)
	for _, r := range rows {
		isl := int(num(t, r["prefill_isl"]))
		meas := num(t, r["prefill_ttft_ms"])
		got := prefillMs(m, isl)
		raw, adj := (got-meas)/meas, (got+overhead-meas)/meas
		t.Logf("ISL %5d: model %6.1f ms, measured TTFT %6.1f ms: raw %+5.1f %%, with overhead %+5.1f %%", isl, got, meas, 100*raw, 100*adj)
		if math.Abs(adj) > 0.25 {
			t.Errorf("ISL %d: model + %.1f ms overhead = %.1f ms, measured %.1f ms (%+.1f %%, want within 25 %%)", isl, overhead, got+overhead, meas, 100*adj)
		}
		if isl == 4168 && math.Abs(raw) > 0.25 {
			t.Errorf("ISL 4168: model %.1f ms, measured %.1f ms (%+.1f %%, want within 25 %%)", got, meas, 100*raw)
		}
	}
}

// TestPlannerDecode compares decode steps with the planner profile's ITL. Points are (context, nominal
// concurrency = active KV tokens / context); those above 256 concurrent requests are logged only:
// there the engine's max_num_seqs and KV capacity bound the real batch, which the profile does not
// record. ITL also carries the engine's per-step CPU work (scheduling, sampling, detokenising:
// ~0.3-0.6 ms), which no kernel table holds, so the tolerance is 25 %.
func TestPlannerDecode(t *testing.T) {
	rows := readCSV(t, sharedData+"/dynamo_planner_h200/derived/decode_profile.csv")
	m := llama8B(t, "fp8")
	var conc string
	for h := range rows[0] {
		if strings.HasPrefix(h, "est_concurrency") {
			conc = h
		}
	}
	for _, r := range rows {
		ctx := int(num(t, r["y_context_length"]))
		b := int(num(t, r[conc]))
		meas := num(t, r["z_itl_ms"])
		got := decodeMs(m, b, ctx)
		e := (got - meas) / meas
		t.Logf("context %5d batch %4d: model %5.2f ms, measured ITL %5.2f ms (%+5.1f %%)", ctx, b, got, meas, 100*e)
		if b <= 256 && math.Abs(e) > 0.25 {
			t.Errorf("context %d batch %d: model %.2f ms, measured %.2f ms (%+.1f %%, want within 25 %%)", ctx, b, got, meas, 100*e)
		}
	}
}

// TestOwnProfileBF16 compares bf16 Llama-3.1-8B with our plain-PyTorch H200 measurements
// (../shared/data/profiles/h200_bf16_dense.csv: CUDA graphs, PyTorch SDPA, no fused kernels). The
// engine's kernels (FlashAttention 3, tuned GEMMs, fused norms) should be as fast or faster: the
// ratio model/measured is logged and must lie in [0.3, 1.1].
func TestOwnProfileBF16(t *testing.T) {
	rows := readCSV(t, sharedData+"/profiles/h200_bf16_dense.csv")
	m := llama8B(t, "bf16")
	for _, r := range rows {
		if r["model"] != "llama-3.1-8b" || r["kind"] != "prefill" && r["kind"] != "decode" {
			continue
		}
		batch, tokens, ctx := int(num(t, r["batch"])), int(num(t, r["tokens"])), int(num(t, r["ctx"]))
		meas := num(t, r["ms_p50"])
		var got float64
		if r["kind"] == "prefill" {
			got = prefillMs(m, tokens)
		} else {
			got = decodeMs(m, batch, ctx)
		}
		ratio := got / meas
		t.Logf("%-7s batch %3d tokens %5d ctx %5d: model %7.2f ms, PyTorch %7.2f ms, ratio %.2f", r["kind"], batch, tokens, ctx, got, meas, ratio)
		if ratio < 0.3 || ratio > 1.1 {
			t.Errorf("%s batch %d ctx %d: model/PyTorch = %.2f, want 0.3..1.1", r["kind"], batch, ctx, ratio)
		}
	}
}

// TestVersionsOnRealData pins the newest-version default and reuse.yaml redirection on the shared
// database.
func TestVersionsOnRealData(t *testing.T) {
	needData(t)
	d := db{root: aicRoot, system: "h200_sxm"}
	for _, tc := range []struct {
		ref     tableRef
		version string
		want    []string
	}{
		// vLLM 0.22.0 has its own GEMM table and reuses 0.24.0's for shapes it lacks.
		{tableRef{"gemm", "vllm", "gemm_perf"}, "0.22.0", []string{"gemm/vllm/0.22.0/", "gemm/vllm/0.24.0/"}},
		// SGLang 0.5.12 has only a reuse.yaml: its attention is 0.5.14's.
		{tableRef{"attention", "sglang", "context_attention_perf"}, "0.5.12", []string{"attention/sglang/0.5.14/"}},
	} {
		paths, err := d.sources(tc.ref, tc.version)
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != len(tc.want) {
			t.Errorf("sources(%v, %s) = %v, want %d files", tc.ref, tc.version, paths, len(tc.want))
			continue
		}
		for i, w := range tc.want {
			if !strings.Contains(paths[i], w) {
				t.Errorf("sources(%v, %s)[%d] = %s, want it under %s", tc.ref, tc.version, i, paths[i], w)
			}
		}
	}

	sys, _ := hardware.Lookup("h200_sxm")
	llama, _ := model.Lookup("llama-3.1-8b")
	for backend, want := range map[string]string{"vllm": "0.24.0", "sglang": "0.5.14"} {
		m, err := New(Options{Model: llama, System: sys, Root: aicRoot, Backend: backend})
		if err != nil {
			t.Fatal(err)
		}
		if m.Version() != want {
			t.Errorf("%s: Version() = %s, want the newest, %s", backend, m.Version(), want)
		}
	}
	// SGLang 0.5.12 collected no custom all-reduce: TP 2 falls back to NCCL at the system's version.
	m, err := New(Options{Model: llama, System: sys, Root: aicRoot, Backend: "sglang", Version: "0.5.12", TP: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !hasSource(m, "comm/nccl/2.26.2/nccl_perf.parquet") {
		t.Errorf("sglang 0.5.12 TP 2: Sources() = %v, want NCCL 2.26.2 (h200_sxm.yaml's nccl_version)", m.Sources())
	}
}

// TestModelsOnRealData builds the catalog's models that the tables can express and checks the ones
// they cannot fail with an error naming what is missing.
func TestModelsOnRealData(t *testing.T) {
	needData(t)
	sys, _ := hardware.Lookup("h200_sxm")
	for _, tc := range []struct {
		model, backend, quant, moe string
		tp                         int
		err                        string // "" = must build
		kv                         string
	}{
		{"llama-3.1-8b", "sglang", "fp8", "", 1, "", ""},
		// SGLang measured fp8-KV prefill as fp8 attention only.
		{"llama-3.1-8b", "sglang", "fp8", "", 1, "", "fp8"},
		{"llama-3.1-8b", "vllm", "fp8", "", 1, "", "fp8"},
		{"llama-3.1-70b", "vllm", "fp8", "", 4, "", ""},
		{"llama-3.1-70b", "sglang", "bf16", "", 8, "", ""},
		{"qwen3-32b", "vllm", "bf16", "", 2, "", ""},
		{"qwen3-30b-a3b", "vllm", "bf16", "", 1, "", ""},
		{"qwen3-30b-a3b", "vllm", "fp8_block", "", 2, "", ""},
		{"gpt-oss-120b", "vllm", "bf16", "mxfp4", 2, "", ""},
		// 1536/8 = 192 columns per GPU is not a multiple of the 128-wide fp8 blocks: not collected.
		{"qwen3-235b-a22b", "sglang", "fp8_block", "", 8, "moe_tp_size=8", ""},
		// vLLM's whole-module MLA tables (mla_context_module_perf, mla_generation_module_perf).
		{"deepseek-v3", "vllm", "fp8_block", "", 8, "", ""},
		{"kimi-k2.5", "vllm", "bf16", "int4_wo", 8, "", ""},
		// SGLang's MLA op tables (context_mla_perf, generation_mla_perf, mla_bmm_perf).
		{"deepseek-v3", "sglang", "fp8", "fp8_block", 8, "", ""},
	} {
		mdl, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(Options{Model: mdl, System: sys, Root: aicRoot, Backend: tc.backend, GEMMQuant: tc.quant, MoEQuant: tc.moe, TP: tc.tp, KVCacheDtype: tc.kv})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want one naming %q", tc.model, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s %s TP %d: %v", tc.model, tc.backend, tc.quant, tc.tp, err)
			continue
		}
		c := m.Cost(realisticBatch())
		t.Logf("%-15s %-6s %-9s kv %-4s TP %d: prefill 4k %7.2f ms; 2k chunk + 64 decodes: prefill %6.2f ms, decode %6.2f ms",
			tc.model, tc.backend, tc.quant, tc.kv, tc.tp, prefillMs(m, 4096), ms(c.Prefill), ms(c.Decode))
		if c.Prefill <= 0 || c.Decode <= 0 {
			t.Errorf("%s: cost %+v, want both phases positive", tc.model, c)
		}
	}
}

// dataDip is the largest relative decrease between neighbouring measured points of an op's rows:
// how far from monotone the measurements themselves are.
func dataDip(op *attnOp) float64 {
	d := 0.0
	for _, g := range []*attnGrid{op.lo, op.hi} {
		if g == nil {
			continue
		}
		for _, r := range g.rows {
			for i := 1; i < len(r.y); i++ {
				d = max(d, (r.y[i-1]-r.y[i])/r.y[i-1])
			}
		}
	}
	return d
}

// TestChunkMonotone checks the prefix handling of context attention on the real Llama grid: a
// chunk's cost never falls as its new tokens or its cached prefix grow, beyond the dips the
// measured curves have themselves (a few % between neighbouring short-sequence points, where the
// kernels are launch bound and the measurement noise shows).
func TestChunkMonotone(t *testing.T) {
	m := llama8B(t, "fp8")
	a := &m.attn[0]
	tol := max(dataDip(a.ctx), dataDip(a.gen)) + 1e-12
	t.Logf("largest dip between neighbouring measurements: %.2f %%", 100*tol)
	for _, b := range []float64{1, 2, 3, 8, 16, 64} {
		for n := 1.0; n <= 8192; n = math.Ceil(n * 1.3) {
			prev := 0.0
			for c := 0.0; c <= 40000; c += 13 {
				v := chunkAttention(a, b, n, c)
				if v < prev*(1-tol) {
					t.Errorf("batch %v, %v new tokens: %v cached cost %.4g ms < %.4g ms with fewer", b, n, c, v, prev)
				}
				prev = max(prev, v)
			}
		}
		for c := 0.0; c <= 40000; c += 997 {
			prev := 0.0
			for n := 1.0; n <= 16384; n = math.Ceil(n * 1.05) {
				v := chunkAttention(a, b, n, c)
				if v < prev*(1-tol) {
					t.Errorf("batch %v, %v cached: %v new tokens cost %.4g ms < %.4g ms with fewer", b, c, n, v, prev)
				}
				prev = max(prev, v)
			}
		}
	}
	// A prompt split into two chunks costs what it costs whole plus one more kernel's fixed cost
	// (the latency of a one-token prefill), within 5 % where attention is compute bound.
	fixed := a.ctx.at(1, 1)
	for _, n := range []float64{1024, 4096, 8192} {
		whole := chunkAttention(a, 1, 2*n, 0)
		split := chunkAttention(a, 1, n, 0) + chunkAttention(a, 1, n, n)
		t.Logf("attention of %v tokens: whole %.4g ms, in two chunks %.4g ms (%+.1f %%)", 2*n, whole, split, 100*(split-whole)/whole)
		if math.Abs(split-whole-fixed) > 0.05*whole {
			t.Errorf("attention of %v tokens in two chunks %.4g ms, whole %.4g ms + fixed %.4g ms: want within 5 %%", 2*n, split, whole, fixed)
		}
	}
	// A fully cached prompt recomputing its last token costs at least a decode step over the prefix.
	if got, dec := chunkAttention(a, 1, 1, 30000), a.gen.at(1, 30000); got < dec {
		t.Errorf("1 token over 30000 cached: %.4g ms, less than a decode step's %.4g ms", got, dec)
	}
}

// TestCostAllocs pins that Cost does not allocate.
func TestCostAllocs(t *testing.T) {
	m := llama8B(t, "fp8")
	b := realisticBatch()
	if n := testing.AllocsPerRun(100, func() { m.Cost(b) }); n != 0 {
		t.Errorf("Cost allocates %v times per call", n)
	}
}
