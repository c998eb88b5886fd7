package aic

import (
	"testing"

	"github.com/mocker-sim/mocker/timing"
)

// TestSpeculativeStep: a decode step that verifies one draft token a request (New 2) is priced as
// AIConfigurator prices nextn 1: every generation op at batch × 2 (token work, the MLA BMMs, the
// attention at the same context, the LM head over both positions) and the whole step × (61 + 1) /
// 61 for the MTP module (DeepSeek-V3's 61 layers); a step without drafts is the plain decode step.
// Parts itemise the draft module as mtp_draft and still add up to the step.
func TestSpeculativeStep(t *testing.T) {
	mdl, err := deepSeek(t, "sglang")
	if err != nil {
		t.Fatal(err)
	}
	// 16 requests with one draft each, or 8 with three, read the ops of the 32-request step (32
	// tokens, 32 attention rows at context 1,024, 32 logits) and add 1 or 3 layers in 61 (to the ns).
	plain := mdl.Cost(decodeBatch(32, 1)).Total().Seconds() * 1e3
	for _, tc := range []struct{ n, news int }{{16, 2}, {8, 4}} {
		got := mdl.Cost(decodeBatch(tc.n, tc.news)).Total()
		want := msDuration(plain * float64(61+tc.news-1) / 61)
		if d := got - want; d < -1 || d > 1 {
			t.Errorf("%d requests × (1 + %d drafts): %v, want %v (the 32-request step %.6f ms × %d/61)", tc.n, tc.news-1, got, want, plain, 61+tc.news-1)
		}
	}
	for _, tc := range []struct {
		n, news int
		want    string
	}{
		{16, 1, "18.793032ms"},
		{32, 1, "22.431893ms"},
		{16, 2, "22.799628ms"},
		{8, 4, "23.5351ms"},
	} {
		if got := mdl.Cost(decodeBatch(tc.n, tc.news)).Total().String(); got != tc.want {
			t.Errorf("%d requests × %d tokens: %s, want %s", tc.n, tc.news, got, tc.want)
		}
	}
	b := decodeBatch(16, 2)
	var sum, draft float64
	for _, p := range mdl.Parts(b) {
		sum += p.Ms
		if p.Op == "mtp_draft" {
			draft = p.Ms
		}
	}
	total := mdl.Cost(b).Total().Seconds() * 1e3
	if !near(sum, total, 1e-6) || !near(draft, total/62, 1e-6) {
		t.Errorf("parts: sum %.6f ms (cost %.6f), mtp_draft %.6f ms, want 1/62 of the step (%.6f)", sum, total, draft, total/62)
	}
}

// TestSpeculativeStepGDN: Qwen3.5's Gated DeltaNet steps price a speculative step's drafts as
// requests too, like its attention: 8 requests with one draft each run the GDN kernels of the
// 16-request step (45 layers × the generation table at batch 16, as TestQwen35GatedDeltaNet reads it),
// and the whole step is the 16-request step × (60 + 1) / 60 for the draft module.
func TestSpeculativeStepGDN(t *testing.T) {
	mdl, err := onH200(t, "qwen3.5-397b-a17b", Options{Backend: "sglang", Version: "0.5.14", TP: 8, EP: 8, GEMMQuant: "fp8_block"})
	if err != nil {
		t.Fatal(err)
	}
	gdn := func(b *timing.Batch) float64 {
		for _, p := range mdl.Parts(b) {
			if p.Op == "gdn_generation" {
				return p.Ms
			}
		}
		return 0
	}
	want := 45 * (0.0017260800302028654 + 0.0066048002243041994) // update + recurrence at batch 16
	for _, b := range []*timing.Batch{decodeBatch(16, 1), decodeBatch(8, 2)} {
		if got := gdn(b); !near(got, want, 1e-9) {
			t.Errorf("%d requests × %d tokens: gdn_generation %.9f ms, want %.9f", len(b.Seqs), b.Seqs[0].New, got, want)
		}
	}
	for _, tc := range []struct {
		n, news int
		want    string
	}{
		{8, 1, "7.943554ms"},
		{16, 1, "10.764022ms"},
		{8, 2, "10.943422ms"}, // 10.764022 ms × 61/60
	} {
		if got := mdl.Cost(decodeBatch(tc.n, tc.news)).Total().String(); got != tc.want {
			t.Errorf("%d requests × %d tokens: %s, want %s", tc.n, tc.news, got, tc.want)
		}
	}
}

// decodeBatch is n decoding requests at context 1,024, each with news new tokens (1 + its drafts).
func decodeBatch(n, news int) *timing.Batch {
	b := &timing.Batch{}
	for range n {
		b.Seqs = append(b.Seqs, timing.Seq{New: news, Cached: 1024, Samples: true})
	}
	return b
}
