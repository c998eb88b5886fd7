package planner

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig("min.yaml", []byte("pools:\n  agg: {max: 4}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Pools.Agg = &PoolConfig{Min: 1, Max: 4}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("ParseConfig = %+v, want %+v", *c, want)
	}
	if got := c.GPUs(Agg); got != 1 {
		t.Errorf("GPUs(agg) = %d, want 1", got)
	}
}

func TestConfigExample(t *testing.T) {
	const y = `
adjustment_interval: 30s      # how often the planner decides
ttft_target: 500ms
itl_target: 50ms
load_sensitivity: 0.7
startup_time: 60s
throughput_scaling: true
load_scaling: false
pools:
  prefill: {min: 1, max: 4, gpus_per_worker: 2}
  decode: {min: 2, max: 8}
gpus_per_worker: 4
`
	path := filepath.Join(t.TempDir(), "planner.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		AdjustmentInterval: 30 * time.Second,
		TTFTTarget:         500 * time.Millisecond,
		ITLTarget:          50 * time.Millisecond,
		LoadSensitivity:    0.7,
		StartupTime:        time.Minute,
		ThroughputScaling:  true,
		LoadScaling:        false,
		Predictor:          "constant",
		Pools:              Pools{Prefill: &PoolConfig{Min: 1, Max: 4, GPUsPerWorker: 2}, Decode: &PoolConfig{Min: 2, Max: 8}},
		GPUsPerWorker:      4,
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("LoadConfig = %+v, want %+v", *c, want)
	}
	if got := c.pools(); !reflect.DeepEqual(got, []Pool{Prefill, Decode}) {
		t.Errorf("pools() = %v", got)
	}
	if p, d := c.GPUs(Prefill), c.GPUs(Decode); p != 2 || d != 4 {
		t.Errorf("GPUs(prefill, decode) = %d, %d, want 2, 4", p, d)
	}
}

func TestConfigStrictYAML(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string
	}{
		{"pools:\n  agg: {max: 4}\nttft: 1s\n", `line 3: unknown key "ttft"`},
		{"pools:\n  agg:\n    min: 1\n    maxx: 4\n", `line 4: unknown key "pools.agg.maxx"`},
		{"pools:\n  mixed: {max: 4}\n", `line 2: unknown key "pools.mixed"`},
		{"ttft_target: 1s\nttft_target: 2s\npools: {agg: {max: 1}}\n", `line 2: key "ttft_target" given twice`},
		{"ttft_target: 500\npools: {agg: {max: 1}}\n", `line 1: ttft_target: want a duration like "30s" or "500ms", got "500"`},
		{"ttft_target: fast\npools: {agg: {max: 1}}\n", `line 1: ttft_target: want a duration`},
		{"load_sensitivity: high\npools: {agg: {max: 1}}\n", `line 1: load_sensitivity: want a number`},
		{"pools: {agg: {max: 1.5}}\n", `line 1: pools.agg.max: want an integer`},
		{"pools: {agg: 3}\n", `line 1: pools.agg: want a mapping`},
		{"- 1\n- 2\n", `line 1: the file: want a mapping`},
		{"pools: {agg: {max: 1}}\n---\npools: {agg: {max: 2}}\n", `line 2: more than one YAML document`},
		{"", "empty"},
	} {
		_, err := ParseConfig("p.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.yaml") {
			t.Errorf("ParseConfig(%q) error = %v, want it to name p.yaml and contain %q", tc.yaml, err, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	agg := func(lo, hi int) Pools { return Pools{Agg: &PoolConfig{Min: lo, Max: hi}} }
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Pools = Pools{} }, "pools: missing"},
		{func(c *Config) { c.Pools = agg(3, 2) }, "pools.agg.max 2: want >= pools.agg.min (3)"},
		{func(c *Config) { c.Pools = agg(0, 2) }, "pools.agg.min 0: want >= 1"},
		{func(c *Config) { c.Pools.Agg.GPUsPerWorker = -1 }, "pools.agg.gpus_per_worker -1"},
		{func(c *Config) { c.Pools.Prefill = &PoolConfig{Min: 1, Max: 1} }, "pools: agg together with prefill"},
		{func(c *Config) { c.Pools = Pools{Decode: &PoolConfig{Min: 1, Max: 1}} }, "needs both prefill and decode"},
		{func(c *Config) { c.AdjustmentInterval = -time.Second }, "adjustment_interval -1s: want > 0"},
		{func(c *Config) { c.AdjustmentInterval = 0 }, "adjustment_interval 0s: want > 0"},
		{func(c *Config) { c.TTFTTarget = 0 }, "ttft_target 0s"},
		{func(c *Config) { c.ITLTarget = -time.Millisecond }, "itl_target -1ms"},
		{func(c *Config) { c.StartupTime = -time.Second }, "startup_time -1s: want >= 0"},
		{func(c *Config) { c.LoadSensitivity = 0 }, "load_sensitivity 0: want in (0, 1]"},
		{func(c *Config) { c.LoadSensitivity = 1.5 }, "load_sensitivity 1.5"},
		{func(c *Config) { c.ThroughputScaling, c.LoadScaling = false, false }, "both false"},
		{func(c *Config) { c.GPUsPerWorker = 0 }, "gpus_per_worker 0: want >= 1"},
		{func(c *Config) { c.Predictor = "arima" }, `predictor "arima": want one of constant`},
	} {
		c := DefaultConfig()
		c.Pools = agg(1, 4)
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
	}

	// A bad value read from a file is reported with the file's name.
	_, err := ParseConfig("p.yaml", []byte("startup_time: -5s\npools: {agg: {max: 2}}\n"))
	if err == nil || !strings.Contains(err.Error(), "planner config p.yaml: startup_time -5s") {
		t.Errorf("ParseConfig error = %v", err)
	}
	// An explicit min: 0 is kept (and rejected), not replaced by the default.
	_, err = ParseConfig("p.yaml", []byte("pools: {agg: {min: 0, max: 2}}\n"))
	if err == nil || !strings.Contains(err.Error(), "pools.agg.min 0") {
		t.Errorf("ParseConfig(min: 0) error = %v", err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "absent.yaml")); err == nil {
		t.Error("LoadConfig(absent) succeeded")
	}
}
