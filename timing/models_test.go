package timing

import (
	"math"
	"slices"
	"testing"
	"time"
)

func near(a, b time.Duration) bool { return a-b <= 1 && b-a <= 1 }

func TestPolynomialReferenceFormulas(t *testing.T) {
	for _, tc := range []struct {
		name        string
		b           Batch
		prefill, dc float64 // ms
	}{
		{"one prefill of 1000 new tokens, pool full", Batch{Seqs: []Seq{{New: 1000, Prefill: true, Samples: true}}, ActiveKVTokens: 1000, TotalKVTokens: 1000},
			4.209989e-07*1e6 + 1.518344e-02*1000 + 1.650142e+01, -25.74 + 54.01 + 5.74},
		{"two prefills, mean isl−prefix × batch = new tokens", Batch{Seqs: []Seq{{New: 300, Cached: 100, Prefill: true}, {New: 100, Cached: 500, Prefill: true}}, TotalKVTokens: 1 << 20},
			4.209989e-07*400*400 + 1.518344e-02*400 + 1.650142e+01, 0},
		{"decode at half KV usage", Batch{Seqs: []Seq{{New: 1, Cached: 99, Samples: true}}, ActiveKVTokens: 500, TotalKVTokens: 1000},
			0, -25.74*0.25 + 54.01*0.5 + 5.74},
		{"decode at zero usage is 5.74 ms", Batch{Seqs: []Seq{{New: 1, Samples: true}}, TotalKVTokens: 1000}, 0, 5.74},
		{"no sampling: no decode time", Batch{Seqs: []Seq{{New: 8, Prefill: true}}, TotalKVTokens: 64}, 4.209989e-07*64 + 1.518344e-02*8 + 1.650142e+01, 0},
	} {
		c := Polynomial{}.Cost(&tc.b)
		if !near(c.Prefill, ms(tc.prefill)) || !near(c.Decode, ms(tc.dc)) {
			t.Errorf("%s: Cost = %v/%v, want %.6fms/%.6fms", tc.name, c.Prefill, c.Decode, tc.prefill, tc.dc)
		}
	}
}

// TestPolynomialFullyCachedPromptSkipsPrefill is the reference's fully_cached_prompt_skips_prefill.
func TestPolynomialFullyCachedPromptSkipsPrefill(t *testing.T) {
	b := Batch{Seqs: []Seq{{New: 0, Cached: 64, Prefill: true}}}
	if c := (Polynomial{}).Cost(&b); c.Prefill != 0 {
		t.Fatalf("prefill with nothing new = %v, want 0", c.Prefill)
	}
}

func TestDecodeFloorIsOneMs(t *testing.T) {
	// Usage above 1 is clamped to 1: −25.74 + 54.01 + 5.74 = 34.01 ms, never below the 1 ms floor.
	b := Batch{Seqs: []Seq{{New: 1, Cached: 10, Samples: true}}, ActiveKVTokens: 5000, TotalKVTokens: 1000}
	if c := (Polynomial{}).Cost(&b); !near(c.Decode, ms(34.01)) {
		t.Fatalf("decode at usage>1 = %v, want 34.01ms", c.Decode)
	}
	f := Fixed{PrefillMs: 0, DecodeMs: 0.2}
	if c := f.Cost(&b); c.Decode != time.Millisecond {
		t.Fatalf("fixed decode 0.2ms = %v, want the 1ms floor", c.Decode)
	}
}

func TestFixed(t *testing.T) {
	f := Fixed{PrefillMs: 25, DecodeMs: 5}
	mixed := Batch{Seqs: []Seq{{New: 100, Prefill: true, Samples: true}, {New: 1, Cached: 7, Samples: true}}}
	if c := f.Cost(&mixed); c.Prefill != 25*time.Millisecond || c.Decode != 5*time.Millisecond || c.Total() != 30*time.Millisecond {
		t.Fatalf("mixed = %+v", c)
	}
	chunk := Batch{Seqs: []Seq{{New: 100, Prefill: true}}}
	if c := f.Cost(&chunk); c.Prefill != 25*time.Millisecond || c.Decode != 0 {
		t.Fatalf("chunk without sampling = %+v", c)
	}
}

func TestScaled(t *testing.T) {
	b := Batch{Seqs: []Seq{{New: 100, Prefill: true, Samples: true}}}
	f := Fixed{PrefillMs: 40, DecodeMs: 8}
	for _, tc := range []struct {
		sp, dsp         float64
		prefill, decode time.Duration
	}{
		{2, 1, 20 * time.Millisecond, 4 * time.Millisecond},
		{1, 4, 40 * time.Millisecond, 2 * time.Millisecond},
		{2, 4, 20 * time.Millisecond, time.Millisecond},
		{0, -1, 40 * time.Millisecond, 8 * time.Millisecond}, // <= 0 means unscaled
		{math.Inf(1), 1, 0, 0},
	} {
		c := Scaled{Model: f, Speedup: tc.sp, DecodeSpeedup: tc.dsp}.Cost(&b)
		if c.Prefill != tc.prefill || c.Decode != tc.decode {
			t.Errorf("speedup %v, decode speedup %v: %+v, want %v/%v", tc.sp, tc.dsp, c, tc.prefill, tc.decode)
		}
	}
}

// TestHostOverhead: 16 µs per request of the pass, on the decode part of a pass that samples and on the
// prefill part of one that does not.
func TestHostOverhead(t *testing.T) {
	h := HostOverhead{Model: Fixed{PrefillMs: 10, DecodeMs: 5}, PerRequest: 16 * time.Microsecond}
	mixed := Batch{Seqs: []Seq{{New: 100, Prefill: true}, {New: 1, Cached: 50, Samples: true}, {New: 1, Cached: 70, Samples: true}}}
	if c := h.Cost(&mixed); c.Prefill != 10*time.Millisecond || c.Decode != 5*time.Millisecond+48*time.Microsecond {
		t.Fatalf("mixed pass: %+v", c)
	}
	chunk := Batch{Seqs: []Seq{{New: 100, Prefill: true}, {New: 100, Prefill: true}}}
	if c := h.Cost(&chunk); c.Prefill != 10*time.Millisecond+32*time.Microsecond || c.Decode != 0 {
		t.Fatalf("prefill-only pass: %+v", c)
	}
	if c := (HostOverhead{Model: Fixed{PrefillMs: 10, DecodeMs: 5}}).Cost(&mixed); c != (Fixed{PrefillMs: 10, DecodeMs: 5}).Cost(&mixed) {
		t.Fatalf("zero overhead changes the cost: %+v", c)
	}
}

// TestPartsOfWrappers: a model without parts is one "pass" part; the host term is a part of its own;
// a speed-up scales every part as it scales the pass.
func TestPartsOfWrappers(t *testing.T) {
	b := &Batch{Seqs: []Seq{{New: 10, Prefill: true, Samples: true}, {New: 1, Cached: 9, Samples: true}}}
	var m Model = Fixed{PrefillMs: 10, DecodeMs: 5}
	if got, want := Parts(m, b), []Part{{"pass", 15}}; !slices.Equal(got, want) {
		t.Errorf("fixed: %v, want %v", got, want)
	}
	m = HostOverhead{Model: m, PerRequest: 500 * time.Microsecond}
	if got, want := Parts(m, b), []Part{{"pass", 15}, {"host", 1}}; !slices.Equal(got, want) {
		t.Errorf("host: %v, want %v", got, want)
	}
	m = Scaled{Model: m, Speedup: 2}
	if got, want := Parts(m, b), []Part{{"pass", 7.5}, {"host", 0.5}}; !slices.Equal(got, want) {
		t.Errorf("scaled: %v, want %v", got, want)
	}
}

// TestMsSaturates: a model's time is at most MaxPass and never negative, whatever the arithmetic before
// it (--prefill-ms 1e300 or --speedup-ratio 1e-12 wrapped to negative durations).
func TestMsSaturates(t *testing.T) {
	for _, tc := range []struct {
		ms   float64
		want time.Duration
	}{{1.5, 1500 * time.Microsecond}, {0, 0}, {-3, 0}, {math.NaN(), 0}, {1e300, MaxPass}, {math.Inf(1), MaxPass}} {
		if got := Ms(tc.ms); got != tc.want {
			t.Errorf("Ms(%v) = %v, want %v", tc.ms, got, tc.want)
		}
	}
	slow := Scaled{Model: Fixed{PrefillMs: 3.6e6, DecodeMs: 3.6e6}, Speedup: 1e-6, DecodeSpeedup: 1e-6}
	b := &Batch{Seqs: []Seq{{New: 100, Prefill: true}, {Cached: 10, New: 1, Samples: true}}}
	if c := slow.Cost(b); c.Prefill != MaxPass || c.Decode != MaxPass {
		t.Errorf("an hour a pass slowed 10^6 and 10^12 times: %+v, want MaxPass each", c)
	}
}
