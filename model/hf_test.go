package model_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// TestFromHFConfigCatalog reads the published config.json of catalog models and expects the catalog
// entry exactly.
func TestFromHFConfigCatalog(t *testing.T) {
	for _, name := range []string{"llama-3.1-8b", "qwen3-235b-a22b", "gpt-oss-120b", "deepseek-v3"} {
		got, err := model.FromHFConfig(filepath.Join("testdata", name, "config.json"))
		if err != nil {
			t.Errorf("FromHFConfig(%s): %v", name, err)
			continue
		}
		if want := mustLookup(t, name); *got != *want {
			t.Errorf("FromHFConfig(%s) =\n%+v, want\n%+v", name, *got, *want)
		}
	}
}

func TestFromHFConfigDirectory(t *testing.T) {
	got, err := model.FromHFConfig(filepath.Join("testdata", "llama-3.1-8b"))
	if err != nil {
		t.Fatal(err)
	}
	if want := mustLookup(t, "llama-3.1-8b"); *got != *want {
		t.Errorf("FromHFConfig(dir) = %+v, want %+v", *got, *want)
	}
}

func TestFromHFConfigMixtral(t *testing.T) {
	got, err := model.FromHFConfig(filepath.Join("testdata", "mixtral-8x7b", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := model.Model{
		Name: "mixtral-8x7b", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128,
		Vocab: 32000, Dtype: "bfloat16", Experts: 8, ExpertsPerToken: 2, MoEIntermediate: 14336,
		MaxPositions: 32768, BOS: 1, AddsBOS: true,
	}
	if *got != want {
		t.Fatalf("FromHFConfig(mixtral) =\n%+v, want\n%+v", *got, want)
	}
	// Mistral AI: 46.7B total, 12.9B active.
	if p, a := got.Params(), got.ActiveParams(); p != 46702792704 || a != 12879925248 {
		t.Errorf("mixtral Params, ActiveParams = %d, %d, want 46702792704, 12879925248", p, a)
	}
}

// TestFromHFConfigFamilies checks what each model_type adds beyond the common keys.
func TestFromHFConfigFamilies(t *testing.T) {
	const common = `"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
		"vocab_size": 100, "torch_dtype": "float16"`
	tests := []struct {
		name, json string
		want       model.Model
	}{
		{
			"qwen2", `{"model_type": "qwen2", "intermediate_size": 128, "tie_word_embeddings": true, ` + common + `}`,
			model.Model{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 100,
				TiedEmbeddings: true, Dtype: "float16", QKVBias: true},
		},
		{
			"qwen3", `{"model_type": "qwen3", "intermediate_size": 128, "head_dim": 32, ` + common + `}`,
			model.Model{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 32, Intermediate: 128, Vocab: 100,
				Dtype: "float16", QKNorm: true},
		},
		{
			"llama-defaults", `{"model_type": "llama", "intermediate_size": 128, "num_hidden_layers": 2, "hidden_size": 64,
				"num_attention_heads": 4, "vocab_size": 100, "dtype": "bfloat16", "attention_bias": true, "mlp_bias": true}`,
			model.Model{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 4, HeadDim: 16, Intermediate: 128, Vocab: 100,
				Dtype: "bfloat16", QKVBias: true, OBias: true, MLPBias: true},
		},
		{
			// A per-tensor FP8 checkpoint; methods the timing model does not price stay in the dtype.
			"qwen3-fp8", `{"model_type": "qwen3", "intermediate_size": 128, "head_dim": 32,
				"quantization_config": {"quant_method": "fp8", "activation_scheme": "static"}, ` + common + `}`,
			model.Model{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 32, Intermediate: 128, Vocab: 100,
				Dtype: "float16", QKNorm: true, Quantization: "fp8"},
		},
		{
			"llama-awq", `{"model_type": "llama", "intermediate_size": 128,
				"quantization_config": {"quant_method": "awq", "bits": 4}, ` + common + `}`,
			model.Model{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 100,
				Dtype: "float16"},
		},
		{
			"mistral-sliding", `{"model_type": "mistral", "intermediate_size": 128, "sliding_window": 4096, ` + common + `}`,
			// sliding_window without layer_types: every layer counts as full attention.
			model.Model{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 128, Vocab: 100,
				Dtype: "float16"},
		},
	}
	for _, tt := range tests {
		dir := filepath.Join(t.TempDir(), tt.name)
		path := writeConfig(t, dir, tt.json)
		got, err := model.FromHFConfig(path)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		tt.want.Name = tt.name
		if *got != tt.want {
			t.Errorf("%s: FromHFConfig =\n%+v, want\n%+v", tt.name, *got, tt.want)
		}
	}
}

// TestFromHFConfigMiniMax reads a config.json with MiniMax-M2.5's numbers (the catalog entry's source)
// back into the catalog model.
func TestFromHFConfigMiniMax(t *testing.T) {
	layers := strings.TrimSuffix(strings.Repeat("1, ", 62), ", ")
	json := `{"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "num_hidden_layers": 62,
		"hidden_size": 3072, "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
		"intermediate_size": 1536, "num_local_experts": 256, "num_experts_per_tok": 8,
		"shared_intermediate_size": 0, "use_routing_bias": true, "use_qk_norm": true, "qk_norm_type": "per_layer",
		"rotary_dim": 64, "vocab_size": 200064, "max_position_embeddings": 196608, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
		"num_mtp_modules": 3, "attn_type_list": [` + layers + `],
		"quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn", "weight_block_size": [128, 128]}}`
	got, err := model.FromHFConfig(writeConfig(t, filepath.Join(t.TempDir(), "minimax-m2.5"), json))
	if err != nil {
		t.Fatal(err)
	}
	if want := mustLookup(t, "minimax-m2.5"); *got != *want {
		t.Errorf("FromHFConfig =\n%+v, want\n%+v", *got, *want)
	}
	for _, bad := range []struct{ from, to, want string }{
		{`"attn_type_list": [1, `, `"attn_type_list": [0, `, "attn_type_list[0] = 0 is not supported"},
		{`"shared_intermediate_size": 0`, `"shared_intermediate_size": 512`, "shared_intermediate_size = 512"},
		{`"qk_norm_type": "per_layer"`, `"qk_norm_type": "rms"`, `qk_norm_type "rms"`},
	} {
		_, err := model.FromHFConfig(writeConfig(t, filepath.Join(t.TempDir(), "bad"), strings.Replace(json, bad.from, bad.to, 1)))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: err = %v, want %q", bad.to, err, bad.want)
		}
	}
}

func TestFromHFConfigErrors(t *testing.T) {
	llama, err := os.ReadFile(filepath.Join("testdata", "llama-3.1-8b", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	// drop renames keys, so the file stays valid JSON without them.
	drop := func(keys ...string) string {
		s := string(llama)
		for _, k := range keys {
			s = strings.Replace(s, `"`+k+`":`, `"unused_`+k+`":`, 1)
		}
		return s
	}
	tests := []struct {
		name, json string
		want       []string // substrings of the error, besides the file name
	}{
		{"no-hidden", drop("hidden_size"), []string{`missing required field "hidden_size"`}},
		{"no-layers", drop("num_hidden_layers"), []string{`"num_hidden_layers"`}},
		{"no-intermediate", drop("intermediate_size"), []string{`"intermediate_size"`}},
		{"no-type", drop("model_type"), []string{`missing required field "model_type"`}},
		{"two-missing", drop("vocab_size", "hidden_size"), []string{`missing required fields ["hidden_size" "vocab_size"]`}},
		{"unsupported", strings.Replace(string(llama), `"llama"`, `"bert"`, 1), []string{`model_type "bert"`, "llama", "qwen3_moe"}},
		{"wrong-type", strings.Replace(string(llama), `"hidden_size": 4096`, `"hidden_size": "4096"`, 1), []string{"hidden_size"}},
		{"zero", strings.Replace(string(llama), `"num_hidden_layers": 32`, `"num_hidden_layers": 0`, 1), []string{"num_hidden_layers = 0"}},
		// Counted in int64 these weights overflowed, and the deployment said the weights took -6.5e18 bytes.
		{"huge", strings.Replace(string(llama), `"num_hidden_layers": 32`, `"num_hidden_layers": 1000000000000`, 1),
			[]string{"2.18e+20 weights, more than 2^50 (the largest models have about 10^12): a size out of range (num_hidden_layers = 1000000000000, hidden_size = 4096"}},
		{"huge-experts", `{"model_type": "qwen3_moe", "num_hidden_layers": 94, "hidden_size": 4096, "num_attention_heads": 64,
			"head_dim": 128, "num_key_value_heads": 4, "vocab_size": 151936, "torch_dtype": "bfloat16", "num_experts": 4000000000,
			"num_experts_per_tok": 8, "moe_intermediate_size": 1536}`, []string{"weights, more than 2^50", "num_experts = 4000000000"}},
		{"heads", strings.Replace(string(llama), `"num_key_value_heads": 8`, `"num_key_value_heads": 5`, 1), []string{"num_key_value_heads = 5"}},
		{"syntax", `{"model_type": "llama",`, []string{"unexpected end of JSON input"}},
		{"qwen3-no-head-dim", `{"model_type": "qwen3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
			"intermediate_size": 128, "vocab_size": 100, "torch_dtype": "bfloat16"}`, []string{`missing required field "head_dim"`}},
		{"moe-missing", `{"model_type": "qwen3_moe", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
			"head_dim": 16, "vocab_size": 100, "torch_dtype": "bfloat16"}`,
			[]string{`missing required fields ["num_experts" "num_experts_per_tok" "moe_intermediate_size"]`}},
		{"moe-sparse-step", `{"model_type": "qwen3_moe", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
			"head_dim": 16, "vocab_size": 100, "torch_dtype": "bfloat16", "num_experts": 4, "num_experts_per_tok": 2,
			"moe_intermediate_size": 32, "decoder_sparse_step": 2}`, []string{"decoder_sparse_step = 2"}},
		{"layer-types", `{"model_type": "gpt_oss", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
			"head_dim": 16, "vocab_size": 100, "torch_dtype": "bfloat16", "num_local_experts": 4, "num_experts_per_tok": 2,
			"intermediate_size": 32, "sliding_window": 128, "layer_types": ["sliding_attention"]}`,
			[]string{"layer_types has 1 entries for num_hidden_layers = 2"}},
		{"mxfp4-dense", strings.Replace(string(llama), `"model_type"`, `"quantization_config": {"quant_method": "mxfp4"}, "model_type"`, 1),
			[]string{`quant_method "mxfp4" quantizes routed experts, and the model has none`}},
		{"mla-missing", `{"model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
			"vocab_size": 100, "torch_dtype": "bfloat16", "intermediate_size": 128, "n_routed_experts": 4,
			"num_experts_per_tok": 2, "moe_intermediate_size": 32, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
			"v_head_dim": 16}`, []string{`missing required field "kv_lora_rank"`}},
	}
	for _, tt := range tests {
		path := writeConfig(t, filepath.Join(t.TempDir(), tt.name), tt.json)
		_, err := model.FromHFConfig(path)
		if err == nil {
			t.Errorf("%s: FromHFConfig succeeded", tt.name)
			continue
		}
		for _, want := range append(tt.want, path) {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, want)
			}
		}
	}
}

func TestFromHFConfigNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	if _, err := model.FromHFConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("FromHFConfig(missing file) error = %v, want one naming %s", err, path)
	}
}

func writeConfig(t *testing.T, dir, json string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
