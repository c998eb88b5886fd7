package profile

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

func builtin(t testing.TB, name string) *Steps {
	t.Helper()
	s, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func builtinRows(t testing.TB) []stepRow {
	t.Helper()
	rows, err := parseSteps(builtinFile, bytes.NewReader(builtinCSV))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// e2eBatch is the pass an end-to-end row measured: one whole prompt, or batch decodes at context ctx.
func e2eBatch(r stepRow) *timing.Batch {
	if r.kind == kindPrefill {
		return &timing.Batch{Seqs: []timing.Seq{{New: r.tokens, Prefill: true, Samples: true}}}
	}
	b := &timing.Batch{Seqs: make([]timing.Seq, r.batch)}
	for i := range b.Seqs {
		b.Seqs[i] = timing.Seq{New: 1, Cached: r.ctx - 1, Samples: true}
	}
	return b
}

func relErr(got time.Duration, wantMs float64) float64 {
	return (float64(got)/1e6 - wantMs) / wantMs
}

func TestBuiltin(t *testing.T) {
	want := []string{"h200-llama-3.1-8b-bf16", "h200-qwen3-32b-bf16"}
	if got := BuiltinNames(); !slices.Equal(got, want) {
		t.Fatalf("BuiltinNames() = %v, want %v", got, want)
	}
	for _, name := range want {
		if s := builtin(t, name); !strings.Contains(name, s.Model()) {
			t.Errorf("Builtin(%q).Model() = %q", name, s.Model())
		}
	}
	_, err := Builtin("h100-llama")
	if err == nil || !strings.Contains(err.Error(), want[0]) || !strings.Contains(err.Error(), want[1]) {
		t.Fatalf("Builtin(unknown) error = %v, want one listing %v", err, want)
	}
}

// TestStepsReproducesEndToEnd is the acceptance test: for both built-in profiles the additive model
// reproduces the file's own end-to-end prefill rows of ≥ 1024 tokens and every decode row within 10 %.
//
// The overhead term is fitted to these same rows (two numbers per model for ~35 rows), so the test also
// reports, per kind: the pure sum of the measured components (no overhead), and a leave-one-out error,
// where each row is predicted by a model whose overhead was fitted without it.
func TestStepsReproducesEndToEnd(t *testing.T) {
	rows := builtinRows(t)
	for _, name := range BuiltinNames() {
		s := builtin(t, name)
		a, b := s.Overhead()
		t.Logf("%s: overhead %.3f ms + %.3f µs/token", name, a, b*1e3)
		var e2e []stepRow
		for _, r := range rows {
			if r.model == s.Model() && (r.kind == kindPrefill || r.kind == kindDecode) {
				e2e = append(e2e, r)
			}
		}
		type worst struct {
			err float64
			at  string
		}
		w := map[string]*[3]worst{kindPrefill: {}, kindDecode: {}} // model, no overhead, leave-one-out
		note := func(k *worst, err float64, r stepRow) {
			if math.Abs(err) > math.Abs(k.err) {
				k.err, k.at = err, fmt.Sprintf("line %d: batch %d tokens %d ctx %d", r.line, r.batch, r.tokens, r.ctx)
			}
		}
		for i, r := range e2e {
			checked := r.kind == kindDecode || r.tokens >= 1024
			bt := e2eBatch(r)
			c := s.Cost(bt)
			err := relErr(c.Total(), r.p50)
			if checked && math.Abs(err) > 0.10 {
				t.Errorf("%s line %d (%s batch %d tokens %d ctx %d): model %.3f ms, measured %.3f ms (%+.1f %%)",
					name, r.line, r.kind, r.batch, r.tokens, r.ctx, float64(c.Total())/1e6, r.p50, 100*err)
			}
			bare, loo := *s, *s
			bare.overA, bare.overB = 0, 0
			loo.overA, loo.overB = s.fitOverhead(slices.Delete(slices.Clone(e2e), i, i+1))
			if checked {
				note(&w[r.kind][0], err, r)
				note(&w[r.kind][1], relErr(bare.Cost(bt).Total(), r.p50), r)
				note(&w[r.kind][2], relErr(loo.Cost(bt).Total(), r.p50), r)
			}
		}
		for _, kind := range []string{kindPrefill, kindDecode} {
			k := w[kind]
			t.Logf("%s %s: worst %+.1f %% (%s); components alone %+.1f %% (%s); leave-one-out %+.1f %% (%s)",
				name, kind, 100*k[0].err, k[0].at, 100*k[1].err, k[1].at, 100*k[2].err, k[2].at)
		}
	}
}

// TestStepsComponents pins the interpolation to the file: measured values at the knots.
func TestStepsComponents(t *testing.T) {
	rows := builtinRows(t)
	for _, name := range BuiltinNames() {
		s := builtin(t, name)
		for _, r := range rows {
			if r.model != s.Model() {
				continue
			}
			var got float64
			switch r.kind {
			case kindLinear:
				got = s.linearMs(float64(r.tokens))
			case kindAttnPrefill:
				got = s.attnPrefillMs(float64(r.tokens))
			case kindAttnDecode:
				got = s.attnDecodeMs(float64(r.batch), float64(r.ctx))
			default:
				continue
			}
			if got != r.p50 {
				t.Errorf("%s line %d %s: %v, want %v", name, r.line, r.kind, got, r.p50)
			}
		}
		if got := s.attnPrefillMs(0); got != 0 {
			t.Errorf("%s: attn_prefill(0) = %v, want 0", name, got)
		}
	}
}

// TestStepsChunkedPrefillAddsUp: causal attention is cumulative, so a prompt cut into chunks costs the same
// attention as the whole prompt, including chunks that cross the largest measured length.
func TestStepsChunkedPrefillAddsUp(t *testing.T) {
	s := builtin(t, "h200-llama-3.1-8b-bf16")
	attn := func(cached, n int) float64 {
		return s.attnPrefillMs(float64(cached+n)) - s.attnPrefillMs(float64(cached))
	}
	for _, total := range []int{1000, 8192, 30000} {
		var sum float64
		for c := 0; c < total; c += 2048 {
			sum += attn(c, min(2048, total-c))
		}
		if whole := attn(0, total); math.Abs(sum-whole) > 1e-9*whole {
			t.Errorf("%d tokens in chunks of 2048: attention %v, whole prompt %v", total, sum, whole)
		}
	}
	// A chunk costs no less attention the more is cached before it (the same within one linear segment).
	prev := 0.0
	for c := 0; c <= 64000; c += 1000 {
		a := attn(c, 512)
		if a < prev*(1-1e-12) {
			t.Fatalf("chunk of 512 after %d cached: %v ms, less than %v", c, a, prev)
		}
		prev = a
	}
	if a, b := attn(0, 512), attn(64000, 512); b < 10*a {
		t.Errorf("chunk of 512 after 64000 cached: %v ms, after none: %v ms; want the quadratic growth", b, a)
	}
}

// TestStepsLinearNotLogLog justifies interpolating linear() linearly in tokens: held out, each interior
// knot is predicted better from its two neighbours by a straight line than by a power law (log–log).
func TestStepsLinearNotLogLog(t *testing.T) {
	for _, name := range BuiltinNames() {
		x, y := builtin(t, name).linear.Knots()
		var worstLin, worstLog float64
		for i := 1; i+1 < len(x); i++ {
			lin := y[i-1] + (x[i]-x[i-1])*(y[i+1]-y[i-1])/(x[i+1]-x[i-1])
			f := math.Log(x[i]/x[i-1]) / math.Log(x[i+1]/x[i-1])
			loglog := y[i-1] * math.Pow(y[i+1]/y[i-1], f)
			worstLin = max(worstLin, math.Abs(lin-y[i])/y[i])
			worstLog = max(worstLog, math.Abs(loglog-y[i])/y[i])
		}
		t.Logf("%s: linear() held-out knots: worst %.1f %% linear, %.1f %% log-log", name, 100*worstLin, 100*worstLog)
		if worstLin >= worstLog {
			t.Errorf("%s: linear interpolation (%.3f) no better than log-log (%.3f)", name, worstLin, worstLog)
		}
	}
}

// TestStepsQuadraticTail: held out, the longest attn_prefill point is predicted far better by the parabola
// than by a straight line (which is why attn_prefill extrapolates quadratically).
func TestStepsQuadraticTail(t *testing.T) {
	rows := builtinRows(t)
	for _, name := range BuiltinNames() {
		model := builtinModels[name]
		var held stepRow
		var kept []stepRow
		for _, r := range rows {
			if r.model == model && r.kind == kindAttnPrefill && r.tokens == 16384 {
				held = r
				continue
			}
			kept = append(kept, r)
		}
		s, err := newSteps(builtinFile, model, kept)
		if err != nil {
			t.Fatal(err)
		}
		n := float64(held.tokens)
		quad := s.attnPrefillMs(n)
		line := s.attnPrefill.At(n)
		t.Logf("%s: attn_prefill(16384) held out: parabola %.1f ms (%+.1f %%), line %.1f ms (%+.1f %%), measured %.1f ms",
			name, quad, 100*(quad-held.p50)/held.p50, line, 100*(line-held.p50)/held.p50, held.p50)
		if math.Abs(quad-held.p50) > 0.05*held.p50 {
			t.Errorf("%s: parabola predicts %.1f ms at 16384, measured %.1f", name, quad, held.p50)
		}
	}
}

// TestStepsDecodeAttention: exact at the grid's points (TestStepsComponents), rising with context in every
// batch row, positive and finite far outside the measured region.
func TestStepsDecodeAttention(t *testing.T) {
	for _, name := range BuiltinNames() {
		s := builtin(t, name)
		for _, batch := range []float64{1, 3, 16, 48, 100, 256, 512, 1024} {
			prev := 0.0
			for ctx := 1.0; ctx <= 1<<17; ctx *= 1.25 {
				v := s.attnDecodeMs(batch, ctx)
				if !(v >= prev) || math.IsInf(v, 0) {
					t.Fatalf("%s: attn_decode(%v, %v) = %v after %v", name, batch, ctx, v, prev)
				}
				prev = v
			}
		}
	}
	// Bilinear inside a complete cell: llama batch 16..32 × ctx 1024..2048 at its centre is the mean of the
	// four corners (0.7078, 1.1743, 1.1828, 2.1200 ms).
	s := builtin(t, "h200-llama-3.1-8b-bf16")
	if got, want := s.attnDecodeMs(24, 1536), (0.7078+1.1743+1.1828+2.1200)/4; math.Abs(got-want) > 1e-12 {
		t.Errorf("attn_decode(24, 1536) = %v, want %v", got, want)
	}
}

// TestStepsDecodeAttentionHeldOut: the measured grid is triangular, so the missing corner (large batch at
// long context) is extrapolated. Hold out each batch's longest context and predict it from the rest; a
// batch left with one context borrows the scaled shape of its neighbour (attnDecodeGrid).
func TestStepsDecodeAttentionHeldOut(t *testing.T) {
	rows := builtinRows(t)
	for _, name := range BuiltinNames() {
		model := builtinModels[name]
		longest := map[int]stepRow{}
		for _, r := range rows {
			if r.model == model && r.kind == kindAttnDecode && r.ctx > longest[r.batch].ctx {
				longest[r.batch] = r
			}
		}
		worst, at := 0.0, ""
		for _, held := range longest {
			kept := slices.DeleteFunc(slices.Clone(rows), func(r stepRow) bool { return r == held })
			s, err := newSteps(builtinFile, model, kept)
			if err != nil {
				t.Fatal(err)
			}
			got := s.attnDecodeMs(float64(held.batch), float64(held.ctx))
			if e := (got - held.p50) / held.p50; math.Abs(e) > math.Abs(worst) {
				worst, at = e, fmt.Sprintf("batch %d ctx %d: %.3f ms, measured %.3f", held.batch, held.ctx, got, held.p50)
			}
		}
		t.Logf("%s: attn_decode at each batch's longest context, held out: worst %+.1f %% (%s)", name, 100*worst, at)
		if math.Abs(worst) > 0.10 {
			t.Errorf("%s: held-out attn_decode off by %+.1f %% (%s)", name, 100*worst, at)
		}
	}
}

func TestStepsCostSplit(t *testing.T) {
	s := builtin(t, "h200-llama-3.1-8b-bf16")
	lin := func(n int) float64 { return s.linearMs(float64(n)) + s.overheadMs(float64(n)) }
	decodes := func(n, ctx int) []timing.Seq {
		q := make([]timing.Seq, n)
		for i := range q {
			q[i] = timing.Seq{New: 1, Cached: ctx - 1, Samples: true}
		}
		return q
	}
	near := func(a time.Duration, b float64) bool { return math.Abs(float64(a)/1e6-b) < 1e-5 }

	// A prompt finishing in the pass is priced as prefill only: no decode attention, no decode share.
	whole := timing.Batch{Seqs: []timing.Seq{{New: 2048, Prefill: true, Samples: true}}}
	if c := s.Cost(&whole); !near(c.Prefill, lin(2048)+s.attnPrefillMs(2048)) || c.Decode != 0 {
		t.Errorf("whole prompt: %+v", c)
	}
	// Pure decode: all of it is Decode.
	dec := timing.Batch{Seqs: decodes(64, 2048)}
	if c := s.Cost(&dec); c.Prefill != 0 || !near(c.Decode, lin(64)+s.attnDecodeMs(64, 2048)) {
		t.Errorf("64 decodes: %+v", c)
	}
	// Mixed: a 448-token chunk over 1024 cached tokens with 64 decodes at mean context 2048. linear and
	// overhead are shared by tokens: 448 of 512 to prefill.
	mixed := timing.Batch{Seqs: append([]timing.Seq{{New: 448, Cached: 1024, Prefill: true}}, decodes(32, 1024)...)}
	mixed.Seqs = append(mixed.Seqs, decodes(32, 3072)...)
	c := s.Cost(&mixed)
	wantP := s.attnPrefillMs(1472) - s.attnPrefillMs(1024) + lin(512)*448/512
	wantD := s.attnDecodeMs(64, 2048) + lin(512)*64/512
	if !near(c.Prefill, wantP) || !near(c.Decode, wantD) {
		t.Errorf("mixed: %+v, want %.4f/%.4f ms", c, wantP, wantD)
	}
	// Nothing computed, nothing charged.
	if c := s.Cost(&timing.Batch{Seqs: []timing.Seq{{Cached: 64, Prefill: true}}}); c.Total() != 0 {
		t.Errorf("fully cached prompt: %+v", c)
	}
	if c := s.Cost(&timing.Batch{}); c.Total() != 0 {
		t.Errorf("empty batch: %+v", c)
	}
}

// loadSteps is ReadSteps's file's Steps of model.
func loadSteps(path, model string) (*Steps, error) {
	f, err := ReadSteps(path)
	if err != nil {
		return nil, err
	}
	return f.Steps(model)
}

func TestReadStepsMatchesBuiltin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.csv")
	if err := os.WriteFile(path, builtinCSV, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadSteps(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Models(); !slices.Equal(got, []string{"llama-3.1-8b", "qwen3-32b"}) {
		t.Errorf("Models() = %v, want the rows' two in order", got)
	}
	s, err := f.Steps("qwen3-32b")
	if err != nil {
		t.Fatal(err)
	}
	ref := builtin(t, "h200-qwen3-32b-bf16")
	b := benchBatch()
	if got, want := s.Cost(b), ref.Cost(b); got != want {
		t.Errorf("ReadSteps: %+v, Builtin: %+v", got, want)
	}
}

// TestReadStepsWithoutEndToEndRows: a profile of components only has no overhead.
func TestReadStepsWithoutEndToEndRows(t *testing.T) {
	csv := stepsHeader + "\n" +
		"m,linear,1,1,0,5,5,5,3\n" +
		"m,linear,1,100,0,6,6,6,3\n" +
		"m,attn_prefill,1,100,100,1,1,1,3\n" +
		"m,attn_decode,1,1,100,0.5,0.5,0.5,3\n"
	path := filepath.Join(t.TempDir(), "p.csv")
	if err := os.WriteFile(path, []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := loadSteps(path, "m")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := s.Overhead(); a != 0 || b != 0 {
		t.Errorf("Overhead() = %v, %v, want 0, 0", a, b)
	}
	b := timing.Batch{Seqs: []timing.Seq{{New: 100, Prefill: true, Samples: true}}}
	if c := s.Cost(&b); c.Total() != 7*time.Millisecond {
		t.Errorf("100-token prompt = %v, want 7ms", c.Total())
	}
}

func TestReadStepsErrors(t *testing.T) {
	const h = stepsHeader + "\n"
	const ok = "m,linear,1,1,0,5,4,6,3\nm,linear,1,8,0,6,5,7,3\nm,attn_prefill,1,8,8,1,1,1,3\nm,attn_decode,1,1,8,1,1,1,3\n"
	for _, tc := range []struct {
		name, csv, model string
		want             []string
	}{
		{"empty file", "", "m", []string{"p.csv", "empty file"}},
		{"bad header", "model,kind,batch\n", "m", []string{"p.csv:1", "header", stepsHeader}},
		{"no rows", h, "m", []string{"no data rows"}},
		{"short row", h + "m,linear,1,1,0,5\n", "m", []string{"p.csv:2", "6 fields, want 9"}},
		{"unknown kind", h + "m,mlp,1,1,0,5,4,6,3\n", "m", []string{"p.csv:2:3", "column kind", `"mlp"`}},
		{"batch not int", h + "m,linear,x,1,0,5,4,6,3\n", "m", []string{"p.csv:2:10", "column batch", `"x"`}},
		{"tokens zero", h + "m,linear,1,0,0,5,4,6,3\n", "m", []string{"p.csv:2:12", "column tokens", "want >= 1"}},
		{"ms not finite", h + "m,linear,1,1,0,NaN,4,6,3\n", "m", []string{"p.csv:2:16", "column ms_p50", "not a finite number"}},
		{"negative ms", h + "m,linear,1,1,0,5,-4,6,3\n", "m", []string{"p.csv:2", "column ms_p10", "want >= 0"}},
		{"percentiles swapped", h + "m,linear,1,1,0,5,6,4,3\n", "m", []string{"p.csv:2", "percentiles out of order"}},
		{"zero reps", h + "m,linear,1,1,0,5,4,6,0\n", "m", []string{"p.csv:2", "column reps"}},
		{"linear batch", h + "m,linear,2,1,0,5,4,6,3\n", "m", []string{"p.csv:2", "column batch", "want 1"}},
		{"decode tokens", h + "m,attn_decode,4,1,64,5,4,6,3\n", "m", []string{"p.csv:2", "column tokens", "want batch = 4"}},
		{"decode ctx", h + "m,decode,4,4,0,5,4,6,3\n", "m", []string{"p.csv:2", "column ctx", "want >= 1"}},
		{"empty model", h + ",linear,1,1,0,5,4,6,3\n", "m", []string{"p.csv:2:1", "column model"}},
		{"duplicate", h + ok + "m,linear,1,8,0,6,5,7,3\n", "m", []string{"p.csv:6", "line 3"}},
		{"duplicate but for an ignored ctx", h + ok + "m,attn_prefill,1,8,0,1,1,1,3\n", "m", []string{"p.csv:6", "line 4"}},
		{"bad row of another model", h + ok + "other,linear,1,1,0,5,4,6,three\n", "m", []string{"p.csv:6", "column reps"}},
		{"unknown model", h + ok, "llama", []string{"p.csv", `no rows for model "llama"`, "models: m"}},
		{"one linear row", h + "m,linear,1,1,0,5,4,6,3\nm,attn_prefill,1,8,8,1,1,1,3\nm,attn_decode,1,1,8,1,1,1,3\n", "m",
			[]string{"p.csv", "1 linear rows, want at least 2"}},
		{"no attn_decode", h + "m,linear,1,1,0,5,4,6,3\nm,linear,1,8,0,6,5,7,3\nm,attn_prefill,1,8,8,1,1,1,3\n", "m",
			[]string{"p.csv", "no attn_decode rows"}},
		{"quoting", h + "m,\"linear,1,1,0,5,4,6,3\n", "m", []string{"p.csv:2"}},
	} {
		path := filepath.Join(t.TempDir(), "p.csv")
		if err := os.WriteFile(path, []byte(tc.csv), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := loadSteps(path, tc.model)
		if err == nil {
			t.Errorf("%s: ReadSteps succeeded", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", tc.name, err, w)
			}
		}
	}
	if _, err := loadSteps(filepath.Join(t.TempDir(), "none.csv"), "m"); err == nil || !strings.Contains(err.Error(), "none.csv") {
		t.Errorf("missing file: %v", err)
	}
}

// benchBatch is a realistic chunked-prefill pass: one 2,048-token chunk over 4,096 cached tokens, and 64
// decodes at contexts from 300 to 6,600.
func benchBatch() *timing.Batch {
	b := &timing.Batch{Seqs: []timing.Seq{{New: 2048, Cached: 4096, Prefill: true}}}
	for i := range 64 {
		b.Seqs = append(b.Seqs, timing.Seq{New: 1, Cached: 300 + 100*i, Samples: true})
	}
	return b
}

func TestStepsCostDoesNotAllocate(t *testing.T) {
	s := builtin(t, "h200-llama-3.1-8b-bf16")
	b := benchBatch()
	if n := testing.AllocsPerRun(100, func() { s.Cost(b) }); n != 0 {
		t.Fatalf("Cost allocates %v times per call", n)
	}
}

func BenchmarkStepsCost(b *testing.B) {
	s := builtin(b, "h200-llama-3.1-8b-bf16")
	batch := benchBatch()
	b.ReportAllocs()
	for b.Loop() {
		s.Cost(batch)
	}
}

func BenchmarkPlannerCost(b *testing.B) {
	if _, err := os.Stat(plannerDir); err != nil {
		b.Skip(plannerMissing)
	}
	p, err := LoadPlanner(plannerDir)
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch()
	batch.ActiveKVTokens = 300000
	b.ReportAllocs()
	for b.Loop() {
		p.Cost(batch)
	}
}
