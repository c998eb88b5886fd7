package config

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

// TestDefaultMaxNumSeqs pins --max-num-seqs auto to each engine's own default on the deployment: vLLM's
// API server allows 1,024 sequences on a GPU of 70 GiB or more and 256 elsewhere, SGLang sizes its
// request pool from the KV pool and the context length (48 with speculative decoding), TensorRT-LLM keeps
// Dynamo mocker's 256, and a value given wins.
func TestDefaultMaxNumSeqs(t *testing.T) {
	if Default().MaxNumSeqs != 0 {
		t.Fatalf("default max-num-seqs %d, want 0 (auto)", Default().MaxNumSeqs)
	}
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want int
	}{
		{"vllm h200", func(c *Config) {}, 1024},
		{"vllm h100", func(c *Config) { c.System, c.Timing = "h100_sxm", "fixed" }, 1024},
		{"vllm no gpu", func(c *Config) { c.System, c.Timing = "", "fixed" }, 256},
		{"vllm given", func(c *Config) { c.MaxNumSeqs = 64 }, 64},
		{"trtllm", func(c *Config) { c.Backend, c.Timing = "trtllm", "fixed" }, 256},
		// llama-3.1-8b on one H200: 888,360 KV tokens over a 131,072-token context × 512 is 3,470.
		{"sglang", func(c *Config) { c.Backend = "sglang" }, 3470},
		{"sglang short context", func(c *Config) { c.Backend, c.MaxModelLen = "sglang", 8192 }, 4096},
		{"sglang small pool", func(c *Config) { c.Backend, c.NumGPUBlocks = "sglang", 3000 }, 1500},
		{"sglang pool of 4,096", func(c *Config) { c.Backend, c.NumGPUBlocks = "sglang", 4096 }, 2048},
		{"sglang given", func(c *Config) { c.Backend, c.MaxNumSeqs = "sglang", 64 }, 64},
		// SGLang's server_args caps an EAGLE/NEXTN/STANDALONE draft's running requests at 48 unless given;
		// vLLM's and TensorRT-LLM's defaults do not change with drafts.
		{"sglang spec", func(c *Config) { c.Backend, c.SpecNumTokens = "sglang", 2 }, 48},
		{"sglang spec given", func(c *Config) { c.Backend, c.SpecNumTokens, c.MaxNumSeqs = "sglang", 2, 256 }, 256},
		{"vllm spec", func(c *Config) { c.SpecNumTokens = 2 }, 1024},
		{"trtllm spec", func(c *Config) { c.Backend, c.Timing, c.SpecNumTokens = "trtllm", "fixed", 2 }, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			o, err := c.EngineOptions()
			if err != nil {
				t.Fatal(err)
			}
			got := o.VLLM.MaxNumSeqs
			if c.Backend == "sglang" {
				got = o.SGLang.MaxRunning
			}
			if got != tc.want {
				t.Errorf("running requests %d, want %d", got, tc.want)
			}
		})
	}
	c := Default()
	c.MaxNumSeqs = -1
	if err := c.Validate(); err == nil || err.Error() != "max-num-seqs -1: must be at least 1 (0: auto)" {
		t.Errorf("max-num-seqs -1: %v", err)
	}
}

// TestSGLangOverlapDefault: SGLang's overlap scheduler is on unless turned off, as in SGLang; with
// speculative decoding SGLang turns overlap and mixed chunking off (server_args.py,
// _handle_speculative_decoding) unless they are given explicitly.
func TestSGLangOverlapDefault(t *testing.T) {
	for _, tc := range []struct {
		name              string
		set               func(*Config)
		overlap, mixChunk bool
	}{
		{"default", func(c *Config) {}, true, false},
		{"overlap off", func(c *Config) { c.SGLangOverlapSchedule = false }, false, false},
		{"mixed chunk", func(c *Config) { c.SGLangEnableMixedChunk = true }, true, true},
		{"spec", func(c *Config) { c.SpecNumTokens = 1; c.SGLangEnableMixedChunk = true }, false, false},
		{"spec given", func(c *Config) {
			c.SpecNumTokens, c.SGLangEnableMixedChunk = 2, true
			c.Given("sglang-overlap-schedule", "")
			c.Given("sglang-enable-mixed-chunk", "")
		}, true, true},
		{"spec overlap given", func(c *Config) {
			c.SpecNumTokens, c.SGLangEnableMixedChunk = 2, true
			c.Given("sglang-overlap-schedule", "")
		}, true, false},
		{"spec given off", func(c *Config) {
			c.SpecNumTokens, c.SGLangOverlapSchedule = 2, false
			c.Given("sglang-overlap-schedule", "")
		}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			c.Backend = "sglang"
			tc.set(&c)
			o, err := c.EngineOptions()
			if err != nil {
				t.Fatal(err)
			}
			if o.SGLang.Overlap != tc.overlap || o.SGLang.MixedChunk != tc.mixChunk {
				t.Errorf("overlap %v, mixed chunk %v; want %v, %v", o.SGLang.Overlap, o.SGLang.MixedChunk, tc.overlap, tc.mixChunk)
			}
		})
	}
}

// TestSyntheticLengths: with --concurrency the synthetic prompts and outputs are exactly their means and
// share no prefix, as benchmarks send them, unless a spread is given or --synthetic-lengths spread; an
// open-loop workload keeps the spread defaults.
func TestSyntheticLengths(t *testing.T) {
	type shape struct {
		minIn, maxIn, minOut, maxOut int
		shared                       bool // some two prompts begin with the same 16 tokens
	}
	look := func(c Config) shape {
		t.Helper()
		c.NumRequests, c.InputTokens, c.OutputTokens, c.ConcurrencyDesyncMs = 64, 256, 32, 0
		src, err := c.Source()
		if err != nil {
			t.Fatal(err)
		}
		s := shape{minIn: 1 << 30, minOut: 1 << 30}
		heads := map[string]bool{}
		var toks []uint32
		for {
			sess, err := src.Next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			r := &sess.Turns[0]
			s.minIn, s.maxIn = min(s.minIn, r.InputLen), max(s.maxIn, r.InputLen)
			s.minOut, s.maxOut = min(s.minOut, r.OutputLen), max(s.maxOut, r.OutputLen)
			toks = r.AppendTokens(toks[:0])
			head := fmt.Sprint(toks[:16])
			s.shared = s.shared || heads[head]
			heads[head] = true
		}
		return s
	}
	fixed := shape{256, 256, 32, 32, false}
	for _, tc := range []struct {
		name   string
		set    func(*Config)
		spread bool // lengths vary and prompts share prefixes
		want   shape
	}{
		{"concurrency", func(c *Config) { c.Concurrency = 4 }, false, fixed},
		{"concurrency, fixed", func(c *Config) { c.Concurrency, c.SyntheticLengths = 4, "fixed" }, false, fixed},
		{"concurrency, spread", func(c *Config) { c.Concurrency, c.SyntheticLengths = 4, "spread" }, true, shape{}},
		{"open loop", func(c *Config) {}, true, shape{}},
		{"open loop, fixed", func(c *Config) { c.SyntheticLengths = "fixed" }, false, fixed},
		{"concurrency, output stddev given", func(c *Config) {
			c.Concurrency, c.OutputTokensStddev = 4, 8
			c.Given("output-tokens-stddev", "")
		}, false, shape{256, 256, 0, 0, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.set(&c)
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			got := look(c)
			switch {
			case tc.spread:
				if got.minIn == got.maxIn || got.minOut == got.maxOut || !got.shared {
					t.Errorf("got %+v, want lengths spread and a shared prefix", got)
				}
			case tc.want.maxOut == 0: // outputs spread, prompts fixed
				if got.minIn != 256 || got.maxIn != 256 || got.minOut == got.maxOut || got.shared {
					t.Errorf("got %+v, want prompts of 256, outputs spread, nothing shared", got)
				}
			case got != tc.want:
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	c := Default()
	c.SyntheticLengths = "even"
	if err := c.Validate(); err == nil || err.Error() != `synthetic-lengths "even": want auto, fixed or spread` {
		t.Errorf("synthetic-lengths even: %v", err)
	}
}
