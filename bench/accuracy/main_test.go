package main

import (
	"cmp"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
)

func TestQuantFor(t *testing.T) {
	for _, tc := range []struct{ model, gemm, moe, quant, moeQuant string }{
		// Labels no H200 table holds: the checkpoint's format ("", ""): for gpt-oss-120b bf16 GEMMs and
		// w4a16_mxfp4 experts, what vLLM runs on Hopper.
		{"openai/gpt-oss-120b", "nvfp4", "nvfp4", "", ""},
		// Kimi-K2.5's int4 checkpoint: bf16 GEMMs, int4_wo (Marlin W4A16) routed experts.
		{"moonshotai/Kimi-K2.5", "int4_wo", "int4_wo", "", ""},
		// fp8 for both on a checkpoint stored in 128×128 blocks: the checkpoint's fp8_block, which vLLM
		// loads whatever the label.
		{"Qwen/Qwen3-235B-A22B-FP8", "fp8", "fp8", "", ""},
		{"MiniMaxAI/MiniMax-M2.5", "fp8", "fp8", "", ""},
		// Labels that name the two apart keep them (SGLang's DeepSeek rows).
		{"deepseek-ai/DeepSeek-R1", "fp8", "fp8_block", "fp8", "fp8_block"},
		{"Qwen/Qwen3-235B-A22B", "fp8_block", "fp8_block", "fp8_block", ""},
		{"meta-llama/Llama-3.1-70B", "bfloat16", "", "bf16", ""},
		{"Qwen/Qwen3-235B-A22B", "fp8", "bfloat16", "fp8", "bfloat16"},
		// A model whose checkpoint is not quantized keeps the label, which the configuration rejects by name.
		{"Qwen/Qwen3-235B-A22B", "nvfp4", "nvfp4", "nvfp4", ""},
	} {
		m, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		q, mq := quantFor(m, tc.gemm, tc.moe)
		if q != tc.quant || mq != tc.moeQuant {
			t.Errorf("%s %s/%s: %q, %q; want %q, %q", tc.model, tc.gemm, tc.moe, q, mq, tc.quant, tc.moeQuant)
		}
	}
}

// TestGeneratorKVCacheDtype: the generator's workers keep the KV cache in fp8 exactly when the weights
// are fp8 or fp8_block, whether the row names the format or the checkpoint's own applies.
func TestGeneratorKVCacheDtype(t *testing.T) {
	for _, tc := range []struct{ model, quantization, want string }{
		{"deepseek-ai/DeepSeek-R1", "fp8", "fp8"},        // the disaggregated rows
		{"deepseek-ai/DeepSeek-R1", "", "fp8"},           // checkpoint: fp8_block
		{"Qwen/Qwen3-235B-A22B-FP8", "fp8_block", "fp8"}, //
		{"nvidia/Llama-3.1-8B-Instruct-FP8", "", "fp8"},  // checkpoint: fp8
		{"meta-llama/Llama-3.1-70B", "bf16", "auto"},     //
		{"meta-llama/Llama-3.1-8B-Instruct", "", "auto"}, // bf16 checkpoint
		{"openai/gpt-oss-120b", "", "auto"},              // mxfp4 experts, bf16 GEMMs
		{"moonshotai/Kimi-K2.5", "", "auto"},             // int4 experts, bf16 GEMMs
	} {
		m, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		linear, _ := formats(m, tc.quantization, "")
		if got := generatorKVCacheDtype(linear); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.model, tc.quantization, got, tc.want)
		}
	}

	// The disaggregated rows' TP 8 DeepSeek-R1 decode worker: fp8 halves the MLA latent's 70,272 bytes
	// per token and so doubles the pool, 674,240 → 1,348,481 tokens (the measured C 2,048 rows keep
	// ~1.2 M tokens resident).
	m, err := model.Lookup("deepseek-ai/DeepSeek-R1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kv            string
		bytes, tokens int
	}{{"auto", 70272, 674240}, {generatorKVCacheDtype("fp8"), 35136, 1348481}} {
		cfg := config.Default()
		cfg.Backend, cfg.Model, cfg.System, cfg.TP = "sglang", m.Name, "h200_sxm", 8
		cfg.Quantization, cfg.MoEQuantization, cfg.KVCacheDtype = "fp8", "fp8_block", tc.kv
		d, err := cfg.Deployment()
		if err != nil {
			t.Fatal(err)
		}
		if d.KVBytes != tc.bytes || d.KVBlocks*d.BlockSize != tc.tokens {
			t.Errorf("kv %s: %d B a token, %d tokens; want %d, %d", tc.kv, d.KVBytes, d.KVBlocks*d.BlockSize, tc.bytes, tc.tokens)
		}
	}
}

// TestRunRefusesKVCacheDtype: a KV cache setting other than auto or generator is refused by name before
// any row runs.
// TestGeneratorMTP: -sglang-nextn N deploys N MTP draft steps on the DeepSeek family (MLA experts)
// only — not GLM-5's sparse attention, Qwen's or Llama's — and leaves SGLang's overlap scheduler to
// the config, which turns it off under drafts (config's TestSGLangOverlapDefault); nextn 0 changes
// nothing.
func TestGeneratorMTP(t *testing.T) {
	for _, tc := range []struct {
		model  string
		nextn  int
		drafts int
	}{
		{"deepseek-ai/DeepSeek-R1", 1, 1},
		{"deepseek-ai/DeepSeek-V3", 2, 2},
		{"deepseek-ai/DeepSeek-R1", 0, 0},
		{"zhipuai/GLM-5", 1, 0},
		{"Qwen/Qwen3-235B-A22B-FP8", 1, 0},
		{"meta-llama/Llama-3.1-8B-Instruct", 1, 0},
	} {
		m, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		cfg := config.Default()
		generatorMTP(&cfg, m, tc.nextn)
		if cfg.SpecNumTokens != tc.drafts || !cfg.SGLangOverlapSchedule || len(cfg.GivenKeys()) != 0 {
			t.Errorf("%s nextn %d: spec tokens %d, overlap %v, given %v; want %d, true, none", tc.model, tc.nextn,
				cfg.SpecNumTokens, cfg.SGLangOverlapSchedule, cfg.GivenKeys(), tc.drafts)
		}
	}
}

func TestRunRefusesKVCacheDtype(t *testing.T) {
	err := run(t.TempDir(), 0, "", settings{schedule: "aic", kvCache: "fp16"}, io.Discard)
	if err == nil || err.Error() != `kv-cache-dtype "fp16": want auto or generator` {
		t.Errorf("kv-cache-dtype fp16: %v", err)
	}
}

// TestEpFor: block-quantised experts whose shard at the row's moe_tp is not a whole number of
// 128-wide blocks run with EP = TP (MiniMax-M2.5 at TP 8: 1,536/8 = 192); every other row keeps
// its moe_ep_size.
func TestEpFor(t *testing.T) {
	for _, tc := range []struct {
		model, quant, moeQuant string
		tp, ep, want           int
	}{
		{"MiniMaxAI/MiniMax-M2.5", "", "", 8, 1, 8},              // the checkpoint's fp8_block: 192 columns
		{"MiniMaxAI/MiniMax-M2.5", "", "", 4, 1, 1},              // 384 = 3 blocks
		{"MiniMaxAI/MiniMax-M2.5", "fp8", "", 8, 1, 1},           // per-tensor fp8 has no blocks
		{"Qwen/Qwen3-235B-A22B-FP8", "", "", 8, 1, 8},            // 1,536/8 = 192
		{"Qwen/Qwen3-235B-A22B-FP8", "", "", 8, 2, 2},            // moe_tp 4: 384
		{"Qwen/Qwen3-235B-A22B-FP8", "", "", 2, 1, 1},            // 768 = 6 blocks
		{"deepseek-ai/DeepSeek-R1", "fp8", "fp8_block", 8, 1, 1}, // 2,048/8 = 256 = 2 blocks
		{"meta-llama/Llama-3.1-70B", "fp8_block", "", 8, 1, 1},   // dense
	} {
		m, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		linear, experts := formats(m, tc.quant, tc.moeQuant)
		if got := epFor(m, cmp.Or(experts, linear), tc.tp, tc.ep); got != tc.want {
			t.Errorf("%s %q/%q TP %d EP %d: EP %d, want %d", tc.model, tc.quant, tc.moeQuant, tc.tp, tc.ep, got, tc.want)
		}
	}
}

// TestAttentionDP: a MoE row whose experts span more GPUs than its attention (moe_tp_size ×
// moe_ep_size > tp_size, attention_dp_size empty) ran data-parallel attention over the rest, and the
// bench replays it so; every other row keeps its attention_dp_size (a dense row's moe_* columns mean
// nothing).
func TestAttentionDP(t *testing.T) {
	for _, tc := range []struct {
		model                   string
		tp, dp, moeTP, ep, want int
	}{
		{"Qwen/Qwen3-235B-A22B-FP8", 1, 1, 2, 1, 2}, // vLLM rows at tp_size 1, moe_tp_size 2
		{"Qwen/Qwen3-235B-A22B-FP8", 1, 1, 4, 1, 4},
		{"Qwen/Qwen3-235B-A22B-FP8", 2, 1, 4, 1, 2}, // DP 2 × TP 2
		{"Qwen/Qwen3-235B-A22B-FP8", 2, 1, 2, 1, 1}, // plain TP 2
		{"Qwen/Qwen3-235B-A22B-FP8", 2, 1, 1, 2, 1}, // TP 2, EP 2
		{"Qwen/Qwen3-235B-A22B-FP8", 4, 1, 0, 1, 1}, // moe_tp_size not recorded
		{"Qwen/Qwen3.5-397B-A17B", 8, 1, 1, 8, 1},   // TP 8, EP 8
		{"deepseek-ai/DeepSeek-R1", 8, 8, 1, 64, 8}, // recorded attention DP stands
		{"meta-llama/Llama-3.1-8B-Instruct", 2, 1, 1, 1, 1},
		{"meta-llama/Llama-3.1-8B-Instruct", 1, 1, 4, 1, 1}, // dense: moe_* columns ignored
	} {
		m, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		r := row{tp: tc.tp, dp: tc.dp, moeTP: tc.moeTP, ep: tc.ep}
		if got := attentionDP(m, r); got != tc.want {
			t.Errorf("%s tp %d dp %d moe_tp %d moe_ep %d: attention DP %d, want %d", tc.model, tc.tp, tc.dp, tc.moeTP, tc.ep, got, tc.want)
		}
	}
	// Such a row replays with its attention DP: --dp-size with --dp-attention, the experts over all
	// its GPUs; so does a row that gives attention_dp_size.
	m, err := model.Lookup("Qwen/Qwen3-235B-A22B-FP8")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []row{
		{backend: "vllm", modelPath: "Qwen/Qwen3-235B-A22B-FP8", mode: "agg", tp: 2, dp: 1, moeTP: 4, ep: 1},
		{backend: "vllm", modelPath: "Qwen/Qwen3-235B-A22B-FP8", mode: "agg", tp: 2, dp: 2, moeTP: 4, ep: 1},
	} {
		cfg := config.Default()
		cfg.Model, cfg.System = r.modelPath, "h200_sxm"
		parallelize(&cfg, m, r, "fp8_block")
		if cfg.TP != 2 || cfg.DPSize != 2 || !cfg.DPAttention || cfg.EP != 1 {
			t.Errorf("row %+v: tp %d, dp-size %d, dp-attention %v, ep %d; want 2, 2, true, 1", r, cfg.TP, cfg.DPSize, cfg.DPAttention, cfg.EP)
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("row %+v: %v", r, err)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"0.18.0", "0.19.0", -1}, {"0.24.0", "0.19.0", 1}, {"0.9.0", "0.14.0", -1}, {"0.14.0", "0.14.0", 0}, {"1.0", "0.24.0", 1},
	} {
		if got := compareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compareVersions(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestNewerVersions(t *testing.T) {
	const db = "../../../shared/data/aiconfigurator"
	got := newerVersions(db, "h200_sxm", "vllm", "0.18.0")
	if len(got) == 0 {
		t.Skip("shared AIConfigurator data not present")
	}
	// 0.22.0 reuses 0.24.0's GEMM and MoE tables and has no all-reduce table of its own.
	if want := []string{"0.19.0", "0.24.0"}; !slices.Equal(got, want) {
		t.Errorf("newer than 0.18.0: %v, want %v", got, want)
	}
}

func TestHarness(t *testing.T) {
	for _, tc := range []struct{ source, want string }{
		{"source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/h200_sxm/vllm/0.12.0/nvidia_Llama-3.1-8B-Instruct-FP8.csv; silicon_concurrency=112", "aic-auto-gap-analysis"},
		{"source_file=/Users/harrli/projects/aic-auto-gap-analysis/data/h200_sxm/sglang/0.5.6.post2/meta-llama_Llama-3.1-8B-Instruct.csv", "aic-auto-gap-analysis"},
		{"source_file=2026-04-06.csv; model=Llama-3.1-70B; silicon_concurrency=4", "2026-04-06.csv"},
		{"db-dump/2026-04-27; config_id=81; silicon_concurrency=16; lmsysorg/sglang:v0.5.9-cu130", "db-dump/2026-04-27"},
		{"source_file=kimi-k2.5-gap-analysis.csv; silicon_concurrency=4", "kimi-k2.5-gap-analysis.csv"},
	} {
		if got := harness(tc.source); got != tc.want {
			t.Errorf("harness(%q) = %q, want %q", tc.source, got, tc.want)
		}
	}
}

// TestChoose: the grid point chosen without a harness is the one that fits the other rows, judged per
// backend. Two grid points; harness a's SGLang row fits only point 1, harness b's only point 0, and the
// vLLM row (harness c) is the same at both; without it, the SGLang rows' TTFT errors are 50 and 0 % at
// point 0 (median 25) and 0 and 40 % at point 1 (median 20).
func TestChoose(t *testing.T) {
	grid := []calibration{{sglangHostUs: 0}, {sglangHostUs: 16}}
	rows := []row{
		{source: "source_file=a.csv", backend: "sglang", ttft: 100, tpot: 10},
		{source: "source_file=b.csv", backend: "sglang", ttft: 100, tpot: 10},
		{source: "source_file=c.csv", backend: "vllm", ttft: 100, tpot: 10},
	}
	res := func(pred ...float64) []result {
		var out []result
		for i, r := range rows {
			out = append(out, result{row: r, ttft: pred[i], tpot: 10})
		}
		return out
	}
	results := [][]result{res(150, 100, 120), res(100, 140, 120)}
	for _, tc := range []struct {
		without string
		want    int
	}{{"a.csv", 0}, {"b.csv", 1}, {"c.csv", 1}} {
		if got := choose(grid, results, func(r row) bool { return harness(r.source) != tc.without }); got != tc.want {
			t.Errorf("without %s: grid point %d, want %d", tc.without, got, tc.want)
		}
	}
}

// Two disaggregated rows of silicon_h200_dev.csv as they stand there: DeepSeek-R1 on SGLang with TP 8
// pools and no batch sizes or worker counts recorded, and the one row that records them (expert-parallel
// decode with attention DP 8, so not replayed).
const disaggRows = `id,silicon_data_source,backend,backend_version,model_path,system,precision,mode,isl,osl,gemm_quant_mode,moe_quant_mode,batch_size,tp_size,pp_size,attention_dp_size,moe_tp_size,moe_ep_size,prefill_batch_size,prefill_num_workers,prefill_tp_size,prefill_pp_size,prefill_attention_dp_size,prefill_moe_tp_size,prefill_moe_ep_size,decode_batch_size,decode_num_workers,decode_tp_size,decode_pp_size,decode_attention_dp_size,decode_moe_tp_size,decode_moe_ep_size,silicon_ttft_ms,silicon_tpot_ms
2026_04_06_deepseek_r1_h200_sxm_sglang_fp8_disagg_1024x1024_c8_tp8_ep1_1456,source_file=2026-04-06.csv; model=DeepSeek-R1; silicon_concurrency=8; measured=2026-02-07T00:00:00.000Z; wip=False; image=lmsysorg/sglang:v0.5.8.post1-cu130,sglang,0.5.8.post1,deepseek-ai/DeepSeek-R1,h200_sxm,fp8,disagg,1024,1024,fp8,fp8_block,,,,,,,,,8,1,1,8,1,,,8,1,1,8,1,302.370435645571,8.308669054647913
dsr1_h200_sglang_fp8_disagg_8192x1024_c64_cfg434,db-dump/2026-04-27; config_id=434; silicon_concurrency=64; measured=2026-02-07T00:00:00.000Z; workflow_run_id=266; lmsysorg/sglang:v0.5.8.post1-cu130,sglang,0.5.8.post1,deepseek-ai/DeepSeek-V3,h200_sxm,fp8,disagg,8192,1024,fp8,fp8_block,,,,,,,1,1,8,1,1,8,1,8,1,1,1,8,1,8,2026.2881303591712,34.68734627927778
`

// readDisaggRows reads disaggRows as the bench reads its CSV.
func readDisaggRows(t *testing.T) []row {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(path, []byte(disaggRows), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := readRows(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestDisaggregate(t *testing.T) {
	rows := readDisaggRows(t)
	r := rows[0]
	if r.concurrency != 8 || r.isl != 1024 || r.osl != 1024 || r.mode != "disagg" {
		t.Errorf("row: concurrency %d, %d/%d, mode %s; want 8, 1024/1024, disagg", r.concurrency, r.isl, r.osl, r.mode)
	}
	cfg := config.Default()
	cfg.System = "h200_sxm"
	if err := disaggregate(&cfg, r); err != nil {
		t.Fatal(err)
	}
	// One prefill and one decode worker of TP 8 each: 16 GPUs, two nodes, so the KV crosses the
	// inter-node network, 8 GPUs × 50 GB/s.
	if cfg.PrefillWorkers != 1 || cfg.DecodeWorkers != 1 || *cfg.Prefill.TP != 8 || *cfg.Decode.TP != 8 ||
		cfg.Prefill.MaxNumSeqs != nil || cfg.Decode.MaxNumSeqs != nil || cfg.KVTransferBandwidth != 400 {
		t.Errorf("workers %d/%d, TP %d/%d, max-num-seqs %v/%v, KV link %g GB/s; want 1/1, 8/8, shared, 400",
			cfg.PrefillWorkers, cfg.DecodeWorkers, *cfg.Prefill.TP, *cfg.Decode.TP, cfg.Prefill.MaxNumSeqs, cfg.Decode.MaxNumSeqs, cfg.KVTransferBandwidth)
	}
	if got := cfg.Prefill.Keys(); !slices.Equal(got, []string{"tp"}) {
		t.Errorf("prefill sets %v, want [tp]", got)
	}

	// The row that records batch sizes: they are each pool's max-num-seqs; a TP 8 prefill and a TP 1
	// decode worker are 9 GPUs, more than a node, so the inter-node network again, 1 GPU × 50 GB/s. Its
	// decode pool runs attention DP 8 (--decode-dp-size 8 --decode-dp-attention) with expert
	// parallelism 8 over the 8 GPUs; its batch size is each rank's.
	r = rows[1]
	cfg = config.Default()
	cfg.System = "h200_sxm"
	if err := disaggregate(&cfg, r); err != nil {
		t.Fatal(err)
	}
	if r.concurrency != 64 || *cfg.Prefill.TP != 8 || *cfg.Decode.TP != 1 || *cfg.Prefill.MaxNumSeqs != 1 || *cfg.Decode.MaxNumSeqs != 8 || cfg.KVTransferBandwidth != 50 {
		t.Errorf("concurrency %d, TP %d/%d, max-num-seqs %d/%d, KV link %g GB/s; want 64, 8/1, 1/8, 50",
			r.concurrency, *cfg.Prefill.TP, *cfg.Decode.TP, *cfg.Prefill.MaxNumSeqs, *cfg.Decode.MaxNumSeqs, cfg.KVTransferBandwidth)
	}
	if got := cfg.Decode.Keys(); !slices.Equal(got, []string{"tp", "ep", "dp-size", "dp-attention", "max-num-seqs"}) ||
		*cfg.Decode.EP != 8 || *cfg.Decode.DPSize != 8 || !*cfg.Decode.DPAttention {
		t.Errorf("decode sets %v, want [tp ep dp-size dp-attention max-num-seqs] with ep 8, dp-size 8 and dp-attention", got)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("attention-DP row: %v", err)
	}
}

func TestKVTransferGBps(t *testing.T) {
	sys, err := hardware.Lookup("h200_sxm")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefill, decode int
		want            float64
	}{
		{4, 4, 1800}, // one node: NVLink, 4 × 450 GB/s
		{2, 4, 900},
		{8, 8, 400}, // two nodes: 8 NICs × 50 GB/s
		{8, 1, 50},
	} {
		if got := kvTransferGBps(sys, tc.prefill, tc.decode); got != tc.want {
			t.Errorf("prefill TP %d, decode TP %d: %g GB/s, want %g", tc.prefill, tc.decode, got, tc.want)
		}
	}
}

// A disaggregated row replays with each pool at its own TP: the shared TP (1, the row's empty tp_size)
// prices nothing, so it must not decide whether the model fits or which tables cover the row.
func TestPredictDisaggRow(t *testing.T) {
	const db = "../../../shared/data/aiconfigurator"
	if _, err := os.Stat(db); err != nil {
		t.Skip("shared AIConfigurator data not present")
	}
	rows := readDisaggRows(t)
	set := settings{schedule: "aic", frontendMs: frontendLatencyMs, sglangHostUs: sglangHostOverheadUs, sglangGenerator: true}
	res := predict(rows[0], db, set)
	if res.err != "" || res.tables != "0.5.9" || !(res.ttft > 0) || !(res.tpot > 0) {
		t.Errorf("err %q, tables %q, TTFT %g, TPOT %g; want a replay over the 0.5.9 tables", res.err, res.tables, res.ttft, res.tpot)
	}
	// What reads leaves out of a disaggregated row's key changes nothing in its replay.
	set.sglangGenerator, set.sglangChunkUs = false, 50
	if other := predict(rows[0], db, set); other != res {
		t.Errorf("without the generator config, with a per-chunk frontend: %+v, want %+v", other, res)
	}
}

// TestTablesForNewModels: the Qwen3.5 rows (SGLang 0.5.9, TP 8 EP 8) replay over 0.5.14, the oldest
// newer version whose own tables price the model (0.5.9 has no sharded-head Gated DeltaNet rows nor
// head_dim 256 attention, 0.5.10 no gdn table); the rows that record tp_size 64 are refused by
// name; GLM-5's rows record the image tag glm5-hopper, which holds no version number and so reads
// as older than every table (aic.NearestVersion): the oldest version whose tables price it, 0.5.10
// (0.5.9 has no DSA module tables).
func TestTablesForNewModels(t *testing.T) {
	const db = "../../../shared/data/aiconfigurator"
	if _, err := os.Stat(db); err != nil {
		t.Skip("shared AIConfigurator data not present")
	}
	cfg := config.Default()
	cfg.Backend, cfg.System, cfg.Timing, cfg.PerfDB = "sglang", "h200_sxm", "default", db
	cfg.Model, cfg.TP, cfg.EP = "Qwen/Qwen3.5-397B-A17B", 8, 8
	cfg.Quantization, cfg.MoEQuantization = "fp8", "fp8_block"
	if v, err := tablesFor(cfg, db, "0.5.9"); err != nil || v != "0.5.14" {
		t.Errorf("Qwen3.5 TP 8 EP 8 at 0.5.9: tables %q, %v; want 0.5.14", v, err)
	}
	cfg.TP = 64
	if _, err := tablesFor(cfg, db, "0.5.9"); err == nil {
		t.Error("Qwen3.5 at tp_size 64: no error")
	}
	cfg.Model, cfg.TP, cfg.EP = "zhipuai/GLM-5", 8, 1
	if v, err := tablesFor(cfg, db, "glm5-hopper"); err != nil || v != "0.5.10" {
		t.Errorf("GLM-5 at glm5-hopper: tables %q, %v; want 0.5.10", v, err)
	}
}

// TestPredictSGLangGrouped: an aggregated SGLang row replays the benchmark's 10·C requests with every
// client starting at time 0 and nothing spreading them but the engine (-sglang-grouped); the same row
// with the setting off, and a vLLM row either way, are desynchronised over one lifetime. Eight clients
// of 1,000-token prompts under the generator's budget (ISL + 1,500 tokens: two prompts a pass) come
// back as the engine spaced them, two a pass, so their mean TTFT stays near twice the desynchronised
// replay's, and their decode steps meet fewer prefills.
func TestPredictSGLangGrouped(t *testing.T) {
	const db = "../../../shared/data/aiconfigurator"
	if _, err := os.Stat(db); err != nil {
		t.Skip("shared AIConfigurator data not present")
	}
	r := row{id: "grouped", backend: "sglang", version: "0.5.6.post2", modelPath: "meta-llama/Llama-3.1-8B-Instruct", mode: "agg",
		isl: 1000, osl: 50, concurrency: 8, tp: 1, dp: 1, ep: 1, gemmQuant: "fp8_block", moeQuant: "fp8_block"}
	base := settings{schedule: "aic", frontendMs: frontendLatencyMs, sglangHostUs: sglangHostOverheadUs, sglangGenerator: true}
	predictAt := func(r row, grouped bool) result {
		set := base
		set.sglangGrouped = grouped
		res := predict(r, db, set)
		if res.err != "" {
			t.Fatal(res.err)
		}
		return res
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-6 }
	for _, tc := range []struct {
		grouped    bool
		ttft, tpot float64 // ms
	}{
		{true, 80.459900, 5.514261},
		{false, 42.082449, 6.143908},
	} {
		if res := predictAt(r, tc.grouped); !near(res.ttft, tc.ttft) || !near(res.tpot, tc.tpot) {
			t.Errorf("grouped %v: TTFT %.6f, TPOT %.6f ms; want %.6f, %.6f", tc.grouped, res.ttft, res.tpot, tc.ttft, tc.tpot)
		}
	}
	r.backend, r.version = "vllm", "0.14.0"
	if a, b := predictAt(r, true), predictAt(r, false); a.ttft != b.ttft || a.tpot != b.tpot {
		t.Errorf("vLLM row: grouped %g / %g ms, desynchronised %g / %g; want the same", a.ttft, a.tpot, b.ttft, b.tpot)
	}
}

// formats is what the bench resolves a row's labels into: the linear layers' and experts' formats.
func formats(m *model.Model, quant, moeQuant string) (linear, experts string) {
	c := config.Default()
	c.Quantization, c.MoEQuantization = quant, moeQuant
	return c.QuantModes(m)
}

// TestReplaysOnce checks that rows differing only in what no replay reads (id, source, measurements)
// replay once, each keeping its own row, that the plain replay also ignores the columns it does not
// read (version, quantization), and that anything a replay reads, or other settings, replays anew.
func TestReplaysOnce(t *testing.T) {
	a := row{id: "a", source: "h1", backend: "vllm", version: "0.14.0", modelPath: "m", mode: "agg", isl: 1000, osl: 100,
		concurrency: 8, tp: 1, dp: 1, ep: 1, gemmQuant: "fp8", ttft: 50, tpot: 5}
	twin := a
	twin.id, twin.source, twin.ttft, twin.tpot = "twin", "h2", 60, 6
	longer := a
	longer.id, longer.isl = "longer", 2000
	otherQuant := a
	otherQuant.id, otherQuant.gemmQuant, otherQuant.version = "bf16", "bf16", "0.12.0"
	rows := []row{a, twin, longer, otherQuant}
	set := settings{schedule: "aic", frontendMs: 13.6}
	other := set
	other.frontendMs = 8.6

	var rs replays
	var ran []string
	fake := func(kind string, r row, s settings) func() result {
		return func() result {
			ran = append(ran, kind+" "+r.id+" "+strconv.FormatFloat(s.frontendMs, 'g', -1, 64))
			return result{row: r, ttft: float64(len(ran)), model: kind}
		}
	}
	normal, atOther, plains := make([]result, len(rows)), make([]result, len(rows)), make([]result, len(rows))
	for i, r := range rows {
		rs.add(replayKey{kind: "predict", row: r.replayed(), set: set}, &normal[i], r, fake("predict", r, set))
		rs.add(replayKey{kind: "predict", row: r.replayed(), set: other}, &atOther[i], r, fake("predict", r, other))
		rs.add(replayKey{kind: "plain", row: r.plainReplayed()}, &plains[i], r, fake("plain", r, settings{}))
	}
	for _, job := range rs.jobs { // in order, so ran is deterministic
		job()
	}
	for _, c := range rs.copies {
		c()
	}
	want := []string{"predict a 13.6", "predict a 8.6", "plain a 0", "predict longer 13.6", "predict longer 8.6", "plain longer 0",
		"predict bf16 13.6", "predict bf16 8.6"}
	if !slices.Equal(ran, want) {
		t.Errorf("replayed %q, want %q", ran, want)
	}
	for i, res := range [][]result{normal, atOther, plains} {
		for j, r := range rows {
			if res[j].row != r {
				t.Errorf("replays %d row %s: result carries row %s", i, r.id, res[j].row.id)
			}
		}
		if res[1].ttft != res[0].ttft || res[1].model != res[0].model {
			t.Errorf("replays %d: twin's result %v, a's %v: want a's replay", i, res[1].ttft, res[0].ttft)
		}
	}
	if plains[3].ttft != plains[0].ttft {
		t.Errorf("plain replay of %s: %v, want a's %v (it reads neither version nor quantization)", otherQuant.id, plains[3].ttft, plains[0].ttft)
	}
}

// TestReads checks which settings a row's replay is keyed on: SGLang's host overhead only on SGLang
// rows, the generator config and per-chunk frontend only on aggregated SGLang rows, the rest always.
func TestReads(t *testing.T) {
	set := settings{schedule: "aic", frontendMs: 13.6, sglangHostUs: 16, sglangGenerator: true, sglangGrouped: true, sglangChunkUs: 5}
	for _, tc := range []struct {
		backend, mode string
		want          settings
	}{
		{"sglang", "agg", set},
		{"sglang", "disagg", settings{schedule: "aic", frontendMs: 13.6, sglangHostUs: 16, sglangGrouped: true}},
		{"vllm", "agg", settings{schedule: "aic", frontendMs: 13.6, sglangGrouped: true}},
		{"vllm", "disagg", settings{schedule: "aic", frontendMs: 13.6, sglangGrouped: true}},
	} {
		if got := (row{backend: tc.backend, mode: tc.mode}).reads(set); got != tc.want {
			t.Errorf("%s %s: %+v, want %+v", tc.backend, tc.mode, got, tc.want)
		}
	}
}
