package model

import (
	"fmt"
	"slices"
	"strings"
)

// entry is one catalog model and the Hugging Face ids that share its architecture (quantized checkpoints
// and instruct/base variants have the same config numbers). A model published only in a quantized format
// carries that format as its default (Model.Quantization, Model.MoEQuantization); an id of a quantized
// checkpoint of a 16-bit model carries its own (formats), so that id replays the weights it names
// unless --quantization says otherwise.
type entry struct {
	ids []string
	m   Model
	// formats: the ids among ids that name a quantized checkpoint, and its format as
	// Model.Quantization names it (from the checkpoint's quantization_config).
	formats map[string]string
}

// catalog holds the built-in models. Every number is copied from the config.json of the first id; the BOS
// from its tokenizer.json's post-processor (set only where it adds one: Llama-3 and DeepSeek-V3; Qwen3's
// and gpt-oss's add none, MiniMax's and Kimi's are not modelled).
var catalog = []entry{
	{
		// https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/blob/main/config.json
		ids: []string{"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", "nvidia/Llama-3.1-8B-Instruct-FP8",
			"meta-llama/Meta-Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B"},
		// nvidia/Llama-3.1-8B-Instruct-FP8 is a ModelOpt checkpoint (hf_quant_config.json quant_algo FP8:
		// per-tensor scales; vLLM's modelopt fp8 method).
		formats: map[string]string{"nvidia/Llama-3.1-8B-Instruct-FP8": "fp8"},
		m: Model{
			Name: "llama-3.1-8b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
			Intermediate: 14336, Vocab: 128256, Dtype: "bfloat16",
			MaxPositions: 131072, BOS: 128000, AddsBOS: true,
		},
	},
	{
		// https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
		ids: []string{"meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-70B-Instruct",
			"meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B-Instruct"},
		m: Model{
			Name: "llama-3.1-70b", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128,
			Intermediate: 28672, Vocab: 128256, Dtype: "bfloat16",
			MaxPositions: 131072, BOS: 128000, AddsBOS: true,
		},
	},
	{
		// https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json
		ids: []string{"Qwen/Qwen3-32B", "Qwen/Qwen3-32B-FP8"},
		// The -FP8 checkpoint: quantization_config quant_method fp8, weight_block_size [128, 128].
		formats: map[string]string{"Qwen/Qwen3-32B-FP8": "fp8_block"},
		m: Model{
			Name: "qwen3-32b", Layers: 64, Hidden: 5120, Heads: 64, KVHeads: 8, HeadDim: 128,
			Intermediate: 25600, Vocab: 151936, Dtype: "bfloat16", QKNorm: true,
			MaxPositions: 40960,
		},
	},
	{
		// https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json (intermediate_size 6144 is
		// unused: decoder_sparse_step 1 and no mlp_only_layers make every layer MoE)
		ids: []string{"Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B-FP8"},
		// The -FP8 checkpoint: quantization_config quant_method fp8, weight_block_size [128, 128].
		formats: map[string]string{"Qwen/Qwen3-30B-A3B-FP8": "fp8_block"},
		m: Model{
			Name: "qwen3-30b-a3b", Layers: 48, Hidden: 2048, Heads: 32, KVHeads: 4, HeadDim: 128,
			Vocab: 151936, Dtype: "bfloat16", QKNorm: true,
			Experts: 128, ExpertsPerToken: 8, MoEIntermediate: 768,
			MaxPositions: 40960,
		},
	},
	{
		// https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json (intermediate_size 12288 unused,
		// as for qwen3-30b-a3b)
		ids: []string{"Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B-FP8"},
		// The -FP8 checkpoint: quantization_config quant_method fp8, weight_block_size [128, 128].
		formats: map[string]string{"Qwen/Qwen3-235B-A22B-FP8": "fp8_block"},
		m: Model{
			Name: "qwen3-235b-a22b", Layers: 94, Hidden: 4096, Heads: 64, KVHeads: 4, HeadDim: 128,
			Vocab: 151936, Dtype: "bfloat16", QKNorm: true,
			Experts: 128, ExpertsPerToken: 8, MoEIntermediate: 1536,
			MaxPositions: 40960,
		},
	},
	{
		// https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json: attention_bias true, a biased
		// router, biased experts (intermediate_size is the expert size), attention sinks, and layer_types
		// alternating sliding_attention (window 128) and full_attention. The config has no torch_dtype
		// (see FromHFConfig); the checkpoint stores experts in MXFP4 (quantization_config), the rest in
		// bfloat16.
		ids: []string{"openai/gpt-oss-120b"},
		m: Model{
			Name: "gpt-oss-120b", Layers: 36, Hidden: 2880, Heads: 64, KVHeads: 8, HeadDim: 64,
			Vocab: 201088, Dtype: "bfloat16", Quantization: "mxfp4",
			Experts: 128, ExpertsPerToken: 4, MoEIntermediate: 2880,
			QKVBias: true, OBias: true, Sinks: true, MLPBias: true, RouterBias: true,
			SlidingWindow: 128, SlidingLayers: 18,
			MaxPositions: 131072, ReplyHeader: 3,
		},
	},
	{
		// https://huggingface.co/MiniMaxAI/MiniMax-M2.5/blob/main/config.json (MiniMaxM2ForCausalLM,
		// model_type minimax_m2), as reproduced in full, less its quantization_config, in Ascend's
		// MiniMax-2.5 W8A8 quantization guide. attn_type_list is 1 for all 62 layers: every layer is
		// full softmax GQA, no lightning (linear) attention. Every layer is MoE: intermediate_size 1536
		// is the expert size (num_local_experts 256, num_experts_per_tok 8, shared_intermediate_size 0),
		// sigmoid scoring with an e_score_correction_bias (use_routing_bias). use_qk_norm with
		// qk_norm_type per_layer (one RMSNorm over all heads); rotary_dim 64 of head_dim 128 (partial
		// RoPE, no effect on sizes or timing); tie_word_embeddings false. The 3 MTP modules
		// (num_mtp_modules) are not counted. The checkpoint stores the linear layers and experts in fp8
		// with 128×128 block scales (quantization_config: quant_method fp8, weight_block_size
		// [128, 128]; gate, e_score_correction_bias and lm_head not converted). vLLM (minimax_m2.py)
		// keeps the router (gate) in float32; the weight count and the op-level timing take it in the
		// model's dtype (the GEMM tables have no float32 rows): 98 MB less router memory per GPU, and
		// a router GEMM priced at bfloat16 tensor-core speed. Published: 230B total, 10B active
		// parameters.
		ids: []string{"MiniMaxAI/MiniMax-M2.5"},
		m: Model{
			Name: "minimax-m2.5", Layers: 62, Hidden: 3072, Heads: 48, KVHeads: 8, HeadDim: 128,
			Vocab: 200064, Dtype: "bfloat16", Quantization: "fp8_block", QKNormAllHeads: true,
			Experts: 256, ExpertsPerToken: 8, MoEIntermediate: 1536, RouterBias: true,
			MaxPositions: 196608,
		},
	},
	{
		// Qwen/Qwen3.5-397B-A17B's text model (Qwen3_5MoeForConditionalGeneration, text_config; the
		// vision tower is not modelled), as AIConfigurator records it: ai-dynamo/aiconfigurator
		// src/aiconfigurator/model_configs/Qwen--Qwen3.5-397B-A17B_config.json. 60 layers, layer_types
		// three linear_attention then one full_attention (full_attention_interval 4): 45 Gated
		// DeltaNet layers (16 key heads and 64 value heads of 128, conv kernel 4) and 15 gated GQA
		// layers (32 heads, 2 KV heads of 256, attn_output_gate). Every layer is MoE (mlp_only_layers
		// empty): 512 experts of 1,024, top 10, one shared expert of 1,024 (shared_expert_intermediate_size).
		// Untied embeddings, vocabulary 248,320. mtp_num_hidden_layers 1 is not counted. The published
		// checkpoint is bf16; the rows that ran it in fp8 say so (--quantization).
		ids: []string{"Qwen/Qwen3.5-397B-A17B"},
		m: Model{
			Name: "qwen3.5-397b-a17b", Layers: 60, Hidden: 4096, Heads: 32, KVHeads: 2, HeadDim: 256,
			Vocab: 248320, Dtype: "bfloat16", QKNorm: true, AttnOutputGate: true,
			Experts: 512, ExpertsPerToken: 10, MoEIntermediate: 1024, SharedExperts: 1,
			LinearLayers: 45, LinearKeyHeads: 16, LinearValueHeads: 64, LinearKeyHeadDim: 128,
			LinearValueHeadDim: 128, LinearConvKernel: 4,
		},
	},
	{
		// https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json: MLA, 256 routed experts
		// (top 8, noaux_tc routing with an e_score_correction_bias) plus one shared, the first 3 layers
		// dense. num_nextn_predict_layers 1 (the MTP layer) is not counted. Stored in fp8 (block 128×128).
		ids: []string{"deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3-0324"},
		m:   deepseekV3("deepseek-v3"),
	},
	{
		// https://huggingface.co/deepseek-ai/DeepSeek-R1/blob/main/config.json: the DeepSeek-V3 architecture.
		ids: []string{"deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1-0528"},
		m:   deepseekV3("deepseek-r1"),
	},
	{
		// moonshotai/Kimi-K2.5's text model (KimiK25ForConditionalGeneration; its vision tower is not
		// modelled), as AIConfigurator records it: ai-dynamo/aiconfigurator
		// src/aiconfigurator/model_configs/moonshotai--Kimi-K2.5_config.json — DeepSeek-V3's
		// architecture (MLA with q_lora 1,536, kv_lora 512, rope 64, nope 128, v 128) with 64 heads, 61
		// layers, hidden 7,168, 384 routed experts of 2,048 (top 8) plus one shared, the first layer
		// dense (intermediate 18,432), vocabulary 163,840, untied embeddings. The checkpoint stores the
		// routed experts in int4 (compressed-tensors, group 32) and everything else in bf16
		// (AIConfigurator: gemm_quant_mode bfloat16, moe_quant_mode int4_wo).
		ids: []string{"moonshotai/Kimi-K2.5"},
		m: Model{
			Name: "kimi-k2.5", Layers: 61, Hidden: 7168, Heads: 64, KVHeads: 64, HeadDim: 128 + 64,
			Intermediate: 18432, Vocab: 163840, Dtype: "bfloat16", MoEQuantization: "int4_wo",
			Experts: 384, ExpertsPerToken: 8, MoEIntermediate: 2048, SharedExperts: 1, DenseLayers: 1,
			RouterBias: true,
			QLoRARank:  1536, KVLoRARank: 512, QKNopeHeadDim: 128, QKRopeHeadDim: 64, VHeadDim: 128,
			MaxPositions: 262144,
		},
	},
	{
		// zai-org/GLM-5 (GlmMoeDsaForCausalLM), as AIConfigurator records it:
		// ai-dynamo/aiconfigurator src/aiconfigurator/model_configs/zai-org--GLM-5-FP8_config.json — MLA
		// (q_lora 2,048, kv_lora 512, rope 64, nope 192, v 256) with 64 heads, 78 layers, hidden 6,144,
		// 256 routed experts of 2,048 (top 8) plus one shared, the first 3 layers dense (intermediate
		// 12,288), vocabulary 154,880, untied embeddings; DeepSeek sparse attention: a lightning indexer
		// of 32 heads of 128 picks each query's top 2,048 keys (index_n_heads, index_head_dim,
		// index_topk). The -FP8 checkpoint stores the linear layers and experts in fp8 with 128×128
		// blocks.
		ids:     []string{"zai-org/GLM-5", "zai-org/GLM-5-FP8", "zhipuai/GLM-5"},
		formats: map[string]string{"zai-org/GLM-5-FP8": "fp8_block"},
		m: Model{
			Name: "glm-5", Layers: 78, Hidden: 6144, Heads: 64, KVHeads: 64, HeadDim: 192 + 64,
			Intermediate: 12288, Vocab: 154880, Dtype: "bfloat16",
			Experts: 256, ExpertsPerToken: 8, MoEIntermediate: 2048, SharedExperts: 1, DenseLayers: 3,
			RouterBias: true,
			QLoRARank:  2048, KVLoRARank: 512, QKNopeHeadDim: 192, QKRopeHeadDim: 64, VHeadDim: 256,
			IndexTopK: 2048, IndexHeads: 32, IndexHeadDim: 128,
		},
	},
}

func deepseekV3(name string) Model {
	return Model{
		Name: name, Layers: 61, Hidden: 7168, Heads: 128, KVHeads: 128, HeadDim: 128 + 64,
		Intermediate: 18432, Vocab: 129280, Dtype: "bfloat16", Quantization: "fp8_block",
		Experts: 256, ExpertsPerToken: 8, MoEIntermediate: 2048, SharedExperts: 1, DenseLayers: 3,
		RouterBias: true,
		QLoRARank:  1536, KVLoRARank: 512, QKNopeHeadDim: 128, QKRopeHeadDim: 64, VHeadDim: 128,
		MaxPositions: 163840, BOS: 0, AddsBOS: true,
	}
}

// byName indexes the catalog by lower-case catalog name and Hugging Face id.
var byName = func() map[string]*entry {
	idx := make(map[string]*entry)
	for i := range catalog {
		e := &catalog[i]
		for _, k := range append([]string{e.m.Name}, e.ids...) {
			k = strings.ToLower(k)
			if idx[k] != nil {
				panic("model: duplicate catalog key " + k)
			}
			idx[k] = e
		}
	}
	return idx
}()

// Lookup returns a copy of the catalog model with the given name or Hugging Face id, case-insensitively
// (e.g. "llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "nvidia/Llama-3.1-8B-Instruct-FP8"). An id
// of a quantized checkpoint gives the model in that format (Quantization: "nvidia/Llama-3.1-8B-Instruct-FP8"
// is llama-3.1-8b in fp8).
func Lookup(name string) (*Model, error) {
	e := byName[strings.ToLower(strings.TrimSpace(name))]
	if e == nil {
		return nil, fmt.Errorf("model: unknown model %q (catalog: %s; or give a Hugging Face config.json)",
			name, strings.Join(Names(), ", "))
	}
	m := e.m
	for id, q := range e.formats {
		if strings.EqualFold(id, strings.TrimSpace(name)) {
			m.Quantization = q
		}
	}
	return &m, nil
}

// Names returns the catalog names, sorted.
func Names() []string {
	names := make([]string, len(catalog))
	for i, e := range catalog {
		names[i] = e.m.Name
	}
	slices.Sort(names)
	return names
}

// HFIDs returns the Hugging Face ids that Lookup maps to the catalog model name, the one whose
// config.json the entry copies first; nil for an unknown name.
func HFIDs(name string) []string {
	e := byName[strings.ToLower(strings.TrimSpace(name))]
	if e == nil {
		return nil
	}
	return slices.Clone(e.ids)
}
