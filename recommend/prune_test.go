package recommend

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/report"
)

// TestStopRuleNeverRejectsAPass feeds random latencies in random order: whenever the rule stops, the
// percentile over every sample (the run had it gone on) is above the target; and whenever that
// percentile is above the target after all samples, the rule has stopped by then.
func TestStopRuleNeverRejectsAPass(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(60)
		p := 1 + rng.IntN(100)
		target := 50.0
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(rng.IntN(100))
		}
		r := newStopRule([]Target{{report.TTFT, p, target}}, n)
		stopped := false
		for _, x := range xs {
			d := time.Duration(x * float64(time.Millisecond))
			if !r.finished(d, d, true) {
				stopped = true
				break
			}
		}
		s := slices.Clone(xs)
		slices.Sort(s)
		final := s[((n-1)*p+50)/100]
		if stopped && final <= target {
			t.Fatalf("trial %d: stopped, but p%d of %v is %v <= %v", trial, p, xs, final, target)
		}
		if !stopped && final > target {
			t.Fatalf("trial %d: p%d of %v is %v > %v and the rule never stopped", trial, p, xs, final, target)
		}
	}
}

// TestEarlyStopAgrees runs each size of a shape with and without the early stop: the verdicts agree.
func TestEarlyStopAgrees(t *testing.T) {
	base := small()
	s := Shape{Backend: "vllm", TP: 1, EP: 1, MaxNumSeqs: 256, MaxNumBatchedTokens: 512, Router: "round-robin"}
	targets := []Target{{report.TTFT, 90, 60}, {report.E2E, 50, 150}}
	stops := 0
	for n := 1; n <= 4; n++ {
		full := evaluate(&base, s, n, 1, targets, false, 1)
		early := evaluate(&base, s, n, 1, targets, true, 2)
		if full.Pass != early.Pass {
			t.Errorf("%d workers: pass %v in full, %v with the early stop (%s)", n, full.Pass, early.Pass, early.Why)
		}
		if early.StoppedEarly {
			stops++
		}
	}
	if stops == 0 {
		t.Error("no run stopped early: the test checks nothing")
	}
}

// TestBoundBelowRuns checks the TTFT and ITL bounds against runs with the op-level timing on a workload with
// shared prefixes, lightly and heavily loaded: every run's percentile is at least the bound.
func TestBoundBelowRuns(t *testing.T) {
	base := small()
	base.Model, base.System, base.Timing = "llama-3.1-8b", "h200_sxm", "default"
	base.InputTokens, base.InputTokensStddev, base.SharedPrefixRatio = 2048, 512, 0.5
	base.MaxNumBatchedTokens = 1024
	ps, err := prompts(&base, base.BlockSizeOrDefault(), 0)
	if err != nil {
		t.Fatal(err)
	}
	shared := 0
	for _, p := range ps {
		if p.minNew < p.tokens {
			shared++
		}
	}
	if shared == 0 {
		t.Fatal("no prompt shares a prefix: the bound's cache side is untested")
	}
	for _, rate := range []float64{1, 50} {
		c := base
		c.RequestRate = rate
		ib, err := itlBound(&c, ps)
		if err != nil {
			t.Fatal(err)
		}
		// The ITL bound holds for every sample: the smallest gap is at least the bound.
		if least := direct(t, c, report.ITL, 0); least < ib.Ms || ib.Ms <= 0 {
			t.Errorf("rate %v: smallest ITL %v ms below its bound %v ms", rate, least, ib.Ms)
		} else {
			t.Logf("rate %v: smallest ITL %.3f ms, bound %.3f ms", rate, least, ib.Ms)
		}
		for _, p := range []int{10, 50, 90} {
			c := base
			c.RequestRate = rate
			b, err := ttftBound(&c, ps, p)
			if err != nil {
				t.Fatal(err)
			}
			got := direct(t, c, report.TTFT, p)
			t.Logf("rate %v p%d: TTFT %.2f ms, bound %.2f ms", rate, p, got, b.Ms)
			if got < b.Ms || b.Ms <= 0 {
				t.Errorf("rate %v: p%d TTFT %v ms below its bound %v ms", rate, p, got, b.Ms)
			}
		}
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{"ttft:p95:500", "ttft:p95:500", ""},
		{"ITL:P50:12.5", "itl:p50:12.5", ""},
		{"e2e:p100:1e4", "e2e:p100:10000", ""},
		{"ttft:95:500", "", `sla "ttft:95:500": percentile "95": want p1 to p100`},
		{"ttft:p0:500", "", `sla "ttft:p0:500": percentile "p0": want p1 to p100`},
		{"tpot:p90:5", "", `sla "tpot:p90:5": metric "tpot": want ttft, itl or e2e`},
		{"ttft:p90:-1", "", `sla "ttft:p90:-1": milliseconds "-1": want a finite number > 0`},
		{"ttft:p90", "", `sla "ttft:p90": want METRIC:pN:MS, as in ttft:p95:500`},
	} {
		got, err := ParseTarget(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("ParseTarget(%q) error %v, want %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || got.String() != tc.want):
			t.Errorf("ParseTarget(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
