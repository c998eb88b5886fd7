package model

import (
	"fmt"
	"math"
)

// Params is the total number of weights: embeddings, attention, MLPs or all experts, norms, and the LM
// head unless it is tied.
func (m *Model) Params() int64 {
	w := m.weights(1, 1)
	return w.linear + w.experts + w.other
}

// ActiveParams is the number of weights one token uses: Params less the routed experts it does not
// visit (a MoE token visits ExpertsPerToken routed experts and every shared one per MoE layer). Like
// Params it counts the input embedding, which some model cards leave out of their "active" figure.
func (m *Model) ActiveParams() int64 {
	idle := int64(m.Experts-m.ExpertsPerToken) * int64(m.MoELayers()) * m.expertParams()
	return m.Params() - idle
}

// KVBytesPerToken is the KV cache one token of context takes on one GPU with tensor parallelism tp:
// layers × 2 (K and V) × KV heads per GPU × head_dim × kvDtypeBytes. KV heads are split tp ways, but a
// GPU always holds at least one: with fewer KV heads than GPUs they are replicated.
//
// MLA models (DeepSeek) cache one latent of KVLoRARank + QKRopeHeadDim values per token per layer, the
// same on every GPU, so tp does not divide it. DSA models (GLM-5) also cache the indexer's key per
// token per layer: IndexHeadDim fp8 values and one fp32 scale per 128 of them, whatever the KV
// cache dtype (SGLang's NSA pool; AIConfigurator's indexer_cache_entry_bytes).
//
// Sliding-window layers are not counted: their cache holds at most SlidingWindow tokens per request,
// whatever the context, and vLLM sizes its block pool by the full-attention layers (its hybrid allocator
// gives each block to one layer group). Nor are linear-attention layers, whose recurrent state has one
// size whatever the context (SGLang and vLLM keep it in a pool of their own). For other models this is
// every layer.
//
// It panics if kvDtypeBytes or tp is not positive.
func (m *Model) KVBytesPerToken(kvDtypeBytes, tp int) int {
	mustPositive("KVBytesPerToken", kvDtypeBytes, tp)
	layers := m.FullAttentionLayers()
	if m.MLA() {
		return layers * ((m.KVLoRARank+m.QKRopeHeadDim)*kvDtypeBytes + m.IndexerBytesPerToken())
	}
	return layers * 2 * m.kvHeadsPerGPU(tp) * m.HeadDim * kvDtypeBytes
}

// IndexerBytesPerToken is the indexer's cache per token per layer of a DSA model (0 otherwise): its key
// of IndexHeadDim fp8 values and one fp32 scale per 128 of them.
func (m *Model) IndexerBytesPerToken() int {
	if !m.DSA() {
		return 0
	}
	return m.IndexHeadDim + (m.IndexHeadDim+127)/128*4
}

// WeightBytes is the weight memory of one GPU with tensor parallelism tp when every weight takes
// dtypeBytes bytes. It panics if dtypeBytes or tp is not positive.
func (m *Model) WeightBytes(dtypeBytes, tp int) int64 {
	mustPositive("WeightBytes", dtypeBytes, tp)
	w := m.weights(tp, tp)
	return (w.linear + w.experts + w.other) * int64(dtypeBytes)
}

// Precision is how many bytes a weight takes in each class of weights, for quantized deployments, which
// quantize the decoder's linear layers and experts but keep embeddings, LM head, norms, routers and biases
// in the model's dtype. BytesPerWeight converts format names.
type Precision struct {
	Linear  float64 // attention projections and dense MLPs of the decoder layers
	Experts float64 // routed and shared experts
	Other   float64 // embeddings, LM head, norms, routers, biases, attention sinks
}

// QuantizedWeightBytes is the weight memory of one GPU at precision p with tensor parallelism tp and
// the routed experts sharded over expertGPUs GPUs (tp, or more with attention data parallelism, which
// spreads them over all of a worker's GPUs), rounded up to a whole byte. It panics if tp or
// expertGPUs is not positive.
func (m *Model) QuantizedWeightBytes(p Precision, tp, expertGPUs int) int64 {
	mustPositive("QuantizedWeightBytes", tp, expertGPUs)
	w := m.weights(tp, expertGPUs)
	return int64(math.Ceil(float64(w.linear)*p.Linear + float64(w.experts)*p.Experts + float64(w.other)*p.Other))
}

// mustPositive panics unless both of fn's integer arguments (dtype bytes, tp, GPU counts) are positive.
func mustPositive(fn string, a, b int) {
	if a <= 0 || b <= 0 {
		panic(fmt.Sprintf("model: %s(%d, %d): dtype bytes, tp and GPU counts must be positive", fn, a, b))
	}
}

// kvHeadsPerGPU is the number of KV heads one GPU holds: KVHeads/tp, rounded up, at least one.
func (m *Model) kvHeadsPerGPU(tp int) int {
	return max(1, (m.KVHeads+tp-1)/tp)
}

// weightCount is a number of weights on one GPU by class (see Precision).
type weightCount = counts[int64]

// counts are weights by class, counted exactly (int64) or, to bound a model before it is counted
// exactly, approximately (float64, which cannot overflow).
type counts[T int64 | float64] struct {
	linear, experts, other T
}

// weights counts the weights one GPU holds (see countWeights).
func (m *Model) weights(tp, expertGPUs int) weightCount {
	return countWeights(m, tp, expertGPUs, ceilDiv)
}

// countWeights counts the weights one GPU holds with tensor parallelism tp and the routed experts (with
// their biases) sharded over expertGPUs GPUs, split by div; countWeights(m, 1, 1, ...) is the whole model.
// Any other weight is sharded (split tp ways) or replicated; vLLM shards column-parallel biases with their
// matrices and replicates row-parallel ones.
func countWeights[T int64 | float64](m *Model, tp, expertGPUs int, div func(T, int) T) counts[T] {
	var sharded, replicated, routed counts[T]
	var (
		h  = T(m.Hidden)
		hd = T(m.HeadDim)
		nh = T(m.Heads)
		l  = T(m.Layers)
	)
	one := func(b bool) T {
		if b {
			return 1
		}
		return 0
	}

	// Embeddings, LM head and the final norm.
	sharded.other += T(m.Vocab) * h
	if !m.TiedEmbeddings {
		sharded.other += T(m.Vocab) * h
	}
	replicated.other += h

	// Per layer: the norms before attention and before the MLP.
	replicated.other += l * 2 * h

	// Linear attention (Gated DeltaNet): in_proj_qkvz and in_proj_ba, the depthwise convolution over q,
	// k and v, A_log and dt_bias per value head, the gated RMSNorm over a value head, out_proj.
	if ll := T(m.LinearLayers); ll > 0 {
		qk := T(m.LinearKeyHeads) * T(m.LinearKeyHeadDim)
		v := T(m.LinearValueHeads) * T(m.LinearValueHeadDim)
		nv := T(m.LinearValueHeads)
		sharded.linear += ll * h * (2*qk + 2*v + 2*nv) // in_proj_qkvz, in_proj_ba
		sharded.linear += ll * v * h                   // out_proj
		sharded.other += ll * (2*qk + v) * T(m.LinearConvKernel)
		sharded.other += ll * 2 * nv
		replicated.other += ll * T(m.LinearValueHeadDim)
		l -= ll // the attention below is the full-attention layers'
	}

	// Attention.
	if m.MLA() {
		qr, kvr := T(m.QLoRARank), T(m.KVLoRARank)
		rope, nope, v := T(m.QKRopeHeadDim), T(m.QKNopeHeadDim), T(m.VHeadDim)
		if qr > 0 {
			replicated.linear += l * h * qr    // q_a_proj
			replicated.other += l * qr         // q_a_layernorm
			sharded.linear += l * qr * nh * hd // q_b_proj
		} else {
			sharded.linear += l * h * nh * hd // q_proj
		}
		replicated.linear += l * h * (kvr + rope)   // kv_a_proj_with_mqa
		replicated.other += l * kvr                 // kv_a_layernorm
		sharded.linear += l * kvr * nh * (nope + v) // kv_b_proj
		sharded.linear += l * nh * v * h            // o_proj
		replicated.other += l * one(m.OBias) * h    // o_proj bias
	} else {
		// K and V heads replicated below one per GPU count once on every GPU.
		kv := T(m.kvHeadsPerGPU(tp)) * T(tp) * hd
		sharded.linear += l * 2 * h * nh * hd                     // q_proj, o_proj
		sharded.linear += l * one(m.AttnOutputGate) * h * nh * hd // q_proj's gate half
		sharded.linear += l * 2 * h * kv                          // k_proj, v_proj
		sharded.other += l * one(m.QKVBias) * (nh*hd + 2*kv)
		replicated.other += l * one(m.OBias) * h
		replicated.other += l * one(m.QKNorm) * 2 * hd
		sharded.other += l * one(m.QKNormAllHeads) * (nh + T(m.KVHeads)) * hd
		sharded.other += l * one(m.Sinks) * nh
	}

	// Dense MLPs: gate, up and down projections.
	dense := T(m.Layers - m.MoELayers())
	in := T(m.Intermediate)
	sharded.linear += dense * 3 * h * in
	sharded.other += dense * one(m.MLPBias) * 2 * in
	replicated.other += dense * one(m.MLPBias) * h

	// Experts (routed and shared) and routers.
	if m.MoE() {
		moe := T(m.MoELayers())
		e, se := T(m.Experts), T(m.SharedExperts)
		mlp := 3 * h * T(m.MoEIntermediate)
		bias := one(m.MLPBias) * (2*T(m.MoEIntermediate) + h) // expertParams less mlp
		routed.experts += moe * e * mlp
		routed.other += moe * e * bias
		sharded.experts += moe * se * mlp
		sharded.other += moe * se * bias
		replicated.other += moe * e * h // router
		replicated.other += moe * one(m.RouterBias) * e
	}

	return counts[T]{
		linear:  replicated.linear + div(sharded.linear, tp),
		experts: replicated.experts + div(sharded.experts, tp) + div(routed.experts, expertGPUs),
		other:   replicated.other + div(sharded.other, tp) + div(routed.other, expertGPUs),
	}
}

// expertParams is the weights of one expert: gate, up and down projections, and their biases if any.
func (m *Model) expertParams() int64 {
	h, in := int64(m.Hidden), int64(m.MoEIntermediate)
	n := 3 * h * in
	if m.MLPBias {
		n += 2*in + h
	}
	return n
}

func ceilDiv(a int64, b int) int64 {
	return (a + int64(b) - 1) / int64(b)
}
