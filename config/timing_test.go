package config

import (
	"fmt"
	"os"
	"path/filepath"
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

// TestWithoutUnreadTiming: the shared timing model's own settings that no pool's passes read are no
// longer given (the value stays), those a pool reads are, and so are a pool's own and an aggregated
// deployment's, which Validate still refuses unread.
func TestWithoutUnreadTiming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	const pools = "prefill-workers: 1\ndecode-workers: 1\n"
	for _, tc := range []struct {
		body, want string
		given      bool // profile is still given
	}{
		{"timing: profile\nprofile: h200-llama-3.1-8b-bf16\n" + pools + "prefill:\n  timing: polynomial\ndecode:\n  timing: polynomial\n", "", false},
		{"timing: profile\nprofile: h200-llama-3.1-8b-bf16\n" + pools + "prefill:\n  timing: polynomial\n", "", true},
		{pools + "prefill:\n  profile: h200-llama-3.1-8b-bf16\n",
			"config " + path + " line 4: prefill-profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the prefill passes are priced by --timing default", true},
		{"timing: fixed\nprofile: h200-llama-3.1-8b-bf16\n",
			"config " + path + " line 2: profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the passes are priced by --timing fixed", true},
	} {
		os.WriteFile(path, []byte(tc.body), 0o644)
		c := Default()
		if err := c.Load(path); err != nil {
			t.Fatal(err)
		}
		w := c.WithoutUnreadTiming()
		if err := w.Validate(); fmt.Sprint(err) != tc.want && !(err == nil && tc.want == "") {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
		}
		if tc.want == "" && (w.isGiven("profile") != tc.given || w.Profile != "h200-llama-3.1-8b-bf16" || !c.isGiven("profile")) {
			t.Errorf("%q: profile %q given %v (c's %v), want the value and given %v", tc.body, w.Profile, w.isGiven("profile"), c.isGiven("profile"), tc.given)
		}
	}
}
