package recommend

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/report"
)

// Target is one latency objective: the Percentile-th percentile of Metric at most Ms milliseconds, over
// completed requests (report.Collector.Percentile's nearest rank, so p90 is the report's p90).
type Target struct {
	Metric     report.Metric
	Percentile int
	Ms         float64
}

// ParseTarget parses METRIC:pN:MS, as in ttft:p95:500 (metric ttft, itl or e2e; N in 1..100).
func ParseTarget(s string) (Target, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Target{}, fmt.Errorf("sla %q: want METRIC:pN:MS, as in ttft:p95:500", s)
	}
	t := Target{Metric: report.Metric(strings.ToLower(parts[0]))}
	if t.Metric != report.TTFT && t.Metric != report.ITL && t.Metric != report.E2E {
		return Target{}, fmt.Errorf("sla %q: metric %q: want ttft, itl or e2e", s, parts[0])
	}
	p, err := strconv.Atoi(strings.TrimPrefix(strings.ToLower(parts[1]), "p"))
	if err != nil || !strings.HasPrefix(strings.ToLower(parts[1]), "p") || p < 1 || p > 100 {
		return Target{}, fmt.Errorf("sla %q: percentile %q: want p1 to p100", s, parts[1])
	}
	t.Percentile = p
	if t.Ms, err = strconv.ParseFloat(parts[2], 64); err != nil || !(t.Ms > 0) || math.IsInf(t.Ms, 0) {
		return Target{}, fmt.Errorf("sla %q: milliseconds %q: want a finite number > 0", s, parts[2])
	}
	return t, nil
}

// String is the target as ParseTarget reads it.
func (t Target) String() string {
	return fmt.Sprintf("%s:p%d:%s", t.Metric, t.Percentile, strconv.FormatFloat(t.Ms, 'g', -1, 64))
}

// Label names the figure: "p90 TTFT".
func (t Target) Label() string {
	return fmt.Sprintf("p%d %s", t.Percentile, strings.ToUpper(string(t.Metric)))
}

// Check is one target checked on a run.
type Check struct {
	Target string  `json:"target"` // as ParseTarget reads it
	Ms     float64 `json:"ms"`     // the run's figure; for a run stopped early, a lower bound of it
	Met    bool    `json:"met"`
}

// measurable refuses a TTFT or ITL target that no request of the workload can have a sample of, as
// prompts ps (for a header of header tokens) say: it would pass, or fail, whatever the deployment.
func measurable(targets []Target, ps []prompt, header int) error {
	most := 0 // the most tokens a request shows
	for _, p := range ps {
		most = max(most, p.shown)
	}
	for _, t := range targets {
		need, a := 1, "a TTFT"
		switch t.Metric {
		case report.ITL:
			need, a = 2, "an ITL"
		case report.E2E:
			continue
		}
		if most >= need {
			continue
		}
		what := "an output token"
		if need == 2 {
			what = "2 output tokens or more"
		}
		if header > 0 {
			what = fmt.Sprintf("%s beyond the model's %d-token reply header, which a client does not see", what, header)
		}
		return fmt.Errorf("sla %s: no request has %s, so none has %s", t, what, a)
	}
	return nil
}

// stopRule ends a run as soon as a TTFT or E2E target is certainly missed.
//
// The p-th percentile of n samples is the sample of rank r(n) = round((n−1)·p/100) in ascending order
// (report's nearest rank), so it exceeds T exactly when at least n − r(n) samples exceed T. n − r(n)
// never decreases as n grows (r grows by at most one per sample), and a run has at most total samples
// of a metric (one per request). A completed request keeps its TTFT and E2E, so once k completed
// requests exceed T with k ≥ total − r(total) ≥ n − r(n), the final percentile exceeds T however the
// run goes on: stopping cannot reject a candidate that would pass. ITL has no such rule: its samples are
// per token and a request's count is not known until it ends.
type stopRule struct {
	targets []Target
	need    []int // late requests that settle each target (0: the target takes no part)
	late    []int
	stopped int // index of the target that stopped the run, -1 while none
}

func newStopRule(targets []Target, total int) *stopRule {
	s := &stopRule{targets: targets, need: make([]int, len(targets)), late: make([]int, len(targets)), stopped: -1}
	for i, t := range targets {
		if t.Metric != report.ITL && total > 0 {
			s.need[i] = total - ((total-1)*t.Percentile+50)/100
		}
	}
	return s
}

// finished is sim.Options.Finished.
func (s *stopRule) finished(ttft, e2e time.Duration, first bool) bool {
	for i, t := range s.targets {
		var d time.Duration
		switch {
		case s.need[i] == 0:
			continue
		case t.Metric == report.E2E:
			d = e2e
		case !first:
			continue
		default:
			d = ttft
		}
		if float64(d)/float64(time.Millisecond) > t.Ms {
			s.late[i]++
			if s.late[i] >= s.need[i] {
				s.stopped = i
				return false
			}
		}
	}
	return true
}
