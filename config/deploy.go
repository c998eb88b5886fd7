package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/aic"
	"github.com/mocker-sim/mocker/timing/registry"
)

// defaultKVTokens is the KV capacity when no model and GPU size it: the reference's 16,384 blocks of
// vLLM's 16 tokens, the same number of tokens whatever the backend's block or page size.
const defaultKVTokens = 16384 * 16

// Deployment is what the settings describe, resolved: the model (nil when none is named), the GPU system
// (nil when none), and the KV cache they leave room for.
type Deployment struct {
	Model       *model.Model
	System      *hardware.System
	BlockSize   int // tokens per KV block (page)
	KVBlocks    int // per data-parallel rank
	WeightBytes int64
	KVBytes     int // KV bytes per token per GPU
	TokenBytes  int // KV bytes of one whole token, all shards: what a disaggregated handoff moves
}

// resolveModel is the model --model-config or --model names; nil when neither does.
func (c *Config) resolveModel() (*model.Model, error) {
	switch {
	case c.ModelConfig != "":
		m, err := model.FromHFConfig(c.ModelConfig)
		if fe := FileError("model-config", c.ModelConfig, err); fe != err {
			return nil, c.at("model-config", fe)
		}
		if err != nil { // model's errors begin "model: ": the user gave model-config
			err = errors.New("model-config: " + strings.TrimPrefix(err.Error(), "model: "))
		}
		return m, c.at("model-config", err)
	case c.Model != "":
		m, err := model.Lookup(c.Model)
		return m, c.at("model", err) // model's errors begin "model: "
	}
	return nil, nil
}

// ReplyHeader is how many tokens every reply of the model opens with that a client does not see
// (model.Model.ReplyHeader: gpt-oss's 3); 0 without a model.
func (c *Config) ReplyHeader() (int, error) {
	m, err := c.resolveModel()
	if err != nil || m == nil {
		return 0, err
	}
	return m.ReplyHeader, nil
}

// Deployment resolves the model, the GPU system and the KV cache size.
func (c *Config) Deployment() (*Deployment, error) {
	d := &Deployment{BlockSize: c.BlockSizeOrDefault()}
	var err error
	if d.Model, err = c.resolveModel(); err != nil {
		return nil, err
	}
	if noExperts := d.Model == nil || !d.Model.MoE(); noExperts && (c.EP > 1 || c.MoEDP() > 1) {
		name := "no --model"
		if d.Model != nil {
			name = "model " + d.Model.Name
		}
		if c.EP > 1 {
			return nil, fmt.Errorf("ep %d: shards routed experts, and %s has none", c.EP, name)
		}
		return nil, fmt.Errorf("dp-attention: the %d ranks share the routed experts, and %s has none (without --dp-attention they are replicas)", c.DPSize, name)
	}
	if d.System, err = c.system(); err != nil {
		return nil, err
	}
	if d.Model != nil {
		if d.WeightBytes, err = c.weightBytes(d.Model); err != nil {
			return nil, err
		}
		kv := c.KVCacheDtype
		if kv == "auto" {
			kv = d.Model.Dtype
		}
		b, err := model.DtypeBytes(kv)
		if err != nil {
			return nil, fmt.Errorf("kv-cache-dtype %q: %w", c.KVCacheDtype, err)
		}
		d.KVBytes = d.Model.KVBytesPerToken(b, c.TP)
		d.TokenBytes = d.Model.KVBytesPerToken(b, 1)
	}
	switch {
	case c.NumGPUBlocks > 0:
		d.KVBlocks = c.NumGPUBlocks
	case d.Model != nil && d.System != nil:
		d.KVBlocks, err = hardware.KVBlocks(d.System, d.WeightBytes, d.KVBytes, d.BlockSize, c.GPUMemoryUtilization)
		if err != nil {
			return nil, fmt.Errorf("num-gpu-blocks auto (%s on %s, tp %d): %w; a larger --tp spreads the weights over more GPUs", d.Model.Name, d.System.Name, c.TP, err)
		}
	default:
		d.KVBlocks = defaultKVTokens / d.BlockSize
	}
	return d, nil
}

// moeQuantizations are the --moe-quantization values: the GEMM precisions and the weight-only 4-bit
// expert formats the performance database measures (AIConfigurator's MoE quant modes w4a16_mxfp4,
// under its checkpoint name mxfp4, and int4_wo).
var moeQuantizations = []string{"bf16", "fp8", "fp8_block", "mxfp4", "int4_wo"}

// QuantModes resolves --quantization and --moe-quantization into the precision of the decoder's
// linear layers and of the routed experts ("" = the model's dtype; moe "" = the linear layers').
// Without --quantization the checkpoint's own format applies (model.Model.Quantization, and
// MoEQuantization unless --moe-quantization is given). --quantization mxfp4 is the gpt-oss checkpoint's
// format, quant_method "mxfp4" in its config.json: experts in MXFP4, every other weight in the model's
// dtype. AIConfigurator maps it the same way
// (sdk/models/helpers.py _infer_quant_modes_from_raw_config: quant_algo "mxfp4" → GEMM float16,
// MoE w4a16_mxfp4), and vLLM on Hopper runs those experts with a weight-only MXFP4 kernel (4-bit
// weights, bf16 activations), which is what the MoE table's w4a16_mxfp4 rows measure.
func (c *Config) QuantModes(m *model.Model) (linear, moe string) {
	linear, moe = c.Quantization, c.MoEQuantization
	if linear == "" {
		linear = m.Quantization
		if moe == "" {
			moe = m.MoEQuantization
		}
	}
	if linear == "mxfp4" {
		linear = ""
		if moe == "" {
			moe = "mxfp4"
		}
	}
	return linear, moe
}

// weightBytes is the weight memory per GPU at the configured quantization (each rank's tp GPUs hold
// their shard; with --dp-attention the experts are sharded over all the worker's GPUs).
func (c *Config) weightBytes(m *model.Model) (int64, error) {
	native, err := model.DtypeBytes(m.Dtype)
	if err != nil {
		return 0, fmt.Errorf("model %s dtype: %w", m.Name, err)
	}
	p := model.Precision{Linear: float64(native), Experts: float64(native), Other: float64(native)}
	linear, moe := c.QuantModes(m)
	if linear == "fp8" || linear == "fp8_block" {
		p.Linear, p.Experts = 1, 1 // embeddings, LM head and norms stay in the model's dtype
	}
	switch moe {
	case "bf16":
		p.Experts = 2
	case "fp8", "fp8_block":
		p.Experts = 1
	case "mxfp4":
		if p.Experts, err = model.BytesPerWeight("mxfp4"); err != nil {
			return 0, err
		}
	case "int4_wo":
		p.Experts = 0.5 // group scales ignored
	}
	// With attention data parallelism the routed experts are sharded over all tp × dp-size GPUs, the
	// rest over each rank's tp.
	return m.QuantizedWeightBytes(p, c.TP, c.TP*c.MoEDP()), nil
}

// TimingModel builds the pass timing model, with the host overhead, scaled by the speed-up ratios.
func (c *Config) TimingModel(d *Deployment) (timing.Model, error) {
	m, _, err := c.buildTiming(d)
	if err != nil {
		return nil, err
	}
	if c.HostOverheadUs > 0 {
		m = timing.HostOverhead{Model: m, PerRequest: time.Duration(math.Round(c.HostOverheadUs * float64(time.Microsecond)))}
	}
	return timing.Scaled{Model: m, Speedup: c.SpeedupRatio, DecodeSpeedup: c.DecodeSpeedupRatio}, nil
}

// buildTiming builds the registered model TimingName names from the deployment and the timing flags.
func (c *Config) buildTiming(d *Deployment) (timing.Model, registry.Info, error) {
	e, err := registry.Lookup(c.TimingName())
	if err != nil {
		return nil, registry.Info{}, err
	}
	m, info, err := e.New(c.timingParams(d.Model, d.System))
	return m, info, c.timingFileError(e, err)
}

// timingParams are the deployment's and the timing flags' values a timing model is built from, with
// the model m and the system sys resolved.
func (c *Config) timingParams(m *model.Model, sys *hardware.System) registry.Params {
	p := registry.Params{Model: m, System: sys, Backend: c.Backend, TP: c.TP, EP: c.EP, AttentionDP: c.MoEDP(),
		Quantization: c.Quantization, KVCacheDtype: c.KVCacheDtype, PerfDB: c.PerfDB, BackendVersion: c.BackendVersion,
		Profile: c.Profile, PrefillMs: c.PrefillMs, DecodeMs: c.DecodeMs}
	if m != nil {
		p.GEMMQuant, p.MoEQuant = c.QuantModes(m)
	}
	return p
}

// timingFileError words err of the timing model e as an input file's (FileError), named by the setting
// that gave it (a pool's own: --prefill-profile): the op-level model's database given by --perf-db or,
// without it, by $MOCKER_PERF_DB; the profile model's file given by --profile.
func (c *Config) timingFileError(e *registry.Entry, err error) error {
	if c.PerfDB == "" && e.Name == registry.Models[0].Name {
		return pathError("$"+aic.EnvPerfDB, os.Getenv(aic.EnvPerfDB), err)
	}
	if fe := c.fileError(c.settingKey("perf-db"), c.PerfDB, err); fe != err {
		return fe
	}
	return c.fileError(c.settingKey("profile"), c.Profile, err)
}

// CheckShared checks what every shape of the deployment shares, whatever its TP, EP, workers and batch
// limits: the model, the GPU system, and what its timing model (each pool's) needs that the shape does
// not change (registry.Entry.Shared: its data's directory, its profile's file, ...). Its error would be
// every shape's: recommend raises it once, before its search.
func (c *Config) CheckShared() error {
	m, err := c.resolveModel()
	if err != nil {
		return err
	}
	sys, err := c.system()
	if err != nil {
		return err
	}
	// Aggregated workers run on the shared settings, disaggregated ones each on its pool's: a search
	// deploys a pool that sets its own (--prefill-profile) whatever PrefillWorkers says here.
	var pools []*Config
	if c.PrefillWorkers == 0 {
		pools = append(pools, c)
	}
	for _, r := range Roles {
		if c.PrefillWorkers > 0 || len(c.Role(r).Keys()) > 0 {
			pools = append(pools, c.ForRole(r))
		}
	}
	for _, pool := range pools {
		e, err := registry.Lookup(pool.TimingName())
		if err != nil {
			return err
		}
		if e.Shared != nil {
			if err := e.Shared(pool.timingParams(m, sys)); err != nil {
				return pool.timingFileError(e, err)
			}
		}
	}
	return nil
}

// system is the GPU system --system names; nil when it names none.
func (c *Config) system() (*hardware.System, error) {
	if c.System == "" {
		return nil, nil
	}
	s, err := hardware.Lookup(c.System)
	if err != nil {
		return nil, c.at("system", fmt.Errorf("system: %w", err))
	}
	return s, nil
}

// TimingName is the timing model that prices passes: --timing, except where the backend's registration
// names another for a --timing not given (the op-level default has no TensorRT-LLM tables, so on
// --backend trtllm it is the profile).
func (c *Config) TimingName() string {
	if t := c.backend().Spec().Timing; t != "" && c.Timing == registry.Models[0].Name && !c.isGiven("timing") {
		return t
	}
	return c.Timing
}

// TimingInfo says, for the report, which timing model prices the passes, from what data (the
// op-level model's database: "embedded" or a directory and how it was found; the profile's name or
// path) and, for the op-level model, at which engine version.
func (c *Config) TimingInfo() (report.Timing, error) {
	if c.PrefillWorkers > 0 && c.role == "" {
		// Each pool is priced at its own settings (TP, timing, version); where they differ the report
		// names both.
		p, err := c.ForRole("prefill").TimingInfo()
		if err != nil {
			return p, err
		}
		d, err := c.ForRole("decode").TimingInfo()
		if err != nil || d == p {
			return p, err
		}
		both := func(p, d string) string {
			switch {
			case p == d:
				return p
			case p == "": // a pool whose model has no source or version (fixed, polynomial) names none
				return "decode " + d
			case d == "":
				return "prefill " + p
			}
			return "prefill " + p + ", decode " + d
		}
		return report.Timing{Model: both(p.Model, d.Model), Source: both(p.Source, d.Source), Version: both(p.Version, d.Version)}, nil
	}
	t := report.Timing{Model: c.TimingName()}
	d, err := c.Deployment()
	if err != nil {
		return t, err
	}
	_, info, err := c.buildTiming(d)
	t.Source, t.Version = info.Source, info.Version
	return t, err
}

// EngineOptions builds the options of each worker's engine.
func (c *Config) EngineOptions() (engine.Options, error) {
	d, err := c.Deployment()
	if err != nil {
		return engine.Options{}, err
	}
	backend, err := engine.ParseBackend(c.Backend)
	if err != nil {
		return engine.Options{}, err
	}
	pre, err := vllm.ParsePreemption(c.PreemptionMode)
	if err != nil {
		return engine.Options{}, err
	}
	capacity, err := vllm.ParseCapacity(c.VLLMAdmission)
	if err != nil {
		return engine.Options{}, err
	}
	policy, err := sglang.ParsePolicy(c.SGLangSchedulePolicy)
	if err != nil {
		return engine.Options{}, err
	}
	m, err := c.TimingModel(d)
	if err != nil {
		return engine.Options{}, err
	}
	spec := sched.Spec{Tokens: c.SpecNumTokens, AcceptRates: c.SpecAcceptRates}
	tiers, err := c.tierOptions(d)
	if err != nil {
		return engine.Options{}, err
	}
	running := c.maxNumSeqs(d)
	return engine.Options{
		Backend: backend,
		DPSize:  c.DPSize,
		VLLM: vllm.Options{
			BlockSize:        d.BlockSize,
			NumBlocks:        d.KVBlocks,
			MaxNumSeqs:       running,
			MaxBatchedTokens: c.MaxNumBatchedTokens,
			MaxModelLen:      c.contextLen(d.Model),
			ChunkedPrefill:   c.EnableChunkedPrefill,
			PrefixCaching:    c.EnablePrefixCaching,
			Preemption:       pre,
			Capacity:         capacity,
			Spec:             spec,
			Events:           c.Router == "kv", // only a KV router reads them
			MaxLoRAs:         c.MaxLoRAs,
			MaxCPULoRAs:      c.MaxCPULoRAs,
			Tiers:            tiers,
		},
		SGLang: sglang.Options{
			PageSize:           d.BlockSize,
			NumPages:           d.KVBlocks,
			MaxRunning:         running,
			MaxPrefillTokens:   c.SGLangMaxPrefillTokens,
			ChunkedPrefillSize: c.SGLangChunkedPrefillSize,
			ClipMaxNewTokens:   c.SGLangClipMaxNewTokens,
			ReservedDecode:     c.SGLangReservedDecodeTokens,
			Conservativeness:   c.SGLangScheduleConservativeness,
			Policy:             policy,
			MixedChunk:         c.sglangSpecAllows(c.SGLangEnableMixedChunk, "sglang-enable-mixed-chunk"),
			Overlap:            c.sglangSpecAllows(c.SGLangOverlapSchedule, "sglang-overlap-schedule"),
			PrefixCaching:      c.EnablePrefixCaching,
			MaxModelLen:        c.contextLen(d.Model),
			Spec:               spec,
			Events:             c.Router == "kv",
			MaxLoRAsPerBatch:   c.MaxLoRAsPerBatch,
			Tiers:              tiers,
		},
		Timing:   m,
		Seed:     c.Seed,
		LoRALoad: time.Duration(c.LoRALoadMs * float64(time.Millisecond)),
		Encoder:  engine.EncoderOptions{MsPerToken: c.EncoderMsPerImageToken, CacheTokens: c.encoderCacheSize()},
	}, nil
}

// sglangSpecAllows is an SGLang scheduler switch (on) under speculative decoding: SGLang turns the
// overlap scheduler and mixed chunking off for EAGLE/NEXTN drafts unless SGLANG_ENABLE_SPEC_V2
// (server_args.py, _handle_speculative_decoding), so a default stays on only without drafts; a
// switch given explicitly (key) is kept, as with that variable.
func (c *Config) sglangSpecAllows(on bool, key string) bool {
	return on && (c.SpecNumTokens == 0 || c.isGiven(key))
}

// MaxRunning is the running requests a rank allows on the deployment: --max-num-seqs, or what auto
// means there (maxNumSeqs).
func (c *Config) MaxRunning() (int, error) {
	d, err := c.Deployment()
	if err != nil {
		return 0, err
	}
	return c.maxNumSeqs(d), nil
}

// maxNumSeqs is --max-num-seqs, or when it is auto (0) the engine's own default on the deployment
// (engine.BackendSpec.MaxRunning): from the GPU's memory, one rank's KV pool, the context length
// (--max-model-len, else the model's), whether --spec-num-tokens drafts and the attention data-parallel
// ranks. A value given is each rank's (SGLang's --max-running-requests N over D attention-DP ranks is
// --max-num-seqs N/D).
func (c *Config) maxNumSeqs(d *Deployment) int {
	if c.MaxNumSeqs > 0 {
		return c.MaxNumSeqs
	}
	var mem int64
	if d.System != nil {
		mem = d.System.MemoryBytes
	}
	return c.backend().Spec().MaxRunning(mem, d.KVBlocks*d.BlockSize, c.contextLen(d.Model), c.SpecNumTokens > 0, c.MoEDP())
}

// ContextLen bounds each request's prompt + output tokens: --max-model-len, else the model's
// max_position_embeddings, as vLLM's max_model_len and SGLang's context length default to; 0 (no model,
// or one that gives none) is unbounded. Every command bounds a request by it: predict's and recommend's
// engines, serve's frontend and workers.
func (c *Config) ContextLen() (int, error) {
	m, err := c.resolveModel()
	if err != nil {
		return 0, err
	}
	return c.contextLen(m), nil
}

// contextLen is ContextLen with the model m resolved.
func (c *Config) contextLen(m *model.Model) int {
	if c.MaxModelLen > 0 || m == nil {
		return c.MaxModelLen
	}
	return m.MaxPositions
}

// encoderCacheSize is --encoder-cache-size, or by default the pass token budget, as vLLM sizes its encoder
// cache (encoder_cache_size = max_num_batched_tokens); SGLang's budget is its max prefill tokens.
func (c *Config) encoderCacheSize() int {
	switch {
	case c.EncoderCacheSize > 0:
		return c.EncoderCacheSize
	case c.Backend == "sglang":
		return c.SGLangMaxPrefillTokens
	}
	return c.MaxNumBatchedTokens
}

// Lower KV tiers' defaults: a PCIe Gen5 x16 link's practical host-to-device rate and a local NVMe
// drive's; a lower-tier hit is worth half a GPU hit to the KV router (its onboarding is cheaper than its
// prefill, but not free).
const (
	DefaultCPUBandwidthGBps   = 50
	DefaultDiskBandwidthGBps  = 5
	DefaultRouterCPUHitWeight = 0.5
)

// tierOptions are each rank's lower KV tiers: a block is one GPU's share of its tokens' KV (each GPU of a
// TP group offloads its shard over its own link).
func (c *Config) tierOptions(d *Deployment) (kvcache.TierOptions, error) {
	o := kvcache.TierOptions{CPUBlocks: c.NumCPUBlocks, DiskBlocks: c.NumDiskBlocks,
		CPUBandwidth: c.CPUBandwidthGBps, DiskBandwidth: c.DiskBandwidthGBps}
	if !o.Enabled() {
		return o, nil
	}
	perToken := int64(d.KVBytes)
	if c.KVBytesPerToken > 0 {
		perToken = int64(c.KVBytesPerToken / max(c.TP, 1))
	}
	if perToken == 0 {
		return o, fmt.Errorf("num-cpu-blocks %d: pricing the tiers' transfers needs the KV bytes per token: give --model or --kv-bytes-per-token", c.NumCPUBlocks)
	}
	o.BlockBytes = perToken * int64(d.BlockSize)
	return o, o.Validate()
}
