package aic

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// vLLM 0.12 to 0.14 run block-quantised fp8 experts through DeepGEMM's contiguous grouped GEMM at
// every batch size, on Hopper too, wherever the MoE tensor parallelism is below 8:
//
//   - the fp8 MoE backend is DeepGEMM for block-quantised experts when VLLM_USE_DEEP_GEMM and
//     VLLM_MOE_USE_DEEP_GEMM hold (both default on, and vLLM's images install DeepGEMM), unless the
//     TP size is 8 or more (vLLM PR 29346, merged 2025-11-24: "DeepGEMM MoE is disabled by default
//     when TP size is >= 8"; oracle/fp8.py select_fp8_moe_backend);
//   - TritonOrDeepGemmExperts then takes DeepGEMM whenever is_deep_gemm_e8m0_used(), whatever the
//     shape, and E8M0 scales are on by default on Hopper since vLLM PR 26197 ("Enable E8M0 by Default
//     on Hopper for DeepGEMM", merged 2025-10-03);
//   - the oracle was rewritten into a priority list in 0.15 (vLLM PR 32414), which on Hopper put
//     FlashInfer's CUTLASS MoE first (vLLM issue 34249), so the rule ends there. A report against
//     0.12.0–0.14.0 (llm-compressor issue 2292: fp8 MoE models a quarter slower than on 0.11.0
//     until DeepGEMM was turned off) covers the same window.
//
// The rule holds with expert parallelism too: vLLM's MoE tensor parallelism is then 1 (below 8), so
// TP 8 × EP 8 on 0.12–0.14 is priced with DeepGEMM as well. Whether 0.11.1 and 0.11.2 already carry
// PR 26197 (which would move the window's lower bound) is not established here; the window starts at
// 0.12.0, where the llm-compressor report starts.
//
// The contiguous layout gives each local expert's tokens whole blocks of deepGEMMBlockM rows and,
// without the experts' token counts on the host (the path without EP; with EP it is priced the same
// way), sizes the grouped GEMMs for the worst case: M_sum = round_up(tokens·topk + local_experts·(deepGEMMBlockM − 1), deepGEMMBlockM)
// (deep_gemm_utils.py compute_aligned_M). The experts are priced as the two grouped GEMMs over
// M_sum rows (gate/up: n = 2·inter/tp, k = hidden; down: n = hidden, k = inter/tp), read from the
// fp8_block GEMM rows that time DeepGEMM's kernel (deepGEMMKernel). Every M_sum row is priced as
// computed: the rows' decode steps are flat in the batch (vLLM 0.12.0, Qwen3-235B-A22B-FP8 at TP 2:
// 51–56 ms from 7 to 20 requests, where the blocks of the experts a batch touches double), as a
// GEMM over all of M_sum is and one over the touched experts' blocks is not. The permutation and
// activation kernels around the GEMMs are not in any table and are left out.

// deepGEMMBlockM is DeepGEMM's M alignment of the contiguous grouped layout on Hopper
// (get_m_alignment_for_contiguous_layout).
const deepGEMMBlockM = 128

// deepGEMMKernel is the kernel_source AIConfigurator's vLLM GEMM collector gives the fp8_block rows
// it timed with DeepGEMM (vLLM's W8A8 block-scaled linear kernel of that name; the H200 tables of
// 0.24.0).
const deepGEMMKernel = "DeepGemmFp8BlockScaledMMKernel"

// deepGEMMMoE reports whether vLLM at version runs experts k through DeepGEMM's contiguous grouped
// GEMM at every batch size (see above).
func deepGEMMMoE(version string, k moeKey) bool {
	return k.dtype == "fp8_block" && k.tp < 8 &&
		compareVersions(version, "0.12.0") >= 0 && compareVersions(version, "0.15.0") < 0
}

// deepGEMMRows is M_sum, the rows the grouped GEMMs compute for tokens tokens (compute_aligned_M).
func deepGEMMRows(tokens float64, k moeKey) float64 {
	local := float64(k.experts / k.ep)
	return math.Ceil((tokens*float64(k.topk)+local*(deepGEMMBlockM-1))/deepGEMMBlockM) * deepGEMMBlockM
}

// deepGEMMExperts prices experts k as DeepGEMM's grouped GEMMs at the token counts of the version's
// own MoE curve, from the fp8_block GEMM rows of the nearest vLLM version that times DeepGEMM's
// kernel (the oldest newer one first, as NearestVersion picks a version). The sources record the
// GEMM table used.
func (mdl *Model) deepGEMMExperts(d db, version string, own curve, k moeKey, rf *roofline) (curve, error) {
	ref := gemmTable
	ref.backend = "vllm"
	var g *gemmData
	candidates := append([]string{version}, d.nearestVersions(ref.op, ref.backend, version)...)
	paths, err := mdl.substitute(d, ref, version, candidates, nil, func(paths []string) (bool, error) {
		var err error
		g, err = loadGEMMKernel(paths, "fp8_block", deepGEMMKernel, rf)
		var none *noKernelRows
		if errors.As(err, &none) {
			return false, nil // this version's rows do not name DeepGEMM's kernel
		}
		return err == nil, err
	})
	if err != nil {
		return curve{}, err
	}
	if paths == nil {
		return curve{}, fmt.Errorf("aic: vllm %s runs %s through DeepGEMM's grouped GEMM, and no vLLM version's fp8_block GEMM rows time its kernel (kernel_source %s)",
			version, k, deepGEMMKernel)
	}
	inter := float64(k.inter / k.tp)
	hidden := float64(k.hidden)
	y := make([]float64, len(own.x))
	for i, tok := range own.x {
		rows := deepGEMMRows(tok, k)
		y[i] = g.latency(rows, 2*inter, hidden) + g.latency(rows, hidden, inter)
	}
	flops, err := rf.flopsOf(k.dtype)
	if err != nil {
		return curve{}, err
	}
	return newCurve(slices.Clone(own.x), y, func(v float64) float64 { return rf.moeSOL(v, k, flops) }, 1, false), nil
}
