package model_test

import (
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// TestTPError: a TP must divide the query heads, and divide or be a multiple of the key/value heads
// (vLLM's and SGLang's rule); MLA's latent cache replicates whatever the TP.
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
