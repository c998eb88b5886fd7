package aic

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// Rows of the synthetic tables, with AIConfigurator's column names. The attention tables leave out
// window_size, as versions collected before sliding-window support do.
type gemmRow struct {
	Dtype   string  `parquet:"gemm_dtype"`
	M       int64   `parquet:"m"`
	N       int64   `parquet:"n"`
	K       int64   `parquet:"k"`
	Latency float64 `parquet:"latency"`
}

type attnRow struct {
	Batch     int64   `parquet:"batch_size"`
	ISL       int64   `parquet:"isl"`
	Heads     int64   `parquet:"num_heads"`
	KVHeads   int64   `parquet:"num_key_value_heads"`
	HeadDim   int64   `parquet:"head_dim"`
	AttnDtype string  `parquet:"attn_dtype"`
	KVDtype   string  `parquet:"kv_cache_dtype"`
	Step      int64   `parquet:"step"`
	Latency   float64 `parquet:"latency"`
}

type allReduceRow struct {
	Kernel  string  `parquet:"kernel_source"`
	Dtype   string  `parquet:"allreduce_dtype"`
	GPUs    int64   `parquet:"num_gpus"`
	Size    int64   `parquet:"message_size"`
	Latency float64 `parquet:"latency"`
}

type ncclRow struct {
	Dtype   string  `parquet:"nccl_dtype"`
	Op      string  `parquet:"op_name"`
	GPUs    int64   `parquet:"num_gpus"`
	Size    int64   `parquet:"message_size"`
	Latency float64 `parquet:"latency"`
}

var testSystem = &hardware.System{
	Name: "testgpu", MemoryBytes: 80 << 30, MemBandwidth: 4e12, NVLinkBandwidth: 4.5e11, GPUsPerNode: 8,
	FLOPS: map[string]float64{"bf16": 1e15, "fp8": 2e15}, MemBWScaling: 0.8,
}

// tinyModel has every GEMM shape inside the synthetic grid at TP 1 and 2.
var tinyModel = &model.Model{Name: "tiny", Layers: 2, Hidden: 256, Heads: 4, KVHeads: 2, HeadDim: 64,
	Intermediate: 512, Vocab: 1024, Dtype: "bfloat16"}

func write[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
}

func writeText(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func gemmRows(scale float64, sites [][2]int64) []gemmRow {
	var rows []gemmRow
	for _, s := range sites {
		for _, m := range []int64{1, 16, 256, 4096} {
			// Twice the roofline of testSystem plus 5 µs.
			lat := 2*max(2*float64(m*s[0]*s[1])/1e15, 2*float64(m*s[0]+m*s[1]+s[0]*s[1])/4e12)*1e3 + 0.005
			rows = append(rows, gemmRow{"bfloat16", m, s[0], s[1], lat * scale})
		}
	}
	return rows
}

func allSites() [][2]int64 {
	var s [][2]int64
	for _, n := range []int64{128, 256, 512, 1024, 2048} {
		for _, k := range []int64{128, 256, 512, 1024, 2048} {
			s = append(s, [2]int64{n, k})
		}
	}
	return s
}

func synthAttn(scale float64, gen bool) []attnRow {
	var rows []attnRow
	for _, h := range [][2]int64{{2, 1}, {4, 2}} {
		for _, b := range []int64{1, 4, 16} {
			for _, x := range []int64{1, 63, 1023} {
				r := attnRow{Batch: b, Heads: h[0], KVHeads: h[1], HeadDim: 64, AttnDtype: "bfloat16", KVDtype: "bfloat16"}
				if gen {
					r.ISL, r.Step = 1, x
					r.Latency = scale * (0.01 + 1e-6*float64(b*h[0]*x))
				} else {
					r.ISL = x
					r.Latency = scale * (0.01 + 1e-8*float64(b*h[0]*x*x))
				}
				rows = append(rows, r)
			}
		}
	}
	return rows
}

// testDB writes a small database in AIConfigurator's layout:
//
//	gemm      vllm 0.1.0 (file), 0.2.0 (reuse.yaml → 0.1.0), 0.4.0 (file with one site + reuse → 0.1.0)
//	attention vllm 0.1.0, 0.2.0 (half the latency), 0.3.0 (no gemm anywhere), 0.4.0 (reuse → 0.2.0)
//	comm      vllm 0.1.0 custom all-reduce on 2 GPUs; nccl 2.0 all_reduce on 2 GPUs
//	testgpu.yaml: misc.nccl_version 2.0
func testDB(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	sys := filepath.Join(root, "testgpu")
	writeText(t, filepath.Join(root, "testgpu.yaml"), "misc:\n  nccl_version: '2.0'\n")
	write(t, filepath.Join(sys, "gemm/vllm/0.1.0/gemm_perf.parquet"), gemmRows(1, allSites()))
	writeText(t, filepath.Join(sys, "gemm/vllm/0.2.0/reuse.yaml"), "schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 0.1.0\n")
	write(t, filepath.Join(sys, "gemm/vllm/0.4.0/gemm_perf.parquet"), gemmRows(3, [][2]int64{{256, 256}}))
	writeText(t, filepath.Join(sys, "gemm/vllm/0.4.0/reuse.yaml"), "reuse:\n- table: gemm_perf\n  from_version: 0.1.0\n")
	for v, scale := range map[string]float64{"0.1.0": 1, "0.2.0": 0.5, "0.3.0": 0.25} {
		write(t, filepath.Join(sys, "attention/vllm", v, "context_attention_perf.parquet"), synthAttn(scale, false))
		write(t, filepath.Join(sys, "attention/vllm", v, "generation_attention_perf.parquet"), synthAttn(scale, true))
	}
	writeText(t, filepath.Join(sys, "attention/vllm/0.4.0/reuse.yaml"),
		"reuse:\n- table: context_attention_perf\n  from_version: 0.2.0\n- table: generation_attention_perf\n  from_version: 0.2.0\n")
	var ar []allReduceRow
	var nc []ncclRow
	for _, size := range []int64{128, 4096, 1 << 20} {
		lat := 0.005 + float64(size)*4/4.5e11*1e3
		ar = append(ar, allReduceRow{"custom_graph", "bfloat16", 2, size, lat}, allReduceRow{"custom_eager", "bfloat16", 2, size, lat + 0.02})
		nc = append(nc, ncclRow{"half", "all_reduce", 2, size, 2 * lat}, ncclRow{"half", "all_gather", 2, size, lat})
	}
	write(t, filepath.Join(sys, "comm/vllm/0.1.0/custom_allreduce_perf.parquet"), ar)
	write(t, filepath.Join(sys, "comm/nccl/2.0/nccl_perf.parquet"), nc)
	return root
}

func newTest(t *testing.T, root string, edit func(*Options)) (*Model, error) {
	t.Helper()
	o := Options{Model: tinyModel, System: testSystem, Root: root, Backend: "vllm"}
	if edit != nil {
		edit(&o)
	}
	return New(o)
}

func hasSource(m *Model, suffix string) bool {
	for _, s := range m.Sources() {
		if strings.HasSuffix(filepath.ToSlash(s), suffix) {
			return true
		}
	}
	return false
}

func TestNewestVersion(t *testing.T) {
	root := testDB(t)
	m, err := newTest(t, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 0.4.0 is the newest with every table (its attention through reuse.yaml); 0.3.0 has no GEMMs.
	if m.Version() != "0.4.0" {
		t.Errorf("Version() = %q, want 0.4.0 (the newest with every needed table)", m.Version())
	}
	for _, want := range []string{"gemm/vllm/0.4.0/gemm_perf.parquet", "gemm/vllm/0.1.0/gemm_perf.parquet",
		"attention/vllm/0.2.0/context_attention_perf.parquet"} {
		if !hasSource(m, want) {
			t.Errorf("Sources() = %v, want one ending in %s", m.Sources(), want)
		}
	}
}

// A reuse.yaml entry redirects a table to the donor version.
func TestReuseRedirect(t *testing.T) {
	root := testDB(t)
	m, err := newTest(t, root, func(o *Options) { o.Version = "0.2.0" })
	if err != nil {
		t.Fatal(err)
	}
	if !hasSource(m, "gemm/vllm/0.1.0/gemm_perf.parquet") || hasSource(m, "gemm/vllm/0.2.0/gemm_perf.parquet") {
		t.Errorf("Sources() = %v, want 0.2.0's GEMMs from 0.1.0", m.Sources())
	}
	if !hasSource(m, "attention/vllm/0.2.0/context_attention_perf.parquet") {
		t.Errorf("Sources() = %v, want 0.2.0's own attention", m.Sources())
	}
}

// With both an own file and a donor, the own rows win and the donor fills the shapes it lacks.
func TestReuseMerge(t *testing.T) {
	root := testDB(t)
	d := db{root: root, system: "testgpu"}
	ref := gemmTable
	ref.backend = "vllm"
	paths, err := d.sources(ref, "0.4.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || !strings.Contains(paths[0], "0.4.0") || !strings.Contains(paths[1], "0.1.0") {
		t.Fatalf("sources = %v, want 0.4.0's file then 0.1.0's", paths)
	}
	rf, _ := newRoofline(testSystem)
	g, err := loadGEMM(paths, "bfloat16", rf)
	if err != nil {
		t.Fatal(err)
	}
	own := gemmRows(3, [][2]int64{{256, 256}})[2] // m = 256
	if got := g.latency(256, 256, 256); got != own.Latency {
		t.Errorf("own shape latency = %v, want 0.4.0's %v", got, own.Latency)
	}
	donor := gemmRows(1, [][2]int64{{512, 512}})[2]
	if got := g.latency(256, 512, 512); got != donor.Latency {
		t.Errorf("donor shape latency = %v, want 0.1.0's %v", got, donor.Latency)
	}
}

func TestNCCLFallback(t *testing.T) {
	root := testDB(t)
	m, err := newTest(t, root, func(o *Options) { o.Version = "0.1.0"; o.TP = 2 })
	if err != nil {
		t.Fatal(err)
	}
	if !hasSource(m, "comm/vllm/0.1.0/custom_allreduce_perf.parquet") {
		t.Errorf("0.1.0 TP 2: Sources() = %v, want the custom all-reduce table", m.Sources())
	}
	m, err = newTest(t, root, func(o *Options) { o.Version = "0.2.0"; o.TP = 2 })
	if err != nil {
		t.Fatal(err)
	}
	if !hasSource(m, "comm/nccl/2.0/nccl_perf.parquet") {
		t.Errorf("0.2.0 TP 2: Sources() = %v, want NCCL 2.0 (the system spec's nccl_version)", m.Sources())
	}
}

func TestNewErrors(t *testing.T) {
	root := testDB(t)
	writeText(t, filepath.Join(root, "testgpu/attention/vllm/0.5.0/collection_meta.yaml"),
		"tables:\n  context_attention_perf:\n    status: partial\n")
	write(t, filepath.Join(root, "testgpu/attention/vllm/0.5.0/context_attention_perf.parquet"), synthAttn(1, false))
	write(t, filepath.Join(root, "testgpu/attention/vllm/0.5.0/generation_attention_perf.parquet"), synthAttn(1, true))
	writeText(t, filepath.Join(root, "testgpu/gemm/vllm/0.5.0/reuse.yaml"), "reuse:\n- table: gemm_perf\n  from_version: 0.1.0\n")
	kv3 := *tinyModel
	kv3.Heads, kv3.KVHeads = 6, 3
	for _, tc := range []struct {
		name string
		edit func(*Options)
		want []string
	}{
		{"missing system", func(o *Options) { o.System = &hardware.System{Name: "nogpu", MemBandwidth: 1e12} },
			[]string{`"nogpu"`, filepath.Join(root, "nogpu")}},
		{"missing version", func(o *Options) { o.Version = "9.9.9" },
			[]string{`"9.9.9"`, "0.4.0, 0.3.0, 0.2.0, 0.1.0"}},
		{"version without a table", func(o *Options) { o.Version = "0.3.0" },
			[]string{"0.3.0", filepath.Join("gemm", "vllm", "0.3.0", "gemm_perf.parquet")}},
		{"partial table", func(o *Options) { o.Version = "0.5.0" },
			[]string{filepath.Join("attention", "vllm", "0.5.0", "context_attention_perf.parquet")}},
		{"missing dtype", func(o *Options) { o.GEMMQuant = "fp8" },
			[]string{`gemm_dtype "fp8"`, "have bfloat16"}},
		{"missing heads", func(o *Options) { o.Model = &kv3 },
			[]string{"num_key_value_heads=3", "context_attention_perf.parquet"}},
		{"missing kv dtype", func(o *Options) { o.KVCacheDtype = "fp8" },
			[]string{"kv_cache_dtype=fp8"}},
		{"missing TP group", func(o *Options) { o.Version = "0.1.0"; o.TP = 4; o.Model = &kv3 },
			nil}, // heads 6 do not split 4 ways: any error will do
		{"unknown backend", func(o *Options) { o.Backend = "trtllm" }, []string{`"trtllm"`}},
		{"unknown quant", func(o *Options) { o.GEMMQuant = "int3" }, []string{`"int3"`}},
	} {
		_, err := newTest(t, root, tc.edit)
		if err == nil {
			t.Errorf("%s: New succeeded, want an error", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", tc.name, err, w)
			}
		}
	}
}

// A reuse.yaml without its top-level "reuse" key is a typo, reported, not read as "no reuse".
func TestMalformedReuse(t *testing.T) {
	root := testDB(t)
	writeText(t, filepath.Join(root, "testgpu/gemm/vllm/0.6.0/reuse.yaml"), "reuses:\n- table: gemm_perf\n  from_version: 0.1.0\n")
	_, err := newTest(t, root, nil)
	if err == nil || !strings.Contains(err.Error(), filepath.Join("0.6.0", "reuse.yaml")) || !strings.Contains(err.Error(), `"reuse"`) {
		t.Errorf("err = %v, want one naming 0.6.0/reuse.yaml and its missing \"reuse\" key", err)
	}
}

// The all-reduce of a TP group that the table lacks is an error naming num_gpus.
func TestMissingAllReduceGroup(t *testing.T) {
	root := testDB(t)
	big := *tinyModel
	big.Heads, big.KVHeads, big.Intermediate = 8, 4, 1024
	_, err := newTest(t, root, func(o *Options) { o.Version = "0.1.0"; o.TP = 4; o.Model = &big })
	if err == nil || !strings.Contains(err.Error(), "num_gpus=4") {
		t.Errorf("TP 4 with all-reduce rows for 2 GPUs only: err = %v, want one naming num_gpus=4", err)
	}
}

// Cost splits a pass by phase and grows with the work in it.
func TestCostSynthetic(t *testing.T) {
	root := testDB(t)
	m, err := newTest(t, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := m.Cost(&timing.Batch{}); c.Total() != 0 {
		t.Errorf("empty pass costs %v", c)
	}
	pre := m.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 512, Prefill: true}}})
	if pre.Prefill <= 0 || pre.Decode != 0 {
		t.Errorf("prefill-only chunk (no sampling): %+v, want all of it in Prefill", pre)
	}
	dec := m.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 1, Cached: 100, Samples: true}}})
	if dec.Prefill != 0 || dec.Decode <= 0 {
		t.Errorf("decode-only pass: %+v, want all of it in Decode", dec)
	}
	mixed := m.Cost(&timing.Batch{Seqs: []timing.Seq{{New: 512, Prefill: true}, {New: 1, Cached: 100, Samples: true}}})
	if mixed.Prefill <= 0 || mixed.Decode <= 0 || mixed.Total() >= pre.Total()+dec.Total() {
		t.Errorf("mixed pass %+v: want both phases, cheaper than the two passes apart (%v + %v)", mixed, pre.Total(), dec.Total())
	}
	prev := timing.Cost{}
	for n := 1; n <= 8192; n = n*3/2 + 1 {
		c := m.Cost(&timing.Batch{Seqs: []timing.Seq{{New: n, Cached: 1000, Prefill: true}}})
		if c.Total() < prev.Total() {
			t.Errorf("chunk of %d costs %v, less than a smaller chunk's %v", n, c.Total(), prev.Total())
		}
		prev = c
	}
}
