// Package registry is where timing models are registered by name: --timing's values, the help each
// gives, and how each is built from a deployment and the timing flags (Params). It sits above timing
// and the packages of its models (timing/aic, timing/profile), which import timing, so that a model's
// package need not know the others; config looks a model up here, and the conformance suite
// (timing/timingtest) runs on every registered model. Adding a model is its package and one entry in
// Models.
package registry

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/aic"
	"github.com/mocker-sim/mocker/timing/profile"
)

// Params is what a timing model may be built from: the deployment and the timing flags.
type Params struct {
	Model   *model.Model     // nil when none is named
	System  *hardware.System // nil when none is named
	Backend string           // --backend
	TP, EP  int
	// AttentionDP is --dp-size when its ranks share the MoE layers (--dp-attention), else 1
	// (config.MoEDP); the op-level model takes 0 and 1 alike.
	AttentionDP int
	// Quantization is --quantization as given; GEMMQuant and MoEQuant are the precisions it resolves to
	// for the linear layers and the routed experts ("": the model's dtype).
	Quantization, GEMMQuant, MoEQuant string
	KVCacheDtype                      string
	PerfDB, BackendVersion            string  // default: the database's root and the tables' version
	Profile                           string  // profile: a built-in name or a path
	PrefillMs, DecodeMs               float64 // fixed
}

// Info is what the report says of a built model: the data it read and the engine version of its
// tables ("" where it reads none).
type Info struct{ Source, Version string }

// Entry is one registered timing model.
type Entry struct {
	Name string // --timing's value
	Help string // for --timing's help
	// Slack is the relative dip in cost the conformance suite allows when a pass grows
	// (timingtest.Options.Slack): 0 for an analytic model, the measured noise for one read off tables.
	Slack float64
	New   func(Params) (timing.Model, Info, error)
	// Shared, if set, checks what New checks that no deployment's shape (its TP, EP, workers and batch
	// limits) changes: the model and system it needs, the files it reads. Its error is New's, which a
	// search raises once rather than for every shape.
	Shared func(Params) error
}

// Models is the registry, in the order --timing's help lists them; the first is the default.
var Models = []Entry{
	{Name: "default", Slack: 0.05, New: opLevel, Shared: opLevelShared,
		Help: "op-level: per-kernel measurements from AIConfigurator's database, found by --perf-db, $MOCKER_PERF_DB, an installed aiconfigurator Python package, else the built-in H200 vLLM/SGLang tables; on --backend trtllm the profile"},
	{Name: "profile", Slack: 0.25, New: stepProfile, Shared: func(p Params) error { _, _, err := openProfile(p); return err },
		Help: "step times of a plain PyTorch decoder, ~1.8x slower than vLLM's kernels"},
	{Name: "polynomial", New: func(Params) (timing.Model, Info, error) { return timing.Polynomial{}, Info{}, nil },
		Help: "Dynamo's default"},
	{Name: "fixed", New: func(p Params) (timing.Model, Info, error) {
		return timing.Fixed{PrefillMs: p.PrefillMs, DecodeMs: p.DecodeMs}, Info{}, nil
	}, Help: "--prefill-ms and --decode-ms"},
}

// Lookup finds a registered model by name; the error names the registered ones.
func Lookup(name string) (*Entry, error) {
	for i := range Models {
		if Models[i].Name == name {
			return &Models[i], nil
		}
	}
	names := make([]string, len(Models))
	for i, m := range Models {
		names[i] = m.Name
	}
	return nil, fmt.Errorf("timing %s: want %s or %s", name, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// Help is --timing's help: each registered model with its own.
func Help() string {
	parts := make([]string, len(Models))
	for i, m := range Models {
		parts[i] = m.Name + " (" + m.Help + ")"
	}
	return "pass timing model: " + strings.Join(parts, ", ")
}

// opLevel builds the op-level model (--timing default) on the database aic.Discover finds.
func opLevel(p Params) (timing.Model, Info, error) {
	if err := opLevelShared(p); err != nil {
		return nil, Info{}, err
	}
	src := aic.Discover(p.PerfDB, p.System.Name)
	a, err := aic.New(aic.Options{Model: p.Model, System: p.System, Root: src.Root, Backend: p.Backend, Version: p.BackendVersion,
		TP: p.TP, EP: p.EP, AttentionDP: p.AttentionDP, GEMMQuant: p.GEMMQuant, KVCacheDtype: p.KVCacheDtype, MoEQuant: p.MoEQuant})
	if err != nil {
		return nil, Info{}, fmt.Errorf("timing default (data: %s): %w", src, err)
	}
	return a, Info{Source: src.String(), Version: p.Backend + " " + a.Version()}, nil
}

// opLevelShared is what opLevel checks that no shape changes: the model and system it needs, the
// backend, the quantization, and the directory --perf-db or $MOCKER_PERF_DB gives, if either does (one
// that is not there is an *os.PathError, which config words as the setting's or the variable's,
// config.FileError: "$MOCKER_PERF_DB /x: no such file or directory").
func opLevelShared(p Params) error {
	switch {
	case p.Model == nil || p.System == nil:
		return fmt.Errorf("timing default: needs --model (or --model-config) and --system")
	case p.Backend == "trtllm":
		return fmt.Errorf("timing default: no TensorRT-LLM tables are supported; use --backend vllm or sglang timing, or --timing profile")
	case p.Quantization == "mxfp4" && !p.Model.MoE():
		return fmt.Errorf("timing default: quantization mxfp4 quantizes only routed experts (the gpt-oss format) and model %s has none", p.Model.Name)
	}
	if src, ok := aic.Given(p.PerfDB); ok {
		_, err := os.Stat(src.Root)
		return err
	}
	return nil
}

// stepProfile opens the profile (openProfile), which prices one GPU.
func stepProfile(p Params) (timing.Model, Info, error) {
	m, info, err := openProfile(p)
	if err == nil && p.TP != 1 {
		return nil, Info{}, fmt.Errorf("timing profile: profiles are measured at tp 1, got --tp %d", p.TP)
	}
	return m, info, err
}

// openProfile opens --profile: a built-in profile name, a profiler results directory (Dynamo's planner
// profile), or a step-time CSV of ours (its rows for the deployment's model). Unset, it is the built-in
// profile of the model on the system. Nothing it reads depends on a deployment's shape.
func openProfile(p Params) (timing.Model, Info, error) {
	name, st, err := profileSource(p)
	if err != nil {
		return nil, Info{Source: name}, err
	}
	info := Info{Source: name}
	if st == nil {
		s, err := profile.Builtin(name)
		return s, info, err
	}
	if st.IsDir() {
		m, err := profile.LoadPlanner(name)
		return m, info, err
	}
	f, err := profile.ReadSteps(name)
	if err != nil {
		return nil, info, err
	}
	rowsModel, err := stepsRows(name, f.Models(), p)
	if err != nil {
		return nil, info, err
	}
	if rowsModel != p.Model.Name {
		info.Source += ", rows of " + rowsModel
	}
	m, err := f.Steps(rowsModel)
	return m, info, err
}

// stepsRows is the model whose rows of the step-time CSV file (which names models) price the
// deployment's model m: the rows of a model of the catalog (by its name or a Hugging Face id of it) that
// m is, or, for a model read from a config.json, whose passes m's compute (builtinPrices' rule: its
// folder's name says nothing of what it holds), those of m's own name first; a name no catalog model
// has is taken as it is written, in any case; rows named by a quantized checkpoint price only that
// precision. The error names the rows' models and the way out: the
// model column, and for a checkpoint named as a catalog model it is not (whose rows it cannot take)
// another name.
func stepsRows(file string, models []string, p Params) (string, error) {
	m := p.Model
	// A path error on file, which config words by the setting that named it (config.FileError:
	// "--prefill-profile steps.csv: no rows price ...").
	fail := func(format string, args ...any) error {
		return &os.PathError{Op: "timing profile", Path: file, Err: fmt.Errorf(format, args...)}
	}
	if m == nil {
		return "", fail("its rows are for %s, and no --model or --model-config says whose to read", strings.Join(models, ", "))
	}
	catalog, prec := isCatalog(m), precision(p)
	var fit, other []string
	for _, name := range models {
		known, err := model.Lookup(name)
		switch {
		case err == nil && known.Quantization != "" && known.Quantization != prec:
			// Rows named by a quantized checkpoint (nvidia/Llama-3.1-8B-Instruct-FP8) were measured at its
			// precision, as a built-in profile's name says its own.
			other = append(other, fmt.Sprintf("%s (%s, not %s)", name, known.Quantization, prec))
		case err != nil && strings.EqualFold(name, m.Name):
			fit = append(fit, name)
		case err != nil:
			other = append(other, name)
		case catalog && known.Name == m.Name || !catalog && known.ShapeDiff(m) == "":
			fit = append(fit, name)
		case !catalog:
			other = append(other, fmt.Sprintf("%s (%s)", name, known.ShapeDiff(m)))
		default:
			other = append(other, name)
		}
	}
	own := slices.Index(fit, m.Name) // its own name as written, else in another case
	if own < 0 {
		own = slices.IndexFunc(fit, func(name string) bool { return strings.EqualFold(name, m.Name) })
	}
	switch {
	case own >= 0: // of its own name, beside a Hugging Face id's
		return fit[own], nil
	case len(fit) == 1:
		return fit[0], nil
	case len(fit) == 0 && !catalog:
		if known, err := model.Lookup(m.Name); err == nil && known.ShapeDiff(m) != "" {
			// Rows of its name are the catalog model's, which it is not: only another name can be its own.
			return "", fail("no rows price model %s (rows of %s): %s is the catalog's name of a model it is not (%s); name its folder otherwise and write that name in the model column of rows measured for it",
				m.Name, strings.Join(other, ", "), m.Name, known.ShapeDiff(m))
		}
		fallthrough
	case len(fit) == 0:
		return "", fail("no rows price model %s (rows of %s): write %s in the model column of rows measured for it", m.Name, strings.Join(other, ", "), m.Name)
	}
	return "", fail("the rows of %s all price model %s: keep one model's rows, or write %s in their model column", strings.Join(fit, " and "), m.Name, m.Name)
}

// profileSource is the profile openProfile opens, which no shape changes: its name, and its file's
// information (nil for a built-in profile); the error says why there is none, or why a built-in profile
// given by name does not fit the deployment's model, GPU or precision.
func profileSource(p Params) (name string, st os.FileInfo, err error) {
	name = p.Profile
	if name == "" {
		if p.Model == nil || p.System == nil {
			return "", nil, fmt.Errorf("timing profile: no --profile, and no --model and --system to choose a built-in one")
		}
		if name = builtinFor(p); name == "" {
			return "", nil, fmt.Errorf("timing profile: no built-in profile for %s on %s (%s); give --profile PATH, or --timing polynomial", p.Model.Name, p.System.Name, builtinName(p))
		}
		return name, nil, nil
	}
	if s, err := profile.Builtin(name); err == nil {
		return name, nil, builtinFits(name, s.Model(), p)
	}
	if st, err = os.Stat(name); err != nil {
		// A path error, which config words by the setting that named it (config.FileError).
		return name, nil, &os.PathError{Op: "open", Path: name,
			Err: fmt.Errorf("not a built-in profile (%s) nor a file: %w", strings.Join(profile.BuiltinNames(), ", "), errors.Unwrap(err))}
	}
	return name, st, nil
}

// builtinName is the name the built-in profile measured for the deployment's model on its GPU at its
// weights' precision would have: h200-llama-3.1-8b-bf16 for llama-3.1-8b in bf16 on h200_sxm.
func builtinName(p Params) string {
	return fmt.Sprintf("%s-%s-%s", gpu(p), p.Model.Name, precision(p))
}

// gpu is the deployment's GPU as profiles name it: "h200" for h200_sxm.
func gpu(p Params) string {
	g, _, _ := strings.Cut(p.System.Name, "_")
	return g
}

// builtinFor is the built-in profile that prices the deployment (builtinPrices), "" where none does:
// for a catalog model the one of its name, for a model read from a config.json one measured for a
// catalog model of its architecture.
func builtinFor(p Params) string {
	for _, name := range profile.BuiltinNames() {
		if s, err := profile.Builtin(name); err == nil && builtinPrices(name, s.Model(), p) {
			return name
		}
	}
	return ""
}

// builtinFits refuses the built-in profile name, measured for the catalog model measured, where it
// does not price the deployment (builtinPrices): it would price the passes of another engine than the
// one simulated. The error is a path error on name, which config words by the setting that gave it
// (config.FileError: "--prefill-profile h200-qwen3-32b-bf16: measured for ..."). Without a model and
// a system named there is nothing to compare.
func builtinFits(name, measured string, p Params) error {
	if p.Model == nil || p.System == nil {
		return nil
	}
	if builtinPrices(name, measured, p) {
		return nil
	}
	hint := "give --profile PATH measured for it, or --timing polynomial"
	if fit := builtinFor(p); fit != "" {
		hint = "its built-in profile is " + fit
	}
	if diff := shapeDiff(measured, p.Model); diff != "" && !isCatalog(p.Model) {
		hint = diff + "; " + hint // what the folder's name does not say
	}
	on, _, _ := strings.Cut(name, "-")
	return &os.PathError{Op: "timing profile", Path: name, Err: fmt.Errorf("measured for %s %s on %s, and the deployment runs %s %s on %s (%s)",
		measured, name[strings.LastIndex(name, "-")+1:], on, p.Model.Name, precision(p), p.System.Name, hint)}
}

// builtinPrices says whether the built-in profile name, measured for the catalog model measured on
// the GPU and at the precision its name says, prices the deployment: on that GPU, at that precision,
// and of that model. A catalog model (isCatalog) must be the one measured. A model read from a
// config.json is named after its folder, which says nothing of what it holds
// (Meta-Llama-3.1-8B-Instruct, a snapshot's hash): it must compute the measured model's passes,
// whatever its name (shapeDiff), since those are all a profile's step times depend on.
func builtinPrices(name, measured string, p Params) bool {
	switch {
	case !strings.HasPrefix(name, gpu(p)+"-") || !strings.HasSuffix(name, "-"+precision(p)):
		return false
	case isCatalog(p.Model):
		return p.Model.Name == measured
	}
	return shapeDiff(measured, p.Model) == ""
}

// isCatalog says whether m is a catalog model: of a catalog name, and computing that model's passes
// (a config.json in a folder named llama-3.1-8b with a layer more is not).
func isCatalog(m *model.Model) bool {
	c, err := model.Lookup(m.Name)
	return err == nil && c.Name == m.Name && c.ShapeDiff(m) == ""
}

// shapeDiff is where m's passes differ from those of the catalog model measured (model.ShapeDiff).
func shapeDiff(measured string, m *model.Model) string {
	c, err := model.Lookup(measured)
	if err != nil {
		return err.Error() // built-in profiles are measured for catalog models (TestBuiltinForItsModel)
	}
	return c.ShapeDiff(m)
}

// precision names the weights' precision as profiles do: the quantization (the flag's, else the
// checkpoint's), else the model's dtype.
func precision(p Params) string {
	switch {
	case p.Quantization != "":
		return p.Quantization
	case p.Model.Quantization != "":
		return p.Model.Quantization
	case p.Model.Dtype == "bfloat16":
		return "bf16"
	}
	return p.Model.Dtype
}
