package registry_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/aic"
	"github.com/mocker-sim/mocker/timing/profile"
	"github.com/mocker-sim/mocker/timing/registry"
	"github.com/mocker-sim/mocker/timing/timingtest"
)

// params is a deployment every registered model has data for: Llama-3.1-8B on one H200 under vLLM,
// priced from the tables built into the binary.
func params(t *testing.T) registry.Params {
	t.Setenv(aic.EnvPerfDB, "")
	t.Setenv("PATH", t.TempDir()) // no python3: no installed AIConfigurator package
	m, err := model.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	sys, err := hardware.Lookup("h200_sxm")
	if err != nil {
		t.Fatal(err)
	}
	return registry.Params{Model: m, System: sys, Backend: "vllm", TP: 1, EP: 1, KVCacheDtype: "auto", PrefillMs: 10, DecodeMs: 5}
}

// TestConformance: every registered timing model passes the timing models' conformance suite.
func TestConformance(t *testing.T) {
	p := params(t)
	for _, e := range registry.Models {
		t.Run(e.Name, func(t *testing.T) {
			m, _, err := e.New(p)
			if err != nil {
				t.Fatal(err)
			}
			timingtest.Run(t, m, timingtest.Options{Slack: e.Slack})
		})
	}
}

// cheaperWhenBigger is a timing model that charges a prompt chunk less the longer it is.
type cheaperWhenBigger struct{}

func (cheaperWhenBigger) Cost(b *timing.Batch) timing.Cost {
	var c timing.Cost
	for _, s := range b.Seqs {
		if s.Prefill {
			c.Prefill = max(c.Prefill, time.Second-time.Duration(s.New)*time.Microsecond)
		}
		if s.Samples {
			c.Decode = time.Millisecond
		}
	}
	return c
}

// TestBrokenModelFails: a broken toy registered beside the real models fails the suite, and only it.
func TestBrokenModelFails(t *testing.T) {
	p := params(t)
	toy := registry.Entry{Name: "toy", New: func(registry.Params) (timing.Model, registry.Info, error) {
		return cheaperWhenBigger{}, registry.Info{}, nil
	}}
	var failed []string
	for _, e := range append(slices.Clone(registry.Models), toy) {
		m, _, err := e.New(p)
		if err == nil {
			err = timingtest.Check(m, timingtest.Options{Slack: e.Slack})
		}
		if err != nil {
			failed = append(failed, e.Name)
			t.Logf("%s: %v", e.Name, err)
		}
	}
	if !slices.Equal(failed, []string{"toy"}) {
		t.Errorf("timing models failing the conformance suite: %v, want [toy]", failed)
	}
}

// TestLookup: each registered name finds its own entry; an unknown one is refused naming them all.
func TestLookup(t *testing.T) {
	for i := range registry.Models {
		if e, err := registry.Lookup(registry.Models[i].Name); err != nil || e != &registry.Models[i] {
			t.Errorf("Lookup(%q) = %v, %v", registry.Models[i].Name, e, err)
		}
	}
	_, err := registry.Lookup("roofline")
	if want := "timing roofline: want default, profile, polynomial or fixed"; err == nil || err.Error() != want {
		t.Errorf("Lookup(roofline) = %v, want %q", err, want)
	}
}

// TestBuildErrors: a model that lacks what it is built from says what to give.
func TestBuildErrors(t *testing.T) {
	p := params(t)
	for _, tc := range []struct {
		name string
		edit func(*registry.Params)
		want string
	}{
		{"default", func(p *registry.Params) { p.System = nil }, "timing default: needs --model (or --model-config) and --system"},
		{"default", func(p *registry.Params) { p.Backend = "trtllm" }, "timing default: no TensorRT-LLM tables are supported; use --backend vllm or sglang timing, or --timing profile"},
		{"default", func(p *registry.Params) { p.Quantization = "mxfp4" }, "timing default: quantization mxfp4 quantizes only routed experts (the gpt-oss format) and model llama-3.1-8b has none"},
		{"profile", func(p *registry.Params) { p.Model = nil }, "timing profile: no --profile, and no --model and --system to choose a built-in one"},
		{"profile", func(p *registry.Params) { p.TP = 2 }, "timing profile: profiles are measured at tp 1, got --tp 2"},
		{"profile", func(p *registry.Params) { p.Quantization = "fp8" }, "timing profile: no built-in profile for llama-3.1-8b on h200_sxm (h200-llama-3.1-8b-fp8); give --profile PATH, or --timing polynomial"},
		// A built-in profile given by name prices only the model, GPU and precision it was measured for.
		{"profile", func(p *registry.Params) { p.Profile = "h200-qwen3-32b-bf16" },
			"timing profile h200-qwen3-32b-bf16: measured for qwen3-32b bf16 on h200, and the deployment runs llama-3.1-8b bf16 on h200_sxm (its built-in profile is h200-llama-3.1-8b-bf16)"},
		{"profile", func(p *registry.Params) { p.Profile, p.System = "h200-llama-3.1-8b-bf16", b200(t) },
			"timing profile h200-llama-3.1-8b-bf16: measured for llama-3.1-8b bf16 on h200, and the deployment runs llama-3.1-8b bf16 on b200_sxm (give --profile PATH measured for it, or --timing polynomial)"},
		{"profile", func(p *registry.Params) { p.Profile, p.Quantization = "h200-llama-3.1-8b-bf16", "fp8" },
			"timing profile h200-llama-3.1-8b-bf16: measured for llama-3.1-8b bf16 on h200, and the deployment runs llama-3.1-8b fp8 on h200_sxm (give --profile PATH measured for it, or --timing polynomial)"},
	} {
		q := p
		tc.edit(&q)
		e, _ := registry.Lookup(tc.name)
		if _, _, err := e.New(q); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	e, _ := registry.Lookup("profile")
	if _, info, err := e.New(p); err != nil || info.Source != "h200-llama-3.1-8b-bf16" {
		t.Errorf("profile of llama-3.1-8b on h200_sxm: source %q, %v; want the built-in h200-llama-3.1-8b-bf16", info.Source, err)
	}
	p.Profile = "h200-llama-3.1-8b-bf16"
	if _, _, err := e.New(p); err != nil {
		t.Errorf("profile h200-llama-3.1-8b-bf16 for llama-3.1-8b on h200_sxm: %v", err)
	}
}

// TestProfileShared: what the profile model checks once for a search (Shared) includes the profile's
// fit to the deployment, a built-in one's model, GPU and precision, a step CSV's rows for the model,
// but not the TP, which the shape decides.
func TestProfileShared(t *testing.T) {
	p := params(t)
	e, _ := registry.Lookup("profile")
	csv := filepath.Join(t.TempDir(), "qwen.csv")
	if err := os.WriteFile(csv, []byte("model,kind,batch,tokens,ctx,ms_p50,ms_p10,ms_p90,reps\nqwen3-32b,linear,1,1,0,5,5,5,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*registry.Params)
		want string
	}{
		{func(p *registry.Params) { p.TP = 2 }, ""},
		{func(p *registry.Params) { p.Profile = "h200-qwen3-32b-bf16" },
			"timing profile h200-qwen3-32b-bf16: measured for qwen3-32b bf16 on h200, and the deployment runs llama-3.1-8b bf16 on h200_sxm (its built-in profile is h200-llama-3.1-8b-bf16)"},
		{func(p *registry.Params) { p.Profile = csv }, "timing profile " + csv + ": no rows price model llama-3.1-8b (rows of qwen3-32b): write llama-3.1-8b in the model column of rows measured for it"},
	} {
		q := p
		tc.edit(&q)
		if err := e.Shared(q); fmt.Sprint(err) != tc.want && !(err == nil && tc.want == "") {
			t.Errorf("profile %q at tp %d: %v, want %q", q.Profile, q.TP, err, tc.want)
		}
	}
}

// TestProfileFitsCheckpoint: a model read from a config.json is named after its folder, so a built-in
// profile prices it where its passes are those of the model the profile was measured for, whatever
// the folder's name (given by --profile or chosen for it), and is refused, naming the number that
// differs, where they are not, even in a folder of the catalog model's name.
func TestProfileFitsCheckpoint(t *testing.T) {
	e, _ := registry.Lookup("profile")
	base := params(t)
	checkpoint := func(name string, edit func(*model.Model)) registry.Params {
		p := base
		m := *base.Model
		m.Name = name
		if edit != nil {
			edit(&m)
		}
		p.Model = &m
		return p
	}
	for _, given := range []string{"", "h200-llama-3.1-8b-bf16"} {
		p := checkpoint("Meta-Llama-3.1-8B-Instruct", nil)
		p.Profile = given
		if m, info, err := e.New(p); err != nil || info.Source != "h200-llama-3.1-8b-bf16" || m != builtin(t, "h200-llama-3.1-8b-bf16") {
			t.Errorf("--profile %q on llama-3.1-8b's config.json in Meta-Llama-3.1-8B-Instruct: source %q, %v; want the built-in h200-llama-3.1-8b-bf16", given, info.Source, err)
		}
	}
	qwen, err := model.Lookup("qwen3-32b")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    registry.Params
		want string
	}{
		{checkpoint("Meta-Llama-3.1-8B-Instruct", func(m *model.Model) { m.Layers = 33 }),
			"timing profile h200-llama-3.1-8b-bf16: measured for llama-3.1-8b bf16 on h200, and the deployment runs Meta-Llama-3.1-8B-Instruct bf16 on h200_sxm (num_hidden_layers 33, not 32; give --profile PATH measured for it, or --timing polynomial)"},
		{checkpoint("llama-3.1-8b", func(m *model.Model) { m.Layers = 33 }),
			"timing profile h200-llama-3.1-8b-bf16: measured for llama-3.1-8b bf16 on h200, and the deployment runs llama-3.1-8b bf16 on h200_sxm (num_hidden_layers 33, not 32; give --profile PATH measured for it, or --timing polynomial)"},
		{checkpoint("Qwen3-32B", func(m *model.Model) { *m = *qwen; m.Name = "Qwen3-32B" }),
			"timing profile h200-llama-3.1-8b-bf16: measured for llama-3.1-8b bf16 on h200, and the deployment runs Qwen3-32B bf16 on h200_sxm (num_hidden_layers 64, not 32; its built-in profile is h200-qwen3-32b-bf16)"},
	} {
		tc.p.Profile = "h200-llama-3.1-8b-bf16"
		if _, _, err := e.New(tc.p); fmt.Sprint(err) != tc.want {
			t.Errorf("%s: %v, want %q", tc.p.Model.Name, err, tc.want)
		}
		if err := e.Shared(tc.p); fmt.Sprint(err) != tc.want {
			t.Errorf("%s: Shared: %v, want %q", tc.p.Model.Name, err, tc.want)
		}
	}
}

// TestStepsCSVFitsCheckpoint: a step-time CSV's rows are picked by the catalog model they name (by its
// name or a Hugging Face id of it) where the deployment's is that model or, read from a config.json in a
// folder named otherwise, computes its passes, those of its own name first, and by the name alone where
// no catalog model has it: the run is priced as the built-in profile of the same rows prices it. Rows of
// no model of the deployment's passes (a folder of a catalog model's name holding another's included),
// or of two, are refused with the rows' models and the way out.
func TestStepsCSVFitsCheckpoint(t *testing.T) {
	e, _ := registry.Lookup("profile")
	data, err := os.ReadFile("../profile/data/h200_bf16_dense.csv")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	steps := write("steps.csv", string(data))
	hf := write("hf.csv", strings.ReplaceAll(string(data), "\nllama-3.1-8b,", "\nmeta-llama/Llama-3.1-8B-Instruct,"))
	var llama strings.Builder // llama-3.1-8b's rows again, under its Hugging Face id
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "llama-3.1-8b,"); ok {
			llama.WriteString("meta-llama/Llama-3.1-8B-Instruct," + rest + "\n")
		}
	}
	both := write("both.csv", string(data)+llama.String())
	mine := write("mine.csv", strings.ReplaceAll(string(data), "\nllama-3.1-8b,", "\nmy-llama,"))
	fp8 := write("fp8.csv", strings.ReplaceAll(string(data), "\nllama-3.1-8b,", "\nnvidia/Llama-3.1-8B-Instruct-FP8,"))
	base := params(t)
	deploy := func(name string, layers int) registry.Params {
		p := base
		m := *base.Model
		m.Name, m.Layers = name, layers
		p.Model = &m
		return p
	}
	quantized := func(p registry.Params, q string) registry.Params { p.Quantization = q; return p }
	b := &timing.Batch{Seqs: []timing.Seq{{Cached: 512, New: 1024, Prefill: true, Samples: true}, {Cached: 2000, New: 1, Samples: true}}}
	want := builtin(t, "h200-llama-3.1-8b-bf16").Cost(b)
	for _, tc := range []struct {
		p           registry.Params
		csv, source string
	}{
		{deploy("llama-3.1-8b", 32), steps, steps},
		{deploy("Meta-Llama-3.1-8B-Instruct", 32), steps, steps + ", rows of llama-3.1-8b"},
		{deploy("llama-3.1-8b", 32), hf, hf + ", rows of meta-llama/Llama-3.1-8B-Instruct"},
		{deploy("Meta-Llama-3.1-8B-Instruct", 32), hf, hf + ", rows of meta-llama/Llama-3.1-8B-Instruct"},
		{deploy("llama-3.1-8b", 32), both, both}, // its own name's rows first
		{deploy("my-llama", 32), mine, mine},
		{deploy("My-Llama", 32), mine, mine + ", rows of my-llama"}, // a name of its own, in any case
		{quantized(deploy("llama-3.1-8b", 32), "fp8"), fp8, fp8 + ", rows of nvidia/Llama-3.1-8B-Instruct-FP8"},
	} {
		tc.p.Profile = tc.csv
		m, info, err := e.New(tc.p)
		if err != nil || info.Source != tc.source || m.Cost(b) != want {
			t.Errorf("%s, %s: source %q, %v; want %q, priced as the built-in", tc.p.Model.Name, filepath.Base(tc.csv), info.Source, err, tc.source)
		}
	}
	qwen, err := model.Lookup("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p        registry.Params
		csv, why string
	}{
		{deploy("llama-3.1-8b", 33), steps, "no rows price model llama-3.1-8b (rows of llama-3.1-8b (num_hidden_layers 33, not 32), qwen3-32b (num_hidden_layers 33, not 64)): llama-3.1-8b is the catalog's name of a model it is not (num_hidden_layers 33, not 32); name its folder otherwise and write that name in the model column of rows measured for it"},
		{deploy("Llama-33", 33), steps, "no rows price model Llama-33 (rows of llama-3.1-8b (num_hidden_layers 33, not 32), qwen3-32b (num_hidden_layers 33, not 64)): write Llama-33 in the model column of rows measured for it"},
		{deploy("llama-3.1-8b", 33), hf, "no rows price model llama-3.1-8b (rows of meta-llama/Llama-3.1-8B-Instruct (num_hidden_layers 33, not 32), qwen3-32b (num_hidden_layers 33, not 64)): llama-3.1-8b is the catalog's name of a model it is not (num_hidden_layers 33, not 32); name its folder otherwise and write that name in the model column of rows measured for it"},
		{deploy("Meta-Llama-3.1-8B-Instruct", 32), mine, "no rows price model Meta-Llama-3.1-8B-Instruct (rows of my-llama, qwen3-32b (num_hidden_layers 32, not 64)): write Meta-Llama-3.1-8B-Instruct in the model column of rows measured for it"},
		// Rows of a quantized checkpoint price its precision only, as a built-in profile's name says.
		{deploy("llama-3.1-8b", 32), fp8, "no rows price model llama-3.1-8b (rows of nvidia/Llama-3.1-8B-Instruct-FP8 (fp8, not bf16), qwen3-32b): write llama-3.1-8b in the model column of rows measured for it"},
		{registry.Params{Model: qwen, System: base.System, Backend: "vllm", TP: 1, EP: 1}, steps, "no rows price model qwen3-30b-a3b (rows of llama-3.1-8b, qwen3-32b): write qwen3-30b-a3b in the model column of rows measured for it"},
		{deploy("Meta-Llama-3.1-8B-Instruct", 32), both, "the rows of llama-3.1-8b and meta-llama/Llama-3.1-8B-Instruct all price model Meta-Llama-3.1-8B-Instruct: keep one model's rows, or write Meta-Llama-3.1-8B-Instruct in their model column"},
		{registry.Params{System: base.System, Backend: "vllm", TP: 1, EP: 1}, steps, "its rows are for llama-3.1-8b, qwen3-32b, and no --model or --model-config says whose to read"},
	} {
		tc.p.Profile = tc.csv
		want := "timing profile " + tc.csv + ": " + tc.why
		if _, _, err := e.New(tc.p); fmt.Sprint(err) != want {
			t.Errorf("New: %v, want %q", err, want)
		}
		if err := e.Shared(tc.p); fmt.Sprint(err) != want {
			t.Errorf("Shared: %v, want %q", err, want)
		}
	}
}

// TestBuiltinForItsModel: each built-in profile is measured for a catalog model, and is the one chosen
// for it without --profile.
func TestBuiltinForItsModel(t *testing.T) {
	e, _ := registry.Lookup("profile")
	for _, name := range profile.BuiltinNames() {
		p := params(t)
		m, err := model.Lookup(builtin(t, name).Model())
		if err != nil {
			t.Fatalf("built-in profile %s: %v", name, err)
		}
		p.Model = m
		if _, info, err := e.New(p); err != nil || info.Source != name {
			t.Errorf("%s without --profile: source %q, %v; want the built-in %s", m.Name, info.Source, err, name)
		}
	}
}

// builtin is the built-in step profile name.
func builtin(t *testing.T, name string) *profile.Steps {
	s, err := profile.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// b200 is the B200 system.
func b200(t *testing.T) *hardware.System {
	s, err := hardware.Lookup("b200_sxm")
	if err != nil {
		t.Fatal(err)
	}
	return s
}
