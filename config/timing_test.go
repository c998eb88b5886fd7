package config

import (
	"os"
	"testing"

	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/aic"
)

// sharedAIC is AIConfigurator's database in the shared data, seen from this package.
const sharedAIC = "../../shared/data/aiconfigurator"

// TestDefaultTimingIsOpLevel pins what the default configuration prices passes with: the op-level
// model, on the embedded tables when nothing else is found, giving exactly the pass times the
// op-level model computes from AIConfigurator's parquet database itself — for a decode batch, a
// prompt chunk and a mixed pass, on dense and MoE models, vLLM and SGLang, TP 1 and more.
func TestDefaultTimingIsOpLevel(t *testing.T) {
	t.Setenv(aic.EnvPerfDB, "")
	t.Setenv("PATH", t.TempDir()) // no python3: no installed AIConfigurator package
	if _, err := os.Stat(sharedAIC + "/h200_sxm"); err != nil {
		t.Skipf("shared AIConfigurator data not present (%v); this test needs %s", err, sharedAIC)
	}
	decode := timing.Batch{}
	for i := range 32 {
		decode.Seqs = append(decode.Seqs, timing.Seq{New: 1, Cached: 900 + 50*i, Samples: true})
	}
	chunk := timing.Batch{Seqs: []timing.Seq{{New: 2048, Cached: 1024, Prefill: true}}}
	mixed := timing.Batch{Seqs: append([]timing.Seq{{New: 512, Prefill: true, Samples: true}}, decode.Seqs[:8]...)}
	for _, tc := range []struct {
		model, backend string
		tp, ep         int
	}{
		{"llama-3.1-8b", "vllm", 1, 1},
		{"llama-3.1-70b", "sglang", 4, 1},
		{"qwen3-30b-a3b", "vllm", 2, 1},
		{"deepseek-v3", "sglang", 8, 1},
		{"qwen3-30b-a3b", "sglang", 8, 4},
		{"qwen3-30b-a3b", "vllm", 8, 8},
	} {
		c := Default()
		if c.Timing != "default" || c.PerfDB != "" {
			t.Fatalf("Default: timing %q, perf-db %q; want the op-level model and no database", c.Timing, c.PerfDB)
		}
		c.Model, c.Backend, c.TP, c.EP = tc.model, tc.backend, tc.tp, tc.ep
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		d, err := c.Deployment()
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.TimingModel(d)
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		info, err := c.TimingInfo()
		if err != nil {
			t.Fatal(err)
		}
		if info.Model != "default" || info.Source != "embedded" {
			t.Errorf("%s: timing %+v, want the op-level model on the embedded tables", tc.model, info)
		}
		linear, moe := c.QuantModes(d.Model)
		ref, err := aic.New(aic.Options{Model: d.Model, System: d.System, Root: sharedAIC, Backend: tc.backend, TP: tc.tp, EP: tc.ep,
			GEMMQuant: linear, KVCacheDtype: c.KVCacheDtype, MoEQuant: moe})
		if err != nil {
			t.Fatal(err)
		}
		if v := tc.backend + " " + ref.Version(); info.Version != v {
			t.Errorf("%s: version %q, want %q", tc.model, info.Version, v)
		}
		for name, b := range map[string]*timing.Batch{"decode": &decode, "chunk": &chunk, "mixed": &mixed} {
			if g, w := got.Cost(b), ref.Cost(b); g != w || w.Total() <= 0 {
				t.Errorf("%s %s tp %d ep %d, %s pass: default timing %v, op-level model on the parquet database %v", tc.model, tc.backend, tc.tp, tc.ep, name, g, w)
			}
		}
	}
}
