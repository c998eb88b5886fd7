package model_test

import (
	"fmt"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// TestTPError: a TP must divide the query heads, and divide or be a multiple of the key/value heads
// (vLLM's and SGLang's rule); MLA's latent cache replicates whatever the TP. It must divide a dense MLP's
// size and linear attention's heads; the error lists the TPs that pass every check.
func TestTPError(t *testing.T) {
	for _, tc := range []struct {
		m    *model.Model
		tp   int
		want string // "" when tp shards the attention
	}{
		{mustLookup(t, "llama-3.1-8b"), 8, ""},
		{mustLookup(t, "llama-3.1-8b"), 32, ""}, // 8 KV heads, each on 4 GPUs
		{mustLookup(t, "llama-3.1-8b"), 3, "llama-3.1-8b's 32 attention heads do not split over 3 GPUs (TP must divide 32: 1, 2, 4, 8, 16, 32)"},
		{mustLookup(t, "llama-3.1-8b"), 64, "llama-3.1-8b's 32 attention heads do not split over 64 GPUs (TP must divide 32: 1, 2, 4, 8, 16, 32)"},
		// 48 query heads split over 12 GPUs, 8 key/value heads neither split nor replicate evenly.
		{mustLookup(t, "minimax-m2.5"), 12, "minimax-m2.5's 8 key/value heads do not split over 12 GPUs, nor replicate over them evenly (TP must divide 48 and divide or be a multiple of 8: 1, 2, 4, 8, 16, 24, 48)"},
		{mustLookup(t, "minimax-m2.5"), 24, ""},
		{mustLookup(t, "qwen3.5-397b-a17b"), 16, ""}, // 2 KV heads, each on 8 GPUs
		{mustLookup(t, "deepseek-v3"), 16, ""},       // MLA: no key/value heads to split
		{mustLookup(t, "deepseek-v3"), 3, "deepseek-v3's 128 attention heads do not split over 3 GPUs (TP must divide 128: 1, 2, 4, 8, 16, 32, 64, 128)"},
		{&model.Model{Name: "m", Heads: 12, KVHeads: 4}, 6, "m's 4 key/value heads do not split over 6 GPUs, nor replicate over them evenly (TP must divide 12 and divide or be a multiple of 4: 1, 2, 4, 12)"},
		// A dense MLP's intermediate size and Gated DeltaNet's key/value heads split evenly too.
		{&model.Model{Name: "m", Heads: 16, KVHeads: 16, Intermediate: 1000}, 16, "m's MLP size 1000 does not split over 16 GPUs (TP must divide 16 and 1000: 1, 2, 4, 8)"},
		{&model.Model{Name: "m", Heads: 16, KVHeads: 16, Intermediate: 1000}, 8, ""},
		{mustLookup(t, "qwen3.5-397b-a17b"), 32, "qwen3.5-397b-a17b's 16/64 linear-attention key/value heads do not split over 32 GPUs (TP must divide 32 and 16: 1, 2, 4, 8, 16)"},
		{mustLookup(t, "qwen3.5-397b-a17b"), 3, "qwen3.5-397b-a17b's 32 attention heads do not split over 3 GPUs (TP must divide 32 and 16: 1, 2, 4, 8, 16)"},
		{mustLookup(t, "qwen3-30b-a3b"), 32, ""}, // no dense layers: its experts split by their own TP
	} {
		err := tc.m.TPError(tc.tp)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s tp %d: %v, want nil", tc.m.Name, tc.tp, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s tp %d: %v, want %q", tc.m.Name, tc.tp, err, tc.want)
		}
	}
}

// TestExpertTPError: the routed experts' MLP size must split over the experts' own TP.
func TestExpertTPError(t *testing.T) {
	m := mustLookup(t, "qwen3-30b-a3b") // 768 = 2^8 × 3
	for _, tc := range []struct {
		tp   int
		want string // "" when they split
	}{{1, ""}, {3, ""}, {256, ""}, {5, "qwen3-30b-a3b's expert MLP size 768 does not split over 5 GPUs"}, {512, "qwen3-30b-a3b's expert MLP size 768 does not split over 512 GPUs"}} {
		err := m.ExpertTPError(tc.tp)
		if tc.want == "" && err != nil || tc.want != "" && fmt.Sprint(err) != tc.want {
			t.Errorf("tp %d: %v, want %q", tc.tp, err, tc.want)
		}
	}
}

// TestSharedExpertTPError: the shared experts' MLP, SharedExperts × MoEIntermediate wide, must split over
// the GPUs it is split over; a model without shared experts has nothing to split.
func TestSharedExpertTPError(t *testing.T) {
	shared, routedOnly := mustLookup(t, "deepseek-v3"), mustLookup(t, "qwen3-30b-a3b") // 1 × 2048; none
	two := *shared
	two.Name, two.SharedExperts, two.MoEIntermediate = "two-shared", 2, 1000 // 2000 = 2^4 × 5^3
	for _, tc := range []struct {
		m    *model.Model
		tp   int
		want string // "" when they split
	}{
		{shared, 16, ""}, {shared, 2048, ""},
		{shared, 3, "deepseek-v3's shared-expert MLP size 2048 does not split over 3 GPUs"},
		{&two, 16, ""}, {&two, 10, ""},
		{&two, 32, "two-shared's shared-expert MLP size 2000 does not split over 32 GPUs"},
		{routedOnly, 5, ""},
	} {
		err := tc.m.SharedExpertTPError(tc.tp)
		if tc.want == "" && err != nil || tc.want != "" && fmt.Sprint(err) != tc.want {
			t.Errorf("%s tp %d: %v, want %q", tc.m.Name, tc.tp, err, tc.want)
		}
	}
}

// TestExpertEPError: the routed experts split into ep equal shards of whole experts, or ep is 1; a dense
// model has none to split.
func TestExpertEPError(t *testing.T) {
	moe, dense := mustLookup(t, "qwen3-30b-a3b"), mustLookup(t, "llama-3.1-8b")
	for _, tc := range []struct {
		m    *model.Model
		ep   int
		want string
	}{
		{moe, 1, ""},
		{moe, 8, ""},
		{moe, 128, ""},
		{moe, 3, "qwen3-30b-a3b's 128 routed experts do not split into 3 equal shards"},
		{moe, 6, "qwen3-30b-a3b's 128 routed experts do not split into 6 equal shards"},
		{dense, 3, ""},
	} {
		err := tc.m.ExpertEPError(tc.ep)
		if got := fmt.Sprint(err); tc.want == "" && err != nil || tc.want != "" && got != tc.want {
			t.Errorf("%s.ExpertEPError(%d) = %v, want %q", tc.m.Name, tc.ep, err, tc.want)
		}
	}
}
