package aic

import (
	"fmt"
	"math"

	"github.com/mocker-sim/mocker/hardware"
)

// roofline holds the speed-of-light numbers of one GPU that extrapolation and cross-shape transfer
// scale by. The formulas are AIConfigurator's get_sol closures (sdk/operations/*.py): compute at the
// tensor-core peak of the op's dtype, memory at the raw HBM bandwidth, the larger wins. Memory-bound
// ops without a table (norms, activations, the embedding lookup) use its empirical mem-op formula
// instead: bytes / (bandwidth × mem_bw_empirical_scaling_factor) + mem_empirical_constant_latency.
type roofline struct {
	flops  map[string]float64 // by table dtype name ("bfloat16", "fp8", "fp8_block", ...)
	memBW  float64            // bytes/s, peak
	effBW  float64            // bytes/s, achieved (peak × empirical scaling)
	memLat float64            // ms per memory-bound op
	linkBW float64            // bytes/s per GPU within a node (NVLink)
}

func newRoofline(sys *hardware.System) (*roofline, error) {
	if sys.MemBandwidth <= 0 {
		return nil, fmt.Errorf("aic: system %s: memory bandwidth %v is not positive", sys.Name, sys.MemBandwidth)
	}
	r := &roofline{flops: map[string]float64{}, memBW: sys.MemBandwidth, linkBW: sys.NVLinkBandwidth}
	scale := sys.MemBWScaling
	if scale <= 0 {
		scale = 1 // a system without AIConfigurator's correction
	}
	r.effBW = sys.MemBandwidth * scale
	r.memLat = sys.MemLatency.Seconds() * 1e3
	for table, hw := range map[string]string{
		"bfloat16": "bf16", "float16": "fp16", "fp8": "fp8", "fp8_block": "fp8", "int8": "int8",
		// Weight-only 4-bit experts compute in 16 bits.
		"w4a16_mxfp4": "bf16", "int4_wo": "bf16",
	} {
		if f := sys.FLOPS[hw]; f > 0 {
			r.flops[table] = f
		}
	}
	return r, nil
}

// flopsOf returns the tensor-core peak for a table dtype, or an error naming what the system lacks.
func (r *roofline) flopsOf(dtype string) (float64, error) {
	if f := r.flops[dtype]; f > 0 {
		return f, nil
	}
	return 0, fmt.Errorf("aic: the system has no tensor-core rate for %s", dtype)
}

// bytesOf is the element size of a table dtype (weights for GEMM and MoE tables).
func bytesOf(dtype string) float64 {
	switch dtype {
	case "fp8", "fp8_block", "int8":
		return 1
	case "w4a16_mxfp4":
		return 4.25 / 8
	case "int4_wo":
		return 0.5
	}
	return 2
}

// gemmSOL is AIConfigurator's GEMM roofline in ms: max(2mnk / peak, bytes·(mn+mk+nk) / bandwidth).
func (r *roofline) gemmSOL(m, n, k, flops, elem float64) float64 {
	return max(2*m*n*k/flops, elem*(m*n+m*k+n*k)/r.memBW) * 1e3
}

// memOp is AIConfigurator's memory-bound op in ms (query_mem_op).
func (r *roofline) memOp(bytes float64) float64 {
	return bytes/r.effBW*1e3 + r.memLat
}

// allReduceSOL is AIConfigurator's ring all-reduce roofline in ms for size bf16 elements on gpus GPUs.
func (r *roofline) allReduceSOL(size float64, gpus int) float64 {
	if gpus <= 1 || r.linkBW <= 0 {
		return 0
	}
	g := float64(gpus)
	return 2 * size * 2 / g * (g - 1) / r.linkBW * 1e3
}

// gatherSOL is the ring all-gather's (and reduce-scatter's) roofline in ms for a gathered message of
// size bf16 elements on gpus GPUs: each GPU moves (gpus−1)/gpus of it, half an all-reduce.
func (r *roofline) gatherSOL(size float64, gpus int) float64 {
	return r.allReduceSOL(size, gpus) / 2
}

// attnShape is the per-GPU geometry of an attention op, with the rooflines of one sequence.
type attnShape struct {
	heads, kvHeads, headDim, window float64
	kvBytes                         float64 // KV-cache element size
	flops                           float64 // fmha peak
	memBW                           float64
	// Multi-head latent attention (latent > 0): q/k head size (nope + rope), v head size and the
	// cached latent per token (kv_lora_rank + rope) and kv_lora_rank. Prefill runs as multi-head
	// attention over the decompressed keys and values, decode in the absorbed form over the latent.
	qkDim, vDim, latent, kvLoRA float64
	// DeepSeek sparse attention (topK > 0): each query attends its top topK cached tokens, chosen by
	// an indexer that reads indexerBytes of its own cache per token (AIConfigurator's DSA get_sol).
	topK, indexerBytes float64
}

// ctxSOL is the context-attention roofline in ms of one sequence of s tokens (AIConfigurator's
// ContextAttention get_sol with batch 1 and no prefix); latency of a batch scales linearly with it.
func (a *attnShape) ctxSOL(s float64) float64 {
	if a.topK > 0 {
		// Sparse, in the absorbed form over the latent: query i attends min(i, topK) keys.
		pairs := s * s / 2
		if s > a.topK {
			pairs = a.topK*a.topK/2 + (s-a.topK)*a.topK
		}
		ops := 2 * a.heads * pairs * (a.latent + a.kvLoRA)
		mem := 2*a.heads*s*2*a.qkDim + a.kvBytes*s*a.latent + a.indexerBytes*s
		return max(ops/a.flops, mem/a.memBW) * 1e3
	}
	if a.latent > 0 {
		// Causal: s²/2 query-key pairs, each a qk and a v dot product.
		n := a.heads
		ops := s * s * n * (a.qkDim + a.vDim)
		mem := 2*n*s*(2*a.qkDim+2*a.vDim) + a.kvBytes*s*a.latent
		return max(ops/a.flops, mem/a.memBW) * 1e3
	}
	n, h := a.heads, a.headDim
	ops := 2 * s * s * n * h
	if a.window > 0 && s > a.window {
		ops = 4 * s * a.window * n * h
	}
	mem := 4*n*s*h + a.kvBytes*2*a.kvHeads*s*h
	return max(ops/a.flops, mem/a.memBW) * 1e3
}

// genSOL is the decode-attention roofline in ms of one sequence over step cached tokens: one query
// token reads the whole KV (or the window's worth of it).
func (a *attnShape) genSOL(step float64) float64 {
	kv := step + 1
	if a.topK > 0 {
		// Sparse: the latent of the top topK tokens, after the indexer scanned every token's key.
		n, sel := a.heads, math.Min(kv, a.topK)
		ops := 2 * n * sel * (a.latent + a.kvLoRA)
		mem := a.kvBytes*sel*a.latent + a.indexerBytes*kv + 4*n*a.latent
		return max(ops/a.flops, mem/a.memBW) * 1e3
	}
	if a.latent > 0 {
		// Absorbed: every head scores the latent (latent wide) and sums it (kv_lora wide).
		n := a.heads
		ops := 2 * n * kv * (a.latent + a.kvLoRA)
		mem := a.kvBytes*kv*a.latent + 4*n*a.latent
		return max(ops/a.flops, mem/a.memBW) * 1e3
	}
	if a.window > 0 {
		kv = math.Min(kv, a.window)
	}
	n, h := a.heads, a.headDim
	ops := 4 * n * h * kv
	mem := a.kvBytes*2*a.kvHeads*kv*h + 4*n*h
	return max(ops/a.flops, mem/a.memBW) * 1e3
}

// moeSOL is the fused-MoE roofline in ms for tokens tokens: gated expert MLPs (3 matrices) at the
// expert dtype's peak, or reading the experts the tokens touch, whichever is slower.
func (r *roofline) moeSOL(tokens float64, k moeKey, flops float64) float64 {
	h, in := float64(k.hidden), float64(k.inter)/float64(k.tp)
	ops := 2 * tokens * float64(k.topk) * 3 * h * in
	touched := math.Min(float64(k.experts)/float64(k.ep), tokens*float64(k.topk))
	mem := touched*3*h*in*bytesOf(k.dtype) + 4*tokens*h
	return max(ops/flops, mem/r.memBW) * 1e3
}

// mlaBmmSOL is the roofline in ms of one of MLA's absorbed-decode batched GEMMs for tok tokens over
// heads heads: per head a (kv_lora_rank 512) × (128) weight, tok × heads × 512 × 128 multiply-adds.
func (r *roofline) mlaBmmSOL(tok, heads, flops, elem float64) float64 {
	return max(2*tok*heads*128*512/flops, (elem*heads*128*512+2*tok*heads*(128+512))/r.memBW) * 1e3
}
