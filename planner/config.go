package planner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Pool names a group of interchangeable workers the planner sizes.
type Pool string

// The pools: a disaggregated deployment has Prefill and Decode, an aggregated one has Agg.
const (
	Prefill Pool = "prefill"
	Decode  Pool = "decode"
	Agg     Pool = "agg"
)

// allPools is the order pools are planned and printed in, so output never depends on map order.
var allPools = []Pool{Prefill, Decode, Agg}

// Config is the planner's configuration. Durations are Go duration strings in YAML ("30s", "500ms").
type Config struct {
	// AdjustmentInterval is how often the caller ticks the planner; the planner itself only reads the
	// window length it is given, so this is the driver's schedule.
	AdjustmentInterval time.Duration `yaml:"adjustment_interval"`
	TTFTTarget         time.Duration `yaml:"ttft_target"` // SLA on time to first token
	ITLTarget          time.Duration `yaml:"itl_target"`  // SLA on inter-token latency
	// LoadSensitivity scales the targets for scaling down: only when every engine estimates below
	// target × LoadSensitivity, so a pool does not shrink straight back into a violation. In (0, 1].
	LoadSensitivity   float64       `yaml:"load_sensitivity"`
	StartupTime       time.Duration `yaml:"startup_time"`       // a worker ordered now serves this much later
	ThroughputScaling bool          `yaml:"throughput_scaling"` // the predicted-throughput floor
	LoadScaling       bool          `yaml:"load_scaling"`       // the forward-pass-metrics ±1 step
	Predictor         string        `yaml:"predictor"`          // traffic predictor; see Predictors
	Pools             Pools         `yaml:"pools"`
	// GPUsPerWorker is tp × dp of one worker, for GPU-hours; a pool may override it.
	GPUsPerWorker int `yaml:"gpus_per_worker"`
}

// Pools configures the pools present: Agg alone, or Prefill and Decode together.
type Pools struct {
	Prefill *PoolConfig `yaml:"prefill"`
	Decode  *PoolConfig `yaml:"decode"`
	Agg     *PoolConfig `yaml:"agg"`
}

// PoolConfig bounds one pool.
type PoolConfig struct {
	Min           int `yaml:"min"`             // at least 1 (1 if omitted in YAML); a pool never has fewer workers
	Max           int `yaml:"max"`             // required; a pool never has more workers
	GPUsPerWorker int `yaml:"gpus_per_worker"` // 0: Config.GPUsPerWorker
}

// setDefaults is called on a PoolConfig the YAML decoder creates, before its keys are read, so an
// omitted key keeps its default and a key given as 0 stays 0 (and fails validation, not silently 1).
func (p *PoolConfig) setDefaults() { p.Min = 1 }

// DefaultConfig returns the defaults, with no pools (a configuration must name its pools):
//
//	adjustment_interval: 180s   # Dynamo's default: long enough for a scale-up to complete within it
//	ttft_target: 500ms
//	itl_target: 50ms
//	load_sensitivity: 0.8
//	startup_time: 60s
//	throughput_scaling: true
//	load_scaling: true
//	predictor: constant
//	gpus_per_worker: 1
//
// and, in each pool given, min: 1.
func DefaultConfig() Config {
	return Config{
		AdjustmentInterval: 180 * time.Second,
		TTFTTarget:         500 * time.Millisecond,
		ITLTarget:          50 * time.Millisecond,
		LoadSensitivity:    0.8,
		StartupTime:        60 * time.Second,
		ThroughputScaling:  true,
		LoadScaling:        true,
		Predictor:          "constant",
		GPUsPerWorker:      1,
	}
}

// LoadConfig reads a YAML configuration file over the defaults and validates it. An unknown or repeated
// key, a value of the wrong type or a second document is an error naming the file, the line and the key.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("planner config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig is LoadConfig on data already read; name is used in errors.
func ParseConfig(name string, data []byte) (*Config, error) {
	c := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("planner config %s: empty (pools are required)", name)
	} else if err != nil {
		return nil, fmt.Errorf("planner config %s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("planner config %s line %d: more than one YAML document", name, extra.Line)
	}
	if err := decodeStrict(doc.Content[0], reflect.ValueOf(&c).Elem(), ""); err != nil {
		return nil, fmt.Errorf("planner config %s %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("planner config %s: %w", name, err)
	}
	return &c, nil
}

// decodeStrict decodes a mapping node into the struct v, key by key, so that an unknown or repeated key
// is an error naming it, its line and where it sits (prefix, e.g. "pools.agg."). Struct-valued fields
// recurse; a nil *PoolConfig is created with its defaults first. Errors start with "line N: ".
func decodeStrict(n *yaml.Node, v reflect.Value, prefix string) error {
	if n.Kind != yaml.MappingNode {
		where := "the file"
		if prefix != "" {
			where = strings.TrimSuffix(prefix, ".")
		}
		return fmt.Errorf("line %d: %s: want a mapping (key: value)", n.Line, where)
	}
	fields := map[string]reflect.Value{}
	for i := range v.NumField() {
		fields[v.Type().Field(i).Tag.Get("yaml")] = v.Field(i)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		key := prefix + k.Value
		f, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("line %d: unknown key %q (want one of %s)", k.Line, key, knownKeys(fields))
		}
		if seen[k.Value] {
			return fmt.Errorf("line %d: key %q given twice", k.Line, key)
		}
		seen[k.Value] = true
		switch {
		case f.Kind() == reflect.Struct:
			if err := decodeStrict(val, f, key+"."); err != nil {
				return err
			}
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct:
			if f.IsNil() {
				f.Set(reflect.New(f.Type().Elem()))
				if d, ok := f.Interface().(interface{ setDefaults() }); ok {
					d.setDefaults()
				}
			}
			if err := decodeStrict(val, f.Elem(), key+"."); err != nil {
				return err
			}
		default:
			// yaml.v3 truncates 1.5 into an int field; a count must be written as an integer.
			isInt := f.Kind() == reflect.Int && f.Type() != reflect.TypeFor[time.Duration]()
			if err := val.Decode(f.Addr().Interface()); err != nil || isInt && val.ShortTag() != "!!int" {
				return fmt.Errorf("line %d: %s: want %s, got %q", val.Line, key, typeName(f.Type()), val.Value)
			}
		}
	}
	return nil
}

func knownKeys(fields map[string]reflect.Value) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[time.Duration]():
		return `a duration like "30s" or "500ms"`
	case t.Kind() == reflect.Int:
		return "an integer"
	case t.Kind() == reflect.Float64:
		return "a number"
	case t.Kind() == reflect.Bool:
		return "true or false"
	}
	return "a string"
}

// Validate reports the first invalid setting, named by its YAML key.
func (c *Config) Validate() error {
	bad := func(key string, v any, want string) error { return fmt.Errorf("%s %v: %s", key, v, want) }
	switch {
	case c.AdjustmentInterval <= 0:
		return bad("adjustment_interval", c.AdjustmentInterval, "want > 0")
	case c.TTFTTarget <= 0:
		return bad("ttft_target", c.TTFTTarget, "want > 0")
	case c.ITLTarget <= 0:
		return bad("itl_target", c.ITLTarget, "want > 0")
	case !(c.LoadSensitivity > 0 && c.LoadSensitivity <= 1): // also rejects NaN
		return bad("load_sensitivity", c.LoadSensitivity, "want in (0, 1]")
	case c.StartupTime < 0:
		return bad("startup_time", c.StartupTime, "want >= 0")
	case !c.ThroughputScaling && !c.LoadScaling:
		return errors.New("throughput_scaling and load_scaling are both false: nothing would ever scale")
	case c.GPUsPerWorker < 1:
		return bad("gpus_per_worker", c.GPUsPerWorker, "want >= 1")
	}
	if _, ok := Predictors()[c.Predictor]; !ok {
		return bad("predictor", fmt.Sprintf("%q", c.Predictor), "want one of "+predictorNames())
	}
	p := c.Pools
	switch {
	case p.Prefill == nil && p.Decode == nil && p.Agg == nil:
		return errors.New("pools: missing (want agg, or prefill and decode)")
	case p.Agg != nil && (p.Prefill != nil || p.Decode != nil):
		return errors.New("pools: agg together with prefill or decode (want agg, or prefill and decode)")
	case p.Agg == nil && (p.Prefill == nil || p.Decode == nil):
		return errors.New("pools: a disaggregated deployment needs both prefill and decode")
	}
	for _, pool := range c.pools() {
		pc := c.pool(pool)
		key := "pools." + string(pool) + "."
		switch {
		case pc.Min < 1:
			return bad(key+"min", pc.Min, "want >= 1")
		case pc.Max < pc.Min:
			return bad(key+"max", pc.Max, fmt.Sprintf("want >= %smin (%d)", key, pc.Min))
		case pc.GPUsPerWorker < 0:
			return bad(key+"gpus_per_worker", pc.GPUsPerWorker, "want >= 0 (0: the top-level gpus_per_worker)")
		}
	}
	return nil
}

// pools lists the configured pools in planning order.
func (c *Config) pools() []Pool {
	var out []Pool
	for _, p := range allPools {
		if c.pool(p) != nil {
			out = append(out, p)
		}
	}
	return out
}

// pool returns a pool's configuration, nil if the pool is absent.
func (c *Config) pool(p Pool) *PoolConfig {
	switch p {
	case Prefill:
		return c.Pools.Prefill
	case Decode:
		return c.Pools.Decode
	case Agg:
		return c.Pools.Agg
	}
	return nil
}

// GPUs returns the GPUs one worker of pool p holds.
func (c *Config) GPUs(p Pool) int {
	if pc := c.pool(p); pc != nil && pc.GPUsPerWorker > 0 {
		return pc.GPUsPerWorker
	}
	return c.GPUsPerWorker
}
