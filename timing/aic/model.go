package aic

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
)

// Options configure a Model: what runs (model, GPU system, engine and its version, parallelism,
// precisions) and where the performance database is.
type Options struct {
	Model  *model.Model
	System *hardware.System // its Name is the database's system directory (e.g. "h200_sxm")
	Root   string           // database root holding <system>/<op>/<backend>/<version>/*.parquet

	Backend string // "vllm" or "sglang"
	Version string // engine version directory; "" = the newest that has every table needed
	TP      int    // tensor parallelism: GPUs per engine rank; 0 means 1
	// EP is expert parallelism: the routed experts sharded over EP of the TP GPUs, each shard split
	// over TP/EP of them (moe_ep_size = EP, moe_tp_size = TP/EP; attention stays TP); 0 means 1.
	// It must divide TP; vLLM shards experts over all TP GPUs or none (EP 1 or TP).
	EP int
	// AttentionDP is attention data parallelism: that many ranks of TP GPUs each run attention on
	// their own batch, and run every MoE layer together, the experts sharded over all TP ×
	// AttentionDP GPUs (moe_tp_size × moe_ep_size = TP × AttentionDP, AIConfigurator's
	// attention_dp_size; SGLang's --enable-dp-attention, vLLM's --data-parallel-size on a MoE
	// model). EP then divides TP × AttentionDP. 0 means 1: each rank its own copy of the model.
	AttentionDP int

	// GEMMQuant is the linear layers' precision as vLLM names it: "bf16" (also "" and "auto"),
	// "fp8" (per-tensor), "fp8_block" (128×128 block scales).
	GEMMQuant string
	// KVCacheDtype is the KV cache's element type: "auto" (or "": the model's dtype), "bf16", "fp8".
	KVCacheDtype string
	// MoEQuant is the routed experts' precision: "" = GEMMQuant; also "mxfp4" (gpt-oss) and
	// "int4_wo", as the MoE table names them.
	MoEQuant string
	// MoEDistribution is the MoE table's token-to-expert distribution: "" = AIConfigurator's for
	// the model's family (power_law with its family's alpha: "power_law_1.01" for the DeepSeek
	// family, "power_law_1.2" for other MoE models; see deepSeekFamily); also "balanced".
	MoEDistribution string
	// NCCLVersion selects comm/nccl/<version> when the backend has no custom all-reduce table: ""
	// = the system spec's misc.nccl_version (<root>/<system>.yaml), else the newest present.
	NCCLVersion string
}

// Model is the op-level timing model; it implements timing.Model. Build it with New; it does not
// change afterwards, so Cost may be called from several goroutines.
type Model struct {
	version string
	sources []string

	// perToken is the time of one pass's work that depends only on its token count T: for every
	// layer the QKV, O, MLP (or router + MoE + shared-expert) GEMMs, norms and activations, the two
	// tensor-parallel all-reduces, plus the embedding and its all-reduce; tabulated by T.
	perToken table1
	// perTokenDec replaces perToken for passes without prefill tokens in the DeepSeek family
	// (empty otherwise): the shared expert overlaps the routed experts (see deepSeekFamily).
	perTokenDec table1
	// lmHead is the LM-head GEMM by the number of requests that sample a token.
	lmHead table1
	// attn holds the attention ops by kind of layer (full attention, sliding window).
	attn []attnLayers
	// dsa: attn is SGLang's DSA modules (loadDSAModule).
	dsa bool
	// gdn: the Gated DeltaNet kernels of the linear-attention layers (nil without them).
	gdn *gdnOps
	// Multi-head latent attention only (empty otherwise): preTok is the work that only prefill
	// tokens do (kv_b_proj, decompressing the chunk's keys and values), by prefill tokens in the
	// pass; decTok the work only decode tokens do (the absorbed-decode BMMs), by decode requests.
	preTok, decTok table1

	// tokenParts are perToken's terms by op, untabulated, and overlapCredit perTokenDec's difference
	// from it, for Parts.
	tokenParts    []tokenPart
	overlapCredit tokenPart

	// With attention data parallelism (dp > 1) the routed experts are not in perToken: group holds
	// them and the MoE layers' gather and scatter over the group's GPUs, by the group's tokens
	// (groupTokens), and groupParts are its terms. For the DeepSeek family's decode passes the
	// overlap of the routed group with the shared expert is taken at Cost time from routed (router
	// GEMM and, on SGLang, the two all-reduces, by the rank's tokens) and shared (the shared expert).
	dp             int
	padToMax       bool // vLLM: every rank's batch is padded to the group's largest (groupTokens)
	group          table1
	groupParts     []tokenPart
	routed, shared table1 // the DP group's shared-expert overlap in decode passes, when tabulated

	// layers is the model's transformer layers: a speculative decode step's draft module costs
	// drafts/layers of the step (see drafting).
	layers float64
}

// tokenPart is one op's time by the pass's token count, in ms.
type tokenPart struct {
	op string
	f  func(T float64) float64
}

type attnLayers struct {
	layers float64
	window float64 // 0: full attention
	// module: ctx and gen are vLLM's whole MLA modules (loadMLAModule); a chunk over a cached
	// prefix is priced as AIConfigurator prices it (moduleChunk).
	module   bool
	ctx, gen *attnOp
	// rect prices the part of a chunk that attends cached tokens: the full-attention context op
	// (ctx itself, or the full layers' op for sliding-window layers).
	rect *attnOp
}

var _ timing.Model = (*Model)(nil)

// Version is the engine version whose tables the model uses.
func (m *Model) Version() string { return m.version }

// Sources lists the table files the model was built from (parquet files, or compact tables under
// EmbeddedRoot), those it prices from in place of its version's own included.
func (m *Model) Sources() []string { return slices.Clone(m.sources) }

// config is Options resolved and checked.
type config struct {
	Options
	m                      *model.Model
	tp, ep                 int
	dp, moeTP              int // attention data parallelism; the experts' tensor parallelism (tp × dp / ep)
	gemmDtype, kvDtype     string
	moeDtype, dist         string
	heads, kvHeads, headDm int // per GPU
	// overlapShared: decode passes run the shared expert beside the routed experts (deepSeekFamily).
	overlapShared bool
	// mlaModule: MLA priced from vLLM's whole-module tables (loadMLAModule).
	mlaModule bool
	// dsa: the architecture whose DSA module tables price the attention (SGLang, loadDSAModule); "" otherwise.
	dsa string
}

// deepSeekFamily reports whether AIConfigurator prices m with its DeepSeekModel
// (ai-dynamo/aiconfigurator src/aiconfigurator/sdk/models/deepseek.py, registered for the DEEPSEEK
// and KIMIK25 families: DeepSeek-V3/R1 and Kimi-K2.5, the MoE models with multi-head latent
// attention) rather than its MOEModel (sdk/models/moe.py: Qwen3 MoE, MiniMax-M2, gpt-oss, ...).
// Two things differ for MoE timing:
//
//   - The expert-load distribution: DeepSeekModel sets _power_law_alpha = 1.01, MOEModel 1.2, and
//     both query the MoE table at workload_distribution "power_law_<alpha>" (the default
//     workload_distribution is "power_law").
//   - Decode: DeepSeekModel wraps the generation MoE block in ops.OverlapOp(group_a = router
//     GEMM, MoEDispatch(pre), MoE, MoEDispatch(post); group_b = the shared expert's gate_up GEMM,
//     activation and down GEMM), whose latency is max(sum(group_a), sum(group_b)) (operations.py,
//     OverlapOp: the two groups run on two CUDA streams under CUDA graphs); the context phase runs
//     them one after the other. For SGLang without DeepEP the two MoEDispatch ops are custom
//     all-reduces of T·hidden when TP > 1 (operations.py, MoEDispatch.query), i.e. the layer's two
//     all-reduces sit in the routed group; for vLLM they are a separate CustomAllReduce op
//     (2 per layer), outside the overlap.
func deepSeekFamily(m *model.Model) bool { return m.MLA() && m.MoE() }

func resolve(o Options) (*config, error) {
	c := &config{Options: o, m: o.Model, tp: max(o.TP, 1), ep: max(o.EP, 1), dp: max(o.AttentionDP, 1)}
	switch {
	case o.Model == nil:
		return nil, errors.New("aic: no model")
	case o.System == nil:
		return nil, errors.New("aic: no system")
	case o.Root == "":
		return nil, errors.New("aic: no database root")
	case o.TP < 0:
		return nil, fmt.Errorf("aic: tensor parallelism %d is negative", o.TP)
	case o.EP < 0:
		return nil, fmt.Errorf("aic: expert parallelism %d is negative", o.EP)
	case o.AttentionDP < 0:
		return nil, fmt.Errorf("aic: attention data parallelism %d is negative", o.AttentionDP)
	case c.dp > 1 && !o.Model.MoE():
		return nil, fmt.Errorf("aic: attention data parallelism %d: model %s has no routed experts for its ranks to share", c.dp, o.Model.Name)
	}
	if err := o.Model.Validate(); err != nil {
		return nil, fmt.Errorf("aic: model %s: %w", o.Model.Name, err)
	}
	m := o.Model
	c.Backend = strings.ToLower(strings.TrimSpace(o.Backend))
	if c.Backend != "vllm" && c.Backend != "sglang" {
		return nil, fmt.Errorf("aic: backend %q: want vllm or sglang", o.Backend)
	}
	// MLA on vLLM is priced from whole-module tables (mla_context_module_perf,
	// mla_generation_module_perf), on SGLang from the op tables (loadMLA).
	c.mlaModule = m.MLA() && c.Backend == "vllm"
	if m.Heads%c.tp != 0 {
		return nil, fmt.Errorf("aic: %d attention heads do not split over tensor parallelism %d", m.Heads, c.tp)
	}
	if m.Intermediate%c.tp != 0 || m.MoEIntermediate%c.tp != 0 {
		return nil, fmt.Errorf("aic: MLP sizes %d/%d do not split over tensor parallelism %d", m.Intermediate, m.MoEIntermediate, c.tp)
	}
	if err := checkEP(m, c.Backend, c.tp, c.dp, c.ep); err != nil {
		return nil, err
	}
	c.moeTP = c.tp * c.dp / c.ep
	if m.MoEIntermediate%c.moeTP != 0 {
		return nil, fmt.Errorf("aic: expert size %d does not split over the experts' tensor parallelism %d (tp %d × attention dp %d / ep %d)", m.MoEIntermediate, c.moeTP, c.tp, c.dp, c.ep)
	}
	c.heads, c.kvHeads, c.headDm = m.Heads/c.tp, max(1, m.KVHeads/c.tp), m.HeadDim
	if m.LinearLayers > 0 && (m.LinearKeyHeads%c.tp != 0 || m.LinearValueHeads%c.tp != 0) {
		return nil, fmt.Errorf("aic: %d/%d linear-attention key/value heads do not split over tensor parallelism %d", m.LinearKeyHeads, m.LinearValueHeads, c.tp)
	}

	var err error
	if c.gemmDtype, err = gemmDtype(o.GEMMQuant); err != nil {
		return nil, err
	}
	if c.kvDtype, err = kvDtype(o.KVCacheDtype, m.Dtype); err != nil {
		return nil, err
	}
	if m.DSA() && c.Backend == "sglang" {
		if c.dsa, err = dsaArchitecture(m); err != nil {
			return nil, err
		}
	}
	if m.MoE() {
		c.moeDtype = c.gemmDtype
		if o.MoEQuant != "" {
			if c.moeDtype, err = moeDtype(o.MoEQuant); err != nil {
				return nil, err
			}
		}
		c.dist = o.MoEDistribution
		if c.dist == "" {
			c.dist = defaultMoEDst
			if deepSeekFamily(m) {
				c.dist = deepSeekMoEDst
			}
		}
		c.overlapShared = deepSeekFamily(m) && m.SharedExperts > 0
	}
	return c, nil
}

// checkEP checks expert parallelism ep against the model and the tp GPUs the experts span (the
// tensor parallelism times the attention data parallelism): the experts go to ep shards of whole
// experts, each split over tp/ep GPUs (AIConfigurator's moe_tp_size × moe_ep_size = tp_size ×
// attention_dp_size). vLLM cannot split experts both ways
// (AIConfigurator's MoEDispatch asserts moe_tp 1 or moe_ep 1 for it): its --enable-expert-parallel
// shards them over all tp GPUs.
func checkEP(m *model.Model, backend string, tp, dp, ep int) error {
	gpus, span := tp*dp, fmt.Sprintf("tensor parallelism %d", tp)
	if dp > 1 {
		span = fmt.Sprintf("the %d GPUs of tp %d × attention dp %d", gpus, tp, dp)
	}
	switch {
	case ep == 1:
		return nil
	case !m.MoE():
		return fmt.Errorf("aic: expert parallelism %d: model %s has no routed experts", ep, m.Name)
	case gpus%ep != 0:
		return fmt.Errorf("aic: expert parallelism %d does not divide %s", ep, span)
	case m.Experts%ep != 0:
		return fmt.Errorf("aic: expert parallelism %d does not divide the %d experts", ep, m.Experts)
	case backend == "vllm" && ep != gpus:
		return fmt.Errorf("aic: expert parallelism %d with %s: vLLM shards the experts over all TP GPUs (EP 1 or %d)", ep, span, gpus)
	}
	return nil
}

// gemmDtype maps vLLM's quantization names to the GEMM table's gemm_dtype. The tables have no
// float16 rows: 16-bit models use the bfloat16 rows (Hopper's fp16 and bf16 tensor-core rates are
// equal).
func gemmDtype(q string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(q)) {
	case "", "auto", "bf16", "bfloat16", "fp16", "float16", "half":
		return "bfloat16", nil
	case "fp8":
		return "fp8", nil
	case "fp8_block":
		return "fp8_block", nil
	}
	return "", fmt.Errorf("aic: GEMM quantization %q: want bf16, fp8 or fp8_block", q)
}

func kvDtype(q, modelDtype string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(q))
	if s == "" || s == "auto" {
		s = strings.ToLower(modelDtype)
	}
	switch s {
	case "bf16", "bfloat16", "fp16", "float16", "half":
		return "bfloat16", nil
	case "fp8", "fp8_e4m3":
		return "fp8", nil
	}
	return "", fmt.Errorf("aic: KV cache dtype %q: want auto, bf16 or fp8", q)
}

func moeDtype(q string) (string, error) {
	s := strings.ToLower(strings.TrimSpace(q))
	switch s {
	case "mxfp4", "w4a16_mxfp4":
		return "w4a16_mxfp4", nil
	case "int4_wo":
		return "int4_wo", nil
	}
	d, err := gemmDtype(s)
	if err != nil {
		return "", fmt.Errorf("aic: MoE quantization %q: want bf16, fp8, fp8_block, mxfp4 or int4_wo", q)
	}
	return d, nil
}

// New loads the tables the configuration needs and precomputes its curves. Every missing piece of
// data is an error naming the file (or directory) and the key that is missing; nothing falls back
// silently. The documented substitutions (package doc) are named in the sources the model reports.
func New(o Options) (*Model, error) {
	m, err := cachedModel(o)
	if err != nil && o.Root == EmbeddedRoot && !errors.Is(err, errNotData) {
		err = fmt.Errorf("%w%s", err, missingHint())
	}
	return m, err
}

// errNotData marks configuration errors that no database would cure (notData).
var errNotData = errors.New("aic: not a data problem")

type notData struct{ error }

func (e notData) Unwrap() []error { return []error{e.error, errNotData} }

func newModel(o Options) (*Model, error) {
	c, err := resolve(o)
	if err != nil {
		return nil, notData{err}
	}
	d := db{root: c.Root, system: c.System.Name}
	if err := d.check(); err != nil {
		return nil, err
	}
	rf, err := newRoofline(c.System)
	if err != nil {
		return nil, err
	}
	needed := c.neededTables()
	version, src, err := pickVersion(d, c.Backend, c.Version, needed)
	if err != nil {
		return nil, err
	}
	mdl := &Model{version: version, layers: float64(c.m.Layers)}
	for _, ref := range needed {
		mdl.sources = append(mdl.sources, src[ref]...)
	}

	gemmSrc, ctxSrc, genSrc := src[needed[0]], src[needed[1]], src[needed[2]]

	// GEMMs: the linear layers at the chosen precision; router and LM head stay in bfloat16.
	gemms := map[string]*gemmData{}
	for _, dt := range []string{c.gemmDtype, "bfloat16"} {
		if gemms[dt] == nil {
			paths := gemmSrc
			if c.Backend == "vllm" && dt == "fp8_block" {
				if paths, err = mdl.blockGEMMSource(d, version, gemmSrc); err != nil {
					return nil, err
				}
			}
			if gemms[dt], err = loadGEMM(paths, dt, rf); err != nil {
				return nil, err
			}
		}
	}

	var moeSrc []string
	if c.m.MoE() {
		moeSrc = src[needed[3]]
	}
	if c.mlaModule {
		if err := mdl.loadMLAModule(c, rf, ctxSrc, genSrc); err != nil {
			return nil, err
		}
		return mdl.finish(d, c, version, rf, gemms, moeSrc, nil)
	}
	if c.dsa != "" {
		if err := mdl.loadDSAModule(c, rf, ctxSrc, genSrc); err != nil {
			return nil, err
		}
		return mdl.finish(d, c, version, rf, gemms, moeSrc, nil)
	}
	if c.m.MLA() {
		bmm, err := mdl.loadMLA(c, rf, ctxSrc, genSrc, src[needed[len(needed)-1]])
		if err != nil {
			return nil, err
		}
		return mdl.finish(d, c, version, rf, gemms, moeSrc, bmm)
	}

	// Attention: one op per kind of layer (full attention; sliding window).
	ctxRows, err := loadAttention(ctxSrc, false)
	if err != nil {
		return nil, err
	}
	if ctxSrc, ctxRows, err = mdl.ctxAttnSource(d, c.Backend, version, ctxSrc, ctxRows, rf); err != nil {
		return nil, err
	}
	genRows, err := loadAttention(genSrc, true)
	if err != nil {
		return nil, err
	}
	kinds := []struct{ layers, window int }{{c.m.FullAttentionLayers(), 0}}
	if c.m.SlidingLayers > 0 {
		kinds = append(kinds, struct{ layers, window int }{c.m.SlidingLayers, c.m.SlidingWindow})
	}
	for _, k := range kinds {
		key := attnKey{c.heads, c.kvHeads, c.headDm, k.window, "", c.kvDtype}
		shape := attnShape{heads: float64(c.heads), kvHeads: float64(c.kvHeads), headDim: float64(c.headDm),
			window: float64(k.window), kvBytes: bytesOf(c.kvDtype), memBW: rf.memBW}
		ctx, gen, err := newAttnOps(ctxRows, genRows, key, shape, ctxSrc, genSrc, rf)
		if err != nil {
			return nil, err
		}
		rect := ctx
		if k.window > 0 {
			rect = mdl.attn[0].ctx // kinds[0] is full attention
		}
		mdl.attn = append(mdl.attn, attnLayers{layers: float64(k.layers), window: float64(k.window), ctx: ctx, gen: gen, rect: rect})
	}
	if m := c.m; m.LinearLayers > 0 {
		k := gdnKey{m.Hidden, m.LinearKeyHeads / c.tp, m.LinearKeyHeadDim, m.LinearValueHeads / c.tp, m.LinearValueHeadDim, m.LinearConvKernel}
		if mdl.gdn, err = loadGDN(src[needed[len(needed)-1]], k); err != nil {
			return nil, err
		}
		mdl.gdn.layers = float64(m.LinearLayers)
	}

	return mdl.finish(d, c, version, rf, gemms, moeSrc, nil)
}

// neededTables lists the tables the configuration reads: GEMM, the two attention tables (or MLA's),
// MoE and MLA's BMMs where the model has them. The all-reduce table is looked up apart (allReduce).
func (c *config) neededTables() []tableRef {
	needed := []tableRef{gemmTable, ctxAttnTable, genAttnTable}
	switch {
	case c.mlaModule:
		needed = []tableRef{gemmTable, mlaCtxTable, mlaGenTable}
	case c.dsa != "":
		needed = []tableRef{gemmTable, dsaCtxTable, dsaGenTable}
	case c.m.MLA():
		needed = []tableRef{gemmTable, mlaCtxOpTable, mlaGenOpTable}
	}
	if c.m.MoE() {
		needed = append(needed, moeTable)
	}
	if c.m.MLA() && !c.mlaModule && c.dsa == "" {
		needed = append(needed, mlaBmmTable)
	}
	if c.m.LinearLayers > 0 {
		needed = append(needed, gdnTable) // last: newModel reads it there
	}
	for i := range needed {
		needed[i].backend = c.Backend
	}
	return needed
}

// groupCurves are the MoE layers' collectives over an attention data-parallel group (zero without):
// the gather and scatter over all its GPUs and, on SGLang with attention TP > 1, the reduce-scatter
// and all-gather within a rank's attention TP group around them.
type groupCurves struct{ gather, scatter, tpScatter, tpGather curve }

// finish loads the MoE and all-reduce curves and tabulates the per-pass curves.
func (mdl *Model) finish(d db, c *config, version string, rf *roofline, gemms map[string]*gemmData, moeSrc []string, bmm *mlaBmm) (*Model, error) {
	var err error
	// MoE.
	var moe curve
	var mk moeKey
	if c.m.MoE() {
		mk = moeKey{dtype: c.moeDtype, dist: c.dist, topk: c.m.ExpertsPerToken, experts: c.m.Experts,
			hidden: c.m.Hidden, inter: c.m.MoEIntermediate, tp: c.moeTP, ep: c.ep}
		var kernels []string
		if moe, kernels, err = loadMoE(moeSrc, mk, rf); err != nil {
			return nil, err
		}
		if c.Backend == "vllm" && slices.Contains(kernels, vllmWNA16Kernel) {
			if moe, err = mdl.marlinMoE(d, version, moeSrc, mk, rf); err != nil {
				return nil, err
			}
		}
		if c.Backend == "vllm" && deepGEMMMoE(version, mk) {
			if moe, err = mdl.deepGEMMExperts(d, version, moe, mk, rf); err != nil {
				return nil, err
			}
		}
	}

	// Tensor-parallel all-reduce.
	var ar curve
	if c.tp > 1 {
		if ar, err = allReduce(d, c, version, rf, mdl); err != nil {
			return nil, err
		}
	}

	var gc groupCurves
	if c.dp > 1 {
		if gc, err = groupComm(d, c, rf, mdl); err != nil {
			return nil, err
		}
	}
	mdl.buildCurves(c, rf, gemms, moe, mk, ar, bmm, gc)
	return mdl, nil
}

// vllmWNA16Kernel is the kernel_source AIConfigurator's vLLM MoE collector gives its int4_wo rows
// (collector/vllm/collect_moe.py, for vLLM >= 0.17: the H200 tables of 0.18.0 to 0.22.0). Despite the
// name, those rows time fused_experts() with int4_w4a16_moe_quant_config: vLLM's WNA16 kernels
// (fused_moe.py: moe_wna16_gemm up to 6 tokens per expert, else the Triton fused_moe_kernel_gptq_awq),
// which vLLM runs for compressed-tensors W4A16 experts only where Marlin cannot take the layer
// (compressed_tensors_moe.py: CompressedTensorsWNA16MoEMethod when check_moe_marlin_supports_layer
// fails or on ROCm; otherwise CompressedTensorsWNA16MarlinMoEMethod, fused_marlin_moe). On H200 they
// are 3–4× the Marlin rows of the versions before and after (Kimi-K2.5's experts, 64 tokens at
// moe_tp 1: 6.8 ms in 0.19.0, 1.7 ms in 0.14.0's vllm_marlin_moe, 1.8 ms in 0.24.0's
// vllm_compressedtensorswna16marlinmoe_marlin_marlinexperts).
const vllmWNA16Kernel = "vllm_marlin_int4_moe"

// marlinMoE prices vLLM's int4_wo experts where the engine version's rows time the WNA16 kernels
// (vllmWNA16Kernel): from the Marlin rows of the same MoE configuration in the nearest version that
// has them, the oldest newer one first (as NearestVersion picks a version), else the newest older
// one. The sources record the table used in place of the version's own.
func (mdl *Model) marlinMoE(d db, version string, own []string, k moeKey, rf *roofline) (curve, error) {
	ref := moeTable
	ref.backend = "vllm"
	var moe curve
	paths, err := mdl.substitute(d, ref, version, d.nearestVersions(ref.op, ref.backend, version), own, func(paths []string) (bool, error) {
		var kernels []string
		var err error
		moe, kernels, err = loadMoE(paths, k, rf)
		// Passed over: a version that lacks the configuration, or times the same WNA16 kernels.
		return err == nil && !slices.Contains(kernels, vllmWNA16Kernel), nil
	})
	if err != nil {
		return curve{}, err
	}
	if paths == nil {
		return curve{}, fmt.Errorf("aic: %s: the %s rows time vLLM's WNA16 MoE kernels (kernel_source %s), not the Marlin MoE vLLM runs for int4 experts, and no other vLLM version has Marlin rows for it",
			sourceList(own), k, vllmWNA16Kernel)
	}
	return moe, nil
}

// substitute walks candidates, versions of ref's table, and returns the paths of the first whose
// table usable accepts (nil with none; an error from usable or the database ends the walk). A table
// of another version than the engine's (version) is recorded: its paths join the sources, in place of
// replace (nil: beside the version's own), and traceSubstitute is told of it.
func (mdl *Model) substitute(d db, ref tableRef, version string, candidates, replace []string, usable func(paths []string) (bool, error)) ([]string, error) {
	for _, v := range candidates {
		paths, err := d.sources(ref, v)
		if err != nil {
			return nil, err
		}
		if len(paths) == 0 {
			continue
		}
		ok, err := usable(paths)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if v != version {
			mdl.sources = slices.DeleteFunc(mdl.sources, func(p string) bool { return slices.Contains(replace, p) })
			for _, p := range paths {
				if !slices.Contains(mdl.sources, p) {
					mdl.sources = append(mdl.sources, p)
				}
			}
			if traceSubstitute != nil {
				traceSubstitute(ref, v, paths)
			}
		}
		return paths, nil
	}
	return nil, nil
}

// nearestVersions lists the other versions of backend that have op's table, nearest to version
// first as NearestVersion picks one: the newer ones oldest first, then the older ones newest first.
func (d db) nearestVersions(op, backend, version string) []string {
	var newer, older []string
	for _, v := range d.versions(op, backend) { // newest first
		switch c := compareVersions(v, version); {
		case c > 0:
			newer = append(newer, v)
		case c < 0:
			older = append(older, v)
		}
	}
	slices.Reverse(newer)
	return append(newer, older...)
}

// hostBoundRatio: a version's fp8_block GEMM rows time host work, not a kernel, when the smallest
// GEMM they hold costs more than this many times the bfloat16 GEMM of the same m, n and k. On H200
// the 128×128×128 GEMM (m 1–8) is 2.4–2.7 µs in bfloat16 in every vLLM version; its fp8_block row
// (a per-token-group activation quantisation and a block-scaled GEMM, two launches) is 2.3–3.4×
// that in 0.19.0 and 6.4–7.2× in 0.14.0, but 51–68 µs, 20–26×, in 0.18.0, 0.22.0 and 0.24.0, flat
// in m up to thousands of tokens.
const hostBoundRatio = 10

// blockGEMMSource is where vLLM's fp8_block GEMMs are priced from: the version's own GEMM table
// unless its fp8_block rows are host-bound (hostBoundRatio), else the GEMM table of the nearest
// version whose rows are not, the oldest newer one first (as NearestVersion picks a version), else
// the newest older one; with none, the version's own. vLLM captures its decode steps (and the
// piecewise parts of mixed steps) in CUDA graphs, so a step pays the kernels' GPU time, not their
// launch: the 0.18.0 rows give an H200 8.7 ms of attention projections per decode step of
// MiniMax-M2.5 at TP 8 and 4 requests, where the whole step measured 8.0 ms on 0.18.0. The
// sources record the table used beside the version's own.
func (mdl *Model) blockGEMMSource(d db, version string, own []string) ([]string, error) {
	bound, _, err := blockGEMMHostBound(own)
	if err != nil || !bound {
		return own, err
	}
	ref := gemmTable
	ref.backend = "vllm"
	paths, err := mdl.substitute(d, ref, version, d.nearestVersions(ref.op, ref.backend, version), nil, func(paths []string) (bool, error) {
		bound, have, err := blockGEMMHostBound(paths)
		return have && !bound, err
	})
	if err != nil || paths == nil {
		return own, err
	}
	return paths, nil
}

// ctxAttnSource is where context attention is priced from: the version's own table (own, read as
// rows) unless some of its rows take less time than the GPU's tensor cores need for their arithmetic
// (attnRows.impossibleCtx), else the table of the nearest version with no such row, the oldest newer
// one first (as NearestVersion picks a version), else the newest older one; with none, the version's
// own. On H200 only vLLM 0.19.0's table has such rows: 7,147 of its 37,432 (every other vLLM and
// SGLang version: none), its prefill latency following the KV heads rather than the query heads.
// An 8,192-token prompt of gpt-oss-120b at TP 2 (32 query and 4 KV heads of 64; 18 full and 18
// sliding-window layers) read 2.1 ms of attention off it, where the arithmetic alone takes 5.2 ms
// at the peak and 0.22.0's and 0.24.0's tables give 11.3 and 12.5 ms; Llama-3.1-70B's at TP 2 read
// 6.3 ms, against 44 ms at the peak. The sources name the table used in place of the version's own.
func (mdl *Model) ctxAttnSource(d db, backend, version string, own []string, rows attnRows, rf *roofline) ([]string, attnRows, error) {
	if bad, _ := rows.impossibleCtx(rf); bad == 0 {
		return own, rows, nil
	}
	ref := ctxAttnTable
	ref.backend = backend
	var alt attnRows
	paths, err := mdl.substitute(d, ref, version, d.nearestVersions(ref.op, ref.backend, version), own, func(paths []string) (bool, error) {
		var err error
		if alt, err = loadAttention(paths, false); err != nil {
			return false, err
		}
		bad, _ := alt.impossibleCtx(rf)
		return bad == 0, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if paths == nil {
		return own, rows, nil
	}
	return paths, alt, nil
}

// traceSubstitute, when set, is told of every table a model prices from in place of its version's own
// (substitute): Generate embeds those too. It is set only while Generate runs.
var traceSubstitute func(ref tableRef, version string, paths []string)

// mlaBmm holds the absorbed-decode batched GEMMs of an MLA model (SGLang): before and after the
// attention core, by number of decode tokens.
type mlaBmm struct {
	pre, post curve
	sol       func(tok float64) float64 // the roofline of either, which the curves scale outside their grids
}

// loadMLA builds the attention ops of an MLA model from SGLang's op tables, the way
// AIConfigurator's DeepSeekModel composes a layer for SGLang (src/aiconfigurator/sdk/models/deepseek.py,
// the granular MLA block): context attention is ContextMLA (the prefill kernel over the
// decompressed q, k, v of the chunk), generation attention is MLABmm(pre) + GenerationMLA (the
// absorbed kernel over the cached latent) + MLABmm(post). The projections around them (the fused
// q_a/kv_a down-projection, q_b_proj, kv_b_proj for prefill tokens, o_proj) are GEMMs priced in
// buildCurves. Attention is looked up at heads/TP in the tables' family of the model's own head
// count (num_heads × tp_size = heads); the BMMs run in fp8 when the GEMMs are quantised, in bf16
// otherwise (AIConfigurator's mla_bmm_quant_mode).
func (mdl *Model) loadMLA(c *config, rf *roofline, ctxSrc, genSrc, bmmSrc []string) (*mlaBmm, error) {
	m := c.m
	ctxRows, err := loadMLA(ctxSrc, false, m.Heads)
	if err != nil {
		return nil, err
	}
	genRows, err := loadMLA(genSrc, true, m.Heads)
	if err != nil {
		return nil, err
	}
	latent := m.KVLoRARank + m.QKRopeHeadDim
	if latent != mlaLatent {
		return nil, fmt.Errorf("aic: model %s caches a latent of %d (kv_lora_rank + qk_rope_head_dim); the MLA tables measured %d", m.Name, latent, mlaLatent)
	}
	if err := mdl.addMLAAttn(c, rf, ctxRows, genRows, ctxSrc, genSrc, false); err != nil {
		return nil, err
	}

	dt := "fp8"
	if c.gemmDtype == "bfloat16" {
		dt = "bfloat16"
	}
	flops, err := rf.flopsOf(dt)
	if err != nil {
		return nil, err
	}
	heads, elem := float64(c.heads), bytesOf(dt)
	b := &mlaBmm{sol: func(tok float64) float64 { return rf.mlaBmmSOL(tok, heads, flops, elem) }}
	if b.pre, err = loadMLABmm(bmmSrc, "mla_gen_pre", dt, c.heads, b.sol); err != nil {
		return nil, err
	}
	if b.post, err = loadMLABmm(bmmSrc, "mla_gen_post", dt, c.heads, b.sol); err != nil {
		return nil, err
	}
	return b, nil
}

// addMLAAttn adds the attention of an MLA model (latent mlaLatent) read from its context and generation
// tables: the kernels (SGLang, loadMLA) or the whole modules (vLLM, loadMLAModule).
func (mdl *Model) addMLAAttn(c *config, rf *roofline, ctxRows, genRows attnRows, ctxSrc, genSrc []string, module bool) error {
	m := c.m
	key := attnKey{c.heads, 1, mlaLatent, 0, "", c.kvDtype}
	shape := attnShape{heads: float64(c.heads), kvHeads: 1, headDim: float64(m.HeadDim), kvBytes: bytesOf(c.kvDtype), memBW: rf.memBW,
		qkDim: float64(m.HeadDim), vDim: float64(m.VHeadDim), latent: mlaLatent, kvLoRA: float64(m.KVLoRARank)}
	if c.dsa != "" {
		shape.topK, shape.indexerBytes = float64(m.IndexTopK), float64(m.IndexerBytesPerToken())
	}
	ctx, gen, err := newAttnOps(ctxRows, genRows, key, shape, ctxSrc, genSrc, rf)
	if err != nil {
		return err
	}
	mdl.attn = append(mdl.attn, attnLayers{layers: float64(m.Layers), ctx: ctx, gen: gen, rect: ctx, module: module})
	return nil
}

// loadMLAModule builds the attention of an MLA model on vLLM from its whole-module tables, as
// AIConfigurator's DeepSeekModel does (src/aiconfigurator/sdk/models/deepseek.py: the
// context_mla_block / generation_mla_block FallbackOp, whose primary ops.MLAModule stands for the
// whole granular list — the fused q_a/kv_a down-projection, q_b_proj, kv_b_proj, the attention and
// o_proj — and is used wherever the module tables have the row). The tables
// (collector/vllm/collect_mla_module_v2.py) time vLLM's DeepseekV2MLAAttention forward at TP 1
// with num_heads standing for the heads per GPU, keyed by gemm_type (the projections' precision:
// bfloat16 or fp8_block), kv_cache_dtype and mla_dtype (bfloat16), measured with DeepSeek-V3's
// geometry (AIConfigurator reads them at the model's heads/TP for every model of the family, Kimi
// K2.5's included: its 64 heads at TP 8 are DeepSeek-V3's at TP 16). The context module is read by
// (batch, isl) in sqrt space, the generation module by (batch, past KV length); the projections
// are then not in the per-token curve, and no kv_b or BMM term is added (Model.Cost). AIConfigurator
// prices a chunk over a cached prefix as the module at the full length scaled by its share of the
// causal token pairs (MLAModule._query_context_mla_module_table: latency(full_s) × (full_s² −
// prefix²) / full_s²), and so does Cost.
func (mdl *Model) loadMLAModule(c *config, rf *roofline, ctxSrc, genSrc []string) error {
	m := c.m
	gemm := c.gemmDtype
	if gemm == "fp8" {
		return fmt.Errorf("aic: model %s on vllm: the MLA module tables (%s, %s) measured gemm_type bfloat16 and fp8_block, not per-tensor fp8",
			m.Name, sourceList(ctxSrc), sourceList(genSrc))
	}
	latent := m.KVLoRARank + m.QKRopeHeadDim
	if latent != mlaLatent || m.QLoRARank != 1536 || m.QKNopeHeadDim != 128 || m.VHeadDim != 128 || m.Hidden != 7168 {
		return fmt.Errorf("aic: model %s: the vLLM MLA module tables measured DeepSeek-V3's attention (hidden 7168, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128)", m.Name)
	}
	ctxRows, err := loadMLAModule(ctxSrc, false, gemm)
	if err != nil {
		return err
	}
	genRows, err := loadMLAModule(genSrc, true, gemm)
	if err != nil {
		return err
	}
	return mdl.addMLAAttn(c, rf, ctxRows, genRows, ctxSrc, genSrc, true)
}

// pickVersion returns the engine version to use and the source files of each needed table.
func pickVersion(d db, backend, want string, needed []tableRef) (string, map[tableRef][]string, error) {
	have := map[string]bool{}
	for _, ref := range needed {
		for _, v := range d.versions(ref.op, backend) {
			have[v] = true
		}
	}
	if len(have) == 0 {
		return "", nil, fmt.Errorf("aic: no %s data for system %s: %s has none", backend, d.system, d.dir("{gemm,attention}", backend))
	}
	var cands []string
	for v := range have {
		cands = append(cands, v)
	}
	slices.SortFunc(cands, func(a, b string) int { return compareVersions(b, a) })
	if want != "" {
		if !have[want] {
			return "", nil, fmt.Errorf("aic: %s version %q has no data for system %s (have %s)", backend, want, d.system, strings.Join(cands, ", "))
		}
		cands = []string{want}
	}
	var misses []string
	for _, v := range cands {
		src := map[tableRef][]string{}
		var missing []string
		for _, ref := range needed {
			paths, err := d.sources(ref, v)
			if err != nil {
				return "", nil, err
			}
			if len(paths) == 0 {
				missing = append(missing, missingPath(d, ref, v))
			}
			src[ref] = paths
		}
		if len(missing) == 0 {
			return v, src, nil
		}
		misses = append(misses, fmt.Sprintf("%s lacks %s", v, strings.Join(missing, ", ")))
	}
	return "", nil, fmt.Errorf("aic: no %s version has every table needed: %s", backend, strings.Join(misses, "; "))
}

func missingPath(d db, ref tableRef, version string) string {
	return d.dir(ref.op, ref.backend, version, ref.table+".parquet") + " (nor a reuse.yaml entry for it)"
}

// allReduce loads the engine version's custom all-reduce curve for the TP group, or NCCL's when the
// version has no custom all-reduce table.
func allReduce(d db, c *config, version string, rf *roofline, mdl *Model) (curve, error) {
	ref := allReduceTab
	ref.backend = c.Backend
	paths, err := d.sources(ref, version)
	if err != nil {
		return curve{}, err
	}
	if len(paths) > 0 {
		mdl.sources = append(mdl.sources, paths...)
		return loadAllReduce(paths, c.tp, rf)
	}
	paths, err = ncclSources(d, c, fmt.Sprintf("no custom all-reduce table for %s %s (%s)", c.Backend, version, missingPath(d, ref, version)))
	if err != nil {
		return curve{}, err
	}
	mdl.sources = append(mdl.sources, paths...)
	return loadNCCL(paths, c.tp, rf)
}

// ncclSources is the NCCL table: of --nccl-version (Options.NCCLVersion), else of the system spec's
// misc.nccl_version, else the newest present. why says what needs it, for the error without one.
func ncclSources(d db, c *config, why string) ([]string, error) {
	nv := c.NCCLVersion
	var err error
	if nv == "" {
		if nv, err = d.ncclVersion(); err != nil {
			return nil, err
		}
	}
	if nv == "" {
		if vs := d.versions(ncclTable.op, ncclTable.backend); len(vs) > 0 {
			nv = vs[0]
		}
	}
	if nv == "" {
		return nil, fmt.Errorf("aic: %s and no NCCL data (%s)", why, d.dir(ncclTable.op, ncclTable.backend))
	}
	paths, err := d.sources(ncclTable, nv)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("aic: %s and no NCCL table: %s", why, missingPath(d, ncclTable, nv))
	}
	return paths, nil
}

// groupComm loads the MoE layers' NCCL gather and scatter over the attention data-parallel group's
// tp × dp GPUs (half precision, by message size in elements) and, on SGLang with tp > 1, the
// reduce-scatter and all-gather over a rank's tp GPUs (AIConfigurator's MoEDispatch,
// combined_attention_tpdp).
func groupComm(d db, c *config, rf *roofline, mdl *Model) (groupCurves, error) {
	var gc groupCurves
	gpus := c.tp * c.dp
	paths, err := ncclSources(d, c, fmt.Sprintf("attention data parallelism %d gathers the MoE layers' tokens over %d GPUs", c.dp, gpus))
	if err != nil {
		return gc, err
	}
	mdl.sources = append(mdl.sources, paths...)
	if gc.gather, err = loadCollective(paths, "all_gather", gpus, rf.gatherSOL); err != nil {
		return gc, err
	}
	if gc.scatter, err = loadCollective(paths, "reduce_scatter", gpus, rf.gatherSOL); err != nil {
		return gc, err
	}
	if sglangTPHalves(c) {
		if gc.tpScatter, err = loadCollective(paths, "reduce_scatter", c.tp, rf.gatherSOL); err != nil {
			return gc, err
		}
		if gc.tpGather, err = loadCollective(paths, "all_gather", c.tp, rf.gatherSOL); err != nil {
			return gc, err
		}
	}
	return gc, nil
}

// sglangTPHalves: SGLang with attention TP and DP both above 1 reduce-scatters a MoE layer's input
// over the rank's attention TP group before gathering it over all GPUs, and all-gathers the output
// within that group after scattering it: the group's two all-reduces become one all-reduce's halves.
func sglangTPHalves(c *config) bool { return c.Backend == "sglang" && c.tp > 1 && c.dp > 1 }

// buildCurves tabulates the token-linear part of a pass and the LM head.
func (mdl *Model) buildCurves(c *config, rf *roofline, gemms map[string]*gemmData, moe curve, mk moeKey, ar curve, bmm *mlaBmm, gc groupCurves) {
	m := c.m
	tp := float64(c.tp)
	h := float64(m.Hidden)
	lin, bf16 := gemms[c.gemmDtype], gemms["bfloat16"]
	qkvN := float64(c.heads*c.headDm + 2*c.kvHeads*c.headDm)
	oK := float64(c.heads * c.headDm)
	all := float64(m.Layers)
	dense := float64(m.Layers - m.MoELayers())
	moeLayers := float64(m.MoELayers())
	in := float64(m.Intermediate) / tp
	sh := float64(m.SharedExperts*m.MoEIntermediate) / tp
	var moeFlops float64
	if m.MoE() {
		moeFlops, _ = rf.flopsOf(mk.dtype) // checked by loadMoE
	}
	arAt := func(T float64) float64 {
		if c.tp == 1 {
			return 0
		}
		size := T * h
		return ar.at(size, rf.allReduceSOL(size, c.tp))
	}
	// A q/k RMSNorm over all heads (MiniMax-M2) all-reduces each token's two fp32 partial sums of
	// squares in every layer: 8 bytes a token, priced as 4 bf16 elements. Below the smallest measured
	// message the latency is held, not scaled down: so small a collective is launch bound.
	qkNormAt := func(T float64) float64 {
		if c.tp == 1 || !m.QKNormAllHeads {
			return 0
		}
		size := max(4*T, ar.x[0])
		return ar.at(size, rf.allReduceSOL(size, c.tp))
	}
	// A MoE layer's traffic within the attention TP group: two all-reduces, or on SGLang with
	// attention data parallelism the reduce-scatter and all-gather around the group's gather and
	// scatter (sglangTPHalves), of the rank's T tokens × hidden elements over tp GPUs.
	moeTPComm := func(T float64) float64 { return 2 * arAt(T) }
	if sglangTPHalves(c) {
		moeTPComm = func(T float64) float64 {
			size := T * h
			return gc.tpScatter.at(size, rf.gatherSOL(size, c.tp)) + gc.tpGather.at(size, rf.gatherSOL(size, c.tp))
		}
	}
	// The attention projections every token goes through: per full-attention layer q (with its
	// output gate, AttnOutputGate), k, v and o; per linear-attention layer (Gated DeltaNet,
	// AIConfigurator's qwen35.py) the fused input projection to q, k, v, the output gate z and the
	// decay and beta gates, and the output projection.
	if m.AttnOutputGate {
		qkvN += float64(c.heads * c.headDm)
	}
	proj := func(T float64) float64 { return lin.latency(T, qkvN, h) + lin.latency(T, h, oK) }
	if m.LinearLayers > 0 {
		full, linear := float64(m.FullAttentionLayers())/all, float64(m.LinearLayers)/all
		qk, v, nv := float64(m.LinearKeyHeads*m.LinearKeyHeadDim)/tp, float64(m.LinearValueHeads*m.LinearValueHeadDim)/tp, float64(m.LinearValueHeads)/tp
		gqa := proj
		proj = func(T float64) float64 {
			return full*gqa(T) + linear*(lin.latency(T, 2*qk+2*v+2*nv, h)+lin.latency(T, h, v))
		}
	}
	switch {
	case c.mlaModule || c.dsa != "":
		// vLLM's MLA module tables and SGLang's DSA module tables include every projection
		// (loadMLAModule, loadDSAModule).
		proj = func(float64) float64 { return 0 }
	case m.MLA():
		// AIConfigurator's DeepSeekModel (granular MLA block): the fused q_a/kv_a down-projection
		// (replicated: q_lora_rank + kv_lora_rank + qk_rope_head_dim outputs), q_b_proj (heads/TP ×
		// (nope + rope) from q_lora_rank; from hidden without a q LoRA) and o_proj (heads/TP ×
		// v_head_dim in). kv_b_proj (prefill tokens) and the decode BMMs are per phase: preTok, decTok.
		down := float64(m.QLoRARank + m.KVLoRARank + m.QKRopeHeadDim)
		qN, qK := float64(c.heads*m.HeadDim), float64(m.QLoRARank)
		if m.QLoRARank == 0 {
			down, qK = float64(m.KVLoRARank+m.QKRopeHeadDim), h
		}
		oIn := float64(c.heads * m.VHeadDim)
		proj = func(T float64) float64 {
			return lin.latency(T, down, h) + lin.latency(T, qN, qK) + lin.latency(T, h, oIn)
		}
		kvbN, kvbK := float64(c.heads*(m.QKNopeHeadDim+m.VHeadDim)), float64(m.KVLoRARank)
		mdl.preTok = tabulate(unique(append(slices.Clone(lin.ms), powersOfTwo()...)), func(T float64) float64 {
			return all * lin.latency(T, kvbN, kvbK)
		})
		mdl.decTok = tabulate(unique(append(append(slices.Clone(bmm.pre.x), bmm.post.x...), powersOfTwo()...)), func(n float64) float64 {
			v := bmm.sol(n)
			return all * (bmm.pre.at(n, v) + bmm.post.at(n, v))
		})
	}
	// The work that depends only on the pass's token count T, by op. Every layer: norms before
	// attention and MLP (AIConfigurator's add_norm ElementWise ops, (2h in + 2h out) bf16 per token),
	// the attention projections, two all-reduces (three with a q/k norm over all heads); the MLP or
	// router + MoE + shared expert; the embedding lookup (read the rows, write the activations) and its
	// all-reduce over the vocabulary-parallel shards.
	// Per layer: a gated MLP of intermediate size inter (gate/up GEMM, activation, down GEMM); an MoE
	// layer's router GEMM and fused experts.
	gatedMLP := func(T, inter float64) float64 {
		return lin.latency(T, 2*inter, h) + rf.memOp(T*(2*inter+inter)*2) + lin.latency(T, h, inter)
	}
	router := func(T float64) float64 { return bf16.latency(T, float64(m.Experts), h) }
	experts := func(T float64) float64 { return moe.at(T, rf.moeSOL(T, mk, moeFlops)) }
	parts := []tokenPart{
		{"norms", func(T float64) float64 { return all * 2 * rf.memOp(T*(2*h+2*h)*2) }},
		{"attention_projections", func(T float64) float64 { return all * proj(T) }},
		{"tp_allreduce", func(T float64) float64 { return all*(2*arAt(T)+qkNormAt(T)) + arAt(T) }},
	}
	if sglangTPHalves(c) {
		parts[2].f = func(T float64) float64 {
			return dense*2*arAt(T) + moeLayers*moeTPComm(T) + all*qkNormAt(T) + arAt(T)
		}
	}
	if dense > 0 {
		parts = append(parts, tokenPart{"mlp", func(T float64) float64 { return dense * gatedMLP(T, in) }})
	}
	if moeLayers > 0 {
		parts = append(parts, tokenPart{"moe_router", func(T float64) float64 { return moeLayers * router(T) }})
		if c.dp == 1 {
			parts = append(parts, tokenPart{"moe_experts", func(T float64) float64 { return moeLayers * experts(T) }})
		}
		if sh > 0 {
			parts = append(parts, tokenPart{"shared_expert", func(T float64) float64 { return moeLayers * gatedMLP(T, sh) }})
		}
	}
	parts = append(parts, tokenPart{"embedding", func(T float64) float64 { return rf.memOp(2 * T * h * 2) }})
	mdl.tokenParts = parts
	perToken := func(T float64) float64 {
		var v float64
		for _, p := range parts {
			v += p.f(T)
		}
		return v
	}
	// The DeepSeek family's decode passes (deepSeekFamily): in every MoE layer the routed group
	// (router GEMM + fused MoE, with the layer's two all-reduces on SGLang, whose MoEDispatch ops
	// they are) and the shared expert overlap, so the layer pays the larger of the two instead of
	// their sum. perTokenDec = perToken − moeLayers × min(routed, shared).
	// With attention data parallelism the routed experts run on the whole group's tokens (T below
	// is the group's), and every MoE layer gathers the group's tokens to all its GPUs before the
	// experts and reduce-scatters their outputs back after them: AIConfigurator's MoE op at
	// num_tokens × attention_dp_size and its MoEDispatch ops, an NCCL all_gather (pre) and
	// reduce_scatter (post) of num_tokens × hidden × attention_dp_size elements over all
	// moe_tp × moe_ep GPUs (sdk/operations/moe.py, MoE.query and MoEDispatch.query, the vLLM and
	// the SGLang non-DeepEP paths). The attention TP group's own traffic stays in tp_allreduce, by
	// the rank's tokens: on SGLang one reduce-scatter and one all-gather per MoE layer instead of
	// two all-reduces (moeTPComm).
	if c.dp > 1 && moeLayers > 0 {
		mdl.dp = c.dp
		mdl.padToMax = c.Backend == "vllm"
		mdl.groupParts = []tokenPart{
			{"moe_experts", func(T float64) float64 { return moeLayers * experts(T) }},
			{"moe_dispatch", func(T float64) float64 {
				size := T * h
				return moeLayers * (gc.gather.at(size, rf.gatherSOL(size, c.tp*c.dp)) + gc.scatter.at(size, rf.gatherSOL(size, c.tp*c.dp)))
			}},
		}
		gk := tokenKnots(slices.Clone(moe.x), h, gc.gather.x, gc.scatter.x)
		mdl.group = tabulate(unique(append(gk, powersOfTwo()...)), func(T float64) float64 {
			return mdl.groupParts[0].f(T) + mdl.groupParts[1].f(T)
		})
	}
	var perTokenDec func(float64) float64
	if c.overlapShared && moeLayers > 0 && sh > 0 && c.dp > 1 {
		// The overlap spans the rank's tokens (router, shared expert) and the group's (experts,
		// gather and scatter): taken at Cost time (groupWork).
		rk := tokenKnots(append(slices.Clone(lin.ms), bf16.ms...), h, ar.x, gc.tpScatter.x, gc.tpGather.x)
		mdl.routed = tabulate(unique(append(rk, powersOfTwo()...)), func(T float64) float64 {
			v := router(T)
			if c.Backend == "sglang" {
				v += moeTPComm(T)
			}
			return moeLayers * v
		})
		mdl.shared = tabulate(unique(append(slices.Clone(lin.ms), powersOfTwo()...)), func(T float64) float64 { return moeLayers * gatedMLP(T, sh) })
	} else if c.overlapShared && moeLayers > 0 && sh > 0 {
		overlapped := func(T float64) float64 {
			group := router(T) + experts(T)
			if c.Backend == "sglang" {
				group += 2 * arAt(T)
			}
			return moeLayers * math.Min(group, gatedMLP(T, sh))
		}
		perTokenDec = func(T float64) float64 { return perToken(T) - overlapped(T) }
		mdl.overlapCredit = tokenPart{"shared_expert_overlap", func(T float64) float64 { return -overlapped(T) }}
	}

	// Knots: every m the GEMM tables measured, every MoE token count and every all-reduce size
	// (in tokens), so that interpolating the tabulated sum reproduces each component; then powers
	// of two beyond the tables, where the roofline carries the growth.
	knots := append(slices.Clone(lin.ms), bf16.ms...)
	if m.MoE() {
		knots = append(knots, moe.x...)
	}
	for _, s := range append(append(slices.Clone(ar.x), gc.tpScatter.x...), gc.tpGather.x...) {
		if t := s / h; t >= 1 {
			knots = append(knots, t)
		}
		if t := s / 4; t >= 1 && m.QKNormAllHeads {
			knots = append(knots, t)
		}
	}
	knots = unique(append(knots, powersOfTwo()...))
	mdl.perToken = tabulate(knots, perToken)
	if perTokenDec != nil {
		mdl.perTokenDec = tabulate(knots, perTokenDec)
	}

	vocab := float64(m.Vocab) / tp
	smp := append(slices.Clone(bf16.ms), 1<<15, 1<<16, 1<<17, 1<<18, 1<<19, 1<<20)
	mdl.lmHead = tabulate(unique(smp), func(s float64) float64 { return bf16.latency(s, vocab, h) })
}

// powersOfTwo are the knots beyond the tables, where the roofline carries the growth: 1 to 2²¹.
func powersOfTwo() []float64 {
	var xs []float64
	for t := 1.0; t <= 1<<21; t *= 2 {
		xs = append(xs, t)
	}
	return xs
}

func tabulate(xs []float64, f func(float64) float64) table1 {
	t := table1{x: xs, y: make([]float64, len(xs))}
	for i, x := range xs {
		t.y[i] = f(x)
	}
	return t
}

// Cost implements timing.Model. A pass of T new tokens costs
//
//	perToken(T) + Σ_prefill context attention + generation attention + lmHead(#sampling)
//
// (plus, with linear-attention layers, their Gated DeltaNet kernels: linearContext with the prompt
// chunks, linearGeneration with the decodes), split by phase: the prefill requests' share (by tokens) of perToken plus their context
// attention is Prefill (a pass without prefill tokens of a DeepSeek-family model uses perTokenDec,
// its shared expert overlapped with the routed experts: deepSeekFamily); the rest of perToken, the decode requests' generation attention and the LM
// head (every sampled token, the first one of a finishing prompt included) is Decode.
//
// Context attention of a chunk of N new tokens over C cached ones is the fresh prefill of its N
// tokens (the measured curve L at N: the causal triangle and the kernel's fixed cost) plus the
// N × C rectangle of new queries against cached keys, read off the convex minorant H of the
// measured curve as H(C+N) − H(C) − H(N) + H(0), and never less than one decode step over the C
// cached tokens (a chunk still reads the whole prefix; this is what a fully cached prompt that
// recomputes its last token costs). Where attention is compute bound H is the data and the
// rectangle is L(C+N) − L(C) − L(N) + L(0) = 2qNC for L = L0 + q·s²: the same as AIConfigurator's
// prefix correction L(C+N)·((C+N)² − C²)/(C+N)² to first order, with the fixed cost counted once
// instead of scaled away. Because H is convex the sum is nondecreasing in N and in C wherever the
// measured curves are; AIConfigurator's scaling is not where the kernel is launch bound (short
// sequences), where it dips by up to 7 %. Sliding-window layers use their windowed curves for the
// fresh part and the decode floor and a rectangle of N × min(C, window) keys.
//
// With k prefill requests in the pass each is priced at batch size k and charged 1/k of it, so
// batching amortises the fixed cost as measured. Decode requests are priced together: generation
// attention at batch = their tokens (a speculative step's drafts count as requests) and past length =
// their mean cached context.
func (mdl *Model) Cost(b *timing.Batch) timing.Cost { return mdl.cost(b, shapeOf(b), &b.Group) }

// PlainPricer implements timing.PlainModel: a plain pass's shape is its requests' count and their
// cached tokens, which is all cost reads of a batch without prompt chunks, and only its generation
// attention reads the cached tokens: the other terms, and the table rows the generation attention reads
// at the batch's size, are kept while the count and group stay.
func (mdl *Model) PlainPricer() func(*timing.PlainPass) timing.Cost {
	var terms passTerms
	var g timing.Group
	n := -1
	rows := make([]opRows, len(mdl.attn))
	hints := make([][4]int, len(mdl.attn)) // a coast's mean context moves by a token a pass
	return func(pp *timing.PlainPass) timing.Cost {
		if pp.Requests != n || pp.Group != g {
			p := passShape{tokens: pp.Requests, decodes: pp.Requests, samplings: pp.Requests, decodeTokens: pp.Requests}
			terms, n, g = mdl.terms(nil, p, &pp.Group), pp.Requests, pp.Group
			for j := range mdl.attn {
				rows[j] = mdl.attn[j].gen.rowsAt(float64(n))
			}
		}
		if n == 0 {
			return terms.cost(0)
		}
		return terms.cost(mdl.generationRows(rows, float64(pp.Cached)/float64(n), hints))
	}
}

// cost is Cost of a batch of shape p in group g; b is read only for its prompt chunks (p.prefills > 0).
func (mdl *Model) cost(b *timing.Batch, p passShape, g *timing.Group) timing.Cost {
	return mdl.terms(b, p, g).cost(mdl.generationAttention(p))
}

// passTerms are the terms of a pass's cost but its decodes' generation attention, the one that reads
// their contexts: the token-count work lin and the prefill requests' share of it, the prompt chunks' own
// work, and the decodes' other ops (decodeWork) and drafting factor.
type passTerms struct {
	lin, share, pre              float64
	decOnly, linGen, smp, drafts float64
}

func (mdl *Model) terms(b *timing.Batch, p passShape, g *timing.Group) passTerms {
	t := passTerms{
		pre:     mdl.contextAttention(b, p) + mdl.prefillOnly(p) + mdl.linearContext(b, p),
		decOnly: mdl.decodeOnly(p), linGen: mdl.linearGeneration(p), smp: mdl.sampling(p),
		drafts: mdl.drafting(p),
	}
	if p.tokens > 0 {
		t.lin = mdl.tokenWork(p, g)
		t.share = t.lin * float64(p.prefillTokens) / float64(p.tokens)
	}
	return t
}

// cost adds the terms up with the generation attention gen, in decodeWork's order.
func (t passTerms) cost(gen float64) timing.Cost {
	pre, dec := t.share, t.lin-t.share
	pre += t.pre
	dec += t.decOnly + gen + t.linGen + t.smp
	dec *= 1 + t.drafts
	return timing.Cost{Prefill: msDuration(pre), Decode: msDuration(dec)}
}

// Parts implements timing.Itemizer: Cost's terms by op, in ms. The token-count terms are evaluated
// untabulated and scaled to sum to the tabulated value Cost uses, so the parts add up to the pass.
func (mdl *Model) Parts(b *timing.Batch) []timing.Part {
	p := shapeOf(b)
	var parts []timing.Part
	add := func(op string, v float64) {
		if v != 0 {
			parts = append(parts, timing.Part{Op: op, Ms: v})
		}
	}
	if p.tokens > 0 {
		T := float64(p.tokens)
		terms := slices.Clone(mdl.tokenParts)
		if p.prefillTokens == 0 && mdl.overlapCredit.f != nil {
			terms = append(terms, mdl.overlapCredit)
		}
		var sum float64
		for _, t := range terms {
			sum += t.f(T)
		}
		f := 1.0
		if sum != 0 {
			f = mdl.rankWork(p) / sum
		}
		for _, t := range terms {
			add(t.op, t.f(T)*f)
		}
		if mdl.dp > 1 {
			work, all, Tg := mdl.groupWork(p, &b.Group)
			var gsum float64
			for _, t := range mdl.groupParts {
				gsum += t.f(Tg)
			}
			for _, t := range mdl.groupParts {
				if gsum != 0 {
					add(t.op, t.f(Tg)*all/gsum)
				}
			}
			add("shared_expert_overlap", work-all)
		}
	}
	attn := "context_attention"
	switch {
	case mdl.dsa:
		attn = "dsa_context_module"
	case len(mdl.attn) > 0 && mdl.attn[0].module:
		attn = "mla_context_module"
	}
	add(attn, mdl.contextAttention(b, p))
	add("mla_kv_b_proj", mdl.prefillOnly(p))
	add("mla_decode_bmm", mdl.decodeOnly(p))
	add("generation_attention", mdl.generationAttention(p))
	add("gdn_context", mdl.linearContext(b, p))
	add("gdn_generation", mdl.linearGeneration(p))
	add("lm_head", mdl.sampling(p))
	if f := mdl.drafting(p); f > 0 {
		var dec float64
		if p.tokens > 0 {
			dec = mdl.tokenWork(p, &b.Group) * float64(p.tokens-p.prefillTokens) / float64(p.tokens)
		}
		add("mtp_draft", (dec+mdl.decodeWork(p))*f)
	}
	return parts
}

// decodeWork is the decodes' own ops, beside their share of the token-count work: MLA's BMMs,
// generation attention, the Gated DeltaNet steps and the LM head.
func (mdl *Model) decodeWork(p passShape) float64 {
	return mdl.decodeOnly(p) + mdl.generationAttention(p) + mdl.linearGeneration(p) + mdl.sampling(p)
}

// passShape is what Cost reads off a batch: token counts and requests by phase.
type passShape struct {
	tokens, prefillTokens        int
	prefills, decodes, samplings int
	decodeTokens                 int     // the decodes' new tokens: 1 each, plus a speculative step's drafts
	decodeCtx                    float64 // sum of the decodes' cached contexts
}

func shapeOf(b *timing.Batch) passShape {
	var p passShape
	for i := range b.Seqs {
		s := &b.Seqs[i]
		p.tokens += s.New
		if s.Samples {
			p.samplings++
		}
		if s.New <= 0 {
			continue
		}
		if s.Prefill {
			p.prefillTokens += s.New
			p.prefills++
		} else {
			p.decodes++
			p.decodeTokens += s.New
			p.decodeCtx += float64(s.Cached)
		}
	}
	return p
}

// tokenWork is the pass's token-count work (perToken, or perTokenDec for a DeepSeek-family pass
// without prefill tokens), and with attention data parallelism the MoE layers' group work.
func (mdl *Model) tokenWork(p passShape, g *timing.Group) float64 {
	if mdl.dp > 1 {
		work, _, _ := mdl.groupWork(p, g)
		return mdl.rankWork(p) + work
	}
	return mdl.rankWork(p)
}

// rankWork is the token-count work of the rank's own tokens: all of it without attention data
// parallelism.
func (mdl *Model) rankWork(p passShape) float64 {
	if p.prefillTokens == 0 && len(mdl.perTokenDec.x) > 0 {
		return mdl.perTokenDec.at(float64(p.tokens))
	}
	return mdl.perToken.at(float64(p.tokens))
}

// groupWork is the MoE layers' work over the attention data-parallel group: the group curve (all)
// at the group's tokens (tokens, groupTokens), less, in a DeepSeek-family pass without prefill
// tokens, the part the shared expert hides: the routed group (router, gather, experts, scatter) and
// the shared expert overlap (deepSeekFamily).
func (mdl *Model) groupWork(p passShape, g *timing.Group) (work, all, tokens float64) {
	tokens = mdl.groupTokens(p, g)
	all = mdl.group.at(tokens)
	if len(mdl.routed.x) > 0 && p.prefillTokens == 0 { // the DP group's shared-expert overlap
		T := float64(p.tokens)
		return all - math.Min(mdl.routed.at(T)+all, mdl.shared.at(T)), all, tokens
	}
	return all, all, tokens
}

// groupTokens is how many tokens the group's MoE layers process. vLLM pads every rank's batch to the
// largest rank's tokens so that the ranks replay CUDA graphs of one shape in lock step
// (vllm/v1/worker/dp_utils.py, coordinate_batch_across_dp; gpu_model_runner.py's get_dp_padding
// before it), so its MoE sees ranks × the largest; it is taken so for every pass, including the
// eager ones too large for a graph, which gather only what the ranks have. SGLang picks the cheaper
// gather (layers/dp_attention.py, DpPaddingMode.get_dp_padding_mode): with a prompt chunk on any
// rank the sum of the ranks' tokens; decodes only, every rank padded to the largest when
// 2 × the sum > the largest × ranks (an all-gather of ranks × the largest beats an all-reduce of the
// sum), else the sum. A batch priced without its group (Group.Ranks 0) stands for every rank's, as
// AIConfigurator's MoE op takes num_tokens × attention_dp_size.
func (mdl *Model) groupTokens(p passShape, g *timing.Group) float64 {
	switch {
	case g.Ranks == 0:
		return float64(p.tokens * mdl.dp)
	case g.Ranks == 1: // the group is the batch: its tokens, padded or not
		return float64(p.tokens)
	case mdl.padToMax, !g.Prefill && 2*g.Tokens > g.MaxTokens*g.Ranks:
		return float64(g.MaxTokens * g.Ranks)
	}
	return float64(g.Tokens)
}

// contextAttention prices the prompt chunks' attention, each at batch size = the number of chunks
// and charged its share.
func (mdl *Model) contextAttention(b *timing.Batch, p passShape) float64 {
	if p.prefills == 0 {
		return 0
	}
	var v float64
	batch := float64(p.prefills)
	for i := range b.Seqs {
		s := &b.Seqs[i]
		if !s.Prefill || s.New <= 0 {
			continue
		}
		n, c := float64(s.New), float64(s.Cached)
		for j := range mdl.attn {
			a := &mdl.attn[j]
			if a.module {
				v += a.layers * moduleChunk(a, batch, n, c) / batch
				continue
			}
			v += a.layers * chunkAttention(a, batch, n, c) / batch
		}
	}
	return v
}

// prefillOnly is MLA's kv_b_proj over the pass's prefill tokens (0 without MLA).
func (mdl *Model) prefillOnly(p passShape) float64 {
	if p.prefillTokens == 0 || len(mdl.preTok.x) == 0 {
		return 0
	}
	return mdl.preTok.at(float64(p.prefillTokens))
}

// decodeOnly is MLA's absorbed-decode BMMs over the pass's decode tokens (0 without MLA).
func (mdl *Model) decodeOnly(p passShape) float64 {
	if p.decodes == 0 || len(mdl.decTok.x) == 0 {
		return 0
	}
	return mdl.decTok.at(float64(p.decodeTokens))
}

// generationAttention prices the decodes together: batch = their tokens, past length = their mean
// cached context. A speculative step's drafts count as requests of their own, as AIConfigurator
// prices a step with nextn drafts (generation ops at batch × (1 + nextn), sdk/inference_session.py).
func (mdl *Model) generationAttention(p passShape) float64 {
	if p.decodes == 0 {
		return 0
	}
	var v float64
	batch := float64(p.decodeTokens)
	step := p.decodeCtx / float64(p.decodes)
	for j := range mdl.attn {
		a := &mdl.attn[j]
		v += a.layers * a.gen.at(batch, step)
	}
	return v
}

// generationRows is generationAttention at the mean context step, each kind of layer reading the rows of
// its table at the batch's size it was given (attnOp.rowsAt), with hints.
func (mdl *Model) generationRows(rows []opRows, step float64, hints [][4]int) float64 {
	var v float64
	for j := range mdl.attn {
		a := &mdl.attn[j]
		v += a.layers * a.gen.atRows(&rows[j], step, &hints[j])
	}
	return v
}

// linearContext prices the prompt chunks' Gated DeltaNet kernels, each at batch size = the number
// of chunks and charged its share, as contextAttention does. The recurrence carries a cached
// prefix in its state, so a chunk costs its new tokens only.
func (mdl *Model) linearContext(b *timing.Batch, p passShape) float64 {
	if mdl.gdn == nil || p.prefills == 0 {
		return 0
	}
	var v float64
	batch := float64(p.prefills)
	for i := range b.Seqs {
		if s := &b.Seqs[i]; s.Prefill && s.New > 0 {
			v += mdl.gdn.layers * mdl.gdn.ctx.at(batch, float64(s.New)) / batch
		}
	}
	return v
}

// linearGeneration prices the decodes' Gated DeltaNet steps together, at batch = their tokens (a
// speculative step's drafts count as requests, as in generationAttention); a step's cost does not
// depend on the context.
func (mdl *Model) linearGeneration(p passShape) float64 {
	if mdl.gdn == nil || p.decodes == 0 {
		return 0
	}
	b := float64(p.decodeTokens)
	return mdl.gdn.layers * mdl.gdn.gen.at(b, b)
}

// sampling is the LM head over the requests that sample a token, and over a speculative step's
// drafts, whose logits the verification reads.
func (mdl *Model) sampling(p passShape) float64 {
	if p.samplings == 0 {
		return 0
	}
	return mdl.lmHead.at(float64(p.samplings + p.decodeTokens - p.decodes))
}

// drafting is the draft module's share of a speculative decode step: the MTP module is one more
// transformer layer run once per draft token, so a step with d drafts a request costs (layers + d) /
// layers of the step without it, as AIConfigurator's DeepSeekModel scales its generation ops
// (_mtp_scale_factor's (nextn + num_layers) / num_layers; sdk/models/deepseek.py). d is the mean over
// the pass's decodes; 0 without drafts.
func (mdl *Model) drafting(p passShape) float64 {
	if p.decodes == 0 || mdl.layers == 0 {
		return 0
	}
	return float64(p.decodeTokens-p.decodes) / float64(p.decodes) / mdl.layers
}

// chunkAttention is one layer's context attention in ms for a batch of b chunks like this one: n
// new tokens over c cached. See Cost.
func chunkAttention(a *attnLayers, b, n, c float64) float64 {
	fresh := a.ctx.at(b, n)
	if c <= 0 {
		return fresh
	}
	keys := c
	if a.window > 0 {
		keys = math.Min(c, a.window)
	}
	// The n × keys rectangle: H(keys+n) − H(keys) − H(n) + H(0) for the convex minorant H of the
	// measured curve, ≥ 0 and nondecreasing in both n and keys because H is convex.
	h := a.rect
	rect := h.convexAt(b, keys+n) - h.convexAt(b, keys) - h.convexAt(b, n) + h.convexAt(b, 0)
	return math.Max(fresh+math.Max(rect, 0), a.gen.at(b, c))
}

// moduleChunk is one layer's MLA module (vLLM) for a batch of b chunks of n new tokens over c
// cached: the module measured at the full length n + c, scaled by the share of its causal token
// pairs the chunk computes, ((n+c)² − c²)/(n+c)² (ai-dynamo/aiconfigurator
// MLAModule._query_context_mla_module_table, prefix_correction). The whole module is scaled, its
// projections included, as AIConfigurator does.
func moduleChunk(a *attnLayers, b, n, c float64) float64 {
	full := n + c
	return a.ctx.at(b, full) * (full*full - c*c) / (full * full)
}

func msDuration(v float64) time.Duration { return timing.Ms(v) }

// tokenKnots appends to knots each message size of sizes (elements) that is at least one token of h
// elements, in tokens: where a collective's table puts a knot in a per-token curve.
func tokenKnots(knots []float64, h float64, sizes ...[]float64) []float64 {
	for _, ss := range sizes {
		for _, s := range ss {
			if t := s / h; t >= 1 {
				knots = append(knots, t)
			}
		}
	}
	return knots
}
