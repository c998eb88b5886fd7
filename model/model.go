package model

import (
	"errors"
	"fmt"
)

// Model is a decoder-only transformer's architecture: the numbers of its config.json that decide how
// much memory it takes and how much work a token costs. The zero value of an optional feature (biases,
// norms, sliding windows, MLA) means the model does not have it.
type Model struct {
	Name           string // catalog name, e.g. "llama-3.1-8b"; for FromHFConfig, the checkpoint directory's name
	Layers         int    // num_hidden_layers (not counting multi-token-prediction layers)
	Hidden         int    // hidden_size
	Heads, KVHeads int    // num_attention_heads, num_key_value_heads
	HeadDim        int    // per-head dimension of q and k (MLA: qk_nope_head_dim + qk_rope_head_dim)
	Intermediate   int    // dense MLP size (for MoE models: of the dense layers, if any; 0 if none)
	Vocab          int    // vocab_size
	TiedEmbeddings bool   // the LM head reuses the input embedding matrix
	Dtype          string // weights dtype in the HF config ("bfloat16", "float16", ...)

	// MaxPositions is max_position_embeddings: the context vLLM serves by default (its max_model_len);
	// 0 when unknown.
	MaxPositions int
	// BOS is the token the model's tokenizer puts before every prompt (tokenizer.json's
	// post-processor), when AddsBOS: Llama-3's <|begin_of_text|>, DeepSeek-V3's <｜begin▁of▁sentence｜>.
	BOS     uint32
	AddsBOS bool

	// ReplyHeader is how many tokens the model's chat format opens every reply with that carry no
	// text, so a streaming client sees its first token after them: gpt-oss's harmony format opens
	// each reply with <|channel|>analysis<|message|> (token ids 200005, 35644, 200008: openai/harmony's
	// README), for which vLLM's chat stream sends no chunk (stream_harmony.py,
	// extract_harmony_streaming_delta: no delta without text). Zero for the others: their replies'
	// first token is text (a prompt's <think> is the chat template's).
	ReplyHeader int

	// The published checkpoint's weight format where it is not Dtype (config.json's quantization_config):
	// the default of --quantization and --moe-quantization. Quantization is "fp8" (per-tensor scales),
	// "fp8_block" (128×128 block scales) or "mxfp4" (gpt-oss: the routed experts in MXFP4, every other
	// weight in Dtype); MoEQuantization is set only where the experts alone differ ("int4_wo": Kimi-K2.5's
	// INT4 experts beside bfloat16 layers). Both empty: the weights are in Dtype.
	Quantization    string
	MoEQuantization string

	// Mixture of experts; all zero for a dense model.
	Experts         int // routed experts per MoE layer
	ExpertsPerToken int // routed experts each token visits (top-k)
	MoEIntermediate int // per-expert MLP size
	SharedExperts   int // experts every token visits, each of MoEIntermediate size (DeepSeek)
	DenseLayers     int // leading dense layers in a MoE model (DeepSeek's first_k_dense_replace)

	// Details that change parameter counts, not shapes.
	QKVBias    bool // q, k and v projections have biases (Qwen2; attention_bias elsewhere)
	OBias      bool // the attention output projection has a bias (attention_bias in Llama, Qwen3, gpt-oss)
	QKNorm     bool // an RMSNorm over head_dim on q and on k (Qwen3)
	Sinks      bool // one learned attention-sink logit per head per layer (gpt-oss)
	MLPBias    bool // MLP and expert projections have biases (mlp_bias in Llama; gpt-oss experts)
	RouterBias bool // a bias per expert on the router (gpt-oss's router bias, DeepSeek's e_score_correction_bias)

	// QKNormAllHeads: q and k are each normalised by one RMSNorm over all their heads together
	// (MiniMax-M2's use_qk_norm with qk_norm_type "per_layer"): Heads×HeadDim + KVHeads×HeadDim
	// weights per layer, sharded with the heads. Under tensor parallelism each GPU holds part of a
	// token's q and k, so vLLM all-reduces the two partial sums of squares per token in every layer
	// (MiniMaxText01RMSNormTP.forward_qk).
	QKNormAllHeads bool

	// Sliding-window attention (gpt-oss): SlidingLayers of the Layers attend only to the last
	// SlidingWindow tokens, so their KV cache stops growing there. Zero when every layer is full attention.
	SlidingWindow int
	SlidingLayers int

	// Hybrid linear attention (Qwen3.5): LinearLayers of the Layers are Gated DeltaNet layers
	// (layer_types "linear_attention"), which keep a fixed recurrent state per request instead of a KV
	// cache; the rest are full attention. Such a layer projects the hidden state to q and k
	// (LinearKeyHeads × LinearKeyHeadDim each), v and the output gate z (LinearValueHeads ×
	// LinearValueHeadDim each) and the per-value-head decay and beta gates, runs a causal depthwise
	// convolution of LinearConvKernel taps over q, k and v and the gated delta rule, and projects the
	// values back. Zero when every layer is full attention.
	LinearLayers       int // count of "linear_attention" in layer_types
	LinearKeyHeads     int // linear_num_key_heads
	LinearValueHeads   int // linear_num_value_heads
	LinearKeyHeadDim   int // linear_key_head_dim
	LinearValueHeadDim int // linear_value_head_dim
	LinearConvKernel   int // linear_conv_kernel_dim

	// AttnOutputGate: the full-attention layers' q projection also yields a sigmoid gate per head
	// and channel on the attention output (attn_output_gate: q_proj has 2 × Heads × HeadDim outputs).
	AttnOutputGate bool

	// Multi-head latent attention (DeepSeek-V2/V3). KVLoRARank > 0 marks an MLA model: its KV cache holds
	// one compressed latent (KVLoRARank) plus one shared rotary key (QKRopeHeadDim) per token per layer.
	QLoRARank     int // rank of the query down-projection; 0 when queries are projected directly
	KVLoRARank    int // kv_lora_rank
	QKNopeHeadDim int // qk_nope_head_dim
	QKRopeHeadDim int // qk_rope_head_dim
	VHeadDim      int // v_head_dim

	// DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): a lightning indexer (IndexHeads heads of
	// IndexHeadDim over its own fp8 key cache) scores every cached token and the MLA attention reads
	// only each query's top IndexTopK. IndexTopK > 0 marks a DSA model.
	IndexTopK    int // index_topk
	IndexHeads   int // index_n_heads
	IndexHeadDim int // index_head_dim
}

// MoE reports whether m has routed experts.
func (m *Model) MoE() bool { return m.Experts > 0 }

// MLA reports whether m uses multi-head latent attention.
func (m *Model) MLA() bool { return m.KVLoRARank > 0 }

// DSA reports whether m's MLA attention is DeepSeek sparse attention.
func (m *Model) DSA() bool { return m.IndexTopK > 0 }

// FullAttentionLayers is the number of layers with a KV cache over the whole context: all but the
// sliding-window and linear-attention ones.
func (m *Model) FullAttentionLayers() int { return m.Layers - m.SlidingLayers - m.LinearLayers }

// MoELayers is the number of layers with experts: all but the leading dense ones.
func (m *Model) MoELayers() int {
	if !m.MoE() {
		return 0
	}
	return m.Layers - m.DenseLayers
}

// Validate checks that m's numbers describe a buildable model. Errors name the config.json key.
func (m *Model) Validate() error {
	var errs []error
	positive := func(key string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s = %d, want > 0", key, v))
		}
	}
	nonNegative := func(key string, v int) {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s = %d, want >= 0", key, v))
		}
	}
	positive("num_hidden_layers", m.Layers)
	positive("hidden_size", m.Hidden)
	positive("num_attention_heads", m.Heads)
	positive("head_dim", m.HeadDim)
	positive("vocab_size", m.Vocab)
	if m.Dtype == "" {
		errs = append(errs, errors.New("torch_dtype is empty"))
	}
	if !m.MLA() {
		positive("num_key_value_heads", m.KVHeads)
		if m.KVHeads > 0 && m.Heads%m.KVHeads != 0 {
			errs = append(errs, fmt.Errorf("num_attention_heads = %d is not a multiple of num_key_value_heads = %d", m.Heads, m.KVHeads))
		}
	} else {
		positive("qk_nope_head_dim", m.QKNopeHeadDim)
		positive("qk_rope_head_dim", m.QKRopeHeadDim)
		positive("v_head_dim", m.VHeadDim)
		nonNegative("q_lora_rank", m.QLoRARank)
		if m.HeadDim != m.QKNopeHeadDim+m.QKRopeHeadDim {
			errs = append(errs, fmt.Errorf("head_dim = %d, want qk_nope_head_dim + qk_rope_head_dim = %d", m.HeadDim, m.QKNopeHeadDim+m.QKRopeHeadDim))
		}
	}
	if m.DSA() {
		if !m.MLA() {
			errs = append(errs, fmt.Errorf("index_topk = %d without kv_lora_rank: sparse attention is over MLA", m.IndexTopK))
		}
		positive("index_n_heads", m.IndexHeads)
		positive("index_head_dim", m.IndexHeadDim)
	}
	nonNegative("index_topk", m.IndexTopK)
	nonNegative("intermediate_size", m.Intermediate)
	nonNegative("num_experts", m.Experts)
	nonNegative("n_shared_experts", m.SharedExperts)
	nonNegative("first_k_dense_replace", m.DenseLayers)
	nonNegative("sliding_window", m.SlidingWindow)
	nonNegative("reply header tokens", m.ReplyHeader)
	nonNegative("layer_types (sliding layers)", m.SlidingLayers)
	if m.MoE() {
		if m.ExpertsPerToken <= 0 || m.ExpertsPerToken > m.Experts {
			errs = append(errs, fmt.Errorf("num_experts_per_tok = %d, want 1..%d (the number of experts)", m.ExpertsPerToken, m.Experts))
		}
		positive("moe_intermediate_size", m.MoEIntermediate)
		if m.DenseLayers > m.Layers {
			errs = append(errs, fmt.Errorf("first_k_dense_replace = %d exceeds num_hidden_layers = %d", m.DenseLayers, m.Layers))
		}
		if m.DenseLayers > 0 {
			positive("intermediate_size", m.Intermediate)
		}
	} else {
		positive("intermediate_size", m.Intermediate)
		if m.ExpertsPerToken != 0 || m.SharedExperts != 0 || m.DenseLayers != 0 || m.MoEIntermediate != 0 {
			errs = append(errs, errors.New("expert settings without experts"))
		}
	}
	if m.QKNorm && m.QKNormAllHeads {
		errs = append(errs, errors.New("QK norm both per head and over all heads"))
	}
	nonNegative("layer_types (linear_attention layers)", m.LinearLayers)
	if m.LinearLayers > 0 {
		positive("linear_num_key_heads", m.LinearKeyHeads)
		positive("linear_num_value_heads", m.LinearValueHeads)
		positive("linear_key_head_dim", m.LinearKeyHeadDim)
		positive("linear_value_head_dim", m.LinearValueHeadDim)
		positive("linear_conv_kernel_dim", m.LinearConvKernel)
		if m.LinearKeyHeads > 0 && m.LinearValueHeads%m.LinearKeyHeads != 0 {
			errs = append(errs, fmt.Errorf("linear_num_value_heads = %d is not a multiple of linear_num_key_heads = %d", m.LinearValueHeads, m.LinearKeyHeads))
		}
		if m.MLA() || m.SlidingLayers > 0 {
			errs = append(errs, errors.New("linear attention layers beside MLA or sliding-window layers"))
		}
	}
	if m.LinearLayers >= m.Layers {
		errs = append(errs, fmt.Errorf("%d of %d layers are linear attention, want at least one full-attention layer", m.LinearLayers, m.Layers))
	}
	// At least one full-attention layer: KV capacity is sized by those (see KVBytesPerToken).
	if (m.SlidingWindow > 0) != (m.SlidingLayers > 0) || m.SlidingLayers >= m.Layers {
		errs = append(errs, fmt.Errorf("sliding_window = %d with %d of %d layers sliding, want a window and at least one full-attention layer",
			m.SlidingWindow, m.SlidingLayers, m.Layers))
	}
	if len(errs) == 0 {
		// Bounded before anything counts the weights in int64, which a size out of range overflowed.
		w := countWeights(m, 1, 1, func(n float64, by int) float64 { return n / float64(by) })
		if n := w.linear + w.experts + w.other; n > maxParams {
			errs = append(errs, fmt.Errorf("%.3g weights, more than 2^50 (the largest models have about 10^12): a size out of range "+
				"(num_hidden_layers = %d, hidden_size = %d, intermediate_size = %d, num_experts = %d, moe_intermediate_size = %d, vocab_size = %d)",
				n, m.Layers, m.Hidden, m.Intermediate, m.Experts, m.MoEIntermediate, m.Vocab))
		}
	}
	return errors.Join(errs...)
}

// maxParams bounds a model's weights: a thousand times the largest served models', and, at a few bytes a
// weight, far from int64's limit.
const maxParams = 1 << 50
