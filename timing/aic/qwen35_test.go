package aic

import (
	"math"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// TestQwen35GatedDeltaNet: Qwen3.5-397B-A17B's 45 linear-attention layers are priced by the Gated
// DeltaNet kernels of the gdn table at the heads one GPU holds (TP 8: 2 key and 8 value heads), as
// AIConfigurator's qwen35.py does, and only its 15 full-attention layers by the attention tables.
// The figures are gdn_perf.parquet latencies (d_model 4096, num_k_heads 2, num_v_heads 8, head
// dims 128, d_conv 4): a decode step's causal_conv1d_update + fused_recurrent_gated_delta_rule_packed_decode
// at batch 16, a 2,048-token prompt's causal_conv1d_fn + the chunked scan (SGLang's
// chunk_gated_delta_rule, vLLM's chunk_gated_delta_rule_flashinfer) at batch 1.
func TestQwen35GatedDeltaNet(t *testing.T) {
	decode := timing.Batch{Seqs: make([]timing.Seq, 16)}
	for i := range decode.Seqs {
		decode.Seqs[i] = timing.Seq{New: 1, Cached: 1500, Samples: true}
	}
	prefill := timing.Batch{Seqs: []timing.Seq{{New: 2048, Prefill: true, Samples: true}}}
	part := func(mdl *Model, b *timing.Batch, op string) float64 {
		for _, p := range mdl.Parts(b) {
			if p.Op == op {
				return p.Ms
			}
		}
		return 0
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s = %.12g ms, want %.12g", what, got, want)
		}
	}
	for _, tc := range []struct {
		o             Options
		conv, scan    float64 // context, batch 1, seq_len 2048
		update, recur float64 // generation, batch 16
	}{
		{Options{Backend: "sglang", Version: "0.5.14", TP: 8, EP: 8, GEMMQuant: "fp8_block"},
			0.0071923202276229867, 0.088198404312133799, 0.0017260800302028654, 0.0066048002243041994},
		{Options{Backend: "vllm", Version: "0.24.0", TP: 8},
			0.0077142399549484254, 0.10968128204345703, 0.0019711999595165251, 0.0066640001535415647},
	} {
		mdl, err := onH200(t, "qwen3.5-397b-a17b", tc.o)
		if err != nil {
			t.Fatal(err)
		}
		b := tc.o.Backend
		near(b+" decode gdn_generation", part(mdl, &decode, "gdn_generation"), 45*(tc.update+tc.recur))
		near(b+" prefill gdn_context", part(mdl, &prefill, "gdn_context"), 45*(tc.conv+tc.scan))
		if v := part(mdl, &decode, "gdn_context") + part(mdl, &prefill, "gdn_generation"); v != 0 {
			t.Errorf("%s: a decode pass has GDN context work or a prefill pass GDN generation work: %g ms", b, v)
		}
	}

	// The same model with every layer full attention: four times the generation attention.
	o := Options{Backend: "sglang", Version: "0.5.14", TP: 8, EP: 8, GEMMQuant: "fp8_block"}
	mdl, err := onH200(t, "qwen3.5-397b-a17b", o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Lookup("qwen3.5-397b-a17b")
	if err != nil {
		t.Fatal(err)
	}
	m.LinearLayers = 0
	o.Model, o.System, o.Root = m, h200(t), aicRoot
	full, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	near("all-full generation attention / hybrid", part(full, &decode, "generation_attention")/part(mdl, &decode, "generation_attention"), 4)
	if part(full, &decode, "gdn_generation") != 0 {
		t.Error("a model without linear-attention layers has GDN work")
	}
}

// TestGDNShardedHeads: SGLang 0.5.9's gdn table measured Qwen3.5-397B's unsharded heads only (16
// key, 64 value; and no chunk_gated_delta_rule rows), so its layer at TP 8 is an error naming the
// shape, not a guess.
func TestGDNShardedHeads(t *testing.T) {
	needData(t)
	paths := []string{aicRoot + "/h200_sxm/linear_attention/sglang/0.5.9/gdn_perf.parquet"}
	if _, err := loadGDN(paths, gdnKey{4096, 16, 128, 64, 128, 4}); err == nil || !strings.Contains(err.Error(), "num_v_heads=64") {
		t.Errorf("unsharded heads without chunk_gated_delta_rule rows: %v, want an error naming the shape", err)
	}
	_, err := loadGDN(paths, gdnKey{4096, 2, 128, 8, 128, 4})
	if err == nil || !strings.Contains(err.Error(), "num_k_heads=2 head_k_dim=128 num_v_heads=8") {
		t.Errorf("TP 8's heads: %v, want an error naming the shape", err)
	}
}
