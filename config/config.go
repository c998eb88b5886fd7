package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/live"
	"github.com/mocker-sim/mocker/live/outlen"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/planner"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timing/registry"
	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/workload"
)

// Config holds every setting. YAML keys are the flag names.
type Config struct {
	// Engine.
	Backend              string `yaml:"backend"`
	BlockSize            int    `yaml:"block-size"`
	NumGPUBlocks         int    `yaml:"num-gpu-blocks" auto:"model"`
	MaxNumSeqs           int    `yaml:"max-num-seqs" auto:"engine"`
	MaxNumBatchedTokens  int    `yaml:"max-num-batched-tokens"`
	MaxModelLen          int    `yaml:"max-model-len"`
	EnablePrefixCaching  bool   `yaml:"enable-prefix-caching"`
	EnableChunkedPrefill bool   `yaml:"enable-chunked-prefill"`
	PreemptionMode       string `yaml:"preemption-mode"`
	VLLMAdmission        string `yaml:"vllm-admission"`
	DPSize               int    `yaml:"dp-size"`
	// DPAttention: the dp-size ranks are attention data parallelism over one MoE deployment (SGLang's
	// --enable-dp-attention; vLLM's --data-parallel-size on a MoE model): each runs attention on its
	// own batch on its tp GPUs, and all run every MoE layer together, the experts sharded over all tp
	// × dp-size GPUs. Without it the ranks are replicas of the whole model.
	DPAttention bool `yaml:"dp-attention"`
	// LoRA adapters: vLLM's (and TensorRT-LLM's here) adapters per pass and adapters kept loaded
	// (0: max-loras); SGLang's adapters per batch, the base model counting as one; the load time of one
	// not loaded (every backend).
	MaxLoRAs         int     `yaml:"max-loras"`
	MaxCPULoRAs      int     `yaml:"max-cpu-loras"`
	MaxLoRAsPerBatch int     `yaml:"max-loras-per-batch"`
	LoRALoadMs       float64 `yaml:"lora-load-ms"`

	// SGLang.
	PageSize                       int     `yaml:"page-size"`
	SGLangSchedulePolicy           string  `yaml:"sglang-schedule-policy"`
	SGLangMaxPrefillTokens         int     `yaml:"sglang-max-prefill-tokens"`
	SGLangChunkedPrefillSize       int     `yaml:"sglang-chunked-prefill-size"`
	SGLangClipMaxNewTokens         int     `yaml:"sglang-clip-max-new-tokens"`
	SGLangScheduleConservativeness float64 `yaml:"sglang-schedule-conservativeness"`
	SGLangEnableMixedChunk         bool    `yaml:"sglang-enable-mixed-chunk"`
	SGLangOverlapSchedule          bool    `yaml:"sglang-overlap-schedule"`
	SGLangReservedDecodeTokens     int     `yaml:"sglang-num-reserved-decode-tokens"`

	// Speculative decoding (MTP).
	SpecNumTokens   int       `yaml:"spec-num-tokens"`
	SpecAcceptRates []float64 `yaml:"spec-accept-rates"`

	// Deployment: the model and GPUs, which size the KV cache and select measured timing.
	Model                string  `yaml:"model"`
	ModelConfig          string  `yaml:"model-config"`
	System               string  `yaml:"system"`
	TP                   int     `yaml:"tp"`
	EP                   int     `yaml:"ep"`
	Quantization         string  `yaml:"quantization"`
	MoEQuantization      string  `yaml:"moe-quantization"`
	KVCacheDtype         string  `yaml:"kv-cache-dtype"`
	GPUMemoryUtilization float64 `yaml:"gpu-memory-utilization"`

	// Timing.
	Timing             string  `yaml:"timing"`
	Profile            string  `yaml:"profile"`
	PerfDB             string  `yaml:"perf-db"`
	BackendVersion     string  `yaml:"backend-version"`
	PrefillMs          float64 `yaml:"prefill-ms"`
	DecodeMs           float64 `yaml:"decode-ms"`
	SpeedupRatio       float64 `yaml:"speedup-ratio"`
	DecodeSpeedupRatio float64 `yaml:"decode-speedup-ratio"`
	// HostOverheadUs is the engine's host time per request in each pass, in microseconds, on top of the
	// timing model's GPU time (timing.HostOverhead).
	HostOverheadUs float64 `yaml:"host-overhead-us"`
	// The vision encoder of requests with images: ms per image token (a ViT forward over the image's
	// patches), and the per-rank encoder cache's size in image tokens (0: the pass token budget).
	EncoderMsPerImageToken float64 `yaml:"encoder-ms-per-image-token"`
	EncoderCacheSize       int     `yaml:"encoder-cache-size"`

	// Cluster.
	Workers               int     `yaml:"workers"`
	PrefillWorkers        int     `yaml:"prefill-workers"`
	DecodeWorkers         int     `yaml:"decode-workers"`
	Router                string  `yaml:"router"`
	OverlapScoreWeight    float64 `yaml:"overlap-score-weight"`
	RouterTemperature     float64 `yaml:"router-temperature"`
	RouterQueueThreshold  float64 `yaml:"router-queue-threshold"`
	RouterQueuePolicy     string  `yaml:"router-queue-policy"`
	RouterEventDelayMs    float64 `yaml:"router-event-delay-ms"`
	RouterEventsAtPassEnd bool    `yaml:"router-events-at-pass-end"`
	FrontendLatencyMs     float64 `yaml:"frontend-latency-ms"`
	FrontendUsPerRequest  float64 `yaml:"frontend-us-per-request"`
	FrontendUsPerChunk    float64 `yaml:"frontend-us-per-chunk"`
	KVTransferBandwidth   float64 `yaml:"kv-transfer-bandwidth"`
	KVBytesPerToken       int     `yaml:"kv-bytes-per-token" auto:"model"`
	KVTransferTimingMode  string  `yaml:"kv-transfer-timing-mode"`
	// Lower KV tiers (vLLM's CPU offloading, Dynamo's KVBM G2/G3): blocks per worker rank, link speeds.
	NumCPUBlocks       int     `yaml:"num-cpu-blocks"`
	NumDiskBlocks      int     `yaml:"num-disk-blocks"`
	CPUBandwidthGBps   float64 `yaml:"cpu-bandwidth-gbps"`
	DiskBandwidthGBps  float64 `yaml:"disk-bandwidth-gbps"`
	RouterCPUHitWeight float64 `yaml:"router-cpu-hit-weight"`
	PlannerConfig      string  `yaml:"planner-config"`
	// Fault injection (predict): workers killed at simulated times, ID@TIME[:DURATION] each.
	FailWorker      []string `yaml:"fail-worker"`
	OnWorkerFailure string   `yaml:"on-worker-failure"`

	// Workload: a trace, or synthetic.
	Trace               string  `yaml:"trace"`
	TraceFormat         string  `yaml:"trace-format"`
	TraceBlockSize      int     `yaml:"trace-block-size"`
	ArrivalSpeedupRatio float64 `yaml:"arrival-speedup-ratio"`
	Concurrency         int     `yaml:"concurrency"`
	ConcurrencyRampMs   float64 `yaml:"concurrency-ramp-ms"`
	ConcurrencyDesyncMs float64 `yaml:"concurrency-desync-ms" auto:"lifetime"`
	NumRequests         int     `yaml:"num-requests"`
	SyntheticLengths    string  `yaml:"synthetic-lengths"`
	InputTokens         float64 `yaml:"input-tokens"`
	InputTokensStddev   float64 `yaml:"input-tokens-stddev"`
	OutputTokens        float64 `yaml:"output-tokens"`
	OutputTokensStddev  float64 `yaml:"output-tokens-stddev"`
	RequestRate         float64 `yaml:"request-rate"`
	Arrival             string  `yaml:"arrival"`
	Burstiness          float64 `yaml:"burstiness"`
	SharedPrefixRatio   float64 `yaml:"shared-prefix-ratio"`
	NumPrefixGroups     int     `yaml:"num-prefix-groups"`
	NumDatasetEntries   int     `yaml:"num-dataset-entries"`
	DatasetSampling     string  `yaml:"dataset-sampling-strategy"`
	ImagesPerRequest    int     `yaml:"images-per-request"`
	ImageTokens         int     `yaml:"image-tokens"`
	ImagePool           int     `yaml:"image-pool"`
	TurnsPerSession     int     `yaml:"turns-per-session"`
	InterTurnDelayMs    float64 `yaml:"inter-turn-delay-ms"`
	InterTurnDelayDist  string  `yaml:"inter-turn-delay-dist"`
	LoRAAdapters        int     `yaml:"lora-adapters"`
	LoRADist            string  `yaml:"lora-dist"`
	Seed                uint64  `yaml:"seed"`

	// Output.
	ReportJSON      string `yaml:"report-json"`
	RequestsJSONL   string `yaml:"requests-jsonl"`
	ScalingJSONL    string `yaml:"scaling-jsonl"`
	Perfetto        string `yaml:"perfetto"`
	PerfettoWindow  string `yaml:"perfetto-window"`
	HTML            string `yaml:"html"`
	CheckInvariants bool   `yaml:"check-invariants"`

	// Live serving (mocker serve).
	Host              string  `yaml:"host"`
	Port              int     `yaml:"port"`
	ModelName         string  `yaml:"model-name"`
	Tokenizer         string  `yaml:"tokenizer"`
	DefaultMaxTokens  int     `yaml:"default-max-tokens"`
	OutputLengthDist  string  `yaml:"output-length-dist"`
	MaxWaiting        int     `yaml:"max-waiting"`
	MaxRequestBodyMB  float64 `yaml:"max-request-body-mb"`
	APIKey            string  `yaml:"api-key"`
	NATS              string  `yaml:"nats"`
	NATSPort          int     `yaml:"nats-port"`
	ZMQKVEventsPort   int     `yaml:"zmq-kv-events-port"`
	ZMQReplayPort     int     `yaml:"zmq-replay-port"`
	KVEventsMapFormat bool    `yaml:"kv-events-map-format"`
	KVHashSeed        string  `yaml:"kv-hash-seed"`
	KVEventsTopic     string  `yaml:"kv-events-topic"`
	KVEventsEndpoint  string  `yaml:"kv-events-endpoint"`
	// Dynamo's event plane: the format of the NATS events, the workers' place in Dynamo's namespace, and
	// its ZMQ transport (direct: every publisher binds; broker: connect to a broker's XSUB).
	KVEventsFormat    string  `yaml:"kv-events-format"`
	DynamoNamespace   string  `yaml:"dynamo-namespace"`
	DynamoComponent   string  `yaml:"dynamo-component"`
	DynamoEndpoint    string  `yaml:"dynamo-endpoint"`
	DynamoZMQEndpoint string  `yaml:"dynamo-zmq-endpoint"`
	DynamoZMQBroker   string  `yaml:"dynamo-zmq-broker"`
	WorkerPorts       int     `yaml:"worker-ports"`
	BootstrapPort     int     `yaml:"bootstrap-port"`
	BootstrapHost     string  `yaml:"bootstrap-host"`
	BootstrapMaxConns int     `yaml:"bootstrap-max-conns"`
	ShutdownTimeoutS  float64 `yaml:"shutdown-timeout"`
	FleetTTLS         float64 `yaml:"fleet-ttl"`
	// HTTP limits, in seconds (0: the server's defaults).
	ReadHeaderTimeoutS float64  `yaml:"read-header-timeout"`
	ReadTimeoutS       float64  `yaml:"read-timeout"`
	IdleTimeoutS       float64  `yaml:"idle-timeout"`
	WriteTimeoutS      float64  `yaml:"write-timeout"`
	MaxConnections     int      `yaml:"max-connections"`
	FailureRate        float64  `yaml:"failure-rate"`
	FailureTypes       []string `yaml:"failure-types"`

	// LoRAModules are the adapters served besides the base model, vLLM's --lora-modules: NAME or
	// NAME=PATH (the path is not read).
	LoRAModules []string `yaml:"lora-modules"`

	// Disaggregated serving: the prefill and the decode pools' own engine settings (Role).
	Prefill Role `yaml:"prefill"`
	Decode  Role `yaml:"decode"`

	// given says where each setting given explicitly came from (Given).
	given map[string]string `yaml:"-"`
	// role is the pool whose settings these are (ForRole); "" for the whole configuration.
	role string `yaml:"-"`
	// roleKeys are the settings that pool gave itself (Role.Keys), to name them as given: --prefill-profile.
	roleKeys []string `yaml:"-"`
	// trace holds the trace's bytes once HoldTrace has read a trace that is not a regular file.
	trace []byte
}

// Default is the configuration of `mocker predict` with no flags: one vLLM worker with vLLM's defaults and
// the reference's polynomial timing, serving the built-in demo workload (1,000 synthetic requests).
func Default() Config {
	return Config{
		Backend:              "vllm",
		BlockSize:            0, // the backend's own default
		NumGPUBlocks:         0, // auto
		CPUBandwidthGBps:     DefaultCPUBandwidthGBps,
		DiskBandwidthGBps:    DefaultDiskBandwidthGBps,
		RouterCPUHitWeight:   DefaultRouterCPUHitWeight,
		MaxNumSeqs:           0, // auto: the engine's own default on the deployment (maxNumSeqs)
		MaxNumBatchedTokens:  8192,
		EnablePrefixCaching:  true,
		EnableChunkedPrefill: true,
		PreemptionMode:       "lifo",
		VLLMAdmission:        "prompt",
		DPSize:               1,
		MaxLoRAs:             1, // vLLM's default
		MaxLoRAsPerBatch:     8, // SGLang's default
		SpecAcceptRates:      []float64{0.85, 0.3},

		SGLangSchedulePolicy:           "fcfs",
		SGLangMaxPrefillTokens:         16384,
		SGLangChunkedPrefillSize:       8192,
		SGLangClipMaxNewTokens:         4096,
		SGLangScheduleConservativeness: 1,
		SGLangReservedDecodeTokens:     512,
		SGLangOverlapSchedule:          true, // SGLang's default: off only with --disable-overlap-schedule (event_loop_overlap)
		Model:                          "llama-3.1-8b",
		System:                         "h200_sxm",
		TP:                             1,
		EP:                             1,
		KVCacheDtype:                   "auto",
		GPUMemoryUtilization:           0.9,
		Timing:                         "default",
		SpeedupRatio:                   1,
		DecodeSpeedupRatio:             1,
		Workers:                        1,
		Router:                         "round-robin",
		OverlapScoreWeight:             1,
		RouterQueuePolicy:              "fcfs",
		KVTransferTimingMode:           "destination_missing",
		OnWorkerFailure:                "retry",
		TraceFormat:                    "auto",
		TraceBlockSize:                 workload.DefaultTraceBlockSize,
		ArrivalSpeedupRatio:            1,
		ConcurrencyDesyncMs:            math.NaN(), // auto: --concurrency's clients drift apart (desyncPending)
		NumRequests:                    1000,
		SyntheticLengths:               Auto,
		InputTokens:                    1024,
		InputTokensStddev:              256,
		OutputTokens:                   128,
		OutputTokensStddev:             32,
		RequestRate:                    8,
		Arrival:                        "poisson",
		Burstiness:                     1,
		SharedPrefixRatio:              0.25,
		NumPrefixGroups:                8,
		DatasetSampling:                "shuffle",
		ImageTokens:                    workload.DefaultImageTokens,
		EncoderMsPerImageToken:         0.002,
		TurnsPerSession:                1,
		InterTurnDelayDist:             "constant",
		Host:                           "127.0.0.1",
		Port:                           8000,
		DefaultMaxTokens:               16,
		OutputLengthDist:               "uniform",
		MaxRequestBodyMB:               16,
		NATS:                           "embedded",
		NATSPort:                       4222,
		KVEventsFormat:                 "dynamo",
		DynamoNamespace:                "dynamo",
		DynamoComponent:                "backend",
		DynamoEndpoint:                 "generate",
		BootstrapHost:                  "127.0.0.1",
		BootstrapMaxConns:              1024,
		KVHashSeed:                     "0",
		ShutdownTimeoutS:               30,
		FleetTTLS:                      6,
	}
}

// Load reads a YAML configuration over c: keys present in the file replace c's values, others are kept.
// An unknown or repeated key, a value of the wrong type or a second document is an error naming the file,
// the line and the key.
func (c *Config) Load(path string) error {
	data, err := readConfig(path)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil // an empty file changes nothing
	} else if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("config %s line %d: more than one YAML document", path, extra.Line)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config %s line %d: want a mapping of settings (key: value)", path, root.Line)
	}
	fields := c.fieldsByKey()
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if slices.Contains(Roles, k.Value) && !seen[k.Value] {
			seen[k.Value] = true
			if err := c.loadRole(path, k.Value, v); err != nil {
				return err
			}
			continue
		}
		field, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("config %s line %d: unknown key %q%s", path, k.Line, k.Value, didYouMean(k.Value, append(slices.Collect(maps.Keys(fields)), Roles...)))
		}
		if seen[k.Value] {
			return fmt.Errorf("config %s line %d: key %q given twice", path, k.Line, k.Value)
		}
		seen[k.Value] = true
		c.Given(k.Value, fmt.Sprintf("config %s line %d", path, v.Line))
		if err := field.decode(v); err != nil {
			return valueErr(path, k.Value, v, err)
		}
	}
	return nil
}

// valueErr is err about the file's value v of key, quoting v where it is a scalar (a list or a mapping
// has no value to quote).
func valueErr(path, key string, v *yaml.Node, err error) error {
	got := ""
	if v.Kind == yaml.ScalarNode {
		got = fmt.Sprintf(", got %q", v.Value)
	}
	return fmt.Errorf("config %s line %d: %s: %w%s", path, v.Line, key, err, got)
}

// decode stores the YAML value v in the setting.
func (f setting) decode(v *yaml.Node) error {
	if f.auto {
		return f.setAuto(v)
	}
	// YAML reads inf as a string (its infinity is .inf); the flags take it (--request-rate inf).
	if f.Kind() == reflect.Float64 && v.ShortTag() == "!!str" {
		if x, err := strconv.ParseFloat(v.Value, 64); err == nil && math.IsInf(x, 0) {
			f.SetFloat(x)
			return nil
		}
	}
	// yaml decodes 2.9 into an int as 2: an integer setting takes only an integer.
	isInt := f.Kind() == reflect.Int || f.Kind() == reflect.Uint64
	if err := v.Decode(f.Addr().Interface()); err != nil || isInt && v.ShortTag() != "!!int" {
		return errors.New("want " + kindName(f.Type()))
	}
	return nil
}

// Auto is the value that asks for a setting to be derived: --num-gpu-blocks and --kv-bytes-per-token
// from the model and GPU, --max-num-seqs as the engine derives it (stored as 0), --concurrency-desync-ms from a lock-step replay of the workload
// (stored as NaN until ResolveDesync replaces it; no number parses to NaN there).
const Auto = "auto"

// IntOrAuto parses an integer setting that takes Auto (0).
func IntOrAuto(s string) (int, error) {
	if s == Auto {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, errors.New("want an integer or auto")
	}
	return n, nil
}

// MsOrAuto parses a milliseconds setting that takes Auto (NaN); a NaN written as a number is refused,
// so the two never mix.
func MsOrAuto(s string) (float64, error) {
	if s == Auto {
		return math.NaN(), nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) {
		return 0, errors.New("want a number or auto")
	}
	return v, nil
}

// setAuto stores a YAML scalar in a setting that takes Auto.
func (f setting) setAuto(v *yaml.Node) error {
	if v.Kind != yaml.ScalarNode {
		return errors.New("want a scalar")
	}
	if f.Kind() == reflect.Float64 {
		ms, err := MsOrAuto(v.Value)
		if err == nil {
			f.SetFloat(ms)
		}
		return err
	}
	n, err := IntOrAuto(v.Value)
	if err == nil {
		f.SetInt(int64(n))
	}
	return err
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int:
		return "an integer"
	case reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list of numbers"
	}
	return "a string"
}

// setting is a field of Config and whether it takes Auto.
type setting struct {
	reflect.Value
	auto bool
}

// fieldsByKey maps each YAML key to its field in c.
func (c *Config) fieldsByKey() map[string]setting {
	v := reflect.ValueOf(c).Elem()
	m := make(map[string]setting, v.NumField())
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		_, auto := f.Tag.Lookup("auto")
		m[f.Tag.Get("yaml")] = setting{v.Field(i), auto}
	}
	return m
}

// Validate reports the first invalid setting, named by its flag and, when a config file gave it, by
// the file and line.
func (c *Config) Validate() error { return c.placed(c.validate()) }

// placed is err named by the file and line that gave its setting, when a config file gave it.
func (c *Config) placed(err error) error {
	var se *settingError
	if errors.As(err, &se) {
		return c.at(se.key, err)
	}
	return err
}

// outlenErr says why s is not an output-length distribution.
func outlenErr(s string) error {
	_, err := outlen.Parse(s)
	return err
}

func (c *Config) validate() error {
	if err := c.validateBounds(); err != nil {
		return err
	}
	// The two ways of spreading closed-loop clients take the same kind of value under the same conditions.
	for _, f := range []struct {
		name, does string
		v          any
		set, valid bool
	}{
		{"concurrency-ramp-ms", "staggers", c.ConcurrencyRampMs, c.ConcurrencyRampMs > 0, finiteNonNegative(c.ConcurrencyRampMs)},
		// auto is the default: only when given does it ask for clients to spread.
		{"concurrency-desync-ms", "spreads", c.desync(), c.ConcurrencyDesyncMs > 0 || c.DesyncAuto() && c.isGiven("concurrency-desync-ms"), c.DesyncAuto() || finiteNonNegative(c.ConcurrencyDesyncMs)},
	} {
		switch {
		case !f.valid:
			return bad(f.name, f.v, "must be a finite number >= 0")
		case f.set && c.Concurrency == 0:
			return bad(f.name, f.v, f.does+" the clients of --concurrency, which is 0")
		case f.set && c.Trace != "":
			return bad(f.name, f.v, "applies to the synthetic workload, not to a trace")
		case f.set && c.TurnsPerSession > 1:
			return bad(f.name, f.v, "does not combine with multi-turn sessions (each client's requests are independent)")
		}
	}
	if c.NumDatasetEntries != 0 && c.Trace != "" {
		return bad("num-dataset-entries", c.NumDatasetEntries, "applies to the synthetic workload, not to a trace")
	}
	if err := c.validateTraceGiven(); err != nil {
		return err
	}
	for _, check := range []func() error{c.validateOwned, c.validateEngine, c.validateDeployment, c.validateCluster,
		c.validateWorkload, c.validateServe, c.validateEvents, c.validatePerfetto, c.validateRoles, c.validateTimingFlags, c.validateBackendFlags} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// syntheticOnly are the settings that shape only the synthetic workload, each with what takes its place
// with a trace ("" for nothing). Their defaults apply to no trace, so only one given explicitly is refused.
var syntheticOnly = []unreadSetting{
	{"num-requests", "a trace replays every row"},
	{"synthetic-lengths", ""},
	{"input-tokens", "a row gives its prompt"},
	{"input-tokens-stddev", "a row gives its prompt"},
	{"output-tokens", "a row gives its output length"},
	{"output-tokens-stddev", "a row gives its output length"},
	{"request-rate", "a row gives its arrival time; --arrival-speedup-ratio scales them"},
	{"arrival", "a row gives its arrival time"},
	{"burstiness", "a row gives its arrival time"},
	{"shared-prefix-ratio", "rows share the prefixes their hashes or text share"},
	{"num-prefix-groups", "rows share the prefixes their hashes or text share"},
	{"dataset-sampling-strategy", ""},
	{"turns-per-session", "a row's session and turns are its own"},
	{"inter-turn-delay-ms", "a row's session and turns are its own"},
	{"inter-turn-delay-dist", "a row's session and turns are its own"},
	{"image-pool", ""},
	{"lora-dist", ""},
}

// unreadSetting is a setting one kind of workload leaves unread, with what it has in its place ("" for
// nothing).
type unreadSetting struct{ key, instead string }

// validateTraceGiven refuses, with a trace, a synthetic-only setting given explicitly: it would do
// nothing, silently.
func (c *Config) validateTraceGiven() error {
	if c.Trace == "" {
		return nil
	}
	_, err := c.firstGiven(syntheticOnly, "applies to the synthetic workload, not to a trace")
	return err
}

// firstGiven refuses the first of settings given explicitly, which the run's workload leaves unread:
// why, then what the workload has in its place, if anything. It returns the setting's key with the error.
func (c *Config) firstGiven(settings []unreadSetting, why string) (string, error) {
	for _, s := range settings {
		if !c.isGiven(s.key) {
			continue
		}
		if s.instead != "" {
			why += " (" + s.instead + ")"
		}
		return s.key, bad(s.key, c.fieldsByKey()[s.key].Interface(), why)
	}
	return "", nil
}

// validateEngine checks the engine settings config maps onto engine.Options, where they mean more
// than the schedulers' own options (0: the backend's default or auto).
func (c *Config) validateEngine() error {
	switch {
	case c.ImagesPerRequest != 0 && c.Trace != "":
		return bad("images-per-request", c.ImagesPerRequest, "applies to the synthetic workload, not to a trace (give a row's images)")
	case c.ImageTokens < 1:
		return bad("image-tokens", c.ImageTokens, "must be at least 1")
	case c.ImagePool < 0:
		return bad("image-pool", c.ImagePool, "must be >= 0")
	case !finiteNonNegative(c.EncoderMsPerImageToken):
		return bad("encoder-ms-per-image-token", c.EncoderMsPerImageToken, "must be a finite number >= 0")
	case c.EncoderCacheSize < 0:
		return bad("encoder-cache-size", c.EncoderCacheSize, "must be >= 0 (0: the pass token budget)")
	}
	switch {
	case c.PageSize < 0:
		return bad("page-size", c.PageSize, "must be at least 1 (0: --block-size, else 1)")
	case c.backend() == engine.SGLang && c.PageSize > 0 && c.BlockSize > 0 && c.PageSize != c.BlockSize:
		return &settingError{"page-size", fmt.Sprintf("page-size %d and block-size %d: SGLang's block is its page; set one of them", c.PageSize, c.BlockSize)}
	case c.backend() == engine.SGLang && c.SGLangChunkedPrefillSize > 0 && c.SGLangChunkedPrefillSize%c.BlockSizeOrDefault() != 0:
		return bad("sglang-chunked-prefill-size", c.SGLangChunkedPrefillSize, fmt.Sprintf("must be a multiple of the page size %d (or <= 0: no chunking)", c.BlockSizeOrDefault()))
	case c.BlockSize < 0:
		return bad("block-size", c.BlockSize, "must be at least 1 (0: the backend's default)")
	case c.NumGPUBlocks < 0:
		return bad("num-gpu-blocks", c.NumGPUBlocks, "must be at least 1 (0: auto)")
	case c.MaxNumSeqs < 0:
		return bad("max-num-seqs", c.MaxNumSeqs, "must be at least 1 (0: auto)")
	case c.MaxNumBatchedTokens < 1:
		return bad("max-num-batched-tokens", c.MaxNumBatchedTokens, "must be at least 1")
	case c.MaxModelLen < 0:
		return bad("max-model-len", c.MaxModelLen, "must not be negative (0: the model's max_position_embeddings)")
	case c.DPSize < 1:
		return bad("dp-size", c.DPSize, "must be at least 1")
	case c.MaxLoRAs < 1:
		return bad("max-loras", c.MaxLoRAs, "must be at least 1")
	case c.MaxLoRAsPerBatch < 1:
		return bad("max-loras-per-batch", c.MaxLoRAsPerBatch, "must be at least 1")
	case c.MaxCPULoRAs < 0:
		return bad("max-cpu-loras", c.MaxCPULoRAs, "must not be negative (0: max-loras)")
	case c.MaxCPULoRAs > 0 && c.MaxCPULoRAs < c.MaxLoRAs:
		return bad("max-cpu-loras", c.MaxCPULoRAs, fmt.Sprintf("must be at least max-loras (%d)", c.MaxLoRAs))
	case !finiteNonNegative(c.LoRALoadMs) || c.LoRALoadMs > 1e9:
		return bad("lora-load-ms", c.LoRALoadMs, "must be a finite number in [0, 1e9]")
	case c.LoRAAdapters != 0 && c.Trace != "":
		return bad("lora-adapters", c.LoRAAdapters, "applies to the synthetic workload, not to a trace (whose rows name theirs: lora)")
	}
	if _, err := c.Adapters(); err != nil {
		return err
	}
	switch {
	case c.SpecNumTokens < 0 || c.SpecNumTokens > 8:
		return bad("spec-num-tokens", c.SpecNumTokens, "must be in [0, 8]")
	case c.SpecNumTokens > 0 && c.DecodeSpeedupRatio != 1:
		return bad("decode-speedup-ratio", c.DecodeSpeedupRatio, "must be 1 with speculative decoding (the accepted length already scales decode)")
	}
	return nil
}

// MoEDP is how many data-parallel ranks share the MoE layers: --dp-size with --dp-attention, else 1.
func (c *Config) MoEDP() int {
	if c.DPAttention {
		return max(c.DPSize, 1)
	}
	return 1
}

// validateDeployment checks the model, GPUs and timing settings.
func (c *Config) validateDeployment() error {
	switch {
	case c.TP < 1:
		return bad("tp", c.TP, "must be at least 1")
	case c.ModelConfig != "" && c.isGiven("model"):
		return bad("model", c.Model, "contradicts --model-config (the model is one or the other)")
	case c.EP < 1:
		return bad("ep", c.EP, "must be at least 1")
	case c.Quantization != "" && c.Quantization != "bf16" && c.Quantization != "fp8" && c.Quantization != "fp8_block" && c.Quantization != "mxfp4":
		return bad("quantization", c.Quantization, "want bf16, fp8, fp8_block or mxfp4 (empty: the model's dtype)")
	case c.MoEQuantization != "" && !slices.Contains(moeQuantizations, c.MoEQuantization):
		return bad("moe-quantization", c.MoEQuantization, "want bf16, fp8, fp8_block, mxfp4 or int4_wo (empty: --quantization)")
	case c.KVCacheDtype != "auto" && c.KVCacheDtype != "bf16" && c.KVCacheDtype != "fp8":
		return bad("kv-cache-dtype", c.KVCacheDtype, "want auto, bf16 or fp8")
	case !(c.GPUMemoryUtilization > 0 && c.GPUMemoryUtilization <= 1):
		return bad("gpu-memory-utilization", c.GPUMemoryUtilization, "must be in (0, 1]")
	case !(c.PrefillMs >= 0 && c.PrefillMs <= maxPassMs):
		return bad("prefill-ms", c.PrefillMs, fmt.Sprintf("must be from 0 to %g (an hour a pass)", float64(maxPassMs)))
	case !(c.DecodeMs >= 0 && c.DecodeMs <= maxPassMs):
		return bad("decode-ms", c.DecodeMs, fmt.Sprintf("must be from 0 to %g (an hour a pass)", float64(maxPassMs)))
	case !(c.SpeedupRatio >= minSpeedup):
		return bad("speedup-ratio", c.SpeedupRatio, fmt.Sprintf("must be at least %g (passes at most %g times as long; inf: passes take no time)", minSpeedup, 1/minSpeedup))
	case !(c.DecodeSpeedupRatio >= minSpeedup):
		return bad("decode-speedup-ratio", c.DecodeSpeedupRatio, fmt.Sprintf("must be at least %g (decode passes at most %g times as long again)", minSpeedup, 1/minSpeedup))
	case !(c.HostOverheadUs >= 0 && c.HostOverheadUs <= maxPassMs*1000):
		return bad("host-overhead-us", c.HostOverheadUs, fmt.Sprintf("must be from 0 to %g (an hour a request)", float64(maxPassMs*1000)))
	}
	if c.PrefillWorkers == 0 { // disaggregated: validateRoles checks each pool's (validatePoolSplits)
		for _, check := range []func() error{c.validateEPSplit, c.validateDPAttention, c.validateTPSplit} {
			if err := check(); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxPassMs and minSpeedup bound what sets a pass's time directly, each flag to what a deployment might
// mean; together they may still price passes past timing.MaxPass, which a model's time saturates at, and
// a run stops with an error at a century of simulated time (--prefill-ms 1e300 or --speedup-ratio 1e-12
// wrapped passes to negative durations).
const (
	maxPassMs  = 3_600_000
	minSpeedup = 1e-3
)

// validateEPSplit refuses an --ep that does not divide the GPUs the experts are sharded over: tp, or
// tp × dp-size with --dp-attention. Disaggregated, each pool's (validatePoolSplits): the shared settings
// are no pool's where both pools set their own tp.
func (c *Config) validateEPSplit() error {
	switch {
	case c.TP < 1 || c.EP < 1:
		return nil // validate refuses them, naming the setting
	case c.TP*c.MoEDP()%c.EP != 0 && c.MoEDP() > 1:
		return bad("ep", c.EP, fmt.Sprintf("must divide tp %d × dp-size %d (with --dp-attention the experts are sharded over ep of the %d GPUs)", c.TP, c.DPSize, c.TP*c.DPSize))
	case c.TP%c.EP != 0 && c.MoEDP() == 1:
		return bad("ep", c.EP, fmt.Sprintf("must divide tp %d (the experts are sharded over ep of the tp GPUs; with --dp-attention, of the tp × dp-size GPUs)", c.TP))
	}
	return nil
}

// validateTPSplit refuses a --tp that cannot shard the model (model.Model.TPError), or whose experts'
// share of the GPUs (tp × dp-size with --dp-attention, over --ep) cannot split them
// (model.Model.ExpertTPError), and an --ep the backend cannot shard the experts by: on vLLM, whose
// --enable-expert-parallel shards them over all the GPUs or none, other than 1 or all; on SGLang and
// TensorRT-LLM, one the experts do not split evenly into (model.Model.ExpertEPError). The engines refuse
// these at start-up, so they are refused whatever the timing model. A model that does not resolve is left
// to Deployment, which says why; a --tp or --ep below 1 to validateDeployment, and an --ep that does not
// divide the GPUs to validateEPSplit.
func (c *Config) validateTPSplit() error {
	gpus := c.TP * c.MoEDP()
	if c.TP < 1 || c.EP < 1 || gpus%c.EP != 0 {
		return nil
	}
	m, err := c.resolveModel()
	if err != nil || m == nil {
		return nil
	}
	if err := m.TPError(c.TP); err != nil {
		return bad("tp", c.TP, err.Error())
	}
	if err := m.ExpertTPError(gpus / c.EP); err != nil {
		key, v, over := "tp", c.TP, ""
		if c.EP > 1 {
			key, v = "ep", c.EP
		}
		if gpus != c.TP || c.EP > 1 {
			over = fmt.Sprintf(" (the experts' TP: tp %d × dp-size %d / ep %d)", c.TP, c.MoEDP(), c.EP)
		}
		return bad(key, v, err.Error()+over)
	}
	if err := c.sharedExpertSplit(m, gpus); err != nil {
		return err
	}
	if c.EP > 1 && c.backend() == engine.VLLM && c.EP != gpus {
		span := fmt.Sprintf("tp %d", c.TP)
		if gpus != c.TP {
			span = fmt.Sprintf("tp %d × dp-size %d", c.TP, c.MoEDP())
		}
		return bad("ep", c.EP, fmt.Sprintf("vLLM shards the experts over all the GPUs or none (--enable-expert-parallel): ep 1 or %d (%s)", gpus, span))
	}
	if err := m.ExpertEPError(c.EP); err != nil && c.backend() != engine.VLLM {
		return bad("ep", c.EP, fmt.Sprintf("%s (%s shards them evenly; vLLM takes any ep)", err, c.Backend))
	}
	return nil
}

// sharedExpertSplit refuses a TP the shared experts' MLP does not split over (model.Model.SharedExpertTPError):
// on vLLM the attention TP, but where expert parallelism spans data-parallel ranks, which replicates
// them (use_sequence_parallel_moe: --enable-expert-parallel, tp > 1 and dp > 1); on SGLang every GPU,
// its TP group (shared-expert fusion, which would split them as a routed expert, is off with ep > 1).
// Without --ep the routed experts' split over the same GPUs (ExpertTPError) implies it.
func (c *Config) sharedExpertSplit(m *model.Model, gpus int) error {
	over, span := 0, ""
	switch {
	case c.EP == 1:
	case c.backend() == engine.VLLM && (c.TP == 1 || c.MoEDP() == 1):
		over = c.TP
	case c.backend() == engine.SGLang:
		over = gpus
		if gpus != c.TP {
			span = fmt.Sprintf(" (the shared experts' TP: tp %d × dp-size %d)", c.TP, c.MoEDP())
		}
	}
	if over == 0 {
		return nil
	}
	if err := m.SharedExpertTPError(over); err != nil {
		return bad("tp", c.TP, err.Error()+span)
	}
	return nil
}

// validateDPAttention refuses --dp-attention where it would change only the weights per GPU: one rank
// has no other to share its MoE layers with, and only the op-level model prices a pass's MoE layers
// from the group's tokens (the others price each rank as a replica).
func (c *Config) validateDPAttention() error {
	switch {
	case !c.DPAttention:
	case c.DPSize < 2:
		return bad("dp-attention", true, fmt.Sprintf("needs dp-size 2 or more (dp-size %d: a single rank shares its MoE layers with no other)", c.DPSize))
	case c.TimingName() != registry.Models[0].Name:
		return bad("dp-attention", true, fmt.Sprintf("needs the op-level timing model (--timing %s), which prices the MoE layers over all the ranks' tokens; timing %s would price each rank as a replica",
			registry.Models[0].Name, c.TimingName()))
	}
	return nil
}

// validateCluster checks the workers, router and KV transfers.
func (c *Config) validateCluster() error {
	switch {
	case c.Workers < 1:
		return bad("workers", c.Workers, "must be at least 1")
	case c.ScalingJSONL != "" && c.PlannerConfig == "":
		return &settingError{"scaling-jsonl", "scaling-jsonl " + strconv.Quote(c.ScalingJSONL) + ": applies to --planner-config, which is not given"}
	case !(c.FleetTTLS > 0 && c.FleetTTLS <= 3600):
		return bad("fleet-ttl", c.FleetTTLS, "must be in (0, 3600] seconds")
	case c.PrefillWorkers < 0 || c.DecodeWorkers < 0 || (c.PrefillWorkers > 0) != (c.DecodeWorkers > 0):
		return &settingError{"prefill-workers", fmt.Sprintf("prefill-workers %d and decode-workers %d: disaggregated serving needs at least one of each (0 and 0: aggregated --workers)", c.PrefillWorkers, c.DecodeWorkers)}
	case c.PrefillWorkers > 0 && c.backend().Spec().NoDisagg:
		return bad("backend", c.Backend, c.backend().Spec().Help+" has no disaggregated mode here (as in the reference)")
	case c.OverlapScoreWeight < 0 || math.IsNaN(c.OverlapScoreWeight):
		return bad("overlap-score-weight", c.OverlapScoreWeight, "must be >= 0")
	case c.RouterTemperature < 0 || math.IsNaN(c.RouterTemperature):
		return bad("router-temperature", c.RouterTemperature, "must be >= 0")
	case c.RouterQueueThreshold < 0 || math.IsNaN(c.RouterQueueThreshold):
		return bad("router-queue-threshold", c.RouterQueueThreshold, "must be >= 0 (0: no queue)")
	case c.RouterEventDelayMs < 0 || math.IsNaN(c.RouterEventDelayMs):
		return bad("router-event-delay-ms", c.RouterEventDelayMs, "must be >= 0")
	case !finiteNonNegative(c.FrontendLatencyMs):
		return bad("frontend-latency-ms", c.FrontendLatencyMs, "must be a finite number >= 0")
	case !finiteNonNegative(c.FrontendUsPerRequest):
		return bad("frontend-us-per-request", c.FrontendUsPerRequest, "must be a finite number >= 0")
	case !finiteNonNegative(c.FrontendUsPerChunk):
		return bad("frontend-us-per-chunk", c.FrontendUsPerChunk, "must be a finite number >= 0")
	case !finiteNonNegative(c.KVTransferBandwidth):
		return bad("kv-transfer-bandwidth", c.KVTransferBandwidth, "must be a finite number of GB/s >= 0 (0: no transfer delay)")
	case c.KVBytesPerToken < 0:
		return bad("kv-bytes-per-token", c.KVBytesPerToken, "must be >= 0 (0: auto from the model)")
	case c.NumCPUBlocks < 0:
		return bad("num-cpu-blocks", c.NumCPUBlocks, "must not be negative (0: no CPU tier)")
	case c.NumDiskBlocks < 0:
		return bad("num-disk-blocks", c.NumDiskBlocks, "must not be negative (0: no disk tier)")
	case c.NumDiskBlocks > 0 && c.NumCPUBlocks == 0:
		return bad("num-disk-blocks", c.NumDiskBlocks, "needs a CPU tier (--num-cpu-blocks): disk blocks pass through host memory")
	case c.NumCPUBlocks > 0 && !c.EnablePrefixCaching:
		return bad("num-cpu-blocks", c.NumCPUBlocks, "needs --enable-prefix-caching: only cached blocks are offloaded")
	case !(c.CPUBandwidthGBps > 0) || math.IsInf(c.CPUBandwidthGBps, 0):
		return bad("cpu-bandwidth-gbps", c.CPUBandwidthGBps, "must be a finite number of GB/s > 0")
	case !(c.DiskBandwidthGBps > 0) || math.IsInf(c.DiskBandwidthGBps, 0):
		return bad("disk-bandwidth-gbps", c.DiskBandwidthGBps, "must be a finite number of GB/s > 0")
	case !finiteNonNegative(c.RouterCPUHitWeight) || c.RouterCPUHitWeight > 1:
		return bad("router-cpu-hit-weight", c.RouterCPUHitWeight, "must be in [0, 1]")
	}
	return nil
}

// validateWorkload checks the trace and the synthetic workload.
func (c *Config) validateWorkload() error {
	switch {
	case c.TraceBlockSize < 1:
		return bad("trace-block-size", c.TraceBlockSize, "must be at least 1")
	case !(c.ArrivalSpeedupRatio >= minSpeedup) || math.IsInf(c.ArrivalSpeedupRatio, 0):
		return bad("arrival-speedup-ratio", c.ArrivalSpeedupRatio, fmt.Sprintf("must be a finite number, at least %g (arrivals at most %g times as far apart)", minSpeedup, 1/minSpeedup))
	case c.Concurrency < 0:
		return bad("concurrency", c.Concurrency, "must not be negative (0: follow arrival times)")
	case c.SyntheticLengths != Auto && c.SyntheticLengths != "fixed" && c.SyntheticLengths != "spread":
		return &settingError{"synthetic-lengths", fmt.Sprintf("synthetic-lengths %q: want auto, fixed or spread", c.SyntheticLengths)}
	case c.InterTurnDelayMs < 0 || math.IsNaN(c.InterTurnDelayMs):
		return bad("inter-turn-delay-ms", c.InterTurnDelayMs, "must be >= 0")
	case c.Arrival == "burst" && c.isGiven("request-rate"):
		return bad("request-rate", c.RequestRate, "does not apply to --arrival burst, which sends every request at time 0")
	}
	// --concurrency's clients send a request as their last one ends: the arrival process does nothing.
	// A rate of inf says just that (vllm bench serve's --request-rate inf --max-concurrency N).
	for _, s := range []struct {
		key   string
		v     any
		given bool
	}{
		{"request-rate", c.RequestRate, c.isGiven("request-rate") && !math.IsInf(c.RequestRate, 1)},
		{"arrival", c.Arrival, c.isGiven("arrival")},
		{"burstiness", c.Burstiness, c.isGiven("burstiness")},
	} {
		if c.Concurrency > 0 && s.given {
			return bad(s.key, s.v, fmt.Sprintf("does not apply with --concurrency %d, whose clients each send a request as their last one ends, whatever the arrival times", c.Concurrency))
		}
	}
	return nil
}

// validateServe checks the live server's settings (mocker serve): live checks its own options, config
// the ports and endpoints serve wires and the limits it gives in other units.
func (c *Config) validateServe() error {
	lo := live.Options{MaxWaiting: c.MaxWaiting, HTTP: live.HTTPLimits{MaxConns: c.MaxConnections},
		FailureRate: c.FailureRate, FailureTypes: c.FailureTypes, Disagg: &live.Disagg{BootstrapPort: c.BootstrapPort}}
	if err := lo.Validate(); err != nil {
		return owned(err)
	}
	switch {
	case c.Port < 0 || c.Port > 65535:
		return bad("port", c.Port, "must be in [0, 65535] (0: any free port)")
	case c.DefaultMaxTokens < 1:
		return bad("default-max-tokens", c.DefaultMaxTokens, "must be at least 1")
	case outlenErr(c.OutputLengthDist) != nil:
		return bad("output-length-dist", c.OutputLengthDist, outlenErr(c.OutputLengthDist).Error())
	case !(c.MaxRequestBodyMB > 0): // its upper bound: validateBounds
		return bad("max-request-body-mb", c.MaxRequestBodyMB, "must be > 0 (MiB)")
	case c.WorkerPorts < 0 || c.WorkerPorts > 65535:
		return bad("worker-ports", c.WorkerPorts, "must be in [0, 65535] (0: one HTTP port for all workers)")
	case c.WorkerPorts > 0 && c.PrefillWorkers > 0:
		return bad("worker-ports", c.WorkerPorts, "needs aggregated workers; disaggregated serving has one API port")
	case c.WorkerPorts > 0 && c.WorkerPorts+c.Workers-1 > 65535:
		return bad("worker-ports", c.WorkerPorts, fmt.Sprintf("%d workers need ports up to %d, past 65535", c.Workers, c.WorkerPorts+c.Workers-1))
	case c.BootstrapMaxConns < 1 || c.BootstrapMaxConns > 1<<20:
		return bad("bootstrap-max-conns", c.BootstrapMaxConns, "must be in [1, 1048576]")
	}
	for _, t := range []struct {
		name, zero string // zero: what 0 means
		s          float64
	}{
		{"shutdown-timeout", "", c.ShutdownTimeoutS},
		{"read-header-timeout", " (0: 10)", c.ReadHeaderTimeoutS},
		{"read-timeout", " (0: 60)", c.ReadTimeoutS},
		{"idle-timeout", " (0: 120)", c.IdleTimeoutS},
		{"write-timeout", " (0: 60)", c.WriteTimeoutS},
	} {
		if !validTimeout(t.s) {
			return bad(t.name, t.s, "must be in [0, 1e6] seconds"+t.zero)
		}
	}
	return nil
}

// validateEvents checks where serve publishes KV events: NATS, vLLM's ZMQ publisher and Dynamo's event
// plane.
func (c *Config) validateEvents() error {
	switch {
	case c.NATSPort < 0 || c.NATSPort > 65535:
		return bad("nats-port", c.NATSPort, "must be in [0, 65535] (0: any free port)")
	case c.ZMQKVEventsPort < 0 || c.ZMQKVEventsPort > 65535:
		return bad("zmq-kv-events-port", c.ZMQKVEventsPort, "must be in [0, 65535] (0: off)")
	case c.ZMQReplayPort < 0 || c.ZMQReplayPort > 65535:
		return bad("zmq-replay-port", c.ZMQReplayPort, "must be in [0, 65535] (0: off)")
	case c.ZMQReplayPort > 0 && c.ZMQKVEventsPort == 0 && c.KVEventsEndpoint == "":
		return bad("zmq-replay-port", c.ZMQReplayPort, "needs --zmq-kv-events-port or --kv-events-endpoint")
	case c.KVEventsEndpoint != "" && c.ZMQKVEventsPort > 0:
		return bad("kv-events-endpoint", strconv.Quote(c.KVEventsEndpoint), "conflicts with --zmq-kv-events-port; give one of them")
	case c.KVEventsEndpoint != "" && !strings.HasPrefix(c.KVEventsEndpoint, "tcp://") && !strings.HasPrefix(c.KVEventsEndpoint, "ipc://"):
		return bad("kv-events-endpoint", strconv.Quote(c.KVEventsEndpoint), "want tcp://HOST:PORT (\"*\" binds, an address connects) or ipc://PATH")
	case c.KVEventsTopic != "" && c.ZMQKVEventsPort == 0 && c.KVEventsEndpoint == "":
		return bad("kv-events-topic", strconv.Quote(c.KVEventsTopic), "needs --zmq-kv-events-port or --kv-events-endpoint")
	case c.KVEventsFormat != "dynamo" && c.KVEventsFormat != "json":
		return bad("kv-events-format", strconv.Quote(c.KVEventsFormat), "want dynamo (msgpack envelopes on Dynamo's event plane) or json (bare RouterEvent JSON)")
	case c.DynamoNamespace == "":
		return bad("dynamo-namespace", `""`, "must not be empty")
	case c.DynamoComponent == "":
		return bad("dynamo-component", `""`, "must not be empty")
	case c.DynamoEndpoint == "":
		return bad("dynamo-endpoint", `""`, "must not be empty")
	case c.DynamoZMQEndpoint != "" && c.DynamoZMQBroker != "":
		return bad("dynamo-zmq-broker", strconv.Quote(c.DynamoZMQBroker), "conflicts with --dynamo-zmq-endpoint; give one of them")
	case c.DynamoZMQEndpoint != "" && !validTCPEndpoint(c.DynamoZMQEndpoint):
		return bad("dynamo-zmq-endpoint", strconv.Quote(c.DynamoZMQEndpoint), "want tcp://HOST:PORT (0: a free port per publisher)")
	case c.DynamoZMQBroker != "" && !validTCPEndpoint(c.DynamoZMQBroker):
		return bad("dynamo-zmq-broker", strconv.Quote(c.DynamoZMQBroker), "want tcp://HOST:PORT, the broker's XSUB")
	}
	return nil
}

// BlockSizeOrDefault is --block-size, or the backend's default when it is 0 (engine.BackendSpec's
// BlockSize); SGLang's is its --page-size when that is set.
func (c *Config) BlockSizeOrDefault() int {
	switch {
	case c.backend() == engine.SGLang && c.PageSize > 0:
		return c.PageSize
	case c.BlockSize > 0:
		return c.BlockSize
	}
	return c.backend().Spec().BlockSize
}

// backend is the backend --backend names (vLLM where it names none: Validate refuses it).
func (c *Config) backend() engine.Backend {
	b, _ := engine.ParseBackend(c.Backend)
	return b
}

// owned is a setting's error from the package that owns the setting; its message begins with the
// setting's key, as every Parse and Options.Validate of ours does, so that the file and line it came
// from can be named.
func owned(err error) error {
	if err == nil {
		return nil
	}
	key, _, _ := strings.Cut(err.Error(), " ")
	return &settingError{key, err.Error()}
}

// validateOwned has each package check the settings it owns, in its own words: the backend, the
// schedulers' policies and SGLang's budgets, the timing model's name, the routers' policies, the
// KV-transfer mode and the injected failures.
func (c *Config) validateOwned() error {
	if _, err := engine.ParseBackend(c.Backend); err != nil {
		return owned(err)
	}
	if _, err := vllm.ParsePreemption(c.PreemptionMode); err != nil {
		return owned(err)
	}
	if _, err := vllm.ParseCapacity(c.VLLMAdmission); err != nil {
		return owned(err)
	}
	policy, err := sglang.ParsePolicy(c.SGLangSchedulePolicy)
	if err != nil {
		return owned(err)
	}
	// SGLang's own limits; the pool and the page size are checked below, where 0 means auto.
	so := sglang.Options{PageSize: 1, NumPages: 1, MaxPrefillTokens: c.SGLangMaxPrefillTokens, ClipMaxNewTokens: c.SGLangClipMaxNewTokens,
		ReservedDecode: c.SGLangReservedDecodeTokens, Conservativeness: c.SGLangScheduleConservativeness, Policy: policy,
		Spec: sched.Spec{AcceptRates: c.SpecAcceptRates}}
	if err := so.Validate(); err != nil {
		return owned(err)
	}
	if _, err := registry.Lookup(c.Timing); err != nil {
		return owned(err)
	}
	if _, err := router.ParsePolicy(c.Router); err != nil {
		return owned(err)
	}
	if _, err := router.ParseQueuePolicy(c.RouterQueuePolicy); err != nil {
		return owned(err)
	}
	if _, err := disagg.ParseMode(c.KVTransferTimingMode); err != nil {
		return owned(err)
	}
	if _, err := sim.ParseOnFailure(c.OnWorkerFailure); err != nil {
		return owned(err)
	}
	for _, s := range c.FailWorker {
		if _, err := sim.ParseFailure(s); err != nil {
			return owned(err)
		}
	}
	return nil
}

// spread is the synthetic workload's length spread and shared prefix: --input-tokens-stddev,
// --output-tokens-stddev and --shared-prefix-ratio as set (spread: by default Dynamo mocker's 256, 32
// and a quarter of each prompt), or, with --synthetic-lengths fixed, and auto with --concurrency, 0 for
// each one not given: every prompt and output exactly its mean and no prefix shared, as closed-loop
// benchmarks send them by default (genai-perf and AIPerf: --synthetic-input-tokens-stddev and
// --output-tokens-stddev 0, no prefix prompts; vllm bench serve's random dataset: --random-range-ratio
// 0, --random-prefix-len 0; AIConfigurator's runners: fixed ISL and OSL).
func (c *Config) spread() (in, out, shared float64) {
	in, out, shared = c.InputTokensStddev, c.OutputTokensStddev, c.SharedPrefixRatio
	if c.SyntheticLengths == "spread" || c.SyntheticLengths == Auto && c.Concurrency == 0 {
		return in, out, shared
	}
	zero := func(key string, v float64) float64 {
		if c.isGiven(key) {
			return v
		}
		return 0
	}
	return zero("input-tokens-stddev", in), zero("output-tokens-stddev", out), zero("shared-prefix-ratio", shared)
}

// HoldTrace reads the trace into memory when it is not a regular file (a pipe, as `--trace <(zcat
// t.jsonl.gz)` gives), so that every Source reads the same bytes under the trace's own name: a search
// reads its trace for its bounds and again for every run, and a pipe gives its bytes once. A trace that
// cannot be opened is left to Source to word.
func (c *Config) HoldTrace() error {
	if !c.TraceIsStream() || c.trace != nil {
		return nil
	}
	data, err := os.ReadFile(c.Trace)
	if err != nil {
		return c.fileError("trace", c.Trace, err)
	}
	c.trace = append([]byte{}, data...) // not nil: held, even if empty
	return nil
}

// TraceIsStream reports whether the trace is a file that can be read only once (no regular file nor
// a directory: a pipe, a device).
func (c *Config) TraceIsStream() bool {
	if c.Trace == "" {
		return false
	}
	st, err := os.Stat(c.Trace)
	return err == nil && !st.Mode().IsRegular() && !st.IsDir()
}

// Source opens the workload: the trace if one is set, else the synthetic generator. A trace's
// warning (fields it ignores) is dropped; SourceWarn passes it on.
func (c *Config) Source() (workload.Source, error) { return c.SourceWarn(nil) }

// SourceWarn is Source, giving warn (if set) the trace's warning.
func (c *Config) SourceWarn(warn func(string)) (workload.Source, error) {
	if c.desyncPending() {
		return nil, errors.New("concurrency-desync-ms auto: not resolved (Config.ResolveDesync)")
	}
	if c.Trace != "" {
		opts, err := c.traceOptions()
		if err != nil {
			return nil, err
		}
		opts.Warn = warn
		var used workload.TraceUse
		opts.Use = &used
		var src workload.Source
		if c.trace != nil {
			src, err = workload.ReadTrace(bytes.NewReader(c.trace), c.Trace, opts)
		} else {
			src, err = workload.OpenTrace(c.Trace, opts)
		}
		if err != nil {
			return nil, c.fileError("trace", c.Trace, err)
		}
		if err := c.validateTraceRead(used); err != nil {
			return nil, err
		}
		return src, nil
	}
	if err := c.validateSyntheticGiven(); err != nil {
		return nil, err
	}
	in, out, shared := c.spread()
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests:       c.NumRequests,
		Input:             workload.Length{Mean: c.InputTokens, Stddev: in},
		Output:            workload.Length{Mean: c.OutputTokens, Stddev: out},
		RequestRate:       c.RequestRate,
		Arrival:           c.Arrival,
		Burstiness:        c.Burstiness,
		SharedPrefixRatio: shared,
		NumPrefixGroups:   c.NumPrefixGroups,
		DatasetEntries:    c.NumDatasetEntries,
		DatasetSampling:   c.DatasetSampling,
		ImagesPerRequest:  c.ImagesPerRequest,
		ImageTokens:       c.imageTokens(),
		ImagePool:         c.ImagePool,
		TurnsPerSession:   c.TurnsPerSession,
		InterTurnDelay:    time.Duration(c.InterTurnDelayMs * float64(time.Millisecond)),
		InterTurnDist:     c.InterTurnDelayDist,
		LoRAAdapters:      c.LoRAAdapters,
		LoRADist:          c.LoRADist,
		Clients:           c.rampClients(),
		Ramp:              time.Duration(c.ConcurrencyRampMs * float64(time.Millisecond)),
		Desync:            time.Duration(c.desyncMs() * float64(time.Millisecond)),
		Seed:              c.Seed,
	})
	return src, c.syntheticNamed(err)
}

// syntheticNamed names where the setting a synthetic workload's error is about came from, as Validate
// does: workload's messages read "synthetic: KEY: problem".
func (c *Config) syntheticNamed(err error) error {
	if err == nil {
		return nil
	}
	rest, ok := strings.CutPrefix(err.Error(), "synthetic: ")
	if !ok {
		return err
	}
	key, _, _ := strings.Cut(rest, ":")
	return c.at(key, err)
}

// at is err, about setting key, led by where a config file gave the setting (nil stays nil).
func (c *Config) at(key string, err error) error {
	if where := c.given[key]; err != nil && where != "" {
		return fmt.Errorf("%s: %w", where, err)
	}
	return err
}

// imageTokens is --image-tokens where synthetic requests have images, else 0.
func (c *Config) imageTokens() int {
	if c.ImagesPerRequest == 0 {
		return 0
	}
	return c.ImageTokens
}

// validTimeout reports whether a timeout in seconds converts to a time.Duration (at most 1e6 s, 11.6 days).
func validTimeout(v float64) bool { return v >= 0 && v <= 1e6 }

// Adapters returns the adapters of --lora-modules, each once, or an error naming a bad one.
func (c *Config) Adapters() ([]live.LoRAModule, error) {
	var mods []live.LoRAModule
	for _, m := range c.LoRAModules {
		name, path, _ := strings.Cut(m, "=")
		switch {
		case name == "":
			return nil, &settingError{"lora-modules", fmt.Sprintf("lora-modules %q: want NAME or NAME=PATH", m)}
		case len(name) > workload.MaxLoRAName:
			return nil, &settingError{"lora-modules", fmt.Sprintf("lora-modules %q: a name is at most %d bytes", m, workload.MaxLoRAName)}
		case slices.ContainsFunc(mods, func(x live.LoRAModule) bool { return x.Name == name }):
			return nil, &settingError{"lora-modules", fmt.Sprintf("lora-modules %q: adapter %s given twice", m, name)}
		case name == c.ModelName:
			return nil, &settingError{"lora-modules", fmt.Sprintf("lora-modules %q: %s is the base model's name (model-name)", m, name)}
		}
		mods = append(mods, live.LoRAModule{Name: name, Path: path})
	}
	return mods, nil
}

func finiteNonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

// DesyncAuto reports whether --concurrency-desync-ms is auto and not yet resolved (ResolveDesync).
func (c *Config) DesyncAuto() bool { return math.IsNaN(c.ConcurrencyDesyncMs) }

// desync is --concurrency-desync-ms as the user wrote it.
func (c *Config) desync() any {
	if c.DesyncAuto() {
		return Auto
	}
	return c.ConcurrencyDesyncMs
}

// desyncPending reports whether --concurrency-desync-ms auto spreads clients and waits for ResolveDesync.
// auto, the default, spreads the closed-loop clients of a synthetic workload with --concurrency, as a
// benchmark's drift apart; there are none to spread without --concurrency, with a trace (its requests
// differ in length, so clients drift on their own, and the trace's order is replayed as recorded) or with
// multi-turn sessions, and --concurrency-ramp-ms given alone already staggers them. On aggregated workers
// of a backend whose benchmarks' clients stay grouped (engine.BackendSpec.ClientsStayGrouped: SGLang) auto
// spreads nothing either.
func (c *Config) desyncPending() bool {
	grouped := c.backend().Spec().ClientsStayGrouped && c.PrefillWorkers == 0
	return c.DesyncAuto() && c.Concurrency > 0 && c.Trace == "" && c.TurnsPerSession <= 1 && !grouped &&
		(c.ConcurrencyRampMs == 0 || c.isGiven("concurrency-desync-ms"))
}

// desyncMs is the desync in effect: 0 for an auto that has nothing to spread.
func (c *Config) desyncMs() float64 {
	if c.DesyncAuto() {
		return 0
	}
	return c.ConcurrencyDesyncMs
}

// Measure runs a workload on a deployment and returns its requests' mean end-to-end latency in
// milliseconds. It is sim.MeanE2EMs, given by the caller: config composes runs, it does not run them.
type Measure func(workload.Source, sim.Options) (float64, error)

// ResolveDesync replaces --concurrency-desync-ms auto by one request's lifetime (RequestLifetimeMs) and
// returns the milliseconds it chose, or by 0 where auto has no clients to spread (desyncPending); it does
// nothing, and returns 0, for any other value.
func (c *Config) ResolveDesync(measure Measure) (float64, error) {
	if !c.desyncPending() {
		c.ConcurrencyDesyncMs = c.desyncMs()
		return 0, nil
	}
	ms, err := c.RequestLifetimeMs(measure)
	if err != nil {
		return 0, err // a deployment that cannot run says so itself: auto is the default
	}
	c.ConcurrencyDesyncMs = ms
	return ms, nil
}

// RequestLifetimeMs is the mean end-to-end latency, as measure finds it, of a short replay of the
// workload in lock step: its first 2 × --concurrency requests (at most --num-requests), every client
// starting at time 0. About one request's lifetime is the desync (or ramp) that spreads a benchmark's
// clients over its steady state.
func (c *Config) RequestLifetimeMs(measure Measure) (float64, error) {
	if c.Concurrency < 1 || c.Trace != "" {
		return 0, errors.New("a request's lifetime is measured on the synthetic workload with --concurrency > 0")
	}
	lock := *c
	lock.ConcurrencyRampMs, lock.ConcurrencyDesyncMs = 0, 0
	lock.NumRequests = c.LifetimeRequests()
	src, err := lock.Source()
	if err != nil {
		return 0, err
	}
	o, err := lock.SimOptions()
	if err != nil {
		return 0, err
	}
	ms, err := measure(src, o)
	if err != nil {
		return 0, fmt.Errorf("concurrency-desync-ms auto: a lock-step replay of %d requests: %w", lock.NumRequests, err)
	}
	return ms, nil
}

// LifetimeRequests is how many requests RequestLifetimeMs replays.
func (c *Config) LifetimeRequests() int { return min(2*c.Concurrency, c.NumRequests) }

// rampClients is the number of closed-loop clients the synthetic workload is made of: --concurrency
// when --concurrency-ramp-ms or --concurrency-desync-ms spreads them, else 0 (the simulator keeps
// --concurrency sessions in flight itself, all starting at time 0).
func (c *Config) rampClients() int {
	if (c.ConcurrencyRampMs > 0 || c.ConcurrencyDesyncMs > 0 || c.desyncPending()) && c.Trace == "" {
		return c.Concurrency
	}
	return 0
}

// SimOptions builds the simulation's options.
func (c *Config) SimOptions() (sim.Options, error) {
	p, err := c.Pools()
	if err != nil {
		return sim.Options{}, err
	}
	o := sim.Options{
		Workers:               c.Workers,
		Engine:                p.Engine,
		Router:                p.Router,
		RouterEventsAtPassEnd: c.RouterEventsAtPassEnd,
		RouterEventDelay:      time.Duration(c.RouterEventDelayMs * float64(time.Millisecond)),
		FrontendLatency:       time.Duration(math.Round(c.FrontendLatencyMs * float64(time.Millisecond))),
		FrontendPerRequest:    time.Duration(math.Round(c.FrontendUsPerRequest * float64(time.Microsecond))),
		FrontendPerChunk:      time.Duration(math.Round(c.FrontendUsPerChunk * float64(time.Microsecond))),
		Concurrency:           c.Concurrency,
		ArrivalSpeedup:        c.ArrivalSpeedupRatio,
		CheckInvariants:       c.CheckInvariants,
	}
	// Clients see a reply from the first token after its header.
	if o.ReplyHeader, err = c.ReplyHeader(); err != nil {
		return sim.Options{}, err
	}
	for _, s := range c.FailWorker {
		f, err := sim.ParseFailure(s)
		if err != nil {
			return sim.Options{}, err
		}
		o.Failures = append(o.Failures, f)
	}
	if o.OnFailure, err = sim.ParseOnFailure(c.OnWorkerFailure); err != nil {
		return sim.Options{}, err
	}
	if c.rampClients() > 0 {
		// The workload's sessions are the clients themselves (Source): each sends its requests back
		// to back from its staggered start, so the simulator follows their arrival times.
		o.Concurrency = 0
	}
	if c.PrefillWorkers > 0 {
		o.PrefillWorkers, o.DecodeWorkers = c.PrefillWorkers, c.DecodeWorkers
		o.PrefillEngine, o.DecodeEngine, o.DecodeRouter, o.Transfer = p.Engine, p.DecodeEngine, p.DecodeRouter, p.Transfer
	}
	if c.PlannerConfig != "" {
		pc, err := planner.LoadConfig(c.PlannerConfig)
		if err != nil {
			return sim.Options{}, c.fileError("planner-config", c.PlannerConfig, err)
		}
		// The file's pools are the deployment's (agg alone, or prefill and decode: LoadConfig).
		switch {
		case c.PrefillWorkers == 0 && pc.Pools.Agg == nil:
			return sim.Options{}, fmt.Errorf("planner-config %s: its pools are prefill and decode: give --prefill-workers and --decode-workers, or scale aggregated workers with pools: agg", c.PlannerConfig)
		case c.PrefillWorkers > 0 && pc.Pools.Agg != nil:
			return sim.Options{}, fmt.Errorf("planner-config %s: its pool is agg: scale --prefill-workers and --decode-workers with pools: prefill and decode", c.PlannerConfig)
		}
		o.Planner = pc
	}
	return o, nil
}

// Pools is what a deployment runs, simulated or live: the engines and the router of the pool requests
// arrive at (the aggregated pool, or the prefill pool) and, disaggregated, the decode pool's and the KV
// transfer between the two.
type Pools struct {
	Engine       engine.Options
	Router       router.Options
	DecodeEngine engine.Options  // disaggregated only, as are the fields below
	DecodeRouter router.Options  // balances decode load
	Transfer     disagg.Transfer // prices the prompt's KV moving from prefill to decode
}

// Pools builds the deployment's pools from the configuration.
func (c *Config) Pools() (Pools, error) {
	var p Pools
	var err error
	if c.PrefillWorkers == 0 { // disaggregated, each pool builds its own
		if p.Engine, err = c.EngineOptions(); err != nil {
			return Pools{}, err
		}
	}
	if p.Router, err = c.RouterOptions(); err != nil {
		return Pools{}, err
	}
	if c.PrefillWorkers == 0 {
		return p, nil
	}
	// Each pool's engines from its own settings (Role): its TP sizes its KV pool and prices its passes.
	if p.Engine, err = c.ForRole("prefill").EngineOptions(); err != nil {
		return Pools{}, fmt.Errorf("prefill workers: %w", err)
	}
	if p.DecodeEngine, err = c.ForRole("decode").EngineOptions(); err != nil {
		return Pools{}, fmt.Errorf("decode workers: %w", err)
	}
	p.DecodeEngine.VLLM.Events = false // decode workers publish no KV events
	p.DecodeEngine.SGLang.Events = false
	// The decode router balances decode load: no overlap credit, no prefill tracking (reference §8).
	p.DecodeRouter = p.Router
	p.DecodeRouter.OverlapScoreWeight = 0
	p.DecodeRouter.TrackPrefillTokens = false
	p.DecodeRouter.QueueThreshold = 0
	mode, err := disagg.ParseMode(c.KVTransferTimingMode)
	if err != nil {
		return Pools{}, err
	}
	p.Transfer = disagg.Transfer{GBps: c.KVTransferBandwidth, BytesPerToken: c.KVBytesPerToken, Mode: mode}
	if p.Transfer.BytesPerToken == 0 && p.Transfer.GBps > 0 {
		// A whole token's KV, all shards: the same whatever either side's TP (Deployment.TokenBytes).
		d, err := c.ForRole("prefill").Deployment()
		if err != nil {
			return Pools{}, err
		}
		if d.Model == nil {
			return Pools{}, fmt.Errorf("kv-bytes-per-token auto: needs --model (or give the bytes)")
		}
		p.Transfer.BytesPerToken = d.TokenBytes
	}
	return p, nil
}

// RouterOptions builds the router of the aggregated (or prefill) pool.
func (c *Config) RouterOptions() (router.Options, error) {
	ro := router.DefaultOptions()
	var err error
	if ro.Policy, err = router.ParsePolicy(c.Router); err != nil {
		return ro, err
	}
	if ro.QueuePolicy, err = router.ParseQueuePolicy(c.RouterQueuePolicy); err != nil {
		return ro, err
	}
	ro.OverlapScoreWeight = c.OverlapScoreWeight
	ro.LowerHitWeight = c.RouterCPUHitWeight
	ro.Temperature = c.RouterTemperature
	ro.QueueThreshold = c.RouterQueueThreshold
	ro.MaxBatchedTokens = 0 // the engines' budget, filled in by the simulator
	ro.Seed = c.Seed
	return ro, nil
}

// validTCPEndpoint reports whether ep is tcp://HOST:PORT with a port in [0, 65535].
func validTCPEndpoint(ep string) bool {
	addr, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	p, err := strconv.Atoi(port)
	return err == nil && p >= 0 && p <= 65535
}

// PromptTokenizer tokenises prompts given as text (a served request's, a trace row's): --tokenizer, else
// the built-in tokenizer, with the BOS a catalog model's tokenizer puts before every prompt.
func (c *Config) PromptTokenizer() (tokenize.Tokenizer, error) {
	if c.Tokenizer != "" {
		tk, err := tokenize.FromFile(c.Tokenizer)
		return tk, c.fileError("tokenizer", c.Tokenizer, err)
	}
	m, err := c.resolveModel()
	if err != nil {
		return nil, err
	}
	tk := tokenize.Builtin()
	if m != nil && m.AddsBOS {
		tk = tokenize.WithBOS(tk, m.BOS)
	}
	return tk, nil
}

// traceOptions are the trace reader's options. Rows given as text are tokenised as serve tokenises a
// request (--tokenizer, else the built-in tokenizer with the catalog model's BOS), and a row without an
// output length is a request without max_tokens: --default-max-tokens, ended early where
// --output-length-dist draws, keyed by --seed and the row.
func (c *Config) traceOptions() (workload.TraceOptions, error) {
	opts := workload.TraceOptions{TraceBlockSize: c.TraceBlockSize, Format: c.TraceFormat, ImageTokens: c.ImageTokens}
	var err error
	if opts.Tokenizer, err = c.PromptTokenizer(); err != nil {
		return opts, err
	}
	lengths, err := outlen.Parse(c.OutputLengthDist)
	if err != nil {
		return opts, err
	}
	seed, maxTokens := c.Seed, c.DefaultMaxTokens
	opts.OutputLen = func(key uint64) int { return lengths.Draw(seed, key, maxTokens) }
	return opts, nil
}
