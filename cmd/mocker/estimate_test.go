package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/timing"
)

// TestEstimateBreakdownRounded: --breakdown prints each op to the nanosecond, as pass_ms, prefill_ms and
// decode_ms are, and the printed ops sum exactly to the printed pass_ms: a dense pass, a DeepSeek-V3
// decode (one part negative: the shared expert's overlap credited back), one scaled by the speed-up
// ratios with a host part, and a model without an itemization.
func TestEstimateBreakdownRounded(t *testing.T) {
	const golden = `{"pass_ms":20.958824,"prefill_ms":20.122175,"decode_ms":0.836649,"timing_model":"default","timing_source":"embedded","timing_version":"vllm 0.24.0","ops":[` +
		`{"op":"norms","ms":0.739686},{"op":"attention_projections","ms":3.426798},{"op":"mlp","ms":14.899669},{"op":"embedding","ms":0.007279},` +
		`{"op":"context_attention","ms":1.105792},{"op":"generation_attention","ms":0.518792},{"op":"lm_head","ms":0.260808}]}`
	for i, args := range []string{
		"--prefill-tokens 1000 --decode-requests 3 --decode-context 1000",
		"--model deepseek-v3 --backend sglang --tp 8 --decode-requests 16 --decode-context 1500",
		"--model qwen3-30b-a3b --tp 2 --prefill-tokens 777 --prefill-cached 100 --decode-requests 5 --decode-context 3000 --speedup-ratio 3 --decode-speedup-ratio 2 --host-overhead-us 7",
		"--timing polynomial --prefill-tokens 1000 --decode-requests 2 --decode-context 50",
	} {
		out, _, err := mocker(t, append([]string{"estimate", "--breakdown"}, strings.Fields(args)...)...)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if i == 0 && strings.TrimSpace(out) != golden {
			t.Errorf("%s:\n%s\nwant\n%s", args, out, golden)
		}
		var got struct {
			PassMs    json.Number `json:"pass_ms"`
			PrefillMs json.Number `json:"prefill_ms"`
			DecodeMs  json.Number `json:"decode_ms"`
			Ops       []struct {
				Op string      `json:"op"`
				Ms json.Number `json:"ms"`
			} `json:"ops"`
		}
		d := json.NewDecoder(strings.NewReader(out))
		d.UseNumber()
		if err := d.Decode(&got); err != nil {
			t.Fatalf("%s: %v: %q", args, err, out)
		}
		var sum int64
		for _, op := range got.Ops {
			sum += nanos(t, op.Ms)
		}
		if pass := nanos(t, got.PassMs); sum != pass || pass != nanos(t, got.PrefillMs)+nanos(t, got.DecodeMs) {
			t.Errorf("%s: ops sum to %d ns, pass_ms %s = prefill_ms %s + decode_ms %s", args, sum, got.PassMs, got.PrefillMs, got.DecodeMs)
		}
	}
}

// nanos is a printed number of milliseconds in whole nanoseconds; a test error if it has more than 6
// decimal places (or an exponent).
func nanos(t *testing.T, ms json.Number) int64 {
	t.Helper()
	s := ms.String()
	_, frac, _ := strings.Cut(s, ".")
	if len(frac) > 6 || strings.ContainsAny(s, "eE") {
		t.Errorf("%s ms: not to the nanosecond", s)
		return 0
	}
	d, err := time.ParseDuration(s + "ms")
	if err != nil {
		t.Fatal(err)
	}
	return int64(d)
}

// TestRoundParts: each part is rounded down to the nanosecond and the nanoseconds the total has left go
// to the largest remainders first (ties in the parts' order); where the parts round above the total,
// the smallest remainders give them back.
func TestRoundParts(t *testing.T) {
	for _, tc := range []struct {
		ms    []float64 // the parts, in ms
		total time.Duration
		want  []float64
	}{
		{[]float64{1.0000004, 2.0000004, 0.0000002}, 3000001, []float64{1.000001, 2, 0}},
		{[]float64{1.0000003, 2.0000004, 0.0000002}, 3000001, []float64{1, 2.000001, 0}},
		{[]float64{1.0000006, -0.0000002}, 1000001, []float64{1.000001, 0}}, // the second's floor -1 ns, remainder 0.8
		{[]float64{1.0000023, 1.0000021}, 2000003, []float64{1.000002, 1.000001}},
		{[]float64{5, 0.064}, 5064000, []float64{5, 0.064}},
	} {
		var parts []timing.Part
		for _, ms := range tc.ms {
			parts = append(parts, timing.Part{Op: "op", Ms: ms})
		}
		var got []float64
		for _, p := range roundParts(parts, tc.total) {
			got = append(got, p.Ms)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("roundParts(%v, %d) = %v, want %v", tc.ms, tc.total, got, tc.want)
		}
	}
}

// TestEstimateBoundsTheShape: a pass's token counts are bounded before the batch is built, naming the
// flag: --prefill-tokens 99999999999 printed a negative pass_ms (the duration overflowed), and
// --decode-requests 100000000 allocated a batch of 10^8 sequences and ran for minutes. At the bounds the
// pass is priced, and its time is positive.
func TestEstimateBoundsTheShape(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--prefill-tokens 99999999999", "estimate: --prefill-tokens 99999999999 + --prefill-cached 0: a sequence of more than 16777216 tokens"},
		{"--prefill-tokens 10 --prefill-cached 16777216", "estimate: --prefill-tokens 10 + --prefill-cached 16777216: a sequence of more than 16777216 tokens"},
		{"--decode-requests 1 --decode-context 16777217", "estimate: --decode-context 16777217: a sequence of more than 16777216 tokens"},
		{"--decode-requests 100000000 --decode-context 1", "estimate: --decode-requests 100000000: more than 1048576 sequences in one pass"},
	} {
		out, _, err := mocker(t, append([]string{"estimate", "--timing", "polynomial"}, strings.Fields(tc.args)...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %q, error %v; want %q", tc.args, out, err, tc.want)
		}
	}
	for _, args := range []string{
		"--prefill-tokens 16777216",
		"--prefill-tokens 1 --prefill-cached 16777215",
		"--decode-requests 1048576 --decode-context 16777216",
	} {
		for _, tm := range []string{"polynomial", "default"} {
			out, _, err := mocker(t, append([]string{"estimate", "--timing", tm}, strings.Fields(args)...)...)
			if err != nil {
				t.Fatalf("%s --timing %s: %v", args, tm, err)
			}
			var got struct {
				PassMs float64 `json:"pass_ms"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil || got.PassMs <= 0 {
				t.Errorf("%s --timing %s: %q (%v): want a positive pass_ms", args, tm, out, err)
			}
		}
	}
}
