package profile

import (
	"bytes"
	_ "embed"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

// builtinCSV is our own H200 step-time profile (shared/data/SOURCES.md §5), embedded as the built-in default.
//
//go:embed data/h200_bf16_dense.csv
var builtinCSV []byte

const builtinFile = "data/h200_bf16_dense.csv"

// builtinModels maps each built-in profile name to its model in builtinCSV.
var builtinModels = map[string]string{
	"h200-llama-3.1-8b-bf16": "llama-3.1-8b",
	"h200-qwen3-32b-bf16":    "qwen3-32b",
}

// Steps prices a pass from measured step components (one model on one GPU, CUDA graphs, bf16):
//
//	time = linear(T) + overhead(T) + Σ_prefill seqs [attn_prefill(c+n) − attn_prefill(c)] + attn_decode(d, ctx)
//
// where T = Σ New over the pass; a prefill chunk computes n new tokens over c cached ones; d is the number
// of decode seqs (Prefill false, Samples true) and ctx their mean context (Cached+New). A request whose
// prompt completes in the pass is priced only as prefill: its first token comes from the prefill logits.
//
//   - linear is all non-attention work of the model (GEMMs, norms, activation), interpolated piecewise
//     linearly in tokens and extrapolated linearly above the largest measurement. On the log-spaced grid
//     this is better than log–log interpolation: the cost is close to affine between knots (weights are
//     read once, then work grows per token), which a straight line follows and a power law bows under;
//     held out, an interior knot is predicted within 6 % (8B) and 11 % (32B) by a line, 12 % and 17 %
//     by a power law.
//   - attn_prefill is causal attention of one sequence, with attn_prefill(0) = 0; being cumulative, a chunk
//     costs the difference. It is quadratic in length, so above the largest measurement it continues as
//     the parabola a·n² + b·n through the origin and the last two knots, not as a line (which would be
//     a third too low one doubling beyond the data).
//   - attn_decode is interpolated on its (batch, context) grid: rows = batch, curves over context, which is
//     bilinear where the grid is complete, with linear extrapolation outside. The measured grid lacks its
//     large-batch, long-context corner; there each batch's row extrapolates along context (see Grid and
//     attnDecodeGrid; held out, a batch's longest context is predicted within 6 %).
//   - overhead is the work the components do not measure (embedding, RoPE, KV-cache writes, sampling, the
//     seams between captured graphs): a + b·T fitted to the profile's end-to-end prefill and decode rows
//     by least squares on relative error. Without it the sum of the components is 10–28 % short of a
//     measured decode step; see Overhead. A profile without end-to-end rows has no overhead.
//
// In the Cost, Prefill is the prefill attention plus the prefill tokens' share (n/T) of linear+overhead,
// and Decode is the decode attention plus the rest; the total is what the measurements support.
//
// A Steps is immutable and safe for concurrent use; Cost does not allocate.
type Steps struct {
	model       string
	linear      Curve // ms by tokens in the pass
	attnPrefill Curve // ms by sequence length, through (0, 0)
	// Beyond tailFrom, attn_prefill(n) = tailA·n² + tailB·n; tailA = 0 means extrapolate attnPrefill.
	tailFrom, tailA, tailB float64
	attnDecode             Grid // ms: rows = batch, curves over context
	overA, overB           float64
}

var _ timing.Model = (*Steps)(nil)

// BuiltinNames returns the names Builtin accepts, sorted.
func BuiltinNames() []string { return slices.Sorted(maps.Keys(builtinModels)) }

var builtinSteps = sync.OnceValues(func() (map[string]*Steps, error) {
	rows, err := parseSteps(builtinFile, bytes.NewReader(builtinCSV))
	if err != nil {
		return nil, err
	}
	m := make(map[string]*Steps, len(builtinModels))
	for name, model := range builtinModels {
		if m[name], err = newSteps(builtinFile, model, rows); err != nil {
			return nil, err
		}
	}
	return m, nil
})

// Builtin returns a built-in step-time profile by name (see BuiltinNames).
func Builtin(name string) (*Steps, error) {
	m, err := builtinSteps()
	if err != nil {
		return nil, fmt.Errorf("profile: built-in %s: %w", builtinFile, err)
	}
	s, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("profile: unknown built-in step profile %q (want one of %s)", name, strings.Join(BuiltinNames(), ", "))
	}
	return s, nil
}

// Model is the model name the profile was read for.
func (s *Steps) Model() string { return s.model }

// Overhead is the fitted per-pass work the measured components leave out: perPassMs + perTokenMs·T for a
// pass of T tokens. Both are 0 when the profile has no end-to-end rows.
func (s *Steps) Overhead() (perPassMs, perTokenMs float64) { return s.overA, s.overB }

// Cost implements timing.Model. A pass that computes no token costs nothing.
func (s *Steps) Cost(b *timing.Batch) timing.Cost {
	var tokens, prefillTokens, nDecode, sumCtx int
	var attnP float64
	for i := range b.Seqs {
		q := &b.Seqs[i]
		tokens += q.New
		switch {
		case q.Prefill:
			prefillTokens += q.New
			if q.New > 0 {
				attnP += s.attnPrefillMs(float64(q.Cached+q.New)) - s.attnPrefillMs(float64(q.Cached))
			}
		case q.Samples:
			nDecode++
			sumCtx += q.Cached + q.New
		}
	}
	if tokens <= 0 {
		return timing.Cost{}
	}
	var attnD float64
	if nDecode > 0 {
		attnD = s.attnDecodeMs(float64(nDecode), float64(sumCtx)/float64(nDecode))
	}
	t := float64(tokens)
	lin := s.linearMs(t) + s.overheadMs(t)
	share := lin * float64(prefillTokens) / t
	return timing.Cost{Prefill: ms(attnP + share), Decode: ms(attnD + lin - share)}
}

func (s *Steps) linearMs(tokens float64) float64 { return max(s.linear.At(tokens), 0) }

func (s *Steps) overheadMs(tokens float64) float64 { return s.overA + s.overB*tokens }

// attnPrefillMs is causal attention of one sequence of n tokens.
func (s *Steps) attnPrefillMs(n float64) float64 {
	if n <= 0 {
		return 0
	}
	if n > s.tailFrom && s.tailA > 0 {
		return (s.tailA*n + s.tailB) * n
	}
	return max(s.attnPrefill.At(n), 0)
}

// attnDecodeMs is decode attention of batch seqs at mean context ctx.
func (s *Steps) attnDecodeMs(batch, ctx float64) float64 { return max(s.attnDecode.At(batch, ctx), 0) }

// newSteps builds the model's Steps from validated rows of file.
func newSteps(file, model string, rows []stepRow) (*Steps, error) {
	var lin, attnP, attnD, e2e []stepRow
	models := map[string]bool{}
	for _, r := range rows {
		models[r.model] = true
		if r.model != model {
			continue
		}
		switch r.kind {
		case kindLinear:
			lin = append(lin, r)
		case kindAttnPrefill:
			attnP = append(attnP, r)
		case kindAttnDecode:
			attnD = append(attnD, r)
		default:
			e2e = append(e2e, r)
		}
	}
	if !models[model] {
		return nil, fmt.Errorf("%s: no rows for model %q (models: %s)", file, model, strings.Join(slices.Sorted(maps.Keys(models)), ", "))
	}
	if len(lin) < 2 {
		return nil, fmt.Errorf("%s: model %q has %d %s rows, want at least 2", file, model, len(lin), kindLinear)
	}
	for _, k := range []struct {
		kind string
		rows []stepRow
	}{{kindAttnPrefill, attnP}, {kindAttnDecode, attnD}} {
		if len(k.rows) == 0 {
			return nil, fmt.Errorf("%s: model %q has no %s rows", file, model, k.kind)
		}
	}

	s := &Steps{model: model}
	var err error
	byTokens := func(a, b stepRow) int { return a.tokens - b.tokens }
	slices.SortFunc(lin, byTokens)
	if s.linear, err = NewCurve(column(lin, stepRow.tokensF), column(lin, stepRow.p50ms)); err != nil {
		return nil, fmt.Errorf("%s: model %q %s: %w", file, model, kindLinear, err)
	}
	slices.SortFunc(attnP, byTokens)
	x := append([]float64{0}, column(attnP, stepRow.tokensF)...)
	y := append([]float64{0}, column(attnP, stepRow.p50ms)...)
	if s.attnPrefill, err = NewCurve(x, y); err != nil {
		return nil, fmt.Errorf("%s: model %q %s: %w", file, model, kindAttnPrefill, err)
	}
	s.tailFrom, s.tailA, s.tailB = quadraticTail(x, y)
	if s.attnDecode, err = attnDecodeGrid(attnD); err != nil {
		return nil, fmt.Errorf("%s: model %q %s: %w", file, model, kindAttnDecode, err)
	}
	s.overA, s.overB = s.fitOverhead(e2e)
	return s, nil
}

// attnDecodeGrid grids attn_decode points: per batch size, a Curve over context. The measured grid is
// triangular (large batches only at short contexts, as memory allows), so rows extrapolate along context,
// the direction in which decode attention is close to linear. A batch measured at a single context would be
// a constant; it takes the shape of the nearest batch measured at two or more (a smaller one first),
// scaled by the ratio of batch sizes: every sequence reads its own KV, so attention grows with the batch.
func attnDecodeGrid(rows []stepRow) (Grid, error) {
	g, err := NewGridPoints(column(rows, stepRow.batchF), column(rows, stepRow.ctxF), column(rows, stepRow.p50ms))
	if err != nil {
		return Grid{}, err
	}
	batch, curves := g.Rows()
	fixed := false
	for j, c := range curves {
		if len(c.x) > 1 {
			continue
		}
		nb := -1
		for k := range curves { // nearest multi-knot row, a smaller batch winning ties
			if len(curves[k].x) > 1 && (nb < 0 || math.Abs(batch[k]-batch[j]) < math.Abs(batch[nb]-batch[j])) {
				nb = k
			}
		}
		if nb < 0 {
			break // no row has a shape to lend: all rows stay constant in context
		}
		ctx0, z0, ratio := c.x[0], c.y[0], batch[j]/batch[nb]
		base := curves[nb].At(ctx0)
		x := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(curves[nb].x), ctx0))))
		y := make([]float64, len(x))
		for i, ctx := range x {
			y[i] = z0 + ratio*(curves[nb].At(ctx)-base)
		}
		if curves[j], err = NewCurve(x, y); err != nil {
			return Grid{}, err
		}
		fixed = true
	}
	if !fixed {
		return g, nil
	}
	return NewGrid(batch, curves)
}

// quadraticTail fits a·n² + b·n through the origin and the last two knots (x[0] = 0). It returns a = 0
// when the data does not bend upwards there, and the tail is then the curve's own linear extrapolation.
func quadraticTail(x, y []float64) (from, a, b float64) {
	k := len(x) - 1
	x2, y2 := x[k], y[k]
	if k == 1 {
		return x2, y2 / (x2 * x2), 0
	}
	x1, y1 := x[k-1], y[k-1]
	a = (y2/x2 - y1/x1) / (x2 - x1)
	if a <= 0 {
		return x2, 0, 0
	}
	return x2, a, y2/x2 - a*x2
}

// fitOverhead fits the rest of each end-to-end row, measured − (linear + attention), as a + b·T by least
// squares weighted by 1/measured², so that short decode steps count as much as long prefills. Both terms
// are kept non-negative: unmeasured work cannot make a pass faster.
func (s *Steps) fitOverhead(e2e []stepRow) (a, b float64) {
	if len(e2e) == 0 {
		return 0, 0
	}
	t, y, w := make([]float64, len(e2e)), make([]float64, len(e2e)), make([]float64, len(e2e))
	var sw, st, stt, sy, sty float64
	for i, r := range e2e {
		var comp float64
		if r.kind == kindPrefill {
			t[i] = float64(r.tokens)
			comp = s.linearMs(t[i]) + s.attnPrefillMs(t[i])
		} else {
			t[i] = float64(r.batch)
			comp = s.linearMs(t[i]) + s.attnDecodeMs(t[i], float64(r.ctx))
		}
		y[i], w[i] = r.p50-comp, 1/(r.p50*r.p50)
		sw, st, stt, sy, sty = sw+w[i], st+w[i]*t[i], stt+w[i]*t[i]*t[i], sy+w[i]*y[i], sty+w[i]*t[i]*y[i]
	}
	if det := sw*stt - st*st; det > 0 {
		a, b = (sy*stt-sty*st)/det, (sw*sty-st*sy)/det
		if a >= 0 && b >= 0 {
			return a, b
		}
	}
	// Constrained: a constant alone or a per-token term alone, whichever leaves less error.
	ca, cb := max(sy/sw, 0), max(sty/stt, 0)
	var ea, eb float64
	for i := range t {
		ea += w[i] * (y[i] - ca) * (y[i] - ca)
		eb += w[i] * (y[i] - cb*t[i]) * (y[i] - cb*t[i])
	}
	if ea <= eb {
		return ca, 0
	}
	return 0, cb
}

// ms converts float milliseconds to a Duration, rounding to the nanosecond.
func ms(v float64) time.Duration { return timing.Ms(v) }
