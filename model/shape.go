package model

import "fmt"

// shapeNumber is one number of a model that decides what its forward passes compute, by the
// config.json key that gives it.
type shapeNumber struct {
	key string
	v   any
}

// passShape lists the numbers of m that decide what its forward passes compute, and so what a pass
// costs on a GPU: the layers and their kinds, the hidden, head, KV-head and MLP sizes, the vocabulary
// (the LM head's GEMM), the experts and their routing, the QK norms, sliding windows, linear-attention,
// MLA and sparse-attention sizes. Left out are the name, the precision (Dtype, Quantization: those who
// compare passes compare it apart), what no pass reads (MaxPositions, BOS, ReplyHeader), and what
// changes parameter counts only (biases, attention sinks, tied embeddings: the LM head is the same GEMM).
func (m *Model) passShape() []shapeNumber {
	return []shapeNumber{
		{"num_hidden_layers", m.Layers}, {"hidden_size", m.Hidden},
		{"num_attention_heads", m.Heads}, {"num_key_value_heads", m.KVHeads}, {"head_dim", m.HeadDim},
		{"intermediate_size", m.Intermediate}, {"vocab_size", m.Vocab},
		{"num_experts", m.Experts}, {"num_experts_per_tok", m.ExpertsPerToken},
		{"moe_intermediate_size", m.MoEIntermediate}, {"n_shared_experts", m.SharedExperts},
		{"first_k_dense_replace", m.DenseLayers},
		{"QK norm per head", m.QKNorm}, {"QK norm over all heads", m.QKNormAllHeads},
		{"sliding_window", m.SlidingWindow}, {"layer_types (sliding layers)", m.SlidingLayers},
		{"layer_types (linear_attention layers)", m.LinearLayers},
		{"linear_num_key_heads", m.LinearKeyHeads}, {"linear_num_value_heads", m.LinearValueHeads},
		{"linear_key_head_dim", m.LinearKeyHeadDim}, {"linear_value_head_dim", m.LinearValueHeadDim},
		{"linear_conv_kernel_dim", m.LinearConvKernel}, {"attn_output_gate", m.AttnOutputGate},
		{"q_lora_rank", m.QLoRARank}, {"kv_lora_rank", m.KVLoRARank},
		{"qk_nope_head_dim", m.QKNopeHeadDim}, {"qk_rope_head_dim", m.QKRopeHeadDim}, {"v_head_dim", m.VHeadDim},
		{"index_topk", m.IndexTopK}, {"index_n_heads", m.IndexHeads}, {"index_head_dim", m.IndexHeadDim},
	}
}

// ShapeDiff says where o's passes differ from m's (passShape): the first number that differs, as its
// config.json key with o's value and m's ("num_hidden_layers 33, not 32"); "" where o's forward passes
// compute what m's do, whatever the two are named. A timing measured on m prices o only then.
func (m *Model) ShapeDiff(o *Model) string {
	want, got := m.passShape(), o.passShape()
	for i := range want {
		if got[i].v != want[i].v {
			return fmt.Sprintf("%s %v, not %v", want[i].key, got[i].v, want[i].v)
		}
	}
	return ""
}
