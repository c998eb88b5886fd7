package metrics

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/engine"
)

// TestEveryBackendHasMetrics: every registered backend names a family of metric names New knows
// (a registration without one gets vLLM's), so serve never meets a backend it cannot label.
func TestEveryBackendHasMetrics(t *testing.T) {
	want := map[string]string{"vllm": VLLM, "trtllm": TRTLLM, "sglang": SGLang}
	for _, b := range append(slices.Clone(engine.Backends), engine.BackendSpec{Name: "toy"}) {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("backend %s, metrics %q: %v", b.Name, b.Metrics, r)
				}
			}()
			m := New(Options{Backend: b.Metrics, Model: "m", MaxModelLen: 16})
			if w, ok := want[b.Name]; !ok && m.o.Backend != VLLM || ok && m.o.Backend != w {
				t.Errorf("backend %s: metrics of %q", b.Name, m.o.Backend)
			}
		}()
	}
}
