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

// TestWithoutUnreadTiming: the timing models' own settings that no pool's passes read, shared or a
// pool's, on a disaggregated deployment or an aggregated one, are no longer given (the value stays), so
// that the deployment validates; those a pool reads stay given. Validate refuses the unread ones by name.
func TestWithoutUnreadTiming(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	const pools = "prefill-workers: 1\ndecode-workers: 1\n"
	const p = "h200-llama-3.1-8b-bf16"
	for _, tc := range []struct {
		body, key string
		unread    string // Validate's error as given, "" where the setting is read
	}{
		{"timing: profile\nprofile: " + p + "\n" + pools + "prefill:\n  timing: polynomial\ndecode:\n  timing: polynomial\n", "profile",
			"config " + path + " line 2: profile " + p + ": applies to --timing profile, and the passes are priced by --timing polynomial"},
		{"timing: profile\nprofile: " + p + "\n" + pools + "prefill:\n  timing: polynomial\n", "profile", ""},
		{pools + "prefill:\n  profile: " + p + "\n", "prefill-profile",
			"config " + path + " line 4: prefill-profile " + p + ": applies to --timing profile, and the prefill passes are priced by --timing default"},
		{"timing: fixed\nprofile: " + p + "\n", "profile",
			"config " + path + " line 2: profile " + p + ": applies to --timing profile, and the passes are priced by --timing fixed"},
		{"backend: trtllm\nprofile: " + p + "\n", "profile", ""},
		{"timing: profile\nprofile: " + p + "\n" + pools + "prefill:\n  profile: " + p + "\ndecode:\n  timing: polynomial\n", "profile",
			"config " + path + " line 2: profile " + p + ": applies to --timing profile, and the pools it prices take their own (--prefill-profile)"},
	} {
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := Default()
		if err := c.Load(path); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); fmt.Sprint(err) != tc.unread && !(err == nil && tc.unread == "") {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.unread)
		}
		w := c.WithoutUnreadTiming()
		if err := w.Validate(); err != nil {
			t.Errorf("%q without the unread: %v", tc.body, err)
		}
		if w.isGiven(tc.key) != (tc.unread == "") || !c.isGiven(tc.key) {
			t.Errorf("%q: %s given %v (c's %v), want %v", tc.body, tc.key, w.isGiven(tc.key), c.isGiven(tc.key), tc.unread == "")
		}
		if v := w.Role("prefill").Get("profile"); w.Profile != p && v != p {
			t.Errorf("%q: profile %q, prefill's %q: the value must stay", tc.body, w.Profile, v)
		}
	}
}

// TestWithoutUnreadEP: the shared EP, read by the pool the op-level model prices, is EP 1 in the pool
// another model prices (ForRole says so, and a pool's own ep stays); where no pool reads it, or the
// deployment is aggregated, nothing changes, and c itself is never changed.
func TestWithoutUnreadEP(t *testing.T) {
	poly := "polynomial"
	for _, tc := range []struct {
		name            string
		set             func(*Config)
		prefill, decode int
	}{
		{"both pools on default", func(*Config) {}, 8, 8},
		{"prefill on polynomial", func(c *Config) { c.Prefill.Timing = &poly }, 1, 8},
		{"decode on polynomial", func(c *Config) { c.Decode.Timing = &poly }, 8, 1},
		{"prefill on polynomial, its own ep", func(c *Config) { c.Prefill.Timing = &poly; four := 4; c.Prefill.EP = &four }, 4, 8},
		{"both on polynomial: no pool reads it", func(c *Config) { c.Prefill.Timing, c.Decode.Timing = &poly, &poly }, 8, 8},
		{"aggregated", func(c *Config) { c.PrefillWorkers, c.DecodeWorkers, c.Timing = 0, 0, poly }, 8, 8},
	} {
		c := Default()
		c.Model, c.TP, c.EP, c.PrefillWorkers, c.DecodeWorkers = "qwen3-30b-a3b", 8, 8, 1, 1
		tc.set(&c)
		eps := func(c *Config) string { return fmt.Sprint(c.EP, c.ForRole("prefill").EP, c.ForRole("decode").EP) }
		was := eps(&c)
		w := c.WithoutUnreadTiming()
		if got, want := eps(&w), fmt.Sprint(8, tc.prefill, tc.decode); got != want {
			t.Errorf("%s: ep, prefill's, decode's %s; want %s", tc.name, got, want)
		}
		if eps(&c) != was {
			t.Errorf("%s: WithoutUnreadTiming changed c: %s, was %s", tc.name, eps(&c), was)
		}
	}
}

// TestTimingReadOnSome: a timing model's own setting given is taken where one of a search's deployments
// reads it, whichever that is (the trtllm one, priced by profile; the aggregated one beside pools on
// their own timing), and refused, as the first deployment words it, where none does.
func TestTimingReadOnSome(t *testing.T) {
	base := Default()
	base.Profile = "h200-llama-3.1-8b-bf16"
	base.Given("profile", "")
	on := func(backend string, disagg bool) Config {
		c := base.OnBackend(backend)
		if disagg {
			return c.Deployed(0, 1, 1)
		}
		return c.Deployed(1, 0, 0)
	}
	vllm, trtllm := on("vllm", false), on("trtllm", false)
	if err := TimingReadOnSome([]Config{vllm, trtllm}); err != nil {
		t.Errorf("vllm, trtllm: %v", err)
	}
	if err := TimingReadOnSome([]Config{trtllm, vllm}); err != nil {
		t.Errorf("trtllm, vllm: %v", err)
	}
	want := "profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the passes are priced by --timing default"
	if err := TimingReadOnSome([]Config{vllm, on("sglang", false), on("vllm", true)}); fmt.Sprint(err) != want {
		t.Errorf("vllm, sglang, vllm disaggregated: %v, want %s", err, want)
	}
	// Pools on their own timing read no shared profile; the aggregated deployment of the same base does.
	poly := "polynomial"
	base.Timing, base.Prefill.Timing, base.Decode.Timing = "profile", &poly, &poly
	for _, key := range []string{"timing", "prefill-timing", "decode-timing"} {
		base.Given(key, "")
	}
	want = "profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the passes are priced by --timing polynomial"
	if err := TimingReadOnSome([]Config{on("vllm", true)}); fmt.Sprint(err) != want {
		t.Errorf("disaggregated alone: %v, want %s", err, want)
	}
	if err := TimingReadOnSome([]Config{on("vllm", true), on("vllm", false)}); err != nil {
		t.Errorf("disaggregated and aggregated: %v", err)
	}
	// A pool's own setting is read by a disaggregated deployment whose pool its model prices, and by no
	// aggregated one (it has no pools), whichever comes first.
	path := filepath.Join(t.TempDir(), "c.yaml")
	for _, tc := range []struct{ body, want string }{
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  profile: h200-llama-3.1-8b-bf16\n",
			"config " + path + " line 4: prefill-profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the prefill passes are priced by --timing default"},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  timing: profile\n  profile: h200-llama-3.1-8b-bf16\n", ""},
		{"model: qwen3-30b-a3b\ntp: 8\ntiming: polynomial\nprefill-workers: 1\ndecode-workers: 1\nprefill:\n  ep: 8\n",
			"config " + path + " line 7: prefill-ep 8: applies to --timing default, and the prefill passes are priced by --timing polynomial"},
	} {
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := Default()
		if err := c.Load(path); err != nil {
			t.Fatal(err)
		}
		agg, disagg := c.Deployed(1, 0, 0), c.Deployed(0, 1, 1)
		for _, order := range [][]Config{{agg, disagg}, {disagg, agg}} {
			if err := TimingReadOnSome(order); fmt.Sprint(err) != tc.want && !(err == nil && tc.want == "") {
				t.Errorf("%q: %v, want %q", tc.body, err, tc.want)
			}
		}
	}
}

// TestEPRead: a shared EP above 1 is read where a pool that runs it (one without its own ep) is priced
// by the op-level model, and refused by name where none is.
func TestEPRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	const moe = "model: qwen3-30b-a3b\ntp: 8\nep: 8\n"
	const pools = "prefill-workers: 1\ndecode-workers: 1\n"
	for _, tc := range []struct{ body, want string }{
		{moe, ""},
		{"model: qwen3-30b-a3b\ntp: 8\nep: 1\ntiming: polynomial\n", ""},
		{moe + pools + "timing: polynomial\nprefill:\n  timing: default\n", ""},
		{moe + pools + "timing: polynomial\nprefill:\n  timing: default\n  ep: 1\n",
			"ep 8: applies to --timing default, and the passes that run it are priced by --timing default (prefill) and polynomial (decode)"},
		{moe + pools + "decode:\n  ep: 1\n", ""},
	} {
		if err := os.WriteFile(path, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		c := Default()
		if err := c.Load(path); err != nil {
			t.Fatal(err)
		}
		if err := c.EPRead(); fmt.Sprint(err) != tc.want && !(err == nil && tc.want == "") {
			t.Errorf("%q: %v, want %q", tc.body, err, tc.want)
		}
	}
	c := Default()
	c.EP, c.Timing = 8, "polynomial"
	if err := c.EPRead(); fmt.Sprint(err) != "ep 8: applies to --timing default, and the passes that run it are priced by --timing polynomial" {
		t.Errorf("aggregated on polynomial: %v", err)
	}
}
