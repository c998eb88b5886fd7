package aic

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
)

// olderVersions are the engine versions embedded beside the newest: vLLM 0.18.0, the release most of
// AIConfigurator's H200 silicon measurements ran (0.7 MB; SGLang 0.5.9 would add 1 MB more).
var olderVersions = map[string][]string{"vllm": {"0.18.0"}}

// Generate writes the compact tables of system (the embedded tables, EmbeddedRoot) from the
// database at src into out: for vLLM and SGLang, every catalog model at every tensor parallelism
// in 1, 2, 4, 8 its shapes split over, the tables the model reads at the engine version New picks
// by default (the newest that has them all), with only the columns the loaders read and only the
// rows they can look up for those models (attention at the models' heads per GPU and the measured
// head counts around them, MoE at the models' shapes, MLA at the models' head families; GEMM at
// every measured shape of bfloat16, fp8 and fp8_block, since unmeasured shapes blend their
// neighbours). A table the engine version reuses from another (reuse.yaml) is written flattened,
// the version's own rows first, so the loaders' "first row of a shape wins" keeps its meaning.
// Also written: the system spec (<system>.yaml, which names the NCCL version), that version's
// NCCL all_reduce, all_gather and reduce_scatter rows (half precision), and covered.txt, the
// configurations New prices from src (one per line: model, backend, TP, version), which the
// embedded tables must price alike.
func Generate(src, out, system string) error {
	sys, err := hardware.Lookup(system)
	if err != nil {
		return err
	}
	d := db{root: src, system: system}
	if err := d.check(); err != nil {
		return err
	}
	rf, err := newRoofline(sys)
	if err != nil {
		return err
	}
	g := &generator{d: d, rf: rf, dsaSub: dsaSubBackend(sys), attn: map[string][]attnKey{}, mlaHeads: map[int]bool{}, dsa: map[string]bool{}, moe: map[[4]int]bool{},
		tables: map[string][]string{}, sites: map[[2]string]map[[2]float64]bool{}}
	traceGEMM = func(src, dtype string, n, k float64) {
		key := [2]string{src, dtype}
		if g.sites[key] == nil {
			g.sites[key] = map[[2]float64]bool{}
		}
		g.sites[key][[2]float64{n, k}] = true
	}
	defer func() { traceGEMM = nil }()
	traceSubstitute = g.use
	defer func() { traceSubstitute = nil }()
	var covered []string
	for _, backend := range []string{"sglang", "vllm"} {
		for _, name := range model.Names() {
			m, err := model.Lookup(name)
			if err != nil {
				return err
			}
			for _, tp := range []int{1, 2, 4, 8} {
				for _, want := range append([]string{""}, olderVersions[backend]...) {
					o := Options{Model: m, System: sys, Root: src, Backend: backend, TP: tp, Version: want}
					version, err := g.add(o)
					if err != nil {
						return err
					}
					if version != "" {
						covered = append(covered, fmt.Sprintf("%s %s %d %s", name, backend, tp, version))
					}
				}
			}
		}
	}
	nv, err := d.ncclVersion()
	if err != nil {
		return err
	}
	if nv != "" {
		paths, err := d.sources(ncclTable, nv)
		if err != nil {
			return err
		}
		g.use(ncclTable, nv, paths)
	}

	if err := os.RemoveAll(filepath.Join(out, system)); err != nil {
		return err
	}
	for _, rel := range slices.Sorted(maps.Keys(g.tables)) {
		var buf bytes.Buffer
		if err := g.write(&buf, rel, g.tables[rel]); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(out, rel), buf.Bytes()); err != nil {
			return err
		}
	}
	spec, err := os.ReadFile(filepath.Join(src, system+".yaml"))
	if err != nil {
		return fmt.Errorf("aic: %w", err)
	}
	if err := writeFile(filepath.Join(out, system+".yaml"), spec); err != nil {
		return err
	}
	return writeFile(filepath.Join(out, system, "covered.txt"), []byte(strings.Join(covered, "\n")+"\n"))
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// generator collects what the catalog's configurations read.
type generator struct {
	d      db
	rf     *roofline
	dsaSub string // the DSA kernels the system runs with an fp8 KV cache (dsaSubBackend)
	// attn: per attention table file, the (heads, kv heads, head dim, window) the models look up
	// (attnKey with no dtypes).
	attn     map[string][]attnKey
	mlaHeads map[int]bool    // MLA head families (the models' attention heads)
	dsa      map[string]bool // DSA architectures (their module tables' architecture column)
	moe      map[[4]int]bool // MoE shapes: hidden, inter, topk, experts
	// tables: output path (relative) → the source files, in priority order.
	tables map[string][]string
	// sites: per GEMM table (sourceList) and dtype, the (n, k) sites lookups read (traceGEMM).
	sites map[[2]string]map[[2]float64]bool
}

func (g *generator) rel(ref tableRef, version string) string {
	return filepath.Join(g.d.system, ref.op, ref.backend, version, ref.table+compactExt)
}

func (g *generator) use(ref tableRef, version string, paths []string) {
	if len(paths) > 0 {
		g.tables[g.rel(ref, version)] = paths
	}
}

// need records the shapes configuration c looks up.
func (g *generator) need(c *config) {
	m := c.m
	if m.MoE() {
		g.moe[[4]int{m.Hidden, m.MoEIntermediate, m.ExpertsPerToken, m.Experts}] = true
	}
	if c.dsa != "" {
		g.dsa[c.dsa] = true
		return
	}
	if m.MLA() {
		g.mlaHeads[m.Heads] = true
		return
	}
	for _, w := range []int{0, m.SlidingWindow} {
		if w == 0 && m.SlidingLayers == m.Layers || w > 0 && m.SlidingLayers == 0 {
			continue
		}
		k := attnKey{heads: c.heads, kvHeads: c.kvHeads, headDim: c.headDm, window: w}
		for _, t := range []tableRef{ctxAttnTable, genAttnTable} {
			t.backend = c.Backend
			// The attention tables of every version the configuration may use share the key.
			g.attn[t.table+"/"+t.backend] = append(g.attn[t.table+"/"+t.backend], k)
		}
	}
}

// add records the tables and shapes configuration o reads, and returns the engine version it is
// priced at, or "" when the database cannot price it (its shapes do not split over the TP, or the
// data lack a table or a shape it needs).
func (g *generator) add(o Options) (string, error) {
	c, err := resolve(o)
	if err != nil {
		return "", nil
	}
	needed := c.neededTables()
	version, srcs, err := pickVersion(g.d, o.Backend, o.Version, needed)
	if err != nil {
		return "", nil
	}
	o.Version = version
	for _, ref := range needed {
		g.use(ref, version, srcs[ref])
	}
	if c.tp > 1 {
		ref := allReduceTab
		ref.backend = c.Backend
		paths, err := g.d.sources(ref, version)
		if err != nil {
			return "", err
		}
		g.use(ref, version, paths)
	}
	g.need(c)
	// Every linear precision (each reads its own GEMM sites), the experts as the model has them.
	linear, moe := linearQuant(o.Model)
	ok := true
	for _, q := range []string{linear, "bf16", "fp8", "fp8_block"} {
		o.GEMMQuant, o.MoEQuant = q, moe
		// newModel, not New: a model this process built before sits in New's cache and would
		// report nothing to the traces.
		if _, err := newModel(o); err != nil && q == linear {
			ok = false
		}
	}
	if !ok {
		return "", nil
	}
	return version, nil
}

// linearQuant is the catalog model's own linear precision and experts' precision, as --quantization
// and --moe-quantization default to them.
func linearQuant(m *model.Model) (linear, moe string) {
	linear, moe = m.Quantization, m.MoEQuantization
	if linear == "mxfp4" {
		linear, moe = "", "mxfp4"
	}
	return linear, moe
}

// readColumns are the columns the loaders read (tables.go); no other column is kept.
var readColumns = []string{
	"allreduce_dtype", "attn_dtype", "batch_size", "bmm_dtype", "d_conv", "d_model", "distribution", "gemm_dtype",
	"gemm_type", "head_dim", "head_k_dim", "head_v_dim", "hidden_size", "inter_size", "isl", "k", "kernel_source",
	"kv_cache_dtype", "latency", "m", "message_size", "mla_dtype", "moe_dtype", "moe_ep_size", "moe_tp_size", "n",
	"nccl_dtype", "num_experts", "num_gpus", "num_heads", "num_k_heads", "num_key_value_heads", "num_tokens",
	"num_v_heads", "op_name", "phase", "seq_len", "step", "topk", "tp_size", "window_size",
}

// write merges the source files of one table (in priority order) into a compact table of the rows
// some catalog configuration can look up.
func (g *generator) write(buf *bytes.Buffer, rel string, paths []string) error {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	op, backend, name := parts[1], parts[2], strings.TrimSuffix(parts[4], compactExt)
	merged := &table{path: rel, num: map[string][]float64{}, str: map[string][]string{}}
	var srcs []*table
	for _, p := range paths {
		t, err := readTable(p)
		if err != nil {
			return err
		}
		srcs = append(srcs, t)
		for c := range t.num {
			merged.num[c] = nil
		}
		for c := range t.str {
			merged.str[c] = nil
		}
	}
	var cols []string
	read := readColumns
	if op == dsaCtxTable.op {
		read = append(slices.Clone(read), "architecture") // the DSA loader's own key (loadDSA)
		slices.Sort(read)
	}
	for _, c := range read {
		_, n := merged.num[c]
		_, s := merged.str[c]
		if n || s {
			cols = append(cols, c)
		}
	}
	for _, t := range srcs {
		for _, c := range cols {
			if _, ok := merged.num[c]; ok {
				v, ok := t.num[c]
				if !ok {
					if c != "window_size" {
						return fmt.Errorf("aic: %s: no numeric column %q", t.path, c)
					}
					v = t.fOr(c)
				}
				merged.num[c] = append(merged.num[c], v...)
			} else {
				v, ok := t.str[c]
				if !ok {
					return fmt.Errorf("aic: %s: no string column %q", t.path, c)
				}
				merged.str[c] = append(merged.str[c], v...)
			}
		}
		merged.rows += t.rows
	}
	keep, err := g.filter(op, backend, name, merged, paths)
	if err != nil {
		return err
	}
	var rows []int
	for i := range merged.rows {
		if keep(i) {
			rows = append(rows, i)
		}
	}
	return writeCompact(buf, merged, cols, rows)
}

// filter returns which rows of a merged table a catalog configuration can read.
func (g *generator) filter(op, backend, name string, t *table, paths []string) (func(int) bool, error) {
	lat, err := t.f("latency")
	if err != nil {
		return nil, err
	}
	ok := func(i int) bool { return lat[i] > 0 } // the loaders skip the rest
	switch name {
	case gemmTable.table:
		dt, err := t.s("gemm_dtype")
		if err != nil {
			return nil, err
		}
		keep := map[string]map[[2]float64]bool{}
		for _, dtype := range []string{"bfloat16", "fp8", "fp8_block"} {
			if keep[dtype], err = g.gemmSites(paths, dtype); err != nil {
				return nil, err
			}
		}
		ns, e1 := t.f("n")
		ks, e2 := t.f("k")
		if err := firstErr(e1, e2); err != nil {
			return nil, err
		}
		return func(i int) bool { return ok(i) && keep[dt[i]][[2]float64{ns[i], ks[i]}] }, nil
	case ctxAttnTable.table, genAttnTable.table:
		gen := name == genAttnTable.table
		rows, err := loadAttention(paths, gen)
		if err != nil {
			return nil, err
		}
		want := map[attnKey]bool{}
		for _, k := range g.attn[name+"/"+backend] {
			for full := range rows {
				if full.kvHeads != k.kvHeads || full.headDim != k.headDim || full.window != k.window {
					continue
				}
				kk := full
				kk.heads = k.heads
				for _, h := range bracket(rows.headsFor(kk), k.heads) {
					kk.heads = h
					want[kk] = true
				}
			}
		}
		cols, err := columns(t, "num_heads", "num_key_value_heads", "head_dim", "step")
		if err != nil {
			return nil, err
		}
		ad, e1 := t.s("attn_dtype")
		kd, e2 := t.s("kv_cache_dtype")
		if err := firstErr(e1, e2); err != nil {
			return nil, err
		}
		win := t.fOr("window_size")
		return func(i int) bool {
			w := win[i]
			if math.IsNaN(w) {
				w = 0
			}
			k := attnKey{int(cols[0][i]), int(cols[1][i]), int(cols[2][i]), int(w), ad[i], kd[i]}
			return ok(i) && (gen || cols[3][i] == 0) && want[k]
		}, nil
	case mlaCtxOpTable.table, mlaGenOpTable.table:
		cols, err := columns(t, "num_heads", "tp_size", "step")
		if err != nil {
			return nil, err
		}
		gen := name == mlaGenOpTable.table
		return func(i int) bool {
			return ok(i) && (gen || cols[2][i] == 0) && g.mlaHeads[int(cols[0][i]*cols[1][i])]
		}, nil
	case mlaCtxTable.table:
		step, err := t.f("step")
		if err != nil {
			return nil, err
		}
		return func(i int) bool { return ok(i) && step[i] == 0 }, nil
	case dsaCtxTable.table, dsaGenTable.table:
		// The rows loadDSA reads for the catalog's DSA architectures, at any heads per GPU and
		// projection precision: the indexer-running op, context at prefix 0, the kernels the
		// system's sub-backend runs.
		step, e1 := t.f("step")
		ar, e2 := t.s("architecture")
		opn, e3 := t.s("op_name")
		ks, e4 := t.s("kernel_source")
		kd, e5 := t.s("kv_cache_dtype")
		if err := firstErr(e1, e2, e3, e4, e5); err != nil {
			return nil, err
		}
		gen := name == dsaGenTable.table
		return func(i int) bool {
			return ok(i) && (gen || step[i] == 0) && g.dsa[ar[i]] && opn[i] == dsaOpName[gen] && dsaRowRuns(ks[i], kd[i], g.dsaSub)
		}, nil
	case moeTable.table:
		cols, err := columns(t, "hidden_size", "inter_size", "topk", "num_experts")
		if err != nil {
			return nil, err
		}
		return func(i int) bool {
			return ok(i) && g.moe[[4]int{int(cols[0][i]), int(cols[1][i]), int(cols[2][i]), int(cols[3][i])}]
		}, nil
	case ncclTable.table:
		op, e1 := t.s("op_name")
		dt, e2 := t.s("nccl_dtype")
		if err := firstErr(e1, e2); err != nil {
			return nil, err
		}
		// All-reduce for tensor parallelism; all-gather and reduce-scatter for the MoE layers of
		// attention data parallelism (groupComm).
		return func(i int) bool {
			return ok(i) && dt[i] == "half" && (op[i] == "all_reduce" || op[i] == "all_gather" || op[i] == "reduce_scatter")
		}, nil
	}
	return ok, nil // the MLA generation module, MLA BMMs, custom all-reduce: small, kept whole
}

func columns(t *table, names ...string) ([][]float64, error) {
	out := make([][]float64, len(names))
	for i, n := range names {
		var err error
		if out[i], err = t.f(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// bracket returns the measured head counts newAttnOp reads for h: h itself, or the nearest
// measured below and above it (one of them at the ends).
func bracket(hs []int, h int) []int {
	i, found := slices.BinarySearch(hs, h)
	switch {
	case found:
		return []int{h}
	case len(hs) == 0:
		return nil
	case i == 0:
		return []int{hs[0]}
	case i == len(hs):
		return []int{hs[i-1]}
	}
	return []int{hs[i-1], hs[i]}
}

// gemmSites returns the (n, k) sites of one dtype's GEMM table to keep: those lookups read, plus as
// few others as keep the table's distinct n, k and m what they are (a lookup brackets a shape by
// the distinct n and k, and the model tabulates on the distinct m), so every lookup reads the same
// sites as in the whole table.
func (g *generator) gemmSites(paths []string, dtype string) (map[[2]float64]bool, error) {
	full, err := loadGEMM(paths, dtype, g.rf)
	if err != nil {
		return nil, err
	}
	keep := map[[2]float64]bool{}
	maps.Copy(keep, g.sites[[2]string{sourceList(paths), dtype}])
	haveN, haveK, haveM := map[float64]bool{}, map[float64]bool{}, map[float64]bool{}
	add := func(key [2]float64) {
		keep[key] = true
		haveN[key[0]], haveK[key[1]] = true, true
		for _, m := range full.sites[key].c.x {
			haveM[m] = true
		}
	}
	for key := range keep {
		add(key)
	}
	// Sites in a fixed order (by n, then k), so the choice is deterministic.
	all := slices.SortedFunc(maps.Keys(full.sites), func(a, b [2]float64) int {
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		return cmp.Compare(a[1], b[1])
	})
	for _, key := range all {
		s := full.sites[key]
		if !haveN[s.n] || !haveK[s.k] || slices.ContainsFunc(s.c.x, func(m float64) bool { return !haveM[m] }) {
			add(key)
		}
	}
	return keep, nil
}
