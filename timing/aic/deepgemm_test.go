package aic

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/timing"
)

// TestDeepGEMMRows: vLLM's M_sum for the contiguous layout (compute_aligned_M without host-side
// counts): tokens·topk plus 127 rows for every local expert, rounded up to 128.
func TestDeepGEMMRows(t *testing.T) {
	qwen := moeKey{dtype: "fp8_block", topk: 8, experts: 128, hidden: 4096, inter: 1536, tp: 2, ep: 1}
	miniMax := moeKey{dtype: "fp8_block", topk: 8, experts: 256, hidden: 3072, inter: 1536, tp: 1, ep: 8}
	for _, tc := range []struct {
		k      moeKey
		tokens float64
		want   float64
	}{
		{qwen, 1, 16384},       // 8 + 128·127 = 16264
		{qwen, 16, 16384},      // 128 + 16256 = 16384 exactly
		{qwen, 17, 16512},      // 136 + 16256 = 16392
		{qwen, 4000, 48256},    // 32000 + 16256
		{miniMax, 4, 4096},     // 32 experts a GPU: 32 + 4064 = 4096
		{miniMax, 1024, 12288}, // 8192 + 4064 = 12256
	} {
		if got := deepGEMMRows(tc.tokens, tc.k); got != tc.want {
			t.Errorf("%d experts over EP %d, %g tokens: M_sum %g, want %g", tc.k.experts, tc.k.ep, tc.tokens, got, tc.want)
		}
	}
}

// TestDeepGEMMMoE: the versions, precisions and MoE TP sizes whose block-quantised experts vLLM runs
// through DeepGEMM at every batch: 0.12 to 0.14, fp8_block, MoE TP below 8.
func TestDeepGEMMMoE(t *testing.T) {
	k := moeKey{dtype: "fp8_block", tp: 2, ep: 1}
	perTensor, tp8 := k, k
	perTensor.dtype, tp8.tp = "fp8", 8
	for _, tc := range []struct {
		version string
		k       moeKey
		want    bool
	}{
		{"0.11.0", k, false}, {"0.12.0", k, true}, {"0.14.0", k, true}, {"0.14.1", k, true},
		{"0.15.0", k, false}, {"0.18.0", k, false}, {"0.14.0", perTensor, false}, {"0.14.0", tp8, false},
	} {
		if got := deepGEMMMoE(tc.version, tc.k); got != tc.want {
			t.Errorf("vllm %s, %s at MoE TP %d: %v, want %v", tc.version, tc.k.dtype, tc.k.tp, got, tc.want)
		}
	}
}

// TestDeepGEMMExperts: Qwen3-235B-A22B-FP8 in fp8_block at TP 2 on vLLM 0.14.0 (the tables of its
// 0.12.0 silicon rows). A 16-request decode step computes M_sum = 16,384 rows through both grouped
// GEMMs, priced from 0.24.0's DeepGEMM rows at m 16,384: gate/up (n 1,536, k 4,096) 0.3001013398 ms
// and down (n 4,096, k 768) 0.1301173369 ms, so 94 layers × 0.4302186767 ms = 40.4405556 ms of
// experts (the Triton rows of 0.14.0 gave 16.5 ms). The whole step is then flat in the batch:
// 7 and 20 requests cost the same experts (M_sum 16,384 either way). The sources name 0.24.0's
// GEMM table.
func TestDeepGEMMExperts(t *testing.T) {
	mdl, err := onH200(t, "qwen3-235b-a22b", Options{Backend: "vllm", Version: "0.14.0", TP: 2, GEMMQuant: "fp8_block"})
	if err != nil {
		t.Fatal(err)
	}
	experts := func(n int) float64 {
		seqs := make([]timing.Seq, n)
		for i := range seqs {
			seqs[i] = timing.Seq{New: 1, Cached: 2000, Samples: true}
		}
		for _, p := range mdl.Parts(&timing.Batch{Seqs: seqs}) {
			if p.Op == "moe_experts" {
				return p.Ms
			}
		}
		t.Fatal("no moe_experts part")
		return 0
	}
	want := 94 * (0.3001013398170471 + 0.13011733690897623)
	for _, n := range []int{7, 16} {
		if got := experts(n); !near(got, want, 1e-9) {
			t.Errorf("%d requests: experts %.9g ms, want 94 × (0.3001013398 + 0.1301173369) = %.9g", n, got, want)
		}
	}
	if src := strings.Join(mdl.Sources(), " "); !strings.Contains(src, "gemm/vllm/0.24.0/") {
		t.Errorf("sources %s: want 0.24.0's GEMM table (DeepGEMM's rows)", src)
	}
	// Other versions keep their MoE rows: on 0.19.0 the same step's experts are the Triton table's.
	other, err := onH200(t, "qwen3-235b-a22b", Options{Backend: "vllm", Version: "0.19.0", TP: 2, GEMMQuant: "fp8_block"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(other.Sources(), " "), "gemm/vllm/0.24.0/") {
		t.Errorf("0.19.0 reads 0.24.0's GEMM rows: %v", other.Sources())
	}
}

// TestDeepGEMMExpertsReadError: a version whose GEMM table has no rows of DeepGEMM's kernel is passed
// over for the next, but one whose table cannot be read is an error that names it, not "no version
// times DeepGEMM's kernel".
func TestDeepGEMMExpertsReadError(t *testing.T) {
	write := func(root, version string, data []byte) {
		dir := filepath.Join(root, "h200_sxm", "gemm", "vllm", version)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "gemm_perf"+compactExt), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var csv bytes.Buffer
	zw := gzip.NewWriter(&csv)
	fmt.Fprint(zw, "gemm_dtype:s,m:f,n:f,k:f,latency:f,kernel_source:s\nfp8_block,16,1536,4096,0.01,cutlass\n")
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	k := moeKey{dtype: "fp8_block", hidden: 4096, inter: 1536, topk: 8, experts: 128, tp: 1, ep: 1}
	own := curve{x: []float64{1, 16}, y: []float64{0.1, 0.2}}
	rf := h200Roofline(t)

	none := t.TempDir()
	write(none, "0.14.0", csv.Bytes())
	_, err := (&Model{}).deepGEMMExperts(db{root: none, system: "h200_sxm"}, "0.14.0", own, k, rf)
	if err == nil || !strings.Contains(err.Error(), "no vLLM version's fp8_block GEMM rows time its kernel") {
		t.Errorf("a table without DeepGEMM's rows: err = %v, want none of the versions to time the kernel", err)
	}

	corrupt := t.TempDir()
	write(corrupt, "0.14.0", []byte("not a gzip stream"))
	write(corrupt, "0.24.0", csv.Bytes())
	_, err = (&Model{}).deepGEMMExperts(db{root: corrupt, system: "h200_sxm"}, "0.14.0", own, k, rf)
	if err == nil || !strings.Contains(err.Error(), filepath.Join("0.14.0", "gemm_perf")) || strings.Contains(err.Error(), "no vLLM version") {
		t.Errorf("an unreadable table: err = %v, want the read error naming 0.14.0's gemm_perf", err)
	}
}
