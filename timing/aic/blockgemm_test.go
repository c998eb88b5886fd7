package aic

import (
	"math"
	"path/filepath"
	"slices"
	"testing"
)

// TestBlockGEMMHostBound: on H200, vLLM 0.18.0's, 0.22.0's and 0.24.0's fp8_block GEMM rows time
// 51–68 µs for the 128×128×128 GEMM that bfloat16 does in 2.4–2.7 µs (host-bound); 0.14.0's and
// 0.19.0's take 6.4–7.2× and 2.3–3.4× (kernels).
func TestBlockGEMMHostBound(t *testing.T) {
	needData(t)
	d := db{root: aicRoot, system: "h200_sxm"}
	ref := gemmTable
	ref.backend = "vllm"
	want := map[string]bool{"0.14.0": false, "0.18.0": true, "0.19.0": false, "0.22.0": true, "0.24.0": true}
	for v, bound := range want {
		paths, err := d.sources(ref, v)
		if err != nil {
			t.Fatal(err)
		}
		got, have, err := blockGEMMHostBound(paths)
		if err != nil || !have || got != bound {
			t.Errorf("vllm %s: host-bound %v, have %v, err %v; want %v, true, nil", v, got, have, err, bound)
		}
	}
}

// TestBlockGEMMSource: MiniMax-M2.5 in fp8_block at TP 8 with EP 8 (as vLLM must run it) on vLLM
// 0.18.0 prices its block-scaled GEMMs from 0.19.0's table, the nearest with kernel-bound rows: a
// decode step of 4 requests at 1,500 tokens is 7.820325 ms (14.882648 ms on 0.18.0's own rows,
// 8.7 ms of them the attention projections; measured on vLLM 0.18.0 at concurrency 4: 8.0 ms), and
// the sources name 0.19.0's GEMM table beside 0.18.0's. On 0.19.0 the version's own rows serve.
func TestBlockGEMMSource(t *testing.T) {
	for _, tc := range []struct {
		version, extra string
		step           float64
	}{
		{"0.18.0", "0.19.0", 7.820325},
		{"0.19.0", "", 8.0508},
	} {
		mdl, err := onH200(t, "minimax-m2.5", Options{Backend: "vllm", Version: tc.version, TP: 8, EP: 8, GEMMQuant: "fp8_block"})
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeMs(mdl, 4, 1500); math.Abs(got-tc.step) > 1e-6 {
			t.Errorf("%s: decode step %.6f ms, want %.6f", tc.version, got, tc.step)
		}
		var gemms []string
		for _, p := range mdl.Sources() {
			if filepath.Base(filepath.Dir(filepath.Dir(p))) == "vllm" && filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(p)))) == "gemm" {
				gemms = append(gemms, filepath.Base(filepath.Dir(p)))
			}
		}
		want := []string{tc.version}
		if tc.extra != "" {
			want = append(want, tc.extra)
		}
		if !slices.Equal(gemms, want) {
			t.Errorf("%s: GEMM tables %v, want %v", tc.version, gemms, want)
		}
	}
}
