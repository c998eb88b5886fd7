package model_test

import (
	"math"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

func mustLookup(t *testing.T, name string) *model.Model {
	t.Helper()
	m, err := model.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestKVBytesPerToken(t *testing.T) {
	tests := []struct {
		model       string
		bytes, tp   int
		want        int
		explanation string
	}{
		// ../../shared/data/SOURCES.md §5 gives 131,072 and 262,144.
		{"llama-3.1-8b", 2, 1, 131072, "32 layers × 2 × 8 heads × 128 × 2 B"},
		{"qwen3-32b", 2, 1, 262144, "64 × 2 × 8 × 128 × 2"},
		{"llama-3.1-8b", 1, 1, 65536, "fp8 KV cache"},
		{"llama-3.1-8b", 2, 2, 65536, "4 KV heads per GPU"},
		{"llama-3.1-8b", 2, 8, 16384, "1 KV head per GPU"},
		{"llama-3.1-70b", 2, 4, 81920, "80 × 2 × 2 × 128 × 2"},
		{"qwen3-235b-a22b", 2, 4, 48128, "94 × 2 × 1 × 128 × 2"},
		{"qwen3-235b-a22b", 2, 8, 48128, "4 KV heads on 8 GPUs: still one each"},
		{"qwen3-30b-a3b", 2, 1, 98304, "48 × 2 × 4 × 128 × 2"},
		{"gpt-oss-120b", 2, 1, 36864, "18 full-attention layers × 2 × 8 × 64 × 2"},
		{"gpt-oss-120b", 2, 8, 4608, "18 × 2 × 1 × 64 × 2"},
		{"deepseek-v3", 2, 1, 70272, "MLA: 61 layers × (512 + 64) × 2"},
		{"deepseek-v3", 2, 8, 70272, "MLA latent is replicated, not split"},
		{"deepseek-r1", 1, 8, 35136, "61 × 576 × 1"},
		{"glm-5", 2, 8, 100152, "DSA: 78 × ((512 + 64) × 2 + the indexer's 128 fp8 + 4-byte scale)"},
		{"glm-5", 1, 8, 55224, "fp8 latent, the indexer's key fp8 either way: 78 × (576 + 132)"},
		{"minimax-m2.5", 2, 1, 253952, "62 × 2 × 8 × 128 × 2"},
		{"minimax-m2.5", 2, 4, 63488, "62 × 2 × 2 × 128 × 2"},
		{"minimax-m2.5", 2, 8, 31744, "62 × 2 × 1 × 128 × 2"},
		{"minimax-m2.5", 1, 8, 15872, "fp8 KV cache: 62 × 2 × 1 × 128 × 1"},
		{"qwen3.5-397b-a17b", 2, 8, 15360, "15 full-attention layers (45 linear): 15 × 2 × 1 × 256 × 2"},
	}
	for _, tt := range tests {
		m := mustLookup(t, tt.model)
		if got := m.KVBytesPerToken(tt.bytes, tt.tp); got != tt.want {
			t.Errorf("%s.KVBytesPerToken(%d, %d) = %d, want %d (%s)", tt.model, tt.bytes, tt.tp, got, tt.want, tt.explanation)
		}
	}
}

func TestParams(t *testing.T) {
	tests := []struct {
		model          string
		params, active int64
		// Published sizes, matched within 1 % (active: within activeTol).
		published, publishedActive, activeTol float64
	}{
		// 2 × 128256 × 4096 (embeddings, LM head) + 32 × (2·4096² + 2·4096·1024 + 3·4096·14336 + 2·4096) + 4096.
		{"llama-3.1-8b", 8030261248, 8030261248, 8.03e9, 8.03e9, 0.01},
		{"llama-3.1-70b", 70553706496, 70553706496, 70.6e9, 70.6e9, 0.01},
		{"qwen3-32b", 32762123264, 32762123264, 32.8e9, 32.8e9, 0.01},
		// Qwen's 3.3B active is rounded: 3.35B here.
		{"qwen3-30b-a3b", 30532122624, 3353032704, 30.5e9, 3.3e9, 0.02},
		{"qwen3-235b-a22b", 235093634560, 22190763520, 235e9, 22e9, 0.01},
		// OpenAI's model card: 116.83B total; its 5.13B active leaves out the input embedding
		// (201088 × 2880 = 579,133,440), which Active counts: 5,132,849,472 + 579,133,440.
		{"gpt-oss-120b", 116829156672, 5711982912, 116.83e9, 5.13e9 + 201088*2880, 0.01},
		// DeepSeek-V3's 671B main model (the 14B MTP module is not counted) and 37B active, a rounded
		// figure (37.55B here, 36.6B without the input embedding).
		{"deepseek-v3", 671026419200, 37552297472, 671e9, 37e9, 0.02},
		// MiniMax's "230B total, 10B active" (model card, vLLM recipe), both rounded: 228.69B here;
		// 11.03B active, 10.42B without the input embedding (200064 × 3072 = 614,596,608). Every layer:
		// 3072·(6144 + 2·1024) + 6144·3072 attention, 7168 q/k norm, 256 × 3·3072·1536 experts,
		// 256 × 3072 router and 256 router biases, 2 × 3072 norms.
		{"minimax-m2.5", 228689764864, 11030553088, 230e9, 10e9 + 200064*3072, 0.05},
		// Qwen3.5-397B-A17B, text model: 396.35B of the published 397B (the rest is the vision tower
		// and the MTP layer), 17.35B active. 45 Gated DeltaNet layers (4096 × (2·2048 + 2·8192 + 128)
		// in, 8192 × 4096 out), 15 gated GQA layers (4096 × 2·8192 q and gate, 2 × 4096 × 512 k and v,
		// 8192 × 4096 o), 60 × 513 experts of 3·4096·1024.
		{"qwen3.5-397b-a17b", 396346104576, 17348795136, 397e9, 17e9, 0.03},
		// GLM-5: published 744B total (its MTP layer included), 40B active.
		{"glm-5", 743180209920, 41053720320, 744e9, 40e9, 0.03},
	}
	for _, tt := range tests {
		m := mustLookup(t, tt.model)
		if got := m.Params(); got != tt.params {
			t.Errorf("%s.Params() = %d, want %d", tt.model, got, tt.params)
		}
		if got := m.ActiveParams(); got != tt.active {
			t.Errorf("%s.ActiveParams() = %d, want %d", tt.model, got, tt.active)
		}
		if rel := math.Abs(float64(tt.params)/tt.published - 1); rel > 0.01 {
			t.Errorf("%s: %d params is %.2f%% from the published %.4g", tt.model, tt.params, 100*rel, tt.published)
		}
		if rel := math.Abs(float64(tt.active)/tt.publishedActive - 1); rel > tt.activeTol {
			t.Errorf("%s: %d active params is %.2f%% from the published %.4g", tt.model, tt.active, 100*rel, tt.publishedActive)
		}
	}
}

func TestWeightBytes(t *testing.T) {
	tests := []struct {
		model     string
		bytes, tp int
		want      int64
	}{
		{"llama-3.1-8b", 2, 1, 2 * 8030261248},
		{"llama-3.1-8b", 1, 1, 8030261248},
		// Replicated norms: 32 × 2 × 4096 + 4096 = 266,240 weights on each GPU; the other
		// 8,029,995,008 are split in two: (266,240 + 4,014,997,504) × 2 B.
		{"llama-3.1-8b", 2, 2, 8030527488},
		{"llama-3.1-8b", 2, 8, 2008031232},
		{"llama-3.1-70b", 2, 1, 141107412992},
		// 4 KV heads on 8 GPUs: each GPU keeps a whole KV head, so k_proj and v_proj take
		// 94 × 2 × 4096 × 128 extra weights per GPU beyond an even split.
		{"qwen3-235b-a22b", 2, 8, 58959617024},
		{"deepseek-v3", 1, 8, 84780357120},
	}
	for _, tt := range tests {
		if got := mustLookup(t, tt.model).WeightBytes(tt.bytes, tt.tp); got != tt.want {
			t.Errorf("%s.WeightBytes(%d, %d) = %d, want %d", tt.model, tt.bytes, tt.tp, got, tt.want)
		}
	}
}

func TestQuantizedWeightBytes(t *testing.T) {
	mxfp4, err := model.BytesPerWeight("mxfp4")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		model string
		p     model.Precision
		tp    int
		want  int64
	}{
		// gpt-oss-120b as published: experts in MXFP4, the rest bf16.
		// Experts: 36 × 128 × 3 × 2880² = 114,661,785,600 weights × 17/32 B = 60,914,073,600;
		// the other 2,167,371,072 weights × 2 B = 4,334,742,144. The checkpoint is 60.8 GiB.
		{"gpt-oss-120b", model.Precision{Linear: 2, Experts: mxfp4, Other: 2}, 1, 65248815744},
		// Llama-3.1-8B in fp8 with bf16 embeddings and LM head:
		// 6,979,321,856 linear weights × 1 B + 1,050,939,392 others × 2 B.
		{"llama-3.1-8b", model.Precision{Linear: 1, Experts: 1, Other: 2}, 1, 9081200640},
		{"llama-3.1-8b", model.Precision{Linear: 2, Experts: 2, Other: 2}, 1, 2 * 8030261248},
	}
	for _, tt := range tests {
		if got := mustLookup(t, tt.model).QuantizedWeightBytes(tt.p, tt.tp, tt.tp); got != tt.want {
			t.Errorf("%s.QuantizedWeightBytes(%+v, %d) = %d, want %d", tt.model, tt.p, tt.tp, got, tt.want)
		}
	}
}

func TestSizesPanicOnBadTP(t *testing.T) {
	m := mustLookup(t, "llama-3.1-8b")
	for name, f := range map[string]func(){
		"KVBytesPerToken(2, 0)":         func() { m.KVBytesPerToken(2, 0) },
		"KVBytesPerToken(0, 1)":         func() { m.KVBytesPerToken(0, 1) },
		"WeightBytes(2, -1)":            func() { m.WeightBytes(2, -1) },
		"QuantizedWeightBytes(p, 2, 0)": func() { m.QuantizedWeightBytes(model.Precision{Linear: 2, Experts: 2, Other: 2}, 2, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestValidateQKNormKinds(t *testing.T) {
	m := mustLookup(t, "minimax-m2.5")
	m.QKNorm = true
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "QK norm") {
		t.Errorf("QKNorm and QKNormAllHeads together: Validate() = %v, want an error naming the QK norm", err)
	}
}

// TestExpertGPUs: the routed experts' share of a GPU's weights shrinks as they are sharded over more
// GPUs than tp; the rest stays each tp group's. Qwen3-30B-A3B's 48 layers × 128 experts × 3 × 2048 ×
// 768 bf16 weights are 57,982,058,496 B: 28,991,029,248 B a GPU at TP 2, 7,247,757,312 B over 8 GPUs,
// 21,743,271,936 B fewer. gpt-oss-120b's 36 layers × 128 experts × 3 × 2880 × 2880 weights at half a
// byte (57,330,892,800 B) and their biases, 36 × 128 × (2 × 2880 + 2880) at 2 bytes (79,626,240 B),
// are 7/8 fewer over 8 GPUs than on one: 50,234,204,160 B. A dense model has none to spread.
func TestExpertGPUs(t *testing.T) {
	for _, tc := range []struct {
		name        string
		p           model.Precision
		tp, experts int
		want        int64
	}{
		{"qwen3-30b-a3b", model.Precision{Linear: 2, Experts: 2, Other: 2}, 2, 8, 21743271936},
		{"gpt-oss-120b", model.Precision{Linear: 2, Experts: 0.5, Other: 2}, 1, 8, 50234204160},
		{"llama-3.1-8b", model.Precision{Linear: 2, Experts: 2, Other: 2}, 2, 8, 0},
	} {
		m := mustLookup(t, tc.name)
		if got := m.QuantizedWeightBytes(tc.p, tc.tp, tc.tp) - m.QuantizedWeightBytes(tc.p, tc.tp, tc.experts); got != tc.want {
			t.Errorf("%s: experts over %d GPUs save %d B a GPU at TP %d, want %d", tc.name, tc.experts, got, tc.tp, tc.want)
		}
	}
}
