package recommend

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestTableSaysWhyShapesAreRefused: the table names the shapes the space holds that are not valid
// deployments and why (a typo in --backends, a model too large for a TP), four at most.
func TestTableSaysWhyShapesAreRefused(t *testing.T) {
	var refused []string
	for tp := 1; tp <= 32; tp *= 2 {
		refused = append(refused, fmt.Sprintf("sglng agg tp%d seqs auto mbt 8192 round-robin: backend sglng: want vllm, trtllm or sglang", tp))
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "1 shape of the space is not a valid deployment:\n  sglng agg tp1 seqs auto mbt 8192 round-robin: backend sglng: want vllm, trtllm or sglang\n"},
		{6, "6 shapes of the space are not a valid deployment:\n" +
			"  sglng agg tp1 seqs auto mbt 8192 round-robin: backend sglng: want vllm, trtllm or sglang\n" +
			"  sglng agg tp2 seqs auto mbt 8192 round-robin: backend sglng: want vllm, trtllm or sglang\n" +
			"  sglng agg tp4 seqs auto mbt 8192 round-robin: backend sglng: want vllm, trtllm or sglang\n" +
			"  sglng agg tp8 seqs auto mbt 8192 round-robin: backend sglng: want vllm, trtllm or sglang\n" +
			"  ... 2 more (--report-json lists them all)\n"},
	} {
		r := &Report{Objective: FewestGPUs, Targets: []string{"ttft:p90:500"}, Refused: refused[:tc.n]}
		var out bytes.Buffer
		if err := r.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%d refused: table\n%s\nwant it to hold\n%s", tc.n, out.String(), tc.want)
		}
	}
}
