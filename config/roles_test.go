package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/aic"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRoleSections: prefill: and decode: sections set each pool's engines, and only theirs; a key a
// section leaves out keeps the shared setting.
func TestRoleSections(t *testing.T) {
	c := Default()
	c.Timing = "polynomial" // profiles are measured at TP 1
	p := writeConfig(t, `prefill-workers: 2
decode-workers: 3
max-num-seqs: 64
num-gpu-blocks: 1000
prefill:
  tp: 2
  max-num-batched-tokens: 16384
decode:
  tp: 4
  max-num-seqs: 512
  num-gpu-blocks: 3000
  enable-chunked-prefill: false
`)
	if err := c.Load(p); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	o, err := c.SimOptions()
	if err != nil {
		t.Fatal(err)
	}
	pe, de := o.PrefillEngine.VLLM, o.DecodeEngine.VLLM
	type got struct {
		seqs, batched, blocks int
		chunked               bool
	}
	if g, want := (got{pe.MaxNumSeqs, pe.MaxBatchedTokens, pe.NumBlocks, pe.ChunkedPrefill}), (got{64, 16384, 1000, true}); g != want {
		t.Errorf("prefill engine %+v, want %+v", g, want)
	}
	if g, want := (got{de.MaxNumSeqs, de.MaxBatchedTokens, de.NumBlocks, de.ChunkedPrefill}), (got{512, 8192, 3000, false}); g != want {
		t.Errorf("decode engine %+v, want %+v", g, want)
	}
	if o.Engine.VLLM.MaxBatchedTokens != 16384 {
		t.Errorf("the ingress engine is not the prefill pool's: %+v", o.Engine.VLLM)
	}
	if c.ForRole("prefill").TP != 2 || c.ForRole("decode").TP != 4 || c.TP != 1 {
		t.Errorf("tp: prefill %d, decode %d, shared %d", c.ForRole("prefill").TP, c.ForRole("decode").TP, c.TP)
	}
}

// TestDeployed: a search's shape replaces the worker counts, given or not (--workers 2 contradicts no
// disaggregated shape), keeps the pools' own settings where it is disaggregated and drops them, given
// keys too, where it is aggregated.
func TestDeployed(t *testing.T) {
	c := Default()
	c.Model, c.System, c.Timing = "", "", "fixed"
	c.Workers = 2
	c.Given("workers", "")
	seqs := 7
	c.Decode.MaxNumSeqs = &seqs
	c.Given("decode-max-num-seqs", "")
	if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "decode-max-num-seqs 7: sets the decode workers of disaggregated serving") {
		t.Fatalf("Validate() = %v, want decode-max-num-seqs refused without disaggregation", err)
	}
	agg := c.Deployed(3, 0, 0)
	if err := agg.Validate(); err != nil {
		t.Errorf("aggregated: Validate() = %v", err)
	}
	if agg.Workers != 3 || agg.PrefillWorkers != 0 || agg.Decode.MaxNumSeqs != nil || agg.isGiven("decode-max-num-seqs") || agg.isGiven("workers") {
		t.Errorf("aggregated: workers %d, prefill %d, decode's max-num-seqs %v, given %v", agg.Workers, agg.PrefillWorkers, agg.Decode.MaxNumSeqs, agg.given)
	}
	d := c.Deployed(0, 2, 1)
	if err := d.Validate(); err != nil {
		t.Errorf("disaggregated: Validate() = %v", err)
	}
	if d.Workers != 1 || d.PrefillWorkers != 2 || d.DecodeWorkers != 1 || d.ForRole("decode").MaxNumSeqs != 7 || d.ForRole("prefill").MaxNumSeqs != c.MaxNumSeqs {
		t.Errorf("disaggregated: workers %d, prefill %d, decode %d, decode's max-num-seqs %d", d.Workers, d.PrefillWorkers, d.DecodeWorkers, d.ForRole("decode").MaxNumSeqs)
	}
	if c.Workers != 2 || !c.isGiven("workers") || c.Decode.MaxNumSeqs == nil {
		t.Error("Deployed changed its receiver")
	}
}

// TestRoleErrorsNamed: a per-role key is validated as the shared one is and named with its role, file and
// line; without disaggregated serving it is refused; an unknown key in a section is an error.
func TestRoleErrorsNamed(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"prefill:\n  tp: 2\n", "c.yaml line 2: prefill-tp 2: sets the prefill workers of disaggregated serving; give --prefill-workers and --decode-workers"},
		{"prefill-workers: 1\ndecode-workers: 1\ndecode:\n  max-num-seqs: -1\n", "c.yaml line 4: decode-max-num-seqs -1: must be at least 1 (0: auto)"},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  tp: 2\n  speculative: 3\n", `c.yaml line 5: prefill: unknown key "speculative"`},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  block-size: 32\n", `c.yaml line 4: prefill: unknown key "block-size"`},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  tp: 2.5\n", `c.yaml line 4: prefill: tp: want an integer, got "2.5"`},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  tp: 2\n  tp: 4\n", `c.yaml line 5: prefill: key "tp" given twice`},
		{"prefill-workers: 1\ndecode-workers: 1\nprefill:\n  tp: 2\nprefill:\n  tp: 4\n", `c.yaml line 5: key "prefill" given twice`},
		{"prefill-workers: 1\ndecode-workers: 1\ndecode: 4\n", "c.yaml line 3: decode: want a mapping"},
		{"prefill-workers: 1\ndecode-workers: 1\ndecode:\n  timing: roofline\n", "c.yaml line 4: decode-timing roofline: want default, profile, polynomial or fixed"},
		{"prefill-workers: 512\ndecode-workers: 512\ndecode:\n  dp-size: 2\n", "prefill-workers 512 × their dp-size and decode-workers 512 × theirs are 1536 engine ranks; at most 1024"},
		{"prefill-workers: 1\ndecode-workers: 1\ndecode:\n  dp-size: 2000\n", "c.yaml line 4: decode-dp-size 2000: at most 1024"},
	} {
		err := loadAndValidate(writeConfig(t, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.body, err, tc.want)
		}
	}
	// A list has no value to quote, in a section as at the top level.
	for _, body := range []string{"tp: [1, 2]\n", "prefill-workers: 1\ndecode-workers: 1\nprefill:\n  tp: [1, 2]\n"} {
		path := writeConfig(t, body)
		c := Default()
		err := c.Load(path)
		if !strings.HasSuffix(fmt.Sprint(err), "tp: want an integer") {
			t.Errorf("%q: got %v, want ...tp: want an integer", body, err)
		}
	}
	// Ranks are counted per pool: 512 prefill workers of 1 rank and 256 decode workers of 2 fit, though
	// the shared dp-size 2 on all 768 workers would not.
	c0 := Default()
	c0.PrefillWorkers, c0.DecodeWorkers, c0.DPSize, c0.Timing = 512, 256, 2, "polynomial"
	must(t, c0.Prefill.Set("dp-size", "1"))
	if err := c0.Validate(); err != nil {
		t.Errorf("512 × 1 + 256 × 2 ranks: %v", err)
	}
	// A flag's error names the flag, without a place.
	c := Default()
	c.PrefillWorkers, c.DecodeWorkers = 1, 1
	if err := c.Prefill.Set("max-num-batched-tokens", "0"); err != nil {
		t.Fatal(err)
	}
	c.Given("prefill-max-num-batched-tokens", "")
	if err := c.Validate(); err == nil || err.Error() != "prefill-max-num-batched-tokens 0: must be at least 1" {
		t.Errorf("got %v", err)
	}
	if err := c.Prefill.Set("tp", "two"); err == nil || err.Error() != "want an integer" {
		t.Errorf("tp two: %v", err)
	}
	if err := c.Decode.Set("num-gpu-blocks", "auto"); err != nil || c.Decode.Get("num-gpu-blocks") != Auto {
		t.Errorf("num-gpu-blocks auto: %v, %q", err, c.Decode.Get("num-gpu-blocks"))
	}
}

// TestPoolsEPSplit: disaggregated, --ep must divide each pool's GPUs, not the shared --tp, which no pool
// runs where both set their own: ep 8 with prefill-tp 4 (its own ep 4) and decode-tp 8 is valid. An error
// names the pool where only one fails, the pool's own key where it set one.
func TestPoolsEPSplit(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"prefill:\n  tp: 4\n  ep: 4\ndecode:\n  tp: 8\n", ""},
		{"decode:\n  tp: 8\n", "prefill workers: ep 8: must divide tp 1 (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)"},
		{"", "ep 8: must divide tp 1 (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)"},
		{"prefill:\n  tp: 4\ndecode:\n  tp: 8\n", "prefill workers: ep 8: must divide tp 4 (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)"},
		{"prefill:\n  tp: 8\n  ep: 3\ndecode:\n  tp: 8\n", "line 7: prefill-ep 3: must divide tp 8 (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)"},
		// A pool's ep below 1 is its own setting's error, not a division by it.
		{"prefill:\n  ep: 0\ndecode:\n  tp: 8\n", "line 6: prefill-ep 0: must be at least 1"},
		{"prefill:\n  tp: 8\ndecode:\n  ep: -2\n", "line 8: decode-ep -2: must be at least 1"},
	} {
		err := loadAndValidate(writeConfig(t, "model: qwen3-30b-a3b\nep: 8\nprefill-workers: 1\ndecode-workers: 1\n"+tc.body))
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasSuffix(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestRolesFixedTiming replays four 100-token prompts that arrive together on one prefill and one
// decode worker, with fixed timing (prefill pass 10 ms, decode pass 1 ms, output 4 tokens; the first
// token comes from the decode worker's first pass, so TTFT = prefill end + 1 ms).
func TestRolesFixedTiming(t *testing.T) {
	run := func(t *testing.T, edit func(c *Config)) (ttft, e2e []float64) {
		t.Helper()
		c := Default()
		c.NumRequests, c.InputTokens, c.InputTokensStddev, c.OutputTokens, c.OutputTokensStddev = 4, 100, 0, 4, 0
		c.RequestRate, c.SharedPrefixRatio = math.Inf(1), 0
		c.Timing, c.PrefillMs, c.DecodeMs = "fixed", 10, 1
		c.PrefillWorkers, c.DecodeWorkers = 1, 1
		edit(&c)
		res, _ := simulate(t, &c)
		var b bytes.Buffer
		must(t, res.Collector.WriteRequestsJSONL(&b))
		dec := json.NewDecoder(&b)
		for dec.More() {
			var r struct{ TTFT, E2E float64 }
			must(t, dec.Decode(&struct {
				TTFT *float64 `json:"ttft_ms"`
				E2E  *float64 `json:"e2e_ms"`
			}{&r.TTFT, &r.E2E}))
			ttft, e2e = append(ttft, r.TTFT), append(e2e, r.E2E)
		}
		return ttft, e2e
	}
	for _, tc := range []struct {
		name      string
		edit      func(*Config)
		ttft, e2e []float64
	}{
		// One prefill pass holds all four prompts (400 of 8,192 tokens); the decode worker runs them together.
		{"shared", func(*Config) {}, []float64{11, 11, 11, 11}, []float64{14, 14, 14, 14}},
		// The prefill pool's budget of 200 tokens splits them over two passes, 0–10 and 10–20 ms.
		{"prefill budget", func(c *Config) { must(t, c.Prefill.Set("max-num-batched-tokens", "200")) }, []float64{11, 11, 21, 21}, []float64{14, 14, 24, 24}},
		// The decode pool runs two at a time: the last two wait there from 10 to 14 ms.
		{"decode seqs", func(c *Config) { must(t, c.Decode.Set("max-num-seqs", "2")) }, []float64{11, 11, 15, 15}, []float64{14, 14, 18, 18}},
		// A shared limit of 2 bounds the prefill pool; the decode pool's own 4 does not reach it.
		{"decode overrides shared", func(c *Config) { c.MaxNumSeqs = 2; must(t, c.Decode.Set("max-num-seqs", "4")) }, []float64{11, 11, 21, 21}, []float64{14, 14, 24, 24}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ttft, e2e := run(t, tc.edit)
			if !equal(ttft, tc.ttft) || !equal(e2e, tc.e2e) {
				t.Errorf("TTFT %v, E2E %v; want %v, %v", ttft, e2e, tc.ttft, tc.e2e)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRolesOpLevelTiming: with op-level timing, prefill TP 2 and decode TP 4 price each pool's passes
// with the op-level model at that TP, and size each pool's KV cache at that TP.
func TestRolesOpLevelTiming(t *testing.T) {
	const db = "../../../shared/data/aiconfigurator"
	if _, err := os.Stat(db); err != nil {
		t.Skipf("no performance database (%v)", err)
	}
	c := Default()
	c.Timing, c.PerfDB = "default", db
	c.PrefillWorkers, c.DecodeWorkers = 1, 1
	must(t, c.Prefill.Set("tp", "2"))
	must(t, c.Decode.Set("tp", "4"))
	must(t, c.Validate())
	o, err := c.SimOptions()
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Deployment()
	if err != nil {
		t.Fatal(err)
	}
	batches := []timing.Batch{
		{Seqs: []timing.Seq{{New: 1024, Prefill: true, Samples: true}}},
		{Seqs: []timing.Seq{{New: 3000, Cached: 1000, Prefill: true, Samples: true}, {New: 500, Prefill: true}}},
		{Seqs: []timing.Seq{{New: 1, Cached: 1000, Samples: true}, {New: 1, Cached: 4000, Samples: true}}},
	}
	blocks := map[int]int{}
	for _, pool := range []struct {
		tp  int
		eng *timing.Model
		n   int
	}{{2, &o.PrefillEngine.Timing, o.PrefillEngine.VLLM.NumBlocks}, {4, &o.DecodeEngine.Timing, o.DecodeEngine.VLLM.NumBlocks}} {
		m, err := aic.New(aic.Options{Model: d.Model, System: d.System, Root: db, Backend: "vllm", TP: pool.tp, KVCacheDtype: "auto"})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			if got, want := (*pool.eng).Cost(&b), m.Cost(&b); got != want {
				t.Errorf("tp %d: %+v costs %v, want the op-level model's %v", pool.tp, b.Seqs, got, want)
			}
		}
		// The pool an aggregated worker at that TP would have.
		agg := Default()
		agg.TP = pool.tp
		ad, err := agg.Deployment()
		if err != nil {
			t.Fatal(err)
		}
		if pool.n != ad.KVBlocks {
			t.Errorf("tp %d: %d KV blocks, want %d", pool.tp, pool.n, ad.KVBlocks)
		}
		blocks[pool.tp] = pool.n
	}
	if blocks[4] <= blocks[2] {
		t.Errorf("KV blocks at tp 4 (%d) not above tp 2 (%d)", blocks[4], blocks[2])
	}
	// One request end to end: its TTFT is the prefill pass at TP 2 and the decode worker's first pass at
	// TP 4 (no transfer time without a bandwidth); its TPOT one more decode pass at TP 4.
	c.NumRequests, c.InputTokens, c.InputTokensStddev, c.OutputTokens, c.OutputTokensStddev = 1, 1000, 0, 3, 0
	src, err := c.Source()
	must(t, err)
	res, err := sim.Run(src, o)
	must(t, err)
	m2, _ := aic.New(aic.Options{Model: d.Model, System: d.System, Root: db, Backend: "vllm", TP: 2, KVCacheDtype: "auto"})
	m4, _ := aic.New(aic.Options{Model: d.Model, System: d.System, Root: db, Backend: "vllm", TP: 4, KVCacheDtype: "auto"})
	pass := func(m timing.Model, seqs ...timing.Seq) time.Duration {
		c := m.Cost(&timing.Batch{Seqs: seqs})
		return c.Total()
	}
	// The prefill worker computes the prompt without sampling; the decode worker's first pass computes
	// the last prompt token and samples the first output token, then decodes at contexts 1,000 and 1,001.
	ttft := pass(m2, timing.Seq{New: 1000, Prefill: true}) + pass(m4, timing.Seq{New: 1, Cached: 999, Samples: true})
	tpot := (pass(m4, timing.Seq{New: 1, Cached: 1000, Samples: true}) + pass(m4, timing.Seq{New: 1, Cached: 1001, Samples: true})) / 2
	if got, want := res.Summary.TTFT.Mean, float64(ttft)/1e6; got != want {
		t.Errorf("TTFT %v ms, want %v", got, want)
	}
	if got, want := res.Summary.TPOT.Mean, float64(tpot)/1e6; got != want {
		t.Errorf("TPOT %v ms, want %v", got, want)
	}
	if o.Transfer.BytesPerToken != 0 {
		t.Errorf("no bandwidth, yet %d bytes per token", o.Transfer.BytesPerToken)
	}
}

// TestRolesTimingInfo: the report names each pool's timing where the pools differ, and one where they
// agree; the shared TP, which no pool runs, is not priced (70B does not fit one H200).
func TestRolesTimingInfo(t *testing.T) {
	c := Default()
	c.Model, c.PrefillWorkers, c.DecodeWorkers = "llama-3.1-70b", 1, 1
	c.Workers = 0
	tp2, tp4 := 2, 4
	c.Prefill.TP, c.Decode.TP = &tp2, &tp4
	info, err := c.TimingInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.Model != "default" || info.Source != "embedded" || strings.Contains(info.Version, "prefill") {
		t.Errorf("pools alike: %+v, want one op-level timing", info)
	}
	poly := "polynomial"
	c.Decode.Timing = &poly
	if info, err = c.TimingInfo(); err != nil {
		t.Fatal(err)
	}
	if info.Model != "prefill default, decode polynomial" {
		t.Errorf("pools differ: timing %q, want both named", info.Model)
	}
}
