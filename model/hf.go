package model

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hfConfig is the subset of config.json keys FromHFConfig reads. Pointers tell a missing key from zero.
type hfConfig struct {
	ModelType         *string `json:"model_type"`
	TorchDtype        *string `json:"torch_dtype"`
	Dtype             *string `json:"dtype"` // transformers ≥ 4.56 writes dtype instead of torch_dtype
	Layers            *int    `json:"num_hidden_layers"`
	Hidden            *int    `json:"hidden_size"`
	Heads             *int    `json:"num_attention_heads"`
	KVHeads           *int    `json:"num_key_value_heads"`
	HeadDim           *int    `json:"head_dim"`
	Intermediate      *int    `json:"intermediate_size"`
	Vocab             *int    `json:"vocab_size"`
	TieWordEmbeddings *bool   `json:"tie_word_embeddings"`
	MaxPositions      *int    `json:"max_position_embeddings"`
	BOS               *int    `json:"bos_token_id"`
	AttentionBias     *bool   `json:"attention_bias"`
	MLPBias           *bool   `json:"mlp_bias"`

	// MoE: Qwen3-MoE num_experts; Mixtral and gpt-oss num_local_experts; DeepSeek n_routed_experts.
	NumExperts        *int    `json:"num_experts"`
	NumLocalExperts   *int    `json:"num_local_experts"`
	NRoutedExperts    *int    `json:"n_routed_experts"`
	ExpertsPerTok     *int    `json:"num_experts_per_tok"`
	MoEIntermediate   *int    `json:"moe_intermediate_size"`
	DecoderSparseStep *int    `json:"decoder_sparse_step"`
	MLPOnlyLayers     []int   `json:"mlp_only_layers"`
	NSharedExperts    *int    `json:"n_shared_experts"`
	FirstKDense       *int    `json:"first_k_dense_replace"`
	MoELayerFreq      *int    `json:"moe_layer_freq"`
	TopKMethod        *string `json:"topk_method"`

	// MiniMax-M2.
	UseQKNorm          *bool   `json:"use_qk_norm"`
	QKNormType         *string `json:"qk_norm_type"`
	UseRoutingBias     *bool   `json:"use_routing_bias"`
	AttnTypeList       []int   `json:"attn_type_list"`
	SharedIntermediate *int    `json:"shared_intermediate_size"`

	// Sliding windows: layer_types names each layer's attention.
	SlidingWindow *int     `json:"sliding_window"`
	LayerTypes    []string `json:"layer_types"`

	// The checkpoint's weight format.
	QuantizationConfig *struct {
		QuantMethod     string `json:"quant_method"`
		WeightBlockSize []int  `json:"weight_block_size"`
	} `json:"quantization_config"`

	// MLA.
	QLoRARank     *int `json:"q_lora_rank"`
	KVLoRARank    *int `json:"kv_lora_rank"`
	QKNopeHeadDim *int `json:"qk_nope_head_dim"`
	QKRopeHeadDim *int `json:"qk_rope_head_dim"`
	VHeadDim      *int `json:"v_head_dim"`
}

// hfTypes are the model_type values FromHFConfig understands.
var hfTypes = []string{"deepseek_v3", "gpt_oss", "llama", "minimax_m2", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe"}

// FromHFConfig reads a Hugging Face config.json (path names the file or the checkpoint directory holding
// it) of a Llama, Mistral, Mixtral, Qwen2, Qwen3, Qwen3-MoE, gpt-oss, MiniMax-M2 or DeepSeek-V3 model. The Model is
// named after the directory. Unknown keys are ignored; a missing required key is an error naming it and
// the file. Optional keys take the defaults of their transformers config class (num_key_value_heads =
// num_attention_heads, head_dim = hidden_size / num_attention_heads, tie_word_embeddings false); a
// config without torch_dtype gets "bfloat16", as vLLM serves it.
func FromHFConfig(path string) (*Model, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	m, err := c.model()
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	m.Name = filepath.Base(filepath.Dir(abs))
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	return m, nil
}

// model converts c, checking the keys its model_type needs.
func (c *hfConfig) model() (*Model, error) {
	var missing []string
	need := func(key string, v *int) int {
		if v == nil {
			missing = append(missing, key)
			return 0
		}
		return *v
	}
	opt := func(v *int, def int) int {
		if v == nil {
			return def
		}
		return *v
	}
	flag := func(v *bool) bool { return v != nil && *v }

	if c.ModelType == nil {
		return nil, fmt.Errorf("missing required field %q", "model_type")
	}
	typ := *c.ModelType
	if !slices.Contains(hfTypes, typ) {
		return nil, fmt.Errorf("model_type %q is not supported (supported: %s)", typ, strings.Join(hfTypes, ", "))
	}
	m := &Model{
		Layers:         need("num_hidden_layers", c.Layers),
		Hidden:         need("hidden_size", c.Hidden),
		Heads:          need("num_attention_heads", c.Heads),
		Vocab:          need("vocab_size", c.Vocab),
		TiedEmbeddings: flag(c.TieWordEmbeddings),
		QKVBias:        flag(c.AttentionBias),
		OBias:          flag(c.AttentionBias),
		MLPBias:        flag(c.MLPBias),
		MaxPositions:   opt(c.MaxPositions, 0),
	}
	switch {
	case c.TorchDtype != nil:
		m.Dtype = *c.TorchDtype
	case c.Dtype != nil:
		m.Dtype = *c.Dtype
	default:
		// gpt-oss's config has none. vLLM then assumes float32, which its "auto" dtype serves in
		// bfloat16 on GPUs that support it (Ampere and later).
		m.Dtype = "bfloat16"
	}
	m.KVHeads = opt(c.KVHeads, m.Heads)
	switch typ {
	case "llama", "mistral", "mixtral", "deepseek_v3":
		// Their tokenizers put bos_token_id before every prompt (Qwen's, gpt-oss's and MiniMax's none).
		if c.BOS != nil && *c.BOS >= 0 && *c.BOS <= math.MaxUint32 {
			m.BOS, m.AddsBOS = uint32(*c.BOS), true
		}
	}
	switch typ {
	case "qwen3", "qwen3_moe", "gpt_oss", "minimax_m2":
		// Their config classes default head_dim to a constant, not hidden/heads: the file must say.
		m.HeadDim = need("head_dim", c.HeadDim)
	case "deepseek_v3":
		// head_dim is derived below.
	default:
		if m.Heads > 0 {
			m.HeadDim = opt(c.HeadDim, m.Hidden/m.Heads)
		}
	}

	switch typ {
	case "llama", "mistral", "qwen2", "qwen3":
		m.Intermediate = need("intermediate_size", c.Intermediate)
	case "mixtral":
		m.Experts = need("num_local_experts", c.NumLocalExperts)
		m.ExpertsPerToken = need("num_experts_per_tok", c.ExpertsPerTok)
		m.MoEIntermediate = need("intermediate_size", c.Intermediate)
	case "qwen3_moe":
		m.Experts = need("num_experts", c.NumExperts)
		m.ExpertsPerToken = need("num_experts_per_tok", c.ExpertsPerTok)
		m.MoEIntermediate = need("moe_intermediate_size", c.MoEIntermediate)
		if step := opt(c.DecoderSparseStep, 1); step != 1 {
			return nil, fmt.Errorf("decoder_sparse_step = %d is not supported (only 1: every layer MoE)", step)
		}
		if len(c.MLPOnlyLayers) > 0 {
			return nil, fmt.Errorf("mlp_only_layers = %v is not supported (only [])", c.MLPOnlyLayers)
		}
	case "gpt_oss":
		m.Experts = need("num_local_experts", c.NumLocalExperts)
		m.ExpertsPerToken = need("num_experts_per_tok", c.ExpertsPerTok)
		m.MoEIntermediate = need("intermediate_size", c.Intermediate)
		m.MLPBias, m.RouterBias, m.Sinks = true, true, true
		m.ReplyHeader = 3 // the harmony format's <|channel|>analysis<|message|> (model.Model.ReplyHeader)
	case "minimax_m2":
		// Every layer MoE; intermediate_size is the expert size (vLLM minimax_m2.py).
		m.Experts = need("num_local_experts", c.NumLocalExperts)
		m.ExpertsPerToken = need("num_experts_per_tok", c.ExpertsPerTok)
		m.MoEIntermediate = need("intermediate_size", c.Intermediate)
		m.RouterBias = flag(c.UseRoutingBias) // e_score_correction_bias
		if n := opt(c.SharedIntermediate, 0); n != 0 {
			return nil, fmt.Errorf("shared_intermediate_size = %d is not supported (only 0: no shared expert)", n)
		}
		for i, t := range c.AttnTypeList {
			if t != 1 {
				return nil, fmt.Errorf("attn_type_list[%d] = %d is not supported (only 1: softmax attention; 0 is lightning attention)", i, t)
			}
		}
		if flag(c.UseQKNorm) {
			t := "per_layer" // what MiniMax-M2's checkpoints say
			if c.QKNormType != nil {
				t = *c.QKNormType
			}
			switch t {
			case "per_layer":
				m.QKNormAllHeads = true // one RMSNorm over all heads
			case "per_head":
				m.QKNorm = true
			default:
				return nil, fmt.Errorf("qk_norm_type %q is not supported (per_layer or per_head)", t)
			}
		}
	case "deepseek_v3":
		m.Intermediate = need("intermediate_size", c.Intermediate)
		m.Experts = need("n_routed_experts", c.NRoutedExperts)
		m.ExpertsPerToken = need("num_experts_per_tok", c.ExpertsPerTok)
		m.MoEIntermediate = need("moe_intermediate_size", c.MoEIntermediate)
		m.SharedExperts = opt(c.NSharedExperts, 0)
		m.DenseLayers = opt(c.FirstKDense, 0)
		if f := opt(c.MoELayerFreq, 1); f != 1 {
			return nil, fmt.Errorf("moe_layer_freq = %d is not supported (only 1)", f)
		}
		m.RouterBias = c.TopKMethod != nil && *c.TopKMethod == "noaux_tc" // e_score_correction_bias
		m.QLoRARank = opt(c.QLoRARank, 0)                                 // null: queries projected directly
		m.KVLoRARank = need("kv_lora_rank", c.KVLoRARank)
		m.QKNopeHeadDim = need("qk_nope_head_dim", c.QKNopeHeadDim)
		m.QKRopeHeadDim = need("qk_rope_head_dim", c.QKRopeHeadDim)
		m.VHeadDim = need("v_head_dim", c.VHeadDim)
		m.HeadDim = m.QKNopeHeadDim + m.QKRopeHeadDim
	}
	switch typ {
	case "qwen2":
		m.QKVBias, m.OBias = true, false // Qwen2 always biases q, k, v and never o
	case "qwen3", "qwen3_moe":
		m.QKNorm = true
	}

	// Sliding windows, from layer_types (gpt-oss; newer transformers write it for other models too). A
	// sliding_window without layer_types (Mistral v0.1, Qwen2's use_sliding_window) is not modelled:
	// every layer counts as full attention, an upper bound on the cache.
	switch {
	case len(c.LayerTypes) > 0:
		if len(c.LayerTypes) != m.Layers {
			return nil, fmt.Errorf("layer_types has %d entries for num_hidden_layers = %d", len(c.LayerTypes), m.Layers)
		}
		for i, t := range c.LayerTypes {
			switch t {
			case "sliding_attention":
				m.SlidingLayers++
			case "full_attention":
			default:
				return nil, fmt.Errorf("layer_types[%d] = %q is not supported (full_attention or sliding_attention)", i, t)
			}
		}
	case typ == "gpt_oss":
		missing = append(missing, "layer_types")
	}
	if m.SlidingLayers > 0 {
		m.SlidingWindow = need("sliding_window", c.SlidingWindow)
	}

	// The formats the timing model prices; others (AWQ, GPTQ, compressed-tensors, ...) leave the weights
	// in Dtype, for --quantization to override.
	if q := c.QuantizationConfig; q != nil {
		switch q.QuantMethod {
		case "fp8":
			m.Quantization = "fp8"
			if len(q.WeightBlockSize) > 0 {
				m.Quantization = "fp8_block"
			}
		case "mxfp4":
			if m.Experts == 0 {
				return nil, fmt.Errorf("quantization_config quant_method %q quantizes routed experts, and the model has none", q.QuantMethod)
			}
			m.Quantization = "mxfp4"
		}
	}

	switch len(missing) {
	case 0:
		return m, nil
	case 1:
		return nil, fmt.Errorf("missing required field %q", missing[0])
	default:
		return nil, fmt.Errorf("missing required fields %q", missing)
	}
}
