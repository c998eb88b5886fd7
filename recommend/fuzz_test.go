package recommend

import "testing"

// FuzzParseTarget: any string parses or is refused without a panic, and a target that parses prints
// as a string that parses back to it.
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"ttft:p90:500", "itl:p50:12.5", "E2E:P100:1e4", "ttft:p0:1", "ttft:p90:NaN", "ttft:p90:inf", "x:y:z", "::", "ttft:p9999999999999999999:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseTarget(s)
		if err != nil {
			return
		}
		if !(tg.Ms > 0) || tg.Percentile < 1 || tg.Percentile > 100 {
			t.Fatalf("ParseTarget(%q) = %+v: out of range", s, tg)
		}
		back, err := ParseTarget(tg.String())
		if err != nil || back != tg {
			t.Fatalf("ParseTarget(%q) = %+v prints as %q, which parses to %+v, %v", s, tg, tg.String(), back, err)
		}
	})
}

// FuzzParseRatio: any string parses or is refused without a panic; a ratio that parses is in range
// and prints as a string that parses back to it.
func FuzzParseRatio(f *testing.F) {
	for _, s := range []string{"1:2", "2:1", "0:1", "65:1", "1:", ":1", "-1:2", "1:2:3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRatio(s)
		if err != nil {
			return
		}
		if r.Prefill < 1 || r.Decode < 1 || r.Prefill > 64 || r.Decode > 64 {
			t.Fatalf("ParseRatio(%q) = %v: out of range", s, r)
		}
		if back, err := ParseRatio(r.String()); err != nil || back != r {
			t.Fatalf("ParseRatio(%q) = %v prints as %q, which parses to %v, %v", s, r, r.String(), back, err)
		}
	})
}
