package engine

import (
	"fmt"
	"strings"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
)

// Backend is the engine being simulated: its index in Backends.
type Backend uint8

// The built-in backends, in the order of Backends.
const (
	// VLLM is vLLM v1's scheduler and block pool.
	VLLM Backend = iota
	// TRTLLM is TensorRT-LLM: vLLM's scheduling core with the guaranteed_no_evict capacity policy.
	TRTLLM
	// SGLang is SGLang's scheduler over a radix prefix cache.
	SGLang
)

// BackendSpec is one registered backend: everything the engine, the configuration and the CLI know of
// it. A backend reads its schedulers' settings from Options (VLLM or SGLang, or a field of its own).
type BackendSpec struct {
	Name string // --backend's value
	Help string // what it simulates, for --backend's help
	// BlockSize is the tokens per KV block when --block-size is 0.
	BlockSize int
	// Timing is the timing model an unset --timing means on it, where the default has no data for it
	// ("": the default).
	Timing string
	// NoDisagg says it has no disaggregated (prefill/decode) mode.
	NoDisagg bool
	// EventsAtPassEnd says its KV events become visible when a pass ends, not when it starts.
	EventsAtPassEnd bool
	// ClientsStayGrouped says a closed-loop benchmark's clients stay in the groups its aggregated
	// workers form (SGLang: prefill first, so a burst's requests start and end together), so
	// --concurrency-desync-ms auto spreads nothing there. Measured, not derived: docs/accuracy.md.
	ClientsStayGrouped bool
	// MaxRunning is the running requests a rank allows when --max-num-seqs is auto: the engine's own
	// default on a GPU of gpuMemory bytes (0: unknown), with a KV pool of kvTokens tokens, requests of
	// at most contextLen tokens (0: unknown), if spec, speculative decoding on, and attnDP ranks of
	// attention data parallelism in the worker (1 without).
	MaxRunning func(gpuMemory int64, kvTokens, contextLen int, spec bool, attnDP int) int
	// Metrics is the engine whose Prometheus metric names its live workers export (live/metrics:
	// vllm, sglang or trtllm; "": vllm).
	Metrics string
	// New builds the scheduler of data-parallel rank (of dp) from o; seed is the rank's own stream.
	New func(o Options, rank, dp int, seed uint64) (sched.Scheduler, error)
	// Pool is the schedulers' tokens per block, blocks per rank and token budget per pass (the unit of a
	// router's queue threshold) in o.
	Pool func(o Options) (blockSize, blocks, maxBatchedTokens int)
	// AppendCached appends the hashes of the blocks a scheduler's prefix cache holds, each once.
	AppendCached func(s sched.Scheduler, dst []uint64) []uint64
	// Tiers is the lower KV tiers below each rank's pool in o (nil: it has none).
	Tiers func(o Options) kvcache.TierOptions
}

// Backends is the registry of backends, indexed by Backend: adding a backend is one entry here (and
// its scheduler's package).
var Backends = []BackendSpec{
	VLLM: {Name: "vllm", Help: "vLLM v1's scheduler and block pool", BlockSize: 16, Metrics: "vllm", MaxRunning: vllmMaxRunning,
		New: newVLLM(0), Pool: vllmPool, AppendCached: vllmCached, Tiers: vllmTiers},
	TRTLLM: {Name: "trtllm", Help: "vLLM's scheduler with TensorRT-LLM's guaranteed_no_evict admission", BlockSize: 32,
		Timing: "profile", NoDisagg: true, Metrics: "trtllm", MaxRunning: dynamoMaxRunning, New: newVLLM(vllm.GuaranteedNoEvict), Pool: vllmPool,
		AppendCached: vllmCached, Tiers: vllmTiers},
	SGLang: {Name: "sglang", Help: "SGLang's scheduler over a radix prefix cache", BlockSize: 1, EventsAtPassEnd: true,
		ClientsStayGrouped: true, Metrics: "sglang", MaxRunning: sglangMaxRunning, New: newSGLang, Pool: sglangPool, AppendCached: sglangCached, Tiers: sglangTiers},
}

// ParseBackend parses a registered backend's name.
func ParseBackend(s string) (Backend, error) {
	for i, b := range Backends {
		if b.Name == s {
			return Backend(i), nil
		}
	}
	return 0, fmt.Errorf("backend %s: want %s", s, BackendNames())
}

// BackendNames lists the registered backends' names for messages: "vllm, trtllm or sglang".
func BackendNames() string {
	names := make([]string, len(Backends))
	for i, b := range Backends {
		names[i] = b.Name
	}
	return orList(names)
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Spec is b's registration.
func (b Backend) Spec() *BackendSpec { return &Backends[b] }

func (b Backend) String() string { return Backends[b].Name }

// Tiers are the lower KV tiers below each of the engine's pools (none enabled: no lower tier).
func (o Options) Tiers() kvcache.TierOptions {
	if t := o.Backend.Spec().Tiers; t != nil {
		return t(o)
	}
	return kvcache.TierOptions{}
}

// BlockSize is the tokens per KV block (SGLang: per page) of the engine's schedulers.
func (o Options) BlockSize() int {
	bs, _, _ := o.Backend.Spec().Pool(o)
	return bs
}

// KVBlocks is the KV blocks (SGLang: pages) of one rank's pool.
func (o Options) KVBlocks() int {
	_, n, _ := o.Backend.Spec().Pool(o)
	return n
}

// MaxBatchedTokens is the schedulers' token budget per pass (SGLang: its chunked-prefill size), the
// unit of a router's queue threshold.
func (o Options) MaxBatchedTokens() int {
	_, _, t := o.Backend.Spec().Pool(o)
	return t
}

func newVLLM(c vllm.Capacity) func(Options, int, int, uint64) (sched.Scheduler, error) {
	return func(o Options, _, _ int, seed uint64) (sched.Scheduler, error) {
		vo := o.VLLM
		vo.Spec.Seed, vo.Role = seed, o.Role
		if c != 0 {
			vo.Capacity = c
		}
		return vllm.New(vo)
	}
}

// dynamoMaxRunning is Dynamo mocker's default max_num_seqs, 256 whatever the deployment, which
// TensorRT-LLM workers keep here.
func dynamoMaxRunning(int64, int, int, bool, int) int { return 256 }

// vllmMaxRunning is vLLM's max_num_seqs when none is given, as its OpenAI API server sets it
// (vLLM V1's EngineArgs.get_batch_defaults: 1,024 sequences on a GPU of at least 70 GiB other than an A100,
// which the H100, H200 and B200 are; 256 on smaller GPUs and where the GPU is unknown).
func vllmMaxRunning(gpuMemory int64, _, _ int, _ bool, _ int) int {
	if gpuMemory >= 70<<30 {
		return 1024
	}
	return 256
}

func vllmPool(o Options) (int, int, int) {
	return o.VLLM.BlockSize, o.VLLM.NumBlocks, o.VLLM.MaxBatchedTokens
}

func vllmTiers(o Options) kvcache.TierOptions { return o.VLLM.Tiers }

func vllmCached(s sched.Scheduler, dst []uint64) []uint64 {
	return s.(*vllm.Scheduler).Pool().AppendCached(dst)
}

func newSGLang(o Options, _, dp int, seed uint64) (sched.Scheduler, error) {
	so := o.SGLang
	so.Spec.Seed, so.Role = seed, o.Role
	if dp > 1 {
		// SGLang's attention-DP mode splits the chunk budget over the ranks and schedules more
		// conservatively (server_args: chunked_prefill_size //= dp_size, conservativeness × 0.3).
		so.ChunkedPrefillSize /= dp
		so.Conservativeness *= 0.3
	}
	return sglang.New(so)
}

// sglangMaxRunning is SGLang's max_running_requests when none is given: the size of the request pool
// its model runner derives from the KV pool (resolve_max_num_reqs: max_total_num_tokens / context_len ×
// 512, kept within 2,048 to 4,096, and at most half the pool's tokens; 2,048 where the context length is
// unknown). With speculative decoding it is 48, which server_args sets for EAGLE, EAGLE3, NEXTN (run as
// EAGLE) and STANDALONE drafts when --max-running-requests is not given (from v0.4's EAGLE support to
// today's arg_groups/speculative_hook.py, _handle_eagle_family). That 48 is the server's
// --max-running-requests, which the model runner splits over the attention data-parallel ranks
// (_resolve_max_num_reqs: max_running_requests // dp_size), so with attention DP a rank runs 48 / attnDP
// (at least 1); the KV-derived size is each rank's own.
func sglangMaxRunning(_ int64, kvTokens, contextLen int, spec bool, attnDP int) int {
	if spec {
		return max(48/max(attnDP, 1), 1)
	}
	n := 2048
	if contextLen > 0 {
		n = min(max(kvTokens*512/contextLen, 2048), 4096)
	}
	return max(min(n, kvTokens/2), 1)
}

func sglangPool(o Options) (int, int, int) {
	return o.SGLang.PageSize, o.SGLang.NumPages, o.SGLang.ChunkedPrefillSize
}

func sglangTiers(o Options) kvcache.TierOptions { return o.SGLang.Tiers }

func sglangCached(s sched.Scheduler, dst []uint64) []uint64 {
	return s.(*sglang.Scheduler).Cache().AppendCached(dst)
}
