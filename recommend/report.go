package recommend

// Report is what a search found: a plain value a renderer takes as it is (WriteTable, WriteJSON).
type Report struct {
	Objective string   `json:"objective"`
	Targets   []string `json:"targets"` // as ParseTarget reads them
	// Candidates are every run, ranked: those that pass first, best first by the objective; then those
	// that fail, closest first (by the largest ratio of a figure to its target).
	Candidates []Candidate   `json:"candidates"`
	Shapes     []ShapeResult `json:"shapes"`
	Refused    []string      `json:"refused,omitempty"` // shapes of the space left out, and why

	Simulated    int `json:"simulated"`     // runs
	Skipped      int `json:"skipped"`       // deployments never run: bisection and bounds
	StoppedEarly int `json:"stopped_early"` // runs ended once a target was certainly missed
	BoundPruned  int `json:"bound_pruned"`  // shapes whose TTFT or ITL bound exceeds its target: none of their sizes ran
}

// Candidate is one simulated deployment.
type Candidate struct {
	Shape          Shape   `json:"shape"`
	Workers        int     `json:"workers,omitempty"` // aggregated
	PrefillWorkers int     `json:"prefill_workers,omitempty"`
	DecodeWorkers  int     `json:"decode_workers,omitempty"`
	GPUs           int     `json:"gpus"`
	RateScale      float64 `json:"arrival_rate_scale"` // the workload's arrival rate times this

	Pass         bool     `json:"pass"`
	Why          string   `json:"why,omitempty"` // why it failed
	StoppedEarly bool     `json:"stopped_early,omitempty"`
	Error        string   `json:"error,omitempty"` // the run could not complete (e.g. the model does not fit)
	Checks       []Check  `json:"checks,omitempty"`
	Figures      *Figures `json:"figures,omitempty"` // nil when the run did not complete
	Pareto       bool     `json:"pareto,omitempty"`
}

// Figures are a completed run's results.
type Figures struct {
	Completed         int     `json:"completed_requests"`
	Rejected          int     `json:"rejected_requests"`
	Preemptions       int     `json:"preemptions"`
	RequestThroughput float64 `json:"request_throughput"`
	OutputTokensPerS  float64 `json:"output_token_throughput"`
	PerGPU            float64 `json:"output_tokens_per_s_per_gpu"`
	PerUser           float64 `json:"output_tokens_per_s_per_user"` // 1000 / mean TPOT (ms)
	TTFT              Dist    `json:"ttft_ms"`
	ITL               Dist    `json:"itl_ms"`
	E2E               Dist    `json:"e2e_ms"`
}

// Dist summarises a latency distribution, in milliseconds.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// ShapeResult is what the search of one shape found.
type ShapeResult struct {
	Shape      Shape         `json:"shape"`
	Scales     int           `json:"sizes"` // deployment sizes in the worker range
	Simulated  int           `json:"simulated"`
	Skipped    int           `json:"skipped"`
	Bounds     []TargetBound `json:"bounds,omitempty"`     // per TTFT or ITL target
	Infeasible string        `json:"infeasible,omitempty"` // a bound rules out every size
	Rates      []RateBracket `json:"max_rate,omitempty"`
}

// TargetBound is a shape's lower bound on a TTFT or ITL target's figure.
type TargetBound struct {
	Target string `json:"target"`
	Bound
}

// RateBracket brackets the highest arrival-rate scale a deployment sustains: it passes at Pass and
// fails at Fail (Pass 0: it fails even at 1/1024 of the rate; Fail 0: it passes even at 1024 times).
type RateBracket struct {
	Scale int     `json:"scale"` // workers, or disaggregated ratio groups
	Pass  float64 `json:"pass"`
	Fail  float64 `json:"fail"`
}
