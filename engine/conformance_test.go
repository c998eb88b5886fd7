package engine

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
)

// shapeOptions are engine options of a conformance shape, in every registered backend's settings.
func shapeOptions(s schedtest.Shape) Options {
	return Options{
		VLLM: vllm.Options{BlockSize: s.BlockSize, NumBlocks: s.NumBlocks, MaxNumSeqs: s.MaxNumSeqs,
			MaxBatchedTokens: s.MaxBatchedTokens, ChunkedPrefill: true, PrefixCaching: true, Events: true},
		SGLang: sglang.Options{PageSize: s.BlockSize, NumPages: s.NumBlocks, MaxRunning: s.MaxNumSeqs,
			MaxPrefillTokens: s.MaxBatchedTokens, ChunkedPrefillSize: s.MaxBatchedTokens, ClipMaxNewTokens: 4096,
			Conservativeness: 1, PrefixCaching: true, Events: true},
		Role: s.Role,
	}
}

// factory builds a registered backend's scheduler of a shape as the engine builds a rank's.
func factory(spec BackendSpec) schedtest.Factory {
	return func(s schedtest.Shape) (schedtest.Scheduler, error) {
		return spec.New(shapeOptions(s), 0, 1, RankSeed(1, 0))
	}
}

// TestConformance: every registered backend's scheduler passes the schedulers' conformance suite.
func TestConformance(t *testing.T) {
	for _, spec := range Backends {
		t.Run(spec.Name, func(t *testing.T) { schedtest.Run(t, factory(spec)) })
	}
}

// dropsToken is a vLLM scheduler that loses the last token of some requests.
type dropsToken struct{ *vllm.Scheduler }

func (d dropsToken) Step() *sched.Pass {
	p := d.Scheduler.Step()
	for i := range p.Outputs {
		if o := &p.Outputs[i]; o.Done && len(o.Tokens) > 0 && o.ID%3 == 0 {
			o.Tokens = o.Tokens[:len(o.Tokens)-1]
		}
	}
	return p
}

// TestBrokenBackendFails: a broken toy registered beside the real backends fails the suite, and only it.
func TestBrokenBackendFails(t *testing.T) {
	toy := Backends[VLLM]
	toy.Name = "toy"
	toy.New = func(o Options, rank, dp int, seed uint64) (sched.Scheduler, error) {
		s, err := Backends[VLLM].New(o, rank, dp, seed)
		return dropsToken{s.(*vllm.Scheduler)}, err
	}
	var failed []string
	for _, spec := range append(slices.Clone(Backends), toy) {
		if err := schedtest.Check(factory(spec)); err != nil {
			failed = append(failed, spec.Name)
			t.Logf("%s: %v", spec.Name, err)
		}
	}
	if !slices.Equal(failed, []string{"toy"}) {
		t.Errorf("backends failing the conformance suite: %v, want [toy]", failed)
	}
}

// TestParseBackend: every registered name parses to its own entry, and an unknown or empty name is
// refused with the registered names.
func TestParseBackend(t *testing.T) {
	for i, spec := range Backends {
		if b, err := ParseBackend(spec.Name); b != Backend(i) || err != nil || b.String() != spec.Name {
			t.Errorf("ParseBackend(%q) = %v, %v; want %d", spec.Name, b, err, i)
		}
	}
	if _, err := ParseBackend(""); err == nil || err.Error() != "backend : want vllm, trtllm or sglang" {
		t.Errorf(`ParseBackend("") = %v, want an error`, err)
	}
	_, err := ParseBackend("tgi")
	if want := "backend tgi: want vllm, trtllm or sglang"; err == nil || err.Error() != want {
		t.Errorf("ParseBackend(tgi) = %v, want %q", err, want)
	}
	if _, err := New(Options{Backend: Backend(len(Backends)), Timing: nil}); err == nil {
		t.Error("New with an unregistered backend: no error")
	}
}

// TestMaxRunningOfEachBackend: every backend has its --max-num-seqs auto (config reads it without a
// fallback): vLLM's 1,024 on an H200, TensorRT-LLM Dynamo mocker's 256, SGLang's from its KV pool
// (888,360 tokens over a 131,072-token context × 512 is 3,470); with speculative decoding only SGLang's
// changes, to the 48 its server_args sets for drafts. Over 8 attention data-parallel ranks SGLang's
// model runner splits those 48 (48 // 8 = 6 a rank; 48 // 64 is 0, kept at 1); the KV-derived size is
// each rank's own, and vLLM's and TensorRT-LLM's limits are per rank anyway.
func TestMaxRunningOfEachBackend(t *testing.T) {
	for _, tc := range []struct {
		b                       Backend
		want, wantMTP, wantDP8  int
		wantMTPDP8, wantMTPDP64 int
	}{{VLLM, 1024, 1024, 1024, 1024, 1024}, {TRTLLM, 256, 256, 256, 256, 256}, {SGLang, 3470, 48, 3470, 6, 1}} {
		f := tc.b.Spec().MaxRunning
		if f == nil {
			t.Errorf("%v: no MaxRunning", tc.b)
			continue
		}
		got := [5]int{f(141<<30, 888360, 131072, false, 1), f(141<<30, 888360, 131072, true, 1), f(141<<30, 888360, 131072, false, 8),
			f(141<<30, 888360, 131072, true, 8), f(141<<30, 888360, 131072, true, 64)}
		if want := [5]int{tc.want, tc.wantMTP, tc.wantDP8, tc.wantMTPDP8, tc.wantMTPDP64}; got != want {
			t.Errorf("%v: MaxRunning (alone, drafts, dp 8, drafts dp 8, drafts dp 64) %v; want %v", tc.b, got, want)
		}
	}
}

// TestPoolOfEachBackend: the pool and budget accessors read each backend's own settings.
func TestPoolOfEachBackend(t *testing.T) {
	o := Options{VLLM: vllm.Options{BlockSize: 16, NumBlocks: 100, MaxBatchedTokens: 2048},
		SGLang: sglang.Options{PageSize: 4, NumPages: 300, ChunkedPrefillSize: 1024}}
	for _, tc := range []struct {
		b                  Backend
		bs, blocks, budget int
	}{{VLLM, 16, 100, 2048}, {TRTLLM, 16, 100, 2048}, {SGLang, 4, 300, 1024}} {
		o.Backend = tc.b
		if bs, n, m := o.BlockSize(), o.KVBlocks(), o.MaxBatchedTokens(); bs != tc.bs || n != tc.blocks || m != tc.budget {
			t.Errorf("%v: block size %d, blocks %d, budget %d; want %d, %d, %d", tc.b, bs, n, m, tc.bs, tc.blocks, tc.budget)
		}
	}
}
