package config

import (
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// TestQuantizationMXFP4 checks the gpt-oss checkpoint's format: --quantization mxfp4 keeps the
// linear layers in the model's dtype and stores experts in MXFP4 (4.25 bits a weight), as
// --moe-quantization mxfp4 does, and as gpt-oss-120b is priced without either flag.
func TestQuantizationMXFP4(t *testing.T) {
	m, err := model.Lookup("gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	want := m.QuantizedWeightBytes(model.Precision{Linear: 2, Experts: 4.25 / 8, Other: 2}, 2, 2)
	for _, tc := range []struct{ quant, moe, linear, experts string }{
		{"", "", "", "mxfp4"},
		{"mxfp4", "", "", "mxfp4"},
		{"", "mxfp4", "", "mxfp4"},
		{"bf16", "mxfp4", "bf16", "mxfp4"},
	} {
		c := Default()
		c.Model, c.TP, c.Quantization, c.MoEQuantization = "gpt-oss-120b", 2, tc.quant, tc.moe
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		if l, e := c.QuantModes(m); l != tc.linear || e != tc.experts {
			t.Errorf("quantization %q, moe %q: modes %q, %q; want %q, %q", tc.quant, tc.moe, l, e, tc.linear, tc.experts)
		}
		got, err := c.weightBytes(m)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("quantization %q, moe %q: %d weight bytes per GPU, want %d", tc.quant, tc.moe, got, want)
		}
	}
	// --quantization bf16 puts the experts in bf16 too: 2 bytes a weight.
	c := Default()
	c.Model, c.TP, c.Quantization = "gpt-oss-120b", 2, "bf16"
	if got, want := mustWeightBytes(t, &c, m), m.QuantizedWeightBytes(model.Precision{Linear: 2, Experts: 2, Other: 2}, 2, 2); got != want {
		t.Errorf("bf16: %d weight bytes, want %d", got, want)
	}
}

// TestCheckpointQuantization: without --quantization a model published only in a quantized format is
// priced in it; --quantization replaces it, --moe-quantization alone replaces the experts' part.
func TestCheckpointQuantization(t *testing.T) {
	for _, tc := range []struct{ model, quant, moe, linear, experts string }{
		{"deepseek-v3", "", "", "fp8_block", ""},
		{"deepseek-v3", "bf16", "", "bf16", ""},
		{"kimi-k2.5", "", "", "", "int4_wo"},
		{"kimi-k2.5", "", "fp8", "", "fp8"},
		{"kimi-k2.5", "fp8", "", "fp8", ""},
		{"minimax-m2.5", "", "", "fp8_block", ""},
		{"llama-3.1-8b", "", "", "", ""},
	} {
		m, err := model.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		c := Default()
		c.Model, c.Quantization, c.MoEQuantization = tc.model, tc.quant, tc.moe
		if l, e := c.QuantModes(m); l != tc.linear || e != tc.experts {
			t.Errorf("%s, quantization %q, moe %q: modes %q, %q; want %q, %q", tc.model, tc.quant, tc.moe, l, e, tc.linear, tc.experts)
		}
	}
}

func mustWeightBytes(t *testing.T, c *Config, m *model.Model) int64 {
	t.Helper()
	b, err := c.weightBytes(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestQuantizationNames(t *testing.T) {
	for _, tc := range []struct{ quant, moe, want string }{
		{"nvfp4", "", "quantization nvfp4"},
		{"", "nvfp4", "moe-quantization nvfp4"},
		{"", "w4a8", "moe-quantization w4a8"},
	} {
		c := Default()
		c.Quantization, c.MoEQuantization = tc.quant, tc.moe
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("quantization %q, moe %q: err = %v, want prefix %q", tc.quant, tc.moe, err, tc.want)
		}
	}
	// mxfp4 quantizes experts only: a dense model has none.
	c := Default()
	c.Model, c.System, c.Timing, c.PerfDB, c.Quantization = "llama-3.1-8b", "h200_sxm", "default", "unused", "mxfp4"
	d, err := c.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TimingModel(d); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Errorf("mxfp4 on a dense model: err = %v", err)
	}
}
