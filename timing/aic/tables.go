package aic

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Table names (file stems) and the op directories that hold them.
var (
	gemmTable     = tableRef{op: "gemm", table: "gemm_perf"}
	ctxAttnTable  = tableRef{op: "attention", table: "context_attention_perf"}
	genAttnTable  = tableRef{op: "attention", table: "generation_attention_perf"}
	moeTable      = tableRef{op: "moe", table: "moe_perf"}
	allReduceTab  = tableRef{op: "comm", table: "custom_allreduce_perf"}
	ncclTable     = tableRef{op: "comm", backend: "nccl", table: "nccl_perf"}
	mlaCtxTable   = tableRef{op: "mla", table: "mla_context_module_perf"}
	mlaGenTable   = tableRef{op: "mla", table: "mla_generation_module_perf"}
	mlaCtxOpTable = tableRef{op: "mla", table: "context_mla_perf"}
	mlaGenOpTable = tableRef{op: "mla", table: "generation_mla_perf"}
	mlaBmmTable   = tableRef{op: "mla_bmm", table: "mla_bmm_perf"}
	gdnTable      = tableRef{op: "linear_attention", table: "gdn_perf"}
	defaultMoEDst = "power_law_1.2" // AIConfigurator's default workload distribution for MoE models
	// deepSeekMoEDst is the DeepSeek family's (DeepSeekModel._power_law_alpha = 1.01).
	deepSeekMoEDst = "power_law_1.01"
)

// sourceList describes the files of a table for error messages.
func sourceList(paths []string) string { return strings.Join(paths, " + ") }

// ---- GEMM ----------------------------------------------------------------------------------------

// gemmSite is one measured (n, k) shape: its latency curve over m.
type gemmSite struct {
	n, k float64
	c    curve
}

// gemmData is the GEMM table of one dtype: scattered (n, k) sites, each with a dense m sweep
// (AIConfigurator's ScatteredSites resolver). On H200 the sites nearly fill an n × k grid.
type gemmData struct {
	src    string // the source files, as sourceList names them
	dtype  string
	flops  float64
	elem   float64
	rf     *roofline
	sites  map[[2]float64]*gemmSite
	ns, ks []float64 // distinct n and k of the sites, ascending
	ms     []float64 // distinct m, ascending
}

// loadGEMM reads the GEMM rows of one dtype (gemm_dtype, e.g. "bfloat16", "fp8", "fp8_block").
// Measured latencies below the roofline are raised to it, as AIConfigurator's loader does.
func loadGEMM(paths []string, dtype string, rf *roofline) (*gemmData, error) {
	return loadGEMMKernel(paths, dtype, "", rf)
}

// noKernelRows is loadGEMMKernel's error for a table that holds no rows of the kernel asked for, as
// against one it could not read.
type noKernelRows struct{ msg string }

func (e *noKernelRows) Error() string { return e.msg }

// loadGEMMKernel is loadGEMM over the rows of one kernel_source only ("": every row).
func loadGEMMKernel(paths []string, dtype, kernel string, rf *roofline) (*gemmData, error) {
	flops, err := rf.flopsOf(dtype)
	if err != nil {
		return nil, err
	}
	g := &gemmData{src: sourceList(paths), dtype: dtype, flops: flops, elem: bytesOf(dtype), rf: rf, sites: map[[2]float64]*gemmSite{}}
	pts := map[[3]float64]float64{} // (m, n, k) → latency
	have := map[string]bool{}
	keep := func(dt, ks string, mnk [3]float64, lat float64) {
		have[dt] = true
		if dt == dtype && (kernel == "" || ks == kernel) && lat > 0 {
			firstWins(pts, mnk, lat)
		}
	}
	if err := scanGEMM(paths, kernel != "", keep); err != nil {
		return nil, err
	}
	if len(pts) == 0 && kernel != "" {
		return nil, &noKernelRows{fmt.Sprintf("aic: %s: no GEMM rows with gemm_dtype %q and kernel_source %q", sourceList(paths), dtype, kernel)}
	}
	if len(pts) == 0 {
		return nil, fmt.Errorf("aic: %s: no GEMM rows with gemm_dtype %q (have %s)", sourceList(paths), dtype, keys(have))
	}
	bySite := map[[2]float64]map[float64]float64{}
	for s, lat := range pts {
		key := [2]float64{s[1], s[2]}
		if bySite[key] == nil {
			bySite[key] = map[float64]float64{}
		}
		bySite[key][s[0]] = lat
	}
	var allM []float64
	for key, byM := range bySite {
		n, k := key[0], key[1]
		ms := slices.Sorted(maps.Keys(byM))
		lat := make([]float64, len(ms))
		for i, m := range ms {
			lat[i] = math.Max(byM[m], g.sol(m, n, k))
		}
		sol := func(m float64) float64 { return g.sol(m, n, k) }
		// k_tail 3: the m sweep saw-tooths with wave quantisation, so the boundary util is a median.
		g.sites[key] = &gemmSite{n: n, k: k, c: newCurve(ms, lat, sol, 3, false)}
		g.ns = append(g.ns, n)
		g.ks = append(g.ks, k)
		allM = append(allM, ms...)
	}
	g.ns, g.ks, g.ms = unique(g.ns), unique(g.ks), unique(allM)
	return g, nil
}

// scanGEMM calls row with every GEMM table row of paths: its gemm_dtype, kernel_source (read only
// when kernels is set, else ""), (m, n, k) and latency.
func scanGEMM(paths []string, kernels bool, row func(dtype, kernel string, mnk [3]float64, lat float64)) error {
	return scan(paths, func(t *table) (func(int), error) {
		dt, err := t.s("gemm_dtype")
		ms, err1 := t.f("m")
		ns, err2 := t.f("n")
		ks, err3 := t.f("k")
		lat, err4 := t.f("latency")
		var kern []string
		var err5 error
		if kernels {
			kern, err5 = t.s("kernel_source")
		}
		if err := firstErr(err, err1, err2, err3, err4, err5); err != nil {
			return nil, err
		}
		return func(i int) {
			var k string
			if kernels {
				k = kern[i]
			}
			row(dt[i], k, [3]float64{ms[i], ns[i], ks[i]}, lat[i])
		}, nil
	})
}

// blockGEMMHostBound reports whether paths hold fp8_block GEMM rows (have) and whether they are
// host-bound: the smallest GEMM they hold (least n·k, then least m) costs more than hostBoundRatio
// times the bfloat16 row of the same m, n and k (false without such a bfloat16 row).
func blockGEMMHostBound(paths []string) (bound, have bool, err error) {
	// Two scans of the (cached) tables: the least fp8_block GEMM, then the bfloat16 row of its shape;
	// the first row of a shape wins, as everywhere.
	less := func(a, b [3]float64) bool {
		return cmp.Or(cmp.Compare(a[1]*a[2], b[1]*b[2]), cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) < 0
	}
	var least [3]float64
	var block, ref float64
	find := func(dtype string, row func(key [3]float64, lat float64)) error {
		return scanGEMM(paths, false, func(dt, _ string, mnk [3]float64, lat float64) {
			if lat > 0 && dt == dtype {
				row(mnk, lat)
			}
		})
	}
	err = find("fp8_block", func(key [3]float64, lat float64) {
		if !have || less(key, least) {
			least, block, have = key, lat, true
		}
	})
	if err != nil || !have {
		return false, false, err
	}
	err = find("bfloat16", func(key [3]float64, lat float64) {
		if ref == 0 && key == least {
			ref = lat
		}
	})
	if err != nil {
		return false, false, err
	}
	if traceGEMM != nil {
		traceGEMM(sourceList(paths), "fp8_block", least[1], least[2])
		traceGEMM(sourceList(paths), "bfloat16", least[1], least[2])
	}
	return ref > 0 && block > hostBoundRatio*ref, true, nil
}

// traceGEMM, when set, is told of every GEMM site a lookup reads: Generate keeps those. It is set only
// while Generate runs.
var traceGEMM func(src, dtype string, n, k float64)

func (g *gemmData) read(s *gemmSite) {
	if traceGEMM != nil {
		traceGEMM(g.src, g.dtype, s.n, s.k)
	}
}

func (g *gemmData) sol(m, n, k float64) float64 { return g.rf.gemmSOL(m, n, k, g.flops, g.elem) }

// latency is one GEMM call's time in ms. A measured (n, k) uses its own m curve; any other shape
// blends the utilisation of the four surrounding sites bilinearly in (log n, log k), clamped at the
// edges of the measured n and k ranges (beyond them the nearest edge sites' utilisation is held and
// the roofline carries the growth), and missing corners are dropped with their weight renormalised.
func (g *gemmData) latency(m, n, k float64) float64 {
	if s := g.sites[[2]float64{n, k}]; s != nil {
		g.read(s)
		return s.c.at(m, g.sol(m, n, k))
	}
	in, tn := logSeg(g.ns, n)
	ik, tk := logSeg(g.ks, k)
	var util, wsum float64
	for _, cn := range [2]struct {
		i int
		w float64
	}{{in, 1 - tn}, {in + 1, tn}} {
		for _, ck := range [2]struct {
			i int
			w float64
		}{{ik, 1 - tk}, {ik + 1, tk}} {
			w := cn.w * ck.w
			if w <= 0 || cn.i >= len(g.ns) || ck.i >= len(g.ks) {
				continue
			}
			s := g.sites[[2]float64{g.ns[cn.i], g.ks[ck.i]}]
			if s == nil {
				continue
			}
			g.read(s)
			solS := g.sol(m, s.n, s.k)
			util += w * solS / s.c.at(m, solS)
			wsum += w
		}
	}
	if wsum == 0 {
		s := g.nearest(n, k)
		g.read(s)
		solS := g.sol(m, s.n, s.k)
		util, wsum = solS/s.c.at(m, solS), 1
	}
	return g.sol(m, n, k) / (util / wsum)
}

// logSeg is seg in log space, clamped to [0, 1] so that shapes beyond the measured range use the
// edge sites.
func logSeg(xs []float64, v float64) (int, float64) {
	if len(xs) == 1 {
		return 0, 0
	}
	i, _ := seg(xs, v)
	t := (math.Log(v) - math.Log(xs[i])) / (math.Log(xs[i+1]) - math.Log(xs[i]))
	return i, math.Min(1, math.Max(0, t))
}

func (g *gemmData) nearest(n, k float64) *gemmSite {
	var best *gemmSite
	bd := math.Inf(1)
	for _, s := range g.sites {
		d := math.Hypot(math.Log(s.n/n), math.Log(s.k/k))
		if d < bd || d == bd && (s.n < best.n || s.n == best.n && s.k < best.k) {
			best, bd = s, d
		}
	}
	return best
}

// ---- attention -----------------------------------------------------------------------------------

// attnKey selects one attention configuration in a context or generation table.
type attnKey struct {
	heads, kvHeads, headDim, window int
	attnDtype, kvDtype              string
}

func (k attnKey) String() string {
	return fmt.Sprintf("num_heads=%d num_key_value_heads=%d head_dim=%d window_size=%d attn_dtype=%s kv_cache_dtype=%s",
		k.heads, k.kvHeads, k.headDim, k.window, k.attnDtype, k.kvDtype)
}

// attnGrid is the measured latency of one attention configuration over (batch, x), x the sequence
// length (context) or past KV length (generation): one curve over x per measured batch size. Grids
// are corner-truncated (large batch × long sequence was not collected); a row's curve holds its end
// utilisation beyond its last point.
type attnGrid struct {
	shape   attnShape
	gen     bool
	batches []float64
	rows    []curve
}

// perSeqSOL is the roofline of one sequence at x.
func (g *attnGrid) perSeqSOL(x float64) float64 {
	if g.gen {
		return g.shape.genSOL(x)
	}
	return g.shape.ctxSOL(x)
}

// at is the latency in ms of one attention call over b sequences at x: each bracketing batch row is
// evaluated at x and the rows are blended linearly in batch; beyond the largest measured batch the
// latency grows with the roofline, linearly in b.
func (g *attnGrid) at(b, x float64) float64 {
	r := g.rowsAt(b)
	return g.atRows(&r, x, nil)
}

// gridRows is which rows of a grid at reads at one batch size b: rows i and i+1 blended by t, or, beyond
// the measured batches (edge), row i scaled to b. A plain pricer keeps it while the batch stays.
type gridRows struct {
	i    int
	t, b float64
	edge bool
}

func (g *attnGrid) rowsAt(b float64) gridRows {
	n := len(g.batches)
	if b >= g.batches[n-1] {
		return gridRows{i: n - 1, b: b, edge: true}
	}
	if b <= g.batches[0] {
		return gridRows{i: 0, b: b, edge: true}
	}
	i, t := seg(g.batches, b)
	return gridRows{i: i, t: t, b: b}
}

// atRows is at at r's batch size, finding x's segment in the first and second rows it reads from the
// guesses h[0] and h[1] (segNear; a plain pricer's, from pass to pass); h may be nil.
func (g *attnGrid) atRows(r *gridRows, x float64, h *[2]int) float64 {
	var h0, h1 *int
	if h != nil {
		h0, h1 = &h[0], &h[1]
	}
	if r.edge {
		return g.rowAt(r.i, x, h0) * r.b / g.batches[r.i]
	}
	return lerp(g.rowAt(r.i, x, h0), g.rowAt(r.i+1, x, h1), r.t)
}

// rowAt is row i at x, with the roofline worked out only where the row extrapolates: a measured x does
// not need it, and a decode step's attention is priced every pass.
func (g *attnGrid) rowAt(i int, x float64, h *int) float64 {
	r := &g.rows[i]
	if r.inRange(x) {
		return r.atNear(x, 0, h)
	}
	return r.at(x, g.batches[i]*g.perSeqSOL(x))
}

// convexAt is at's convex minorant (curve.convexAt) along x, blended across batch rows the same way.
func (g *attnGrid) convexAt(b, x float64) float64 {
	sol1 := g.perSeqSOL(x)
	n := len(g.batches)
	if b >= g.batches[n-1] {
		return g.rows[n-1].convexAt(x, g.batches[n-1]*sol1) * b / g.batches[n-1]
	}
	if b <= g.batches[0] {
		return g.rows[0].convexAt(x, g.batches[0]*sol1) * b / g.batches[0]
	}
	i, t := seg(g.batches, b)
	return lerp(g.rows[i].convexAt(x, g.batches[i]*sol1), g.rows[i+1].convexAt(x, g.batches[i+1]*sol1), t)
}

// attnRows is an attention table grouped by configuration: for each key, latency by (batch, x).
type attnRows map[attnKey]map[[2]float64]float64

// loadAttention reads a context (gen false) or generation attention table. Context rows are those
// with step 0 (full prefill); generation rows are keyed by step, the past KV length.
func loadAttention(paths []string, gen bool) (attnRows, error) {
	rows := attnRows{}
	err := scan(paths, func(t *table) (func(int), error) {
		b, e1 := t.f("batch_size")
		isl, e2 := t.f("isl")
		nh, e3 := t.f("num_heads")
		nkv, e4 := t.f("num_key_value_heads")
		hd, e5 := t.f("head_dim")
		step, e6 := t.f("step")
		lat, e7 := t.f("latency")
		ad, e8 := t.s("attn_dtype")
		kd, e9 := t.s("kv_cache_dtype")
		if err := firstErr(e1, e2, e3, e4, e5, e6, e7, e8, e9); err != nil {
			return nil, err
		}
		win := t.fOr("window_size") // absent before window-aware collection: full attention
		return func(i int) {
			w := win[i]
			if math.IsNaN(w) {
				w = 0
			}
			rows.add(attnKey{int(nh[i]), int(nkv[i]), int(hd[i]), int(w), ad[i], kd[i]}, gen, b[i], isl[i], step[i], lat[i])
		}, nil
	})
	return rows, err
}

// add files one table row under k: context rows (gen false) with step 0 by (batch, isl), generation
// rows by (batch, step); other rows and unmeasured latencies are skipped.
func (r attnRows) add(k attnKey, gen bool, batch, isl, step, lat float64) {
	x := isl
	if gen {
		x = step
	} else if step != 0 {
		return
	}
	if !(lat > 0) {
		return
	}
	if r[k] == nil {
		r[k] = map[[2]float64]float64{}
	}
	firstWins(r[k], [2]float64{batch, x}, lat)
}

// grid builds the grid of one configuration.
func (r attnRows) grid(k attnKey, shape attnShape, gen bool) *attnGrid {
	pts := r[k]
	if len(pts) == 0 {
		return nil
	}
	byB := map[float64][][2]float64{}
	for pt, lat := range pts {
		byB[pt[0]] = append(byB[pt[0]], [2]float64{pt[1], lat})
	}
	g := &attnGrid{shape: shape, gen: gen}
	for _, b := range slices.Sorted(maps.Keys(byB)) {
		row := byB[b]
		sort.Slice(row, func(i, j int) bool { return row[i][0] < row[j][0] })
		x := make([]float64, len(row))
		y := make([]float64, len(row))
		for i, p := range row {
			x[i], y[i] = p[0], p[1]
		}
		bb := b
		sol := func(v float64) float64 { return bb * g.perSeqSOL(v) }
		// Context latency grows ~s² along the sequence: blend in sqrt space (AIConfigurator's
		// context_grid_config); decode is ~linear in the KV length: raw.
		g.batches = append(g.batches, b)
		g.rows = append(g.rows, newCurve(x, y, sol, 1, !gen))
	}
	return g
}

// headsFor lists the measured num_heads of configurations that match k in everything else.
func (r attnRows) headsFor(k attnKey) []int {
	var hs []int
	for kk := range r {
		if kk.kvHeads == k.kvHeads && kk.headDim == k.headDim && kk.window == k.window &&
			kk.attnDtype == k.attnDtype && kk.kvDtype == k.kvDtype {
			hs = append(hs, kk.heads)
		}
	}
	slices.Sort(hs)
	return hs
}

// describe summarises the configurations a table has, for errors.
func (r attnRows) describe() string {
	seen := map[string]bool{}
	for k := range r {
		seen[fmt.Sprintf("%d/%d/%d/w%d/%s/%s", k.heads, k.kvHeads, k.headDim, k.window, k.attnDtype, k.kvDtype)] = true
	}
	s := keys(seen)
	if len(s) > 400 {
		s = s[:400] + " ..."
	}
	return "heads/kv_heads/head_dim/window/attn_dtype/kv_dtype: " + s
}

// attnOp evaluates one attention op for a model whose heads per GPU may not be measured: the
// bracketing measured head counts are blended linearly (attention work is linear in heads).
type attnOp struct {
	lo, hi *attnGrid
	t      float64 // weight of hi
	scale  float64 // beyond the measured heads: lat(lo) × scale
}

func (a *attnOp) at(b, x float64) float64 {
	r := a.rowsAt(b)
	return a.atRows(&r, x, nil)
}

// opRows is the rows the op's grids read at one batch size (gridRows): the lower head count's, then the
// higher one's.
type opRows [2]gridRows

func (a *attnOp) rowsAt(b float64) opRows {
	r := opRows{a.lo.rowsAt(b)}
	if a.hi != nil {
		r[1] = a.hi.rowsAt(b)
	}
	return r
}

// atRows is at at r's batch size, with guesses of the segments of x in the rows it reads
// (attnGrid.atRows): h[0:2] for the lower head count's grid, h[2:4] for the higher one's; h may be nil.
func (a *attnOp) atRows(r *opRows, x float64, h *[4]int) float64 {
	var lo, hi *[2]int
	if h != nil {
		lo, hi = (*[2]int)(h[0:2]), (*[2]int)(h[2:4])
	}
	v := a.lo.atRows(&r[0], x, lo)
	if a.hi != nil {
		v = lerp(v, a.hi.atRows(&r[1], x, hi), a.t)
	}
	return v * a.scale
}

func (a *attnOp) convexAt(b, x float64) float64 {
	v := a.lo.convexAt(b, x)
	if a.hi != nil {
		v = lerp(v, a.hi.convexAt(b, x), a.t)
	}
	return v * a.scale
}

// newAttnOps builds the context and generation ops of one attention configuration from their tables.
func newAttnOps(ctxRows, genRows attnRows, k attnKey, shape attnShape, ctxSrc, genSrc []string, rf *roofline) (ctx, gen *attnOp, err error) {
	if ctx, err = newAttnOp(ctxRows, k, shape, false, ctxSrc, rf); err != nil {
		return nil, nil, err
	}
	if gen, err = newAttnOp(genRows, k, shape, true, genSrc, rf); err != nil {
		return nil, nil, err
	}
	return ctx, gen, nil
}

// newAttnOp finds the configuration k (interpolating in heads if needed). The attention compute
// dtype (k.attnDtype) is the one the table measured for k's KV-cache dtype: bfloat16 where there is
// one, else the KV dtype itself (SGLang's FA3 runs an fp8 KV cache as fp8 attention in prefill).
func newAttnOp(r attnRows, k attnKey, shape attnShape, gen bool, paths []string, rf *roofline) (*attnOp, error) {
	var hs []int
	for _, dt := range []string{"bfloat16", k.kvDtype} {
		k.attnDtype = dt
		if hs = r.headsFor(k); len(hs) > 0 {
			break
		}
	}
	if len(hs) == 0 {
		k.attnDtype = "bfloat16"
		return nil, fmt.Errorf("aic: %s: no rows for %s (have %s)", sourceList(paths), k, r.describe())
	}
	var err error
	if shape.flops, err = rf.flopsOf(k.attnDtype); err != nil {
		return nil, err
	}
	at := func(h int) *attnGrid {
		kk, s := k, shape
		kk.heads, s.heads = h, float64(h)
		return r.grid(kk, s, gen)
	}
	i := sort.SearchInts(hs, k.heads)
	switch {
	case i < len(hs) && hs[i] == k.heads:
		return &attnOp{lo: at(k.heads), scale: 1}, nil
	case i == 0:
		// Fewer heads than measured: the smallest configuration, scaled by heads (work is linear
		// in heads).
		return &attnOp{lo: at(hs[0]), scale: float64(k.heads) / float64(hs[0])}, nil
	case i == len(hs):
		return &attnOp{lo: at(hs[i-1]), scale: float64(k.heads) / float64(hs[i-1])}, nil
	}
	t := float64(k.heads-hs[i-1]) / float64(hs[i]-hs[i-1])
	return &attnOp{lo: at(hs[i-1]), hi: at(hs[i]), t: t, scale: 1}, nil
}

// ---- multi-head latent attention ----------------------------------------------------------------

// mlaLatent is the attnKey.headDim under which MLA rows are filed: the cached latent per token
// (kv_lora_rank 512 + qk_rope_head_dim 64 in every model the tables measured).
const mlaLatent = 576

// loadMLA reads a context_mla_perf (gen false) or generation_mla_perf table: the MLA attention
// core alone (SGLang's FlashAttention-3 MLA kernels; no projections), keyed by the heads per GPU
// (num_heads) and tp_size. The tables hold two families of rows, num_heads × tp_size = 128
// (DeepSeek-V3's heads) and 64 (Kimi K2's); only the family of the model's own head count
// (native) is read, so a lookup at heads/TP is the row measured for that sharding.
func loadMLA(paths []string, gen bool, native int) (attnRows, error) {
	rows, err := loadMLARows(paths, gen, false, func(t *table) (func(int) bool, error) {
		nh, e1 := t.f("num_heads")
		tps, e2 := t.f("tp_size")
		if err := firstErr(e1, e2); err != nil {
			return nil, err
		}
		return func(i int) bool { return int(nh[i]*tps[i]) == native }, nil
	})
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("aic: %s: no rows with num_heads × tp_size = %d (the model's attention heads)", sourceList(paths), native)
	}
	return rows, err
}

// loadMLAModule reads vLLM's mla_context_module_perf (gen false) or mla_generation_module_perf:
// DeepseekV2MLAAttention forwards at TP 1 (num_heads = heads per GPU), the rows of one gemm_type
// (the projections' precision).
func loadMLAModule(paths []string, gen bool, gemm string) (attnRows, error) {
	have := map[string]bool{}
	rows, err := loadMLARows(paths, gen, false, func(t *table) (func(int) bool, error) {
		gt, err := t.s("gemm_type")
		if err != nil {
			return nil, err
		}
		return func(i int) bool { have[gt[i]] = true; return gt[i] == gemm }, nil
	})
	if err == nil && len(rows) == 0 {
		err = fmt.Errorf("aic: %s: no MLA module rows with gemm_type %s (have %s)", sourceList(paths), gemm, keys(have))
	}
	return rows, err
}

// loadMLARows reads the MLA tables' points, the rows of each table selected by the predicate rowsOf
// builds for it, filed as attnKey{num_heads, 1, mlaLatent, 0, mla_dtype, kv_cache_dtype} by
// (batch, isl) for context (step 0) and (batch, step = past KV length) for generation, for newAttnOp;
// bySeq files generation rows by isl + step − 1 instead (tables keyed by the sequence's length with
// the new token: a decode over c cached tokens reads c + 1).
func loadMLARows(paths []string, gen, bySeq bool, rowsOf func(*table) (func(int) bool, error)) (attnRows, error) {
	rows := attnRows{}
	err := scan(paths, func(t *table) (func(int), error) {
		b, e1 := t.f("batch_size")
		isl, e2 := t.f("isl")
		nh, e3 := t.f("num_heads")
		step, e4 := t.f("step")
		lat, e5 := t.f("latency")
		md, e6 := t.s("mla_dtype")
		kd, e7 := t.s("kv_cache_dtype")
		if err := firstErr(e1, e2, e3, e4, e5, e6, e7); err != nil {
			return nil, err
		}
		keep, err := rowsOf(t)
		if err != nil {
			return nil, err
		}
		return func(i int) {
			if !keep(i) {
				return
			}
			x := step[i]
			if gen && bySeq {
				x = isl[i] + step[i] - 1
			}
			rows.add(attnKey{int(nh[i]), 1, mlaLatent, 0, md[i], kd[i]}, gen, b[i], isl[i], x, lat[i])
		}, nil
	})
	return rows, err
}

// loadMLABmm reads one curve of mla_bmm_perf: the batched GEMMs around SGLang's absorbed MLA decode,
// op "mla_gen_pre" (q_nope × W_UK per head: 128 → 512) or "mla_gen_post" (the attention output ×
// W_UV per head: 512 → 128), latency by num_tokens for one bmm_dtype and heads per GPU.
func loadMLABmm(paths []string, op, dtype string, heads int, sol func(float64) float64) (curve, error) {
	pts := map[float64]float64{}
	have := map[string]bool{}
	err := scan(paths, func(t *table) (func(int), error) {
		ops, e1 := t.s("op_name")
		dt, e2 := t.s("bmm_dtype")
		nh, e3 := t.f("num_heads")
		n, e4 := t.f("num_tokens")
		lat, e5 := t.f("latency")
		if err := firstErr(e1, e2, e3, e4, e5); err != nil {
			return nil, err
		}
		return func(i int) {
			if ops[i] != op || dt[i] != dtype || !(lat[i] > 0) {
				return
			}
			have[strconv.Itoa(int(nh[i]))] = true
			if int(nh[i]) == heads {
				firstWins(pts, n[i], lat[i])
			}
		}, nil
	})
	if err != nil {
		return curve{}, err
	}
	if len(pts) == 0 {
		return curve{}, fmt.Errorf("aic: %s: no %s rows with bmm_dtype %s and num_heads %d (num_heads measured: %s)",
			sourceList(paths), op, dtype, heads, keys(have))
	}
	x, y := sortedPoints(pts)
	return newCurve(x, y, sol, 1, false), nil
}

// ---- linear attention (Gated DeltaNet) ----------------------------------------------------------

// gdnKey selects one Gated DeltaNet layer shape of the gdn table: the heads one GPU holds.
type gdnKey struct {
	hidden, kHeads, kDim, vHeads, vDim, conv int
}

func (k gdnKey) String() string {
	return fmt.Sprintf("d_model=%d num_k_heads=%d head_k_dim=%d num_v_heads=%d head_v_dim=%d d_conv=%d",
		k.hidden, k.kHeads, k.kDim, k.vHeads, k.vDim, k.conv)
}

// gdnOps are the kernels of one Gated DeltaNet layer as AIConfigurator prices them
// (ai-dynamo/aiconfigurator sdk/models/qwen35.py, ops.GDNKernel): a prompt chunk runs the causal
// convolution (causal_conv1d_fn) and the chunked delta rule (chunk_gated_delta_rule), by (batch,
// sequence length); a decode step the convolution's state update (causal_conv1d_update) and the
// recurrent delta rule (fused_recurrent_gated_delta_rule*), by batch.
type gdnOps struct {
	layers float64
	ctx    gdnGrid // the two context kernels, summed
	gen    curve   // the two generation kernels, summed, by batch
}

// gdnGrid is a latency over (batch, sequence length): one curve over the length per measured
// batch, blended linearly in batch. The kernels' work grows with the tokens they carry, so the
// length (and, beyond the largest batch, the batch) scales a curve linearly outside its range.
type gdnGrid struct {
	batches []float64
	rows    []curve
}

func (g *gdnGrid) at(b, s float64) float64 {
	n := len(g.batches)
	switch {
	case b >= g.batches[n-1]:
		return g.rows[n-1].at(s, s) * b / g.batches[n-1]
	case b <= g.batches[0]:
		return g.rows[0].at(s, s)
	}
	i, t := seg(g.batches, b)
	return lerp(g.rows[i].at(s, s), g.rows[i+1].at(s, s), t)
}

// loadGDN reads the Gated DeltaNet kernels of shape k. The table is keyed by the heads one GPU
// holds (AIConfigurator's collector shards them by the attention TP); a layer shape or kernel the
// table lacks is an error naming what it has.
func loadGDN(paths []string, k gdnKey) (*gdnOps, error) {
	ctx := map[string]map[[2]float64]float64{} // kernel → (batch, seq) → ms
	gen := map[string]map[float64]float64{}    // kernel → batch → ms
	have := map[string]bool{}
	err := scan(paths, func(t *table) (func(int), error) {
		src, e1 := t.s("kernel_source")
		phase, e2 := t.s("phase")
		cols, e3 := columns(t, "d_model", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "d_conv", "batch_size", "seq_len", "latency")
		if err := firstErr(e1, e2, e3); err != nil {
			return nil, err
		}
		return func(i int) {
			got := gdnKey{int(cols[0][i]), int(cols[1][i]), int(cols[2][i]), int(cols[3][i]), int(cols[4][i]), int(cols[5][i])}
			have[got.String()] = true
			if got != k || !(cols[8][i] > 0) {
				return
			}
			b, s, lat := cols[6][i], cols[7][i], cols[8][i]
			switch phase[i] {
			case "context":
				if ctx[src[i]] == nil {
					ctx[src[i]] = map[[2]float64]float64{}
				}
				firstWins(ctx[src[i]], [2]float64{b, s}, lat)
			case "generation":
				if gen[src[i]] == nil {
					gen[src[i]] = map[float64]float64{}
				}
				firstWins(gen[src[i]], b, lat)
			}
		}, nil
	})
	if err != nil {
		return nil, err
	}
	// The chunked scan is chunk_gated_delta_rule (SGLang's FLA Triton kernel) or
	// chunk_gated_delta_rule_flashinfer (vLLM 0.24.0's FlashInfer kernel): the one the engine runs.
	ctxKernels := []string{"causal_conv1d_fn", ""}
	for src := range ctx {
		if strings.HasPrefix(src, "chunk_gated_delta_rule") && (ctxKernels[1] == "" || src < ctxKernels[1]) {
			ctxKernels[1] = src
		}
	}
	var genKernels []string
	for src := range gen {
		if src == "causal_conv1d_update" || strings.HasPrefix(src, "fused_recurrent_gated_delta_rule") {
			genKernels = append(genKernels, src)
		}
	}
	slices.Sort(genKernels)
	missing := !slices.Contains(genKernels, "causal_conv1d_update") || len(genKernels) != 2
	for _, src := range ctxKernels {
		missing = missing || len(ctx[src]) == 0
	}
	if missing {
		return nil, fmt.Errorf("aic: %s: no Gated DeltaNet rows of every kernel (causal_conv1d_fn, chunk_gated_delta_rule, causal_conv1d_update, fused_recurrent_gated_delta_rule) for %s (have %s)",
			sourceList(paths), k, keys(have))
	}
	ops := &gdnOps{}
	// Context: the sum of the two kernels wherever both measured (batch, seq).
	bySeq := map[float64]map[float64]float64{}
	for bs, lat := range ctx[ctxKernels[0]] {
		if other, ok := ctx[ctxKernels[1]][bs]; ok {
			if bySeq[bs[0]] == nil {
				bySeq[bs[0]] = map[float64]float64{}
			}
			bySeq[bs[0]][bs[1]] = lat + other
		}
	}
	for _, b := range slices.Sorted(maps.Keys(bySeq)) {
		x, y := sortedPoints(bySeq[b])
		ops.ctx.batches = append(ops.ctx.batches, b)
		ops.ctx.rows = append(ops.ctx.rows, newCurve(x, y, func(s float64) float64 { return s }, 1, false))
	}
	sum := map[float64]float64{}
	for b, lat := range gen[genKernels[0]] {
		if other, ok := gen[genKernels[1]][b]; ok {
			sum[b] = lat + other
		}
	}
	if len(ops.ctx.batches) == 0 || len(sum) == 0 {
		return nil, fmt.Errorf("aic: %s: the Gated DeltaNet kernels of %s share no measured point", sourceList(paths), k)
	}
	x, y := sortedPoints(sum)
	ops.gen = newCurve(x, y, func(b float64) float64 { return b }, 1, false)
	return ops, nil
}

// ---- MoE -----------------------------------------------------------------------------------------

// moeKey selects one fused-MoE curve (latency by num_tokens) in the moe table.
type moeKey struct {
	dtype, dist                          string
	topk, experts, hidden, inter, tp, ep int
}

func (k moeKey) String() string {
	return fmt.Sprintf("moe_dtype=%s distribution=%s topk=%d num_experts=%d hidden_size=%d inter_size=%d moe_tp_size=%d moe_ep_size=%d",
		k.dtype, k.dist, k.topk, k.experts, k.hidden, k.inter, k.tp, k.ep)
}

// loadMoE reads the num_tokens curve of one MoE configuration. As in AIConfigurator the MoE table is
// keyed by the model's full per-expert intermediate size and the MoE tensor/expert parallel sizes,
// and its latency covers the fused expert computation of one layer (routing, expert GEMMs,
// activation and combine), not the router GEMM. It also returns the kernel_source of the rows the
// curve was read from (one per row; the collector names the kernel it timed there).
func loadMoE(paths []string, k moeKey, rf *roofline) (curve, []string, error) {
	flops, err := rf.flopsOf(k.dtype)
	if err != nil {
		return curve{}, nil, err
	}
	pts := map[float64]float64{}
	kernels := map[string]bool{}
	// What the table has, at three depths, to say exactly what is missing.
	dtypes, shapes, dists, parallel := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	err = scan(paths, func(t *table) (func(int), error) {
		dt, e1 := t.s("moe_dtype")
		dist, e2 := t.s("distribution")
		tok, e3 := t.f("num_tokens")
		h, e4 := t.f("hidden_size")
		in, e5 := t.f("inter_size")
		topk, e6 := t.f("topk")
		ne, e7 := t.f("num_experts")
		tp, e8 := t.f("moe_tp_size")
		ep, e9 := t.f("moe_ep_size")
		lat, e10 := t.f("latency")
		ks, e11 := t.s("kernel_source")
		if err := firstErr(e1, e2, e3, e4, e5, e6, e7, e8, e9, e10, e11); err != nil {
			return nil, err
		}
		return func(i int) {
			dtypes[dt[i]] = true
			if dt[i] != k.dtype {
				return
			}
			shapes[fmt.Sprintf("%g/%g/%g/%g", h[i], in[i], topk[i], ne[i])] = true
			if int(h[i]) != k.hidden || int(in[i]) != k.inter || int(topk[i]) != k.topk || int(ne[i]) != k.experts {
				return
			}
			dists[dist[i]] = true
			if dist[i] != k.dist {
				return
			}
			parallel[fmt.Sprintf("%g/%g", tp[i], ep[i])] = true
			if int(tp[i]) == k.tp && int(ep[i]) == k.ep && lat[i] > 0 {
				if _, dup := pts[tok[i]]; !dup {
					kernels[ks[i]] = true
				}
				firstWins(pts, tok[i], lat[i])
			}
		}, nil
	})
	switch {
	case err != nil:
		return curve{}, nil, err
	case len(pts) > 0:
	case !dtypes[k.dtype]:
		return curve{}, nil, fmt.Errorf("aic: %s: no MoE rows with moe_dtype %s (have %s)", sourceList(paths), k.dtype, keys(dtypes))
	case len(dists) == 0:
		return curve{}, nil, fmt.Errorf("aic: %s: no MoE rows for hidden_size=%d inter_size=%d topk=%d num_experts=%d with moe_dtype %s (have hidden/inter/topk/experts %s)",
			sourceList(paths), k.hidden, k.inter, k.topk, k.experts, k.dtype, keys(shapes))
	case len(parallel) == 0:
		return curve{}, nil, fmt.Errorf("aic: %s: no MoE rows for %s (that shape has distributions %s)", sourceList(paths), k, keys(dists))
	default:
		return curve{}, nil, fmt.Errorf("aic: %s: no MoE rows for %s (that shape and distribution have moe_tp_size/moe_ep_size %s)", sourceList(paths), k, keys(parallel))
	}
	x, y := sortedPoints(pts)
	return newCurve(x, y, func(v float64) float64 { return rf.moeSOL(v, k, flops) }, 1, false), slices.Sorted(maps.Keys(kernels)), nil
}

// ---- communication -------------------------------------------------------------------------------

// loadAllReduce reads the custom all-reduce curve (latency by message size in bf16 elements) on
// gpus GPUs. vLLM and SGLang tables hold a CUDA-graph and an eager variant of each point; as in
// AIConfigurator only the graph rows are kept (engines capture their all-reduces in CUDA graphs).
func loadAllReduce(paths []string, gpus int, rf *roofline) (curve, error) {
	pts := map[float64]float64{}
	have := map[string]bool{}
	err := scan(paths, func(t *table) (func(int), error) {
		dt, e1 := t.s("allreduce_dtype")
		ng, e2 := t.f("num_gpus")
		size, e3 := t.f("message_size")
		lat, e4 := t.f("latency")
		ks, e5 := t.s("kernel_source")
		if err := firstErr(e1, e2, e3, e4, e5); err != nil {
			return nil, err
		}
		graphOnly := slices.ContainsFunc(ks, func(s string) bool { return strings.HasSuffix(strings.ToLower(s), "_graph") })
		return func(i int) {
			have[dt[i]+"/"+strconv.Itoa(int(ng[i]))] = true
			if dt[i] != "bfloat16" && dt[i] != "half" && dt[i] != "float16" || int(ng[i]) != gpus || !(lat[i] > 0) {
				return
			}
			if graphOnly && !strings.HasSuffix(strings.ToLower(ks[i]), "_graph") {
				return
			}
			firstWins(pts, size[i], lat[i])
		}, nil
	})
	if err != nil {
		return curve{}, err
	}
	if len(pts) == 0 {
		return curve{}, fmt.Errorf("aic: %s: no bfloat16 all-reduce rows for num_gpus=%d (have dtype/num_gpus %s)", sourceList(paths), gpus, keys(have))
	}
	return commCurve(pts, gpus, rf.allReduceSOL), nil
}

// loadNCCL reads NCCL's all_reduce curve (half precision, latency by message size in elements).
func loadNCCL(paths []string, gpus int, rf *roofline) (curve, error) {
	return loadCollective(paths, "all_reduce", gpus, rf.allReduceSOL)
}

// loadCollective reads the NCCL table's half-precision rows of collective op (all_reduce, all_gather,
// reduce_scatter) on gpus GPUs, by message size in elements; sol is its roofline.
func loadCollective(paths []string, collective string, gpus int, sol func(size float64, gpus int) float64) (curve, error) {
	pts := map[float64]float64{}
	have := map[string]bool{}
	err := scan(paths, func(t *table) (func(int), error) {
		dt, e1 := t.s("nccl_dtype")
		op, e2 := t.s("op_name")
		ng, e3 := t.f("num_gpus")
		size, e4 := t.f("message_size")
		lat, e5 := t.f("latency")
		if err := firstErr(e1, e2, e3, e4, e5); err != nil {
			return nil, err
		}
		return func(i int) {
			have[op[i]+"/"+dt[i]+"/"+strconv.Itoa(int(ng[i]))] = true
			if op[i] == collective && dt[i] == "half" && int(ng[i]) == gpus && lat[i] > 0 {
				firstWins(pts, size[i], lat[i])
			}
		}, nil
	})
	if err != nil {
		return curve{}, err
	}
	if len(pts) == 0 {
		return curve{}, fmt.Errorf("aic: %s: no %s/half rows for num_gpus=%d (have %s)", sourceList(paths), collective, gpus, keys(have))
	}
	return commCurve(pts, gpus, sol), nil
}

// commCurve is a collective's latency by message size on gpus GPUs, sol its roofline.
func commCurve(pts map[float64]float64, gpus int, sol func(size float64, gpus int) float64) curve {
	x, y := sortedPoints(pts)
	return newCurve(x, y, func(v float64) float64 { return sol(v, gpus) }, 1, false)
}

// ---- helpers -------------------------------------------------------------------------------------

// firstWins records v at k unless k already has a value: the first row of a shape wins, as in
// AIConfigurator's loaders.
func firstWins[K comparable](m map[K]float64, k K, v float64) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// scan reads the tables of paths in order and hands each row's index to the function that rowsOf
// builds for its table (reading the columns it needs). Loaders file points with firstWins, so a key
// keeps the first row that gave it: within a file the first, across files the earlier file's — the
// engine version's own table comes first, and a reuse donor only fills shapes it lacks.
func scan(paths []string, rowsOf func(*table) (func(i int), error)) error {
	for _, p := range paths {
		t, err := readTable(p)
		if err != nil {
			return err
		}
		row, err := rowsOf(t)
		if err != nil {
			return err
		}
		for i := range t.rows {
			row(i)
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func keys(m map[string]bool) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// sortedPoints lays a map of x → y out as a curve's points, by increasing x.
func sortedPoints(pts map[float64]float64) (x, y []float64) {
	x = slices.Sorted(maps.Keys(pts))
	y = make([]float64, len(x))
	for i, v := range x {
		y[i] = pts[v]
	}
	return x, y
}

// ctxPairs is the number of query-key pairs causal attention over s tokens computes: every query
// attends itself and the keys before it, at most window of them with a sliding window.
func ctxPairs(s, window float64) float64 {
	if window <= 0 || s <= window {
		return s * (s + 1) / 2
	}
	return window*(window+1)/2 + (s-window)*window
}

// impossibleCtx counts the context rows of r (step 0) that take less time than the GPU's tensor
// cores need for their arithmetic alone — batch × 4 · heads · head_dim FLOPs per query-key pair
// (the QKᵀ and PV products) at the peak of the row's attention dtype — and the rows it checked
// (those of a dtype the GPU has a peak for). No kernel beats its GPU's peak: such rows did not time
// the attention they describe.
func (r attnRows) impossibleCtx(rf *roofline) (bad, checked int) {
	for k, pts := range r {
		flops := rf.flops[k.attnDtype]
		if flops <= 0 {
			continue
		}
		for pt, lat := range pts {
			ops := pt[0] * 4 * float64(k.heads*k.headDim) * ctxPairs(pt[1], float64(k.window))
			checked++
			if lat < ops/flops*1e3 {
				bad++
			}
		}
	}
	return bad, checked
}
