package aic

import (
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// TestMXFP4MoEGridPoint reads gpt-oss-120b's weight-only MXFP4 experts (moe_dtype w4a16_mxfp4) from
// vLLM 0.18.0's H200 MoE table: at a measured token count the curve is the measured latency.
func TestMXFP4MoEGridPoint(t *testing.T) {
	needData(t)
	rf := h200Roofline(t)
	d := db{root: aicRoot, system: "h200_sxm"}
	ref := moeTable
	ref.backend = "vllm"
	paths, err := d.sources(ref, "0.18.0")
	if err != nil || len(paths) == 0 {
		t.Fatalf("sources: %v %v", paths, err)
	}
	k := moeKey{dtype: "w4a16_mxfp4", dist: defaultMoEDst, topk: 4, experts: 128, hidden: 2880, inter: 2880, tp: 1, ep: 1}
	c, _, err := loadMoE(paths, k, rf)
	if err != nil {
		t.Fatal(err)
	}
	flops, _ := rf.flopsOf(k.dtype)
	for _, p := range []struct{ tokens, ms float64 }{
		{1, 0.09327999949455261},
		{64, 0.5680768013000488},
		{8192, 4.353772735595703},
	} {
		if got := c.at(p.tokens, rf.moeSOL(p.tokens, k, flops)); got != p.ms {
			t.Errorf("%v tokens: %v ms, want the measured %v ms", p.tokens, got, p.ms)
		}
	}
}

// TestGPTOSSMXFP4 builds gpt-oss-120b as vLLM runs it on Hopper (bf16 GEMMs, w4a16_mxfp4 experts)
// and checks that a tensor-parallel size the version did not measure is an error naming it.
func TestGPTOSSMXFP4(t *testing.T) {
	needData(t)
	m, err := model.Lookup("gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Model: m, System: h200(t), Root: aicRoot, Backend: "vllm", Version: "0.18.0", TP: 1, GEMMQuant: "bf16", MoEQuant: "mxfp4"}
	mdl, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	// Sliding-window layers are priced with the window_size 128 rows, the rest as full attention.
	if len(mdl.attn) != 2 || mdl.attn[0].window != 0 || mdl.attn[0].layers != 18 || mdl.attn[1].window != 128 || mdl.attn[1].layers != 18 {
		t.Errorf("attention kinds %+v, want 18 full and 18 window-128 layers", mdl.attn)
	}
	if !hasSource(mdl, "moe/vllm/0.18.0/moe_perf.parquet") {
		t.Errorf("Sources() = %v, want the 0.18.0 MoE table", mdl.Sources())
	}

	o.TP = 2 // 0.18.0 measured the MXFP4 experts at moe_tp_size 1 only
	_, err = New(o)
	if err == nil || !strings.Contains(err.Error(), "moe_dtype=w4a16_mxfp4") || !strings.Contains(err.Error(), "moe_tp_size=2") ||
		!strings.Contains(err.Error(), "moe_tp_size/moe_ep_size 1/1") {
		t.Errorf("TP 2 on 0.18.0: err = %v, want one naming moe_tp_size=2 and the sizes present", err)
	}
	o.Version = "0.19.0"
	if _, err := New(o); err != nil {
		t.Errorf("TP 2 on 0.19.0: %v", err)
	}

	o.MoEQuant = "nvfp4" // Blackwell's format: no Hopper table
	if _, err := New(o); err == nil || !strings.Contains(err.Error(), `MoE quantization "nvfp4"`) {
		t.Errorf("nvfp4 experts: err = %v, want an unknown MoE quantization", err)
	}
}
