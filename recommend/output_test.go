package recommend

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestTableSaysWhyShapesAreRefused: the table names the shapes the space holds that are not valid
// deployments and why (a typo in --backends, a model too large for a TP), four lines at most; a backend
// none of whose shapes was searched, all refused for one reason, has one line.
func TestTableSaysWhyShapesAreRefused(t *testing.T) {
	const typo = "backend sglng: want vllm, trtllm or sglang"
	var same, each []string
	for tp := 1; tp <= 32; tp *= 2 {
		same = append(same, fmt.Sprintf("sglng agg tp%d seqs auto mbt 8192 round-robin: %s", tp, typo))
		each = append(each, fmt.Sprintf("vllm agg tp%d seqs auto mbt 8192 round-robin: tp %d: too large", tp, tp))
	}
	searched := []ShapeResult{{Shape: Shape{Backend: "sglng"}}}
	for _, tc := range []struct {
		refused []string
		shapes  []ShapeResult
		want    string
	}{
		{same[:1], nil, "1 shape of the space is not a valid deployment:\n  sglng agg tp1 seqs auto mbt 8192 round-robin: " + typo + "\n\n"},
		{same, nil, "6 shapes of the space are not a valid deployment:\n  every sglng shape (6): " + typo + "\n\n"},
		{append(same[:2:2], each[:1]...), nil, "3 shapes of the space are not a valid deployment:\n" +
			"  every sglng shape (2): " + typo + "\n" +
			"  vllm agg tp1 seqs auto mbt 8192 round-robin: tp 1: too large\n\n"},
		{same[:2], searched, "2 shapes of the space are not a valid deployment:\n" +
			"  sglng agg tp1 seqs auto mbt 8192 round-robin: " + typo + "\n" +
			"  sglng agg tp2 seqs auto mbt 8192 round-robin: " + typo + "\n\n"},
		{each, nil, "6 shapes of the space are not a valid deployment:\n" +
			"  vllm agg tp1 seqs auto mbt 8192 round-robin: tp 1: too large\n" +
			"  vllm agg tp2 seqs auto mbt 8192 round-robin: tp 2: too large\n" +
			"  vllm agg tp4 seqs auto mbt 8192 round-robin: tp 4: too large\n" +
			"  vllm agg tp8 seqs auto mbt 8192 round-robin: tp 8: too large\n" +
			"  ... 2 more lines (--report-json lists every shape)\n"},
	} {
		r := &Report{Objective: FewestGPUs, Targets: []string{"ttft:p90:500"}, Refused: tc.refused, Shapes: tc.shapes}
		var out bytes.Buffer
		if err := r.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%d refused: table\n%s\nwant it to hold\n%s", len(tc.refused), out.String(), tc.want)
		}
	}
}
