package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/nats-io/nats.go"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/recommend"
	"github.com/mocker-sim/mocker/recommend/sweep"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/report/html"
)

// recommendFlags are recommend's own settings: the targets, the objective and the search space.
type recommendFlags struct {
	ttft, itl, e2e float64
	sla            []string
	objective      string
	findMaxRate    bool
	threads        int
	nats           string
	ackWait        time.Duration

	backends, modes, ratios, routers        []string
	tp, ep, prefillTP, decodeTP, seqs, mbts []int
	minWorkers, maxWorkers                  int
}

func newRecommendCmd() *cobra.Command {
	cfg := config.Default()
	var configPath string
	var rf recommendFlags
	cmd := &cobra.Command{
		Use:   "recommend",
		Short: "Find the deployments that meet latency targets on a workload, each simulated in full",
		Long: `recommend simulates every deployment of a search space on the workload predict would replay (the
same flags: a trace or the synthetic workload, the model, the GPU system, every engine setting) and
reports those that meet the latency targets: the fewest GPUs first (--objective tokens-per-gpu: the
most output tokens/s per GPU first; --find-max-rate: the highest arrival rate each deployment
sustains), and the Pareto frontier of output tokens/s per GPU against tokens/s per user. When none
meets them it says which came closest, what each misses by how much, and what bounds the shapes.

  mocker recommend --ttft-p90-ms 500 --itl-p90-ms 30
  mocker recommend --trace trace.jsonl --sla ttft:p95:2000 --sla itl:p90:40 --modes agg,disagg

The space: --backends × --tp-list (× --ep-list, MoE) × --modes (disagg: × --ratios × --prefill-tp-list
× --decode-tp-list) × --max-num-seqs-list × --max-num-batched-tokens-list × --routers, each at every
size from --min-workers to --max-workers workers (both pools together). A list left unset is the
setting's single flag (--backend, --tp ...) when given, else its default; a pool's own setting
(--prefill-KEY, --decode-KEY) applies to that pool of the disaggregated shapes. For one shape, more workers
are taken never to hurt, so the fewest that pass are found by bisection; a run stops as soon as a TTFT or E2E target
is certainly missed; a shape whose TTFT on an idle worker with the best possible prefix cache already
misses the target is not run at all.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadSettings(cmd.Flags(), &cfg, configPath); err != nil {
				return err
			}
			return runRecommend(cmd.Context(), cmd.Flags(), &cfg, &rf, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "YAML file of settings (keys as predict's flags)")
	fs.Float64Var(&rf.ttft, "ttft-p90-ms", 0, "target: p90 time to first token at most this many ms (0: none)")
	fs.Float64Var(&rf.itl, "itl-p90-ms", 0, "target: p90 inter-token latency at most this many ms (0: none)")
	fs.Float64Var(&rf.e2e, "e2e-p90-ms", 0, "target: p90 end-to-end latency at most this many ms (0: none)")
	fs.StringArrayVar(&rf.sla, "sla", nil, "target on any percentile: METRIC:pN:MS with METRIC ttft, itl or e2e, as in ttft:p95:500; repeatable")
	fs.StringVar(&rf.objective, "objective", recommend.FewestGPUs, "rank the deployments that meet the targets by fewest-gpus or tokens-per-gpu (output tokens/s per GPU)")
	fs.BoolVar(&rf.findMaxRate, "find-max-rate", false, "for each deployment, bisect the arrival-rate scale for the highest rate that meets the targets (each size of the worker range is a deployment; default range 1 to 1)")
	fs.IntVar(&rf.threads, "threads", 0, "goroutines in all (0: GOMAXPROCS): up to that many shapes at once, each run's workers on an equal share of the rest; the report is the same whatever the number")
	fs.StringVar(&rf.nats, "nats", "", "run the jobs on mocker sweep-worker processes through a NATS JetStream work queue at this server (same report as a local run)")
	fs.DurationVar(&rf.ackWait, "nats-ack-wait", 30*time.Second, "with --nats: a job a worker holds this long without a sign of life goes to another worker")
	fs.StringSliceVar(&rf.backends, "backends", nil, "space: backends (default: --backend)")
	fs.IntSliceVar(&rf.tp, "tp-list", nil, "space: tensor parallelism of aggregated workers (default: --tp when given, else 1,2,4,8)")
	fs.IntSliceVar(&rf.ep, "ep-list", nil, "space: expert parallelism, MoE models only (default: --ep)")
	fs.StringSliceVar(&rf.modes, "modes", nil, "space: agg, disagg or both (default: agg)")
	fs.StringSliceVar(&rf.ratios, "ratios", []string{"1:1", "1:2", "2:1"}, "space, disagg: prefill:decode worker ratios")
	fs.IntSliceVar(&rf.prefillTP, "prefill-tp-list", nil, "space, disagg: prefill workers' TP (default: --tp-list)")
	fs.IntSliceVar(&rf.decodeTP, "decode-tp-list", nil, "space, disagg: decode workers' TP (default: --tp-list)")
	fs.IntVar(&rf.minWorkers, "min-workers", 1, "space: fewest workers of a deployment, both pools together")
	fs.IntVar(&rf.maxWorkers, "max-workers", 16, "space: most workers of a deployment (default with --workers: --workers)")
	fs.Var(&autoIntList{p: &rf.seqs}, "max-num-seqs-list", "space: max-num-seqs values, each a number or auto (the engine's own default), as in auto,256,512 (default: --max-num-seqs)")
	fs.IntSliceVar(&rf.mbts, "max-num-batched-tokens-list", nil, "space: max-num-batched-tokens values (default: --max-num-batched-tokens)")
	fs.StringSliceVar(&rf.routers, "routers", nil, "space: router policies (default: --router)")
	bindFlags(fs, &cfg)
	fs.Lookup("report-json").Usage = "write every run of the search, its figures and why it passed or failed, as JSON to this file"
	return cmd
}

// space builds the search space from the flags.
func (rf *recommendFlags) space(fs *pflag.FlagSet, cfg *config.Config) (*recommend.Space, error) {
	sp := &recommend.Space{
		Backends: rf.backends, TP: rf.tp, EP: rf.ep, Modes: rf.modes, PrefillTP: rf.prefillTP, DecodeTP: rf.decodeTP,
		MinWorkers: rf.minWorkers, MaxWorkers: rf.maxWorkers, MaxNumSeqs: rf.seqs, MaxNumBatchedTokens: rf.mbts, Routers: rf.routers,
	}
	// A list not given is its single setting's value; both given is a contradiction. A setting is given
	// on the command line or in the --config file.
	given := cfg.GivenKeys()
	isGiven := func(key string) bool { _, ok := given[key]; return ok }
	where := cfg.Where
	for _, l := range []struct {
		list, single string
		set          func()
	}{
		{"backends", "backend", func() { sp.Backends = []string{cfg.Backend} }},
		{"tp-list", "tp", func() { sp.TP = []int{cfg.TP} }},
		{"ep-list", "ep", func() { sp.EP = []int{cfg.EP} }},
		{"max-num-seqs-list", "max-num-seqs", func() { sp.MaxNumSeqs = []int{cfg.MaxNumSeqs} }},
		{"max-num-batched-tokens-list", "max-num-batched-tokens", func() { sp.MaxNumBatchedTokens = []int{cfg.MaxNumBatchedTokens} }},
		{"routers", "router", func() { sp.Routers = []string{cfg.Router} }},
		{"min-workers", "workers", func() { sp.MinWorkers, sp.MaxWorkers = cfg.Workers, cfg.Workers }},
		{"max-workers", "workers", func() {}},
	} {
		switch {
		case fs.Changed(l.list) && isGiven(l.single):
			return nil, fmt.Errorf("--%s and --%s%s: give the list (the space), or the one value", l.list, l.single, where(l.single))
		case !fs.Changed(l.list) && (isGiven(l.single) || l.single != "tp" && l.single != "workers"):
			l.set()
		}
	}
	if len(sp.TP) == 0 {
		sp.TP = []int{1, 2, 4, 8}
	}
	if rf.findMaxRate && !isGiven("workers") && !fs.Changed("min-workers") && !fs.Changed("max-workers") {
		// Each size is its own rate search: one size unless asked for more.
		sp.MinWorkers, sp.MaxWorkers = 1, 1
	}
	if len(sp.Modes) == 0 {
		sp.Modes = []string{"agg"}
	}
	for _, f := range []string{"prefill-workers", "decode-workers", "prefill-tp", "decode-tp"} {
		if isGiven(f) {
			return nil, fmt.Errorf("--%s: recommend sizes the pools itself; use --modes disagg with --ratios, --prefill-tp-list and --decode-tp-list", f)
		}
	}
	// A pool's own setting of a key a list sweeps replaces every swept value in that pool: shapes
	// differing in it alone would run one deployment, each named by a value the pool never ran.
	// Without disaggregated shapes a pool's setting is read by none, which Deployable says (poolsRead).
	for _, l := range []struct{ list, key string }{
		{"ep-list", "ep"}, {"max-num-seqs-list", "max-num-seqs"}, {"max-num-batched-tokens-list", "max-num-batched-tokens"},
	} {
		if !fs.Changed(l.list) || !slices.Contains(sp.Modes, "disagg") {
			continue
		}
		for _, r := range config.Roles {
			if v := cfg.Role(r).Get(l.key); v != "" {
				key := r + "-" + l.key
				return nil, fmt.Errorf("--%s %s%s: cannot be given with --%s, which sweeps it", key, v, where(key), l.list)
			}
		}
	}
	for _, s := range rf.ratios {
		r, err := recommend.ParseRatio(s)
		if err != nil {
			return nil, fmt.Errorf("--ratios: %w", err)
		}
		sp.Ratios = append(sp.Ratios, r)
	}
	return sp, nil
}

// targets collects the latency targets of the flags.
func (rf *recommendFlags) targets() ([]recommend.Target, error) {
	var ts []recommend.Target
	for _, f := range []struct {
		name string
		m    report.Metric
		ms   float64
	}{{"ttft-p90-ms", report.TTFT, rf.ttft}, {"itl-p90-ms", report.ITL, rf.itl}, {"e2e-p90-ms", report.E2E, rf.e2e}} {
		switch {
		case f.ms < 0 || f.ms != f.ms:
			return nil, fmt.Errorf("--%s %v: must be > 0 (0: no target)", f.name, f.ms)
		case f.ms > 0:
			ts = append(ts, recommend.Target{Metric: f.m, Percentile: 90, Ms: f.ms})
		}
	}
	for _, s := range rf.sla {
		t, err := recommend.ParseTarget(s)
		if err != nil {
			return nil, fmt.Errorf("--%w", err)
		}
		ts = append(ts, t)
	}
	if len(ts) == 0 {
		return nil, errors.New("no latency target: give --ttft-p90-ms, --itl-p90-ms, --e2e-p90-ms or --sla METRIC:pN:MS")
	}
	return ts, nil
}

func runRecommend(ctx context.Context, fs *pflag.FlagSet, cfg *config.Config, rf *recommendFlags, stdout, stderr io.Writer) error {
	for _, f := range []string{"requests-jsonl", "scaling-jsonl", "perfetto", "perfetto-window"} {
		if fs.Changed(f) {
			return fmt.Errorf("--%s: a file of one run; run predict on the deployment recommend picks", f)
		}
	}
	targets, err := rf.targets()
	if err != nil {
		return err
	}
	sp, err := rf.space(fs, cfg)
	if err != nil {
		return err
	}
	o := recommend.Options{Targets: targets, Objective: rf.objective, Threads: rf.threads}
	if rf.findMaxRate {
		if fs.Changed("objective") {
			return errors.New("--find-max-rate and --objective: the rate search is its own objective")
		}
		o.Objective = recommend.MaxRate
	}
	if rf.nats != "" && rf.threads == 0 {
		o.Threads = 1 << 16 // every shape's next job on the queue at once: the workers set the pace
	}
	var bar *progressbar.ProgressBar
	if f, ok := stderr.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		o.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("shapes"),
					progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			bar.Set(done)
		}
	}
	if err := holdTrace(cfg, rf.nats); err != nil {
		return err
	}
	// The search is checked before its outputs and its workers: a setting no shape reads or takes (a
	// backend's own, a pool's own, a timing model's own, judged by the shapes that read it) is refused
	// once, by name; a shape a backend cannot run is the search's to list.
	start := time.Now()
	plan, err := recommend.Prepare(cfg, sp, o)
	if err != nil {
		return err
	}
	if err := checkOutputs([]*output{{flag: "report-json", path: cfg.ReportJSON}, {flag: "html", path: cfg.HTML}}, cfg); err != nil {
		return err
	}
	readyOffline()
	var runner func(recommend.Job) (recommend.Candidate, error) // nil: each job runs here
	if rf.nats != "" {
		// Interrupted, the search returns and Close takes its waiting jobs off the queue.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		nc, err := dialNATS(rf.nats, "mocker recommend", jetStreamHint)
		if err != nil {
			return err
		}
		defer nc.Close()
		co, err := sweep.NewCoordinator(ctx, nc, cfg, targets, rf.ackWait)
		if err != nil {
			return fmt.Errorf("--nats %s: %w", rf.nats, err)
		}
		defer co.Close()
		runner = co.Run
	}
	rep, err := plan.Run(runner)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "searched in %.1f s of wall time, peak RSS %s\n", time.Since(start).Seconds(), peakRSS())
	if cfg.ReportJSON != "" {
		if err := report.WriteFile(cfg.ReportJSON, rep.WriteJSON); err != nil {
			return err
		}
	}
	if cfg.HTML != "" {
		f := frontier(rep, targets)
		return report.WriteFile(cfg.HTML, func(w io.Writer) error { return html.WriteFrontier(w, f) })
	}
	return nil
}

// frontier is the page --html draws of a search: every completed run, in the report's ranking, by its
// output tokens/s per GPU and per user, with the region the tightest ITL target allows shaded (a gap of
// at most T ms is at least 1000/T tokens/s per user).
func frontier(rep *recommend.Report, targets []recommend.Target) *html.Frontier {
	f := &html.Frontier{Title: "mocker recommend", Subtitle: "targets " + strings.Join(rep.Targets, ", ") + "; objective " + rep.Objective}
	for _, t := range targets {
		if t.Metric == report.ITL {
			f.MinTokensPerUser = max(f.MinTokensPerUser, 1000/t.Ms)
		}
	}
	for i := range rep.Candidates {
		c := &rep.Candidates[i]
		if c.Figures == nil {
			continue // the run did not complete: nothing to place
		}
		f.Candidates = append(f.Candidates, html.Candidate{Name: c.Deployment(), GPUs: c.GPUs, TokensPerGPU: c.Figures.PerGPU,
			TokensPerUser: c.Figures.PerUser, Pass: c.Pass, Pareto: c.Pareto, Note: c.Why})
	}
	return f
}

// jetStreamHint says what serves a search's work queue.
const jetStreamHint = "; the work queue needs a NATS server with JetStream: nats-server -js"

func newSweepWorkerCmd() *cobra.Command {
	var url string
	var jobs int
	cmd := &cobra.Command{
		Use:   "sweep-worker",
		Short: "Run the jobs of mocker recommend --nats searches, from a NATS JetStream work queue",
		Long: `sweep-worker takes the jobs of recommend searches from the NATS server's work queue, runs each
(a full simulation of one deployment) and publishes its result, until interrupted. A job's trace, model
config and perf database are read at the paths the coordinator gave, made absolute: on another machine
they must be there too (a trace whose SHA-256 differs is refused). A worker that dies holding a job
leaves it to another once --nats-ack-wait (the coordinator's) has passed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobs < 1 {
				return fmt.Errorf("--jobs %d: at least 1", jobs)
			}
			nc, err := dialNATS(url, "mocker sweep-worker", jetStreamHint, nats.MaxReconnects(-1))
			if err != nil {
				return err
			}
			defer nc.Close()
			readyOffline()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return sweep.Serve(ctx, nc, jobs, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&url, "nats", nats.DefaultURL, "NATS server (with JetStream) of the work queue")
	cmd.Flags().IntVar(&jobs, "jobs", runtime.GOMAXPROCS(0), "jobs run at once")
	return cmd
}
