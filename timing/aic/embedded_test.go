package aic

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// TestEmbeddedIsGenerated re-runs the generator against the shared database and checks that the
// embedded tables are byte for byte what it writes (regenerate with the command in gen/main.go).
func TestEmbeddedIsGenerated(t *testing.T) {
	needData(t)
	if testing.Short() {
		t.Skip("regenerating the tables takes ~20 s")
	}
	out := t.TempDir()
	if err := Generate(aicRoot, out, "h200_sxm"); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	err := filepath.WalkDir(out, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		want[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	err = fs.WalkDir(embedded, "embedded", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		got[strings.TrimPrefix(p, "embedded/")], err = fs.ReadFile(embedded, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: generated but not embedded", name)
		} else if !bytes.Equal(g, w) {
			t.Errorf("%s: embedded copy (%d bytes) differs from the generator's (%d bytes)", name, len(g), len(w))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: embedded but not generated", name)
		}
	}
	if t.Failed() {
		t.Log("regenerate: go run ./timing/aic/gen -db ../shared/data/aiconfigurator -out timing/aic/embedded")
	}
}

// coveredConfig is one line of embedded/h200_sxm/covered.txt.
type coveredConfig struct {
	model, backend, version string
	tp                      int
}

func coveredConfigs(t *testing.T) []coveredConfig {
	t.Helper()
	data, err := fs.ReadFile(embedded, "embedded/h200_sxm/covered.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []coveredConfig
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		tp, err := strconv.Atoi(f[2])
		if len(f) != 4 || err != nil {
			t.Fatalf("covered.txt: bad line %q", line)
		}
		out = append(out, coveredConfig{f[0], f[1], f[3], tp})
	}
	return out
}

// TestEmbeddedCoversCatalog: with nothing but the binary, every catalog model at every TP its shapes
// split over, on vLLM and SGLang, is priced by the op-level model (the list the generator wrote;
// the list itself is checked against the catalog here and against the database in
// TestEmbeddedMatchesDatabase).
// uncovered are the catalog models and backends AIConfigurator's H200 tables cannot price: vLLM's MLA
// tables are whole-module measurements of DeepSeek-V3's attention geometry, which GLM-5's (q_lora
// 2,048, nope 192, v 256, hidden 6,144) is not (loadMLAModule).
var uncovered = map[string]bool{"glm-5/vllm": true}

func TestEmbeddedCoversCatalog(t *testing.T) {
	cfgs := coveredConfigs(t)
	byModel := map[string]int{}
	for _, c := range cfgs {
		byModel[c.model+"/"+c.backend]++
		m, err := model.Lookup(c.model)
		if err != nil {
			t.Fatal(err)
		}
		linear, moe := linearQuant(m)
		mdl, err := New(Options{Model: m, System: h200(t), Root: EmbeddedRoot, Backend: c.backend, Version: c.version, TP: c.tp, GEMMQuant: linear, MoEQuant: moe})
		if err != nil {
			t.Errorf("%s %s %s tp %d: %v", c.model, c.backend, c.version, c.tp, err)
			continue
		}
		if mdl.Version() != c.version {
			t.Errorf("%s %s tp %d: version %s, want %s", c.model, c.backend, c.tp, mdl.Version(), c.version)
		}
	}
	for _, name := range model.Names() {
		for _, b := range []string{"vllm", "sglang"} {
			if uncovered[name+"/"+b] {
				if byModel[name+"/"+b] > 0 {
					t.Errorf("catalog model %s on %s: covered, but listed as a model the tables cannot price", name, b)
				}
				continue
			}
			if byModel[name+"/"+b] == 0 {
				t.Errorf("catalog model %s on %s: not covered by the embedded tables", name, b)
			}
		}
	}
}

// TestEmbeddedMatchesDatabase: for every configuration the embedded tables cover, and at every
// linear precision, the model built from them prices passes exactly as the one built from the
// shared parquet database.
func TestEmbeddedMatchesDatabase(t *testing.T) {
	needData(t)
	batches := parityBatches()
	for _, c := range coveredConfigs(t) {
		m, err := model.Lookup(c.model)
		if err != nil {
			t.Fatal(err)
		}
		linear, moe := linearQuant(m)
		for _, q := range []string{linear, "fp8", "fp8_block"} {
			o := Options{Model: m, System: h200(t), Backend: c.backend, Version: c.version, TP: c.tp, GEMMQuant: q, MoEQuant: moe}
			samePrices(t, o, batches, fmt.Sprintf("%s %s %s tp %d %s", c.model, c.backend, c.version, c.tp, q))
		}
	}
	// Expert parallelism reads other MoE rows: EP = TP on both engines, and TP/2 on SGLang.
	var ep int
	for _, c := range coveredConfigs(t) {
		m, err := model.Lookup(c.model)
		if err != nil {
			t.Fatal(err)
		}
		if !m.MoE() || c.tp < 2 {
			continue
		}
		eps := []int{c.tp}
		if c.backend == "sglang" && c.tp >= 4 {
			eps = append(eps, c.tp/2)
		}
		linear, moe := linearQuant(m)
		for _, e := range eps {
			o := Options{Model: m, System: h200(t), Backend: c.backend, Version: c.version, TP: c.tp, EP: e, GEMMQuant: linear, MoEQuant: moe}
			if samePrices(t, o, batches, fmt.Sprintf("%s %s %s tp %d ep %d", c.model, c.backend, c.version, c.tp, e)) {
				ep++
			}
		}
	}
	if ep == 0 {
		t.Error("no expert-parallel configuration built from either")
	}
	t.Logf("%d expert-parallel configurations match", ep)
}

// samePrices checks that o builds from the shared database and from the embedded tables alike (both
// or neither) and that the two price batches equally; it reports whether both built.
func samePrices(t *testing.T, o Options, batches []timing.Batch, name string) bool {
	t.Helper()
	o.Root = aicRoot
	want, werr := New(o)
	o.Root = EmbeddedRoot
	got, gerr := New(o)
	if (werr == nil) != (gerr == nil) {
		t.Errorf("%s: database error %v, embedded error %v", name, werr, gerr)
		return false
	}
	if werr != nil {
		return false
	}
	for _, b := range batches {
		if w, g := want.Cost(&b), got.Cost(&b); w != g {
			t.Errorf("%s: batch %+v: embedded %+v, database %+v", name, b.Seqs, g, w)
		}
	}
	return true
}

// parityBatches spans the lookups: decodes at short and long contexts, prompt chunks with and
// without a cached prefix, mixed passes, large token counts.
func parityBatches() []timing.Batch {
	dec := func(n, ctx int) []timing.Seq {
		s := make([]timing.Seq, n)
		for i := range s {
			s[i] = timing.Seq{New: 1, Cached: ctx + 37*i, Samples: true}
		}
		return s
	}
	return []timing.Batch{
		{Seqs: dec(1, 1000)},
		{Seqs: dec(7, 300)},
		{Seqs: dec(64, 4000)},
		{Seqs: dec(300, 70000)},
		{Seqs: []timing.Seq{{New: 1024, Prefill: true, Samples: true}}},
		{Seqs: []timing.Seq{{New: 3000, Cached: 5000, Prefill: true, Samples: true}}},
		{Seqs: []timing.Seq{{New: 20000, Prefill: true}}},
		{Seqs: append(dec(40, 2000), timing.Seq{New: 2048, Cached: 512, Prefill: true})},
		{Seqs: append(dec(3, 100), timing.Seq{New: 150, Prefill: true, Samples: true}, timing.Seq{New: 77, Prefill: true, Samples: true})},
	}
}
