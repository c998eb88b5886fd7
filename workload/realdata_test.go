package workload

import (
	"math"
	"testing"
	"time"
)

// Statistics of the shared traces, from shared/data/README.md.

func TestConversationTrace(t *testing.T) {
	src, err := OpenTrace(dataFile(t, "mooncake/conversation_trace.jsonl"), TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := requests(collect(t, src))
	var input, output, hashes int
	unique := map[uint32]bool{}
	for _, r := range reqs {
		input += r.InputLen
		output += r.OutputLen
		hashes += len(r.HashIDs())
		for _, h := range r.HashIDs() {
			unique[h] = true
		}
		if want := (r.InputLen + 511) / 512; len(r.HashIDs()) != want {
			t.Errorf("line %d: %d hash ids for %d tokens, want %d", r.Line, len(r.HashIDs()), r.InputLen, want)
		}
	}
	checks := []struct {
		name      string
		got, want int
	}{
		{"Requests()", src.Requests(), 12031},
		{"requests", len(reqs), 12031},
		{"total input", input, 144_793_823},
		{"total output", output, 4_122_048},
		{"hash ids", hashes, 288_500},
		{"unique hash ids", len(unique), 182_790},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if first, last := reqs[0].At, reqs[len(reqs)-1].At; first != 0 || last != 3_536_999*time.Millisecond {
		t.Errorf("time span %v – %v, want 0 – 3536.999s", first, last)
	}
}

func TestMooncakeFirst20(t *testing.T) {
	src, err := OpenTrace(dataFile(t, "mooncake/mooncake_trace_first20.jsonl"), TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := map[time.Duration]int{}
	input := 0
	for _, r := range requests(collect(t, src)) {
		at[r.At]++
		input += r.InputLen
	}
	if len(at) != 2 || at[0] != 15 || at[3052*time.Millisecond] != 5 || input != 256_262 {
		t.Errorf("arrivals %v, Σinput %d; want 15 at 0, 5 at 3.052s, Σinput 256262", at, input)
	}
}

func TestMooncakeSyntheticTrace(t *testing.T) {
	src, err := OpenTrace(dataFile(t, "mooncake/synthetic_trace.jsonl"), TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := requests(collect(t, src))
	input := 0
	for _, r := range reqs {
		input += r.InputLen
	}
	if len(reqs) != 3993 || src.Requests() != 3993 || input != 61_194_628 {
		t.Errorf("%d requests (Requests() %d), Σinput %d; want 3993, 61194628", len(reqs), src.Requests(), input)
	}
}

func TestAzureTraces(t *testing.T) {
	tests := []struct {
		file        string
		rows        int
		meanContext float64
		meanOutput  float64
		span        time.Duration
	}{
		{"azure_llm_2023/AzureLLMInferenceTrace_conv.csv", 19366, 1154.7, 211.1, 3501720 * time.Millisecond},
		{"azure_llm_2023/AzureLLMInferenceTrace_code.csv", 8819, 2047.8, 27.9, 3435950 * time.Millisecond},
	}
	for _, tt := range tests {
		src, err := OpenTrace(dataFile(t, tt.file), TraceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reqs := requests(collect(t, src))
		var in, out float64
		for _, r := range reqs {
			in += float64(r.InputLen)
			out += float64(r.OutputLen)
		}
		n := float64(len(reqs))
		span := reqs[len(reqs)-1].At - reqs[0].At
		if len(reqs) != tt.rows || math.Abs(in/n-tt.meanContext) > 0.05 || math.Abs(out/n-tt.meanOutput) > 0.05 ||
			reqs[0].At != 0 || (span-tt.span).Abs() > 10*time.Millisecond {
			t.Errorf("%s: %d rows, mean context %.2f, mean generated %.2f, span %v; want %d, %.1f, %.1f, %v",
				tt.file, len(reqs), in/n, out/n, span, tt.rows, tt.meanContext, tt.meanOutput, tt.span)
		}
	}
}

func BenchmarkOpenConversationTrace(b *testing.B) {
	path := dataFile(b, "mooncake/conversation_trace.jsonl")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := OpenTrace(path, TraceOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
