package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultIsValidAndBuilds(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SimOptions(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Source(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.BlockSize = -1 }, "block-size -1"},
		{func(c *Config) { c.SpecNumTokens = 9 }, "spec-num-tokens"},
		{func(c *Config) { c.SpecAcceptRates = []float64{1.5} }, "spec-accept-rates"},
		{func(c *Config) { c.SpecNumTokens, c.DecodeSpeedupRatio = 2, 2 }, "decode-speedup-ratio"},
		{func(c *Config) { c.MaxNumBatchedTokens = 0 }, "max-num-batched-tokens"},
		{func(c *Config) { c.MaxModelLen = -5 }, "max-model-len"},
		{func(c *Config) { c.Backend = "tgi" }, "backend"},
		{func(c *Config) { c.Backend, c.PageSize, c.BlockSize = "sglang", 4, 16 }, "page-size 4 and block-size 16"},
		{func(c *Config) { c.Backend, c.PageSize, c.SGLangChunkedPrefillSize = "sglang", 64, 1000 }, "sglang-chunked-prefill-size"},
		{func(c *Config) { c.SGLangSchedulePolicy = "dfs-weight" }, "sglang-schedule-policy"},
		{func(c *Config) { c.SGLangScheduleConservativeness = 2 }, "sglang-schedule-conservativeness"},
		{func(c *Config) { c.NumGPUBlocks = -1 }, "num-gpu-blocks -1"},
		{func(c *Config) { c.PreemptionMode = "random" }, "preemption-mode"},
		{func(c *Config) { c.DPSize = 0 }, "dp-size"},
		{func(c *Config) { c.Timing = "roofline" }, "timing"},
		{func(c *Config) { c.DecodeMs = -1 }, "decode-ms"},
		{func(c *Config) { c.DecodeSpeedupRatio = 0 }, "decode-speedup-ratio"},
		{func(c *Config) { c.Workers = 0 }, "workers"},
		{func(c *Config) { c.TraceBlockSize = 0 }, "trace-block-size"},
		{func(c *Config) { c.Concurrency = -1 }, "concurrency"},
	} {
		c := Default()
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want it to start with %q", err, tc.want)
		}
	}
}

func TestLoadKeepsUnsetKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(path, []byte("# comment\nblock-size: 64\nenable-prefix-caching: false\nrequest-rate: .inf\n"), 0o644)
	c := Default()
	if err := c.Load(path); err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.BlockSize, want.EnablePrefixCaching, want.RequestRate = 64, false, c.RequestRate
	if !reflect.DeepEqual(c, want) || c.RequestRate <= 1e308 {
		t.Fatalf("loaded %+v", c)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	os.WriteFile(empty, nil, 0o644)
	if err := c.Load(empty); err != nil {
		t.Fatalf("empty file: %v", err)
	}
	two := filepath.Join(t.TempDir(), "two.yaml")
	os.WriteFile(two, []byte("seed: 1\n---\nseed: 2\n"), 0o644)
	if err := c.Load(two); err == nil || !strings.Contains(err.Error(), "more than one YAML document") {
		t.Fatalf("two documents: %v", err)
	}
}
