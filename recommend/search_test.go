package recommend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sim"
)

// small is a synthetic workload that queues on few workers: 200 requests of 256 prompt and 16 output
// tokens at 200 req/s, priced by fixed timing (a pass that computes prompt tokens 20 ms, one that
// samples 5 ms), at most 512 tokens a pass.
func small() config.Config {
	c := config.Default()
	c.Model, c.System = "", ""
	c.Timing, c.PrefillMs, c.DecodeMs = "fixed", 20, 5
	c.NumRequests, c.RequestRate, c.Arrival = 200, 200, "constant"
	c.InputTokens, c.InputTokensStddev = 256, 0
	c.OutputTokens, c.OutputTokensStddev = 16, 0
	c.SharedPrefixRatio = 0
	c.MaxNumBatchedTokens = 512
	return c
}

// direct runs cfg as predict would and returns the p-th percentile of metric.
func direct(t *testing.T, cfg config.Config, m report.Metric, p int) float64 {
	t.Helper()
	src, err := cfg.Source()
	if err != nil {
		t.Fatal(err)
	}
	o, err := cfg.SimOptions()
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(src, o)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := res.Collector.Percentile(m, p)
	return v
}

func space() *Space {
	return &Space{Backends: []string{"vllm"}, TP: []int{1}, EP: []int{1}, Modes: []string{"agg"},
		MinWorkers: 1, MaxWorkers: 8, MaxNumSeqs: []int{256}, MaxNumBatchedTokens: []int{512}, Routers: []string{"round-robin"}}
}

func TestFewestWorkers(t *testing.T) {
	base := small()
	// The p90 TTFT at each worker count, run directly; the target sits between 2 and 3 workers'.
	var ttft []float64
	for n := 1; n <= 8; n++ {
		c := base
		c.Workers = n
		ttft = append(ttft, direct(t, c, report.TTFT, 90))
	}
	t.Logf("p90 TTFT by workers: %v", ttft)
	for i := 1; i < len(ttft); i++ {
		if ttft[i] > ttft[i-1] {
			t.Fatalf("p90 TTFT grows from %d to %d workers: %v", i, i+1, ttft)
		}
	}
	target := (ttft[1] + ttft[2]) / 2
	if !(ttft[1] > target && ttft[2] <= target) {
		t.Fatalf("workload does not separate 2 from 3 workers: %v", ttft)
	}
	rep, err := Search(&base, space(), Options{Targets: []Target{{report.TTFT, 90, target}}})
	if err != nil {
		t.Fatal(err)
	}
	best := rep.Candidates[0]
	if !best.Pass || best.Workers != 3 || best.GPUs != 3 {
		t.Fatalf("best = %+v, want 3 workers passing", best)
	}
	if got := best.Checks[0].Ms; got != ttft[2] {
		t.Errorf("best's p90 TTFT %v, want %v as run directly", got, ttft[2])
	}
	// 8 sizes: 8 runs in full, then 4, 2, 3 (4 passes, 2 fails, 3 passes).
	if rep.Simulated != 4 || rep.Skipped != 4 {
		t.Errorf("simulated %d, skipped %d; want 4 and 4", rep.Simulated, rep.Skipped)
	}
	for _, c := range rep.Candidates {
		want := c.Workers >= 3
		if c.Pass != want {
			t.Errorf("%d workers: pass %v, want %v (%s)", c.Workers, c.Pass, want, c.Why)
		}
	}
}

func TestUnreachableByBound(t *testing.T) {
	base := small()
	// Any request's first token takes a pass that computes prompt tokens and samples: 20 + 5 ms.
	rep, err := Search(&base, space(), Options{Targets: []Target{{report.TTFT, 90, 24}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Simulated != 0 || rep.Skipped != 8 || rep.BoundPruned != 1 {
		t.Errorf("simulated %d, skipped %d, bound-pruned %d; want 0, 8, 1", rep.Simulated, rep.Skipped, rep.BoundPruned)
	}
	want := "prefill of the 256-token prompt (256 tokens uncached at best) alone takes 25 ms on one idle worker at TP 1"
	if b := rep.Shapes[0].Bounds[0]; b.Ms != 25 || b.What != want {
		t.Errorf("bound %+v, want 25 ms: %s", b, want)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"No deployment in the search space meets the targets.",
		"p90 TTFT 25.0 ms at best > 24 ms: prefill of the 256-token prompt (256 tokens uncached at best) alone takes 25 ms on one idle worker at TP 1",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestUnreachableByITLBound(t *testing.T) {
	base := small()
	// A pass that samples takes 5 ms, so no gap between two tokens is shorter.
	rep, err := Search(&base, space(), Options{Targets: []Target{{report.ITL, 50, 4.9}}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.WriteTable(&out)
	want := "p50 ITL 5.0 ms at best > 4.9 ms: a decode step of one request alone, at the shortest context (257 tokens), takes 5.0 ms on one idle worker at TP 1\n"
	if rep.Simulated != 0 || rep.BoundPruned != 1 || !strings.Contains(out.String(), want) {
		t.Errorf("simulated %d, bound-pruned %d; want 0 and 1, and the table to say %q:\n%s", rep.Simulated, rep.BoundPruned, want, out.String())
	}
	// At 5 ms the bound allows it, and the runs decide.
	if rep, err = Search(&base, space(), Options{Targets: []Target{{report.ITL, 50, 5}}}); err != nil || rep.BoundPruned != 0 || rep.Simulated == 0 {
		t.Errorf("target 5 ms: bound-pruned %d, simulated %d, err %v; want the shape run", rep.BoundPruned, rep.Simulated, err)
	}
}

func TestUnreachableNamesClosest(t *testing.T) {
	base := small()
	// 16 tokens, a pass each of 5 ms at least: an E2E of 50 ms is out of reach, and nothing bounds E2E
	// ahead, so the largest deployment runs, fails, and is named with its miss and its shape's bounds.
	rep, err := Search(&base, space(), Options{Targets: []Target{{report.TTFT, 90, 1000}, {report.E2E, 90, 50}}})
	if err != nil {
		t.Fatal(err)
	}
	c := base
	c.Workers = 8
	e2e := direct(t, c, report.E2E, 90)
	var out bytes.Buffer
	rep.WriteTable(&out)
	for _, want := range []string{
		"No deployment in the search space meets the targets.",
		fmt.Sprintf("Closest:\n  8 × vllm agg tp1 seqs 256 mbt 512 round-robin (8 GPUs): p90 E2E %.1f ms > 50 ms (+%.0f%%)\n", e2e, 100*(e2e/50-1)),
		"    p90 TTFT at least 25.0 ms: prefill of the 256-token prompt",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if rep.Simulated != 1 {
		t.Errorf("simulated %d, want 1: the largest fails, so every smaller one does", rep.Simulated)
	}
}

func TestFindMaxRate(t *testing.T) {
	base := small()
	sp := space()
	sp.MinWorkers, sp.MaxWorkers = 2, 2
	const target = 60
	rep, err := Search(&base, sp, Options{Targets: []Target{{report.TTFT, 90, target}}, Objective: MaxRate})
	if err != nil {
		t.Fatal(err)
	}
	b := rep.Shapes[0].Rates[0]
	if !(b.Pass > 0 && b.Fail > b.Pass && b.Fail/b.Pass <= rateTolerance) {
		t.Fatalf("bracket %+v: want 0 < pass < fail <= pass × %v", b, rateTolerance)
	}
	at := func(rate float64) float64 {
		c := base
		c.Workers, c.ArrivalSpeedupRatio = 2, rate
		return direct(t, c, report.TTFT, 90)
	}
	if lo, hi := at(b.Pass), at(b.Fail); !(lo <= target && hi > target) {
		t.Errorf("p90 TTFT %v ms at %v× and %v ms at %v×: want the %v ms target crossed between", lo, b.Pass, hi, b.Fail, float64(target))
	}
}

func TestThreadsSameJSON(t *testing.T) {
	base := small()
	// The op-level model, whose tables the threads share.
	base.Model, base.System, base.Timing = "llama-3.1-8b", "h200_sxm", "default"
	sp := space()
	sp.TP = []int{1, 2}
	sp.Routers = []string{"round-robin", "kv"}
	sp.Modes = []string{"agg", "disagg"}
	sp.Ratios = []Ratio{{1, 1}}
	sp.MaxWorkers = 6
	targets := []Target{{report.TTFT, 90, 60}, {report.E2E, 90, 200}}
	// 4 threads: four shapes at once, one thread each; 48: all twelve, four threads each.
	var outs [3]bytes.Buffer
	for i, threads := range []int{1, 4, 48} {
		rep, err := Search(&base, sp, Options{Targets: targets, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteJSON(&outs[i]); err != nil {
			t.Fatal(err)
		}
		if i == 0 && (rep.StoppedEarly == 0 || len(rep.Shapes) != 12) {
			t.Errorf("%d shapes, %d runs stopped early: want 12 shapes and some early stops", len(rep.Shapes), rep.StoppedEarly)
		}
	}
	if !bytes.Equal(outs[0].Bytes(), outs[1].Bytes()) || !bytes.Equal(outs[0].Bytes(), outs[2].Bytes()) {
		t.Error("the report differs between 1, 4 and 48 threads")
	}
}

// TestShapeNamesAuto: a shape of --max-num-seqs auto carries what auto means on it, each pool's when
// disaggregated (SGLang on one H200 with llama-3.1-8b: 3,470 at TP 1, and the cap of 4,096 at TP 2,
// whose pool is more than twice as large); a number given stays as given.
func TestShapeNamesAuto(t *testing.T) {
	base := config.Default()
	base.Backend, base.Timing, base.PrefillMs, base.DecodeMs = "sglang", "fixed", 20, 5
	sp := &Space{Backends: []string{"sglang"}, TP: []int{1}, EP: []int{1}, Modes: []string{"agg", "disagg"}, Ratios: []Ratio{{1, 1}},
		PrefillTP: []int{1}, DecodeTP: []int{2}, MinWorkers: 2, MaxWorkers: 2, MaxNumSeqs: []int{0, 64}, MaxNumBatchedTokens: []int{512},
		Routers: []string{"round-robin"}}
	shapes, refused, err := sp.shapes(&base)
	if err != nil || len(refused) != 0 {
		t.Fatalf("shapes: %v, refused %v", err, refused)
	}
	var names []string
	for _, s := range shapes {
		names = append(names, s.String())
	}
	want := []string{
		"sglang agg tp1 seqs auto=3470 mbt 512 round-robin",
		"sglang agg tp1 seqs 64 mbt 512 round-robin",
		"sglang disagg 1:1 tp1/2 seqs auto=3470/4096 mbt 512 round-robin",
		"sglang disagg 1:1 tp1/2 seqs 64 mbt 512 round-robin",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Errorf("shapes:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

// TestShapeNamesPools: a disaggregated shape names what each pool ran where a pool's own setting makes
// them differ, prefill/decode, and the shared value where they agree: --decode-max-num-seqs 8 under a
// shape of 16 is "seqs 16/8"; --prefill-max-num-seqs auto is auto=3470 on SGLang's prefill pool (TP 1,
// llama-3.1-8b on one H200) beside the decode pool's 8; --decode-ep 8 at decode TP 8 is "ep1/8"
// (qwen3-30b-a3b, the op-level model, which alone reads EP); an aggregated shape drops the pools'
// settings and names its own. The JSON carries each pool's, and none for an aggregated shape.
func TestShapeNamesPools(t *testing.T) {
	names := func(base *config.Config, sp *Space) []string {
		t.Helper()
		shapes, refused, err := sp.shapes(base)
		if err != nil || len(refused) != 0 {
			t.Fatalf("shapes: %v, refused %v", err, refused)
		}
		var names []string
		for _, s := range shapes {
			names = append(names, s.String())
		}
		return names
	}
	base := config.Default()
	base.Backend, base.Timing, base.PrefillMs, base.DecodeMs = "sglang", "fixed", 20, 5
	eight, auto, mbt := 8, 0, 1024
	base.Decode.MaxNumSeqs, base.Decode.MaxNumBatchedTokens = &eight, &mbt
	sp := &Space{Backends: []string{"sglang"}, TP: []int{1}, EP: []int{1}, Modes: []string{"agg", "disagg"}, Ratios: []Ratio{{1, 1}},
		MinWorkers: 2, MaxWorkers: 2, MaxNumSeqs: []int{16}, MaxNumBatchedTokens: []int{512}, Routers: []string{"round-robin"}}
	want := []string{"sglang agg tp1 seqs 16 mbt 512 round-robin", "sglang disagg 1:1 tp1/1 seqs 16/8 mbt 512/1024 round-robin"}
	if got := names(&base, sp); !slices.Equal(got, want) {
		t.Errorf("--decode-max-num-seqs 8: shapes %q, want %q", got, want)
	}
	base.Prefill.MaxNumSeqs = &auto
	want[1] = "sglang disagg 1:1 tp1/1 seqs auto=3470/8 mbt 512/1024 round-robin"
	if got := names(&base, sp); !slices.Equal(got, want) {
		t.Errorf("--prefill-max-num-seqs auto: shapes %q, want %q", got, want)
	}
	// Both pools' own value, the same: the shape's 16 ran nowhere.
	base.Prefill.MaxNumSeqs, base.Decode.MaxNumBatchedTokens = &eight, nil
	want[1] = "sglang disagg 1:1 tp1/1 seqs 8 mbt 512 round-robin"
	if got := names(&base, sp); !slices.Equal(got, want) {
		t.Errorf("both pools 8: shapes %q, want %q", got, want)
	}

	moe := config.Default()
	moe.Model = "qwen3-30b-a3b"
	moe.Decode.EP = &eight
	sp = &Space{Backends: []string{"vllm"}, TP: []int{8}, EP: []int{1}, Modes: []string{"disagg"}, Ratios: []Ratio{{1, 1}},
		PrefillTP: []int{1}, DecodeTP: []int{8}, MinWorkers: 2, MaxWorkers: 2, MaxNumSeqs: []int{64}, MaxNumBatchedTokens: []int{512},
		Routers: []string{"round-robin"}}
	shapes, refused, err := sp.shapes(&moe)
	if err != nil || len(shapes) != 1 {
		t.Fatalf("--decode-ep 8: shapes %v, refused %v, %v", shapes, refused, err)
	}
	if got, want := shapes[0].String(), "vllm disagg 1:1 tp1/8 ep1/8 seqs 64 mbt 512 round-robin"; got != want {
		t.Errorf("--decode-ep 8: shape %q, want %q", got, want)
	}
	js, err := json.Marshal(shapes[0])
	if err != nil {
		t.Fatal(err)
	}
	wantJS := `"pools":{"prefill":{"ep":1,"max_num_seqs":64,"max_num_batched_tokens":512},"decode":{"ep":8,"max_num_seqs":64,"max_num_batched_tokens":512}}`
	if !strings.Contains(string(js), wantJS) {
		t.Errorf("--decode-ep 8: JSON %s, want it to hold %s", js, wantJS)
	}
	agg, _ := json.Marshal(Shape{Backend: "vllm", TP: 1, EP: 1})
	if strings.Contains(string(agg), "pools") {
		t.Errorf("aggregated shape's JSON %s names pools", agg)
	}
}

// TestTargetWithinReplyHeader: gpt-oss opens every reply with a 3-token header the client does not see,
// so replies of 3 tokens show none: a TTFT target has nothing to measure and is refused, rather than met
// by every deployment at 0 ms. Replies of 4 tokens show one: an ITL target is refused and a TTFT target
// is run. A run whose requests show no token misses its TTFT target.
func TestTargetWithinReplyHeader(t *testing.T) {
	base := small()
	base.Model, base.OutputTokens = "gpt-oss-120b", 3
	ttft := Options{Targets: []Target{{report.TTFT, 90, 1000}}}
	_, err := Search(&base, space(), ttft)
	want := "sla ttft:p90:1000: no request has an output token beyond the model's 3-token reply header, which a client does not see, so none has a TTFT"
	if err == nil || err.Error() != want {
		t.Errorf("3-token replies, TTFT target: error %v, want %q", err, want)
	}
	shapes, _, err := space().shapes(&base)
	if err != nil {
		t.Fatal(err)
	}
	c := evaluate(&base, shapes[0], 1, 1, ttft.Targets, false, 1)
	if c.Pass || c.Checks[0].Met || c.Why != "p90 TTFT: no completed request has one" {
		t.Errorf("3-token replies run: pass %v, met %v, why %q; want the TTFT target missed for want of a sample", c.Pass, c.Checks[0].Met, c.Why)
	}

	base.OutputTokens = 4
	_, err = Search(&base, space(), Options{Targets: []Target{{report.ITL, 90, 1000}}})
	want = "sla itl:p90:1000: no request has 2 output tokens or more beyond the model's 3-token reply header, which a client does not see, so none has an ITL"
	if err == nil || err.Error() != want {
		t.Errorf("4-token replies, ITL target: error %v, want %q", err, want)
	}
	rep, err := Search(&base, space(), ttft)
	if err != nil {
		t.Fatal(err)
	}
	// The first token shown is the 4th: a pass that prefills and samples (25 ms), then 3 decode passes (5 ms).
	if best := rep.Candidates[0]; !best.Pass || !(best.Checks[0].Ms >= 40) {
		t.Errorf("4-token replies, TTFT target: best %+v, want a pass at 40 ms or more", best)
	}
}

// TestImpossibleTPRefused: a TP of the space that the model's attention heads do not split over is a
// shape refused with the reason, not a failed search; the other TPs are searched. Fixed timing, which
// prices any TP, refuses it too: no engine starts on it.
func TestImpossibleTPRefused(t *testing.T) {
	base := small()
	base.Model = "llama-3.1-8b"
	sp := space()
	sp.TP = []int{1, 3, 2}
	sp.Modes, sp.Ratios, sp.PrefillTP, sp.DecodeTP = []string{"agg", "disagg"}, []Ratio{{1, 1}}, []int{3}, []int{1}
	shapes, refused, err := sp.shapes(&base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range shapes {
		names = append(names, s.String())
	}
	if want := []string{"vllm agg tp1 seqs 256 mbt 512 round-robin", "vllm agg tp2 seqs 256 mbt 512 round-robin"}; !slices.Equal(names, want) {
		t.Errorf("shapes %q, want %q", names, want)
	}
	heads := "llama-3.1-8b's 32 attention heads do not split over 3 GPUs (TP must divide 32: 1, 2, 4, 8, 16, 32)"
	want := []string{"vllm agg tp3 seqs 256 mbt 512 round-robin: tp 3: " + heads,
		"vllm disagg 1:1 tp3/1 seqs 256 mbt 512 round-robin: prefill-tp 3: " + heads}
	if !slices.Equal(refused, want) {
		t.Errorf("refused:\n%s\nwant:\n%s", strings.Join(refused, "\n"), strings.Join(want, "\n"))
	}
}

// TestPoolSharedErrorOnce: a pool's own timing data (--prefill-profile), which every disaggregated shape
// reads, is checked once, before the search, as the shared settings are; not refused shape by shape.
func TestPoolSharedErrorOnce(t *testing.T) {
	base := small()
	missing := filepath.Join(t.TempDir(), "missing.json")
	timing := "profile"
	base.Prefill.Timing, base.Prefill.Profile = &timing, &missing
	sp := space()
	sp.TP, sp.MaxWorkers = []int{1, 2}, 2
	sp.Modes, sp.Ratios = []string{"agg", "disagg"}, []Ratio{{1, 1}}
	_, err := Search(&base, sp, Options{Targets: []Target{{report.TTFT, 90, 500}}})
	want := "--prefill-profile " + missing + ": not a built-in profile (h200-llama-3.1-8b-bf16, h200-qwen3-32b-bf16) nor a file: no such file or directory"
	if err == nil || err.Error() != want {
		t.Errorf("Search: %v, want %s", err, want)
	}
}

// TestDeployable: the base is judged at the space's TPs, holding when some deployment of them takes it
// (--decode-ep 8 with decode TPs 4 and 8), else with the first one's error; with a pool's own setting
// only a disaggregated deployment counts, which reads it, as with disagg alone in the modes.
func TestDeployable(t *testing.T) {
	base := config.Default()
	base.Model = "qwen3-30b-a3b"
	ep := 8
	base.Decode.EP = &ep
	sp := space()
	sp.Modes, sp.Ratios, sp.TP, sp.PrefillTP, sp.DecodeTP = []string{"agg", "disagg"}, []Ratio{{1, 1}}, []int{8}, []int{2}, []int{4, 8}
	if err := sp.Deployable(&base); err != nil {
		t.Errorf("decode TPs 4, 8: %v", err)
	}
	sp.DecodeTP = []int{4, 2}
	want := "decode-ep 8: must divide tp 4 (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)"
	if err := sp.Deployable(&base); err == nil || err.Error() != want {
		t.Errorf("decode TPs 4, 2: %v, want %s", err, want)
	}
	// A shared --ep 8 holds on the aggregated tp 8, though on no disaggregated pair.
	base.Decode.EP, base.EP = nil, 8
	if err := sp.Deployable(&base); err != nil {
		t.Errorf("ep 8, agg tp 8: %v", err)
	}
	sp.Modes = []string{"disagg"}
	want = "prefill workers: ep 8: must divide tp 2 (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)"
	if err := sp.Deployable(&base); err == nil || err.Error() != want {
		t.Errorf("ep 8, disagg only: %v, want %s", err, want)
	}
	// A --profile only trtllm's disaggregated layout would read, which the engine refuses, is read by no
	// shape that runs.
	prof := config.Default()
	prof.Profile = "h200-llama-3.1-8b-bf16"
	prof.Given("profile", "")
	sp = space()
	sp.Backends, sp.Modes, sp.Ratios = []string{"vllm", "trtllm"}, []string{"disagg"}, []Ratio{{1, 1}}
	want = "profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the passes are priced by --timing default"
	if err := sp.Deployable(&prof); err == nil || err.Error() != want {
		t.Errorf("vllm,trtllm disaggregated with --profile: %v, want %s", err, want)
	}
	sp.Modes = []string{"agg", "disagg"}
	if err := sp.Deployable(&prof); err != nil {
		t.Errorf("vllm,trtllm agg,disagg with --profile: %v", err)
	}
}

// TestDeployableUnread: what the command refused before Deployable is Deployable's, in the command's
// order and words: a backend's own setting no swept backend reads, a pool's own without disaggregated
// shapes (with the file's line that gave it), and an EP list above 1 where no pool is priced by the
// op-level model; each is taken where some shape reads it.
func TestDeployableUnread(t *testing.T) {
	base := small()
	base.SGLangSchedulePolicy = "lpm"
	base.Given("sglang-schedule-policy", "")
	sp := space()
	want := "sglang-schedule-policy lpm: applies to --backend sglang, and the deployment runs vllm"
	if err := sp.Deployable(&base); err == nil || err.Error() != want {
		t.Errorf("lpm on vllm: %v, want %s", err, want)
	}
	sp.Backends = []string{"vllm", "sglang"}
	if err := sp.Deployable(&base); err != nil {
		t.Errorf("lpm on vllm,sglang: %v", err)
	}

	base = small()
	seqs := 8
	base.Prefill.MaxNumSeqs = &seqs
	base.Given("prefill-max-num-seqs", "config c.yaml line 2")
	sp = space()
	want = "--prefill-max-num-seqs 8 (config c.yaml line 2): sets the prefill workers of disaggregated shapes, and --modes is agg (add disagg)"
	if err := sp.Deployable(&base); err == nil || err.Error() != want {
		t.Errorf("a pool's own, agg: %v, want %s", err, want)
	}
	sp.Modes, sp.Ratios = []string{"agg", "disagg"}, []Ratio{{1, 1}}
	if err := sp.Deployable(&base); err != nil {
		t.Errorf("a pool's own, agg,disagg: %v", err)
	}

	base = config.Default()
	base.Model, base.Timing = "qwen3-30b-a3b", "polynomial"
	sp = space()
	sp.TP, sp.EP = []int{8}, []int{1, 8}
	want = "--ep-list 1,8: applies to --timing default, and the passes are priced by --timing polynomial"
	if err := sp.Deployable(&base); err == nil || err.Error() != want {
		t.Errorf("ep 1,8 under polynomial: %v, want %s", err, want)
	}
	sp.EP = []int{1}
	if err := sp.Deployable(&base); err != nil {
		t.Errorf("ep 1 under polynomial: %v", err)
	}
	// A prefill pool priced by the op-level model reads it.
	sp.EP, sp.Modes, sp.Ratios = []int{1, 8}, []string{"agg", "disagg"}, []Ratio{{1, 1}}
	def := "default"
	base.Prefill.Timing = &def
	if err := sp.Deployable(&base); err != nil {
		t.Errorf("ep 1,8, prefill pool on default: %v", err)
	}
}
