package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/report/html"
	"github.com/mocker-sim/mocker/report/perfetto"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timeline"
	"github.com/mocker-sim/mocker/workload"
)

func newPredictCmd() *cobra.Command {
	cfg := config.Default()
	var configPath string
	var prof profiles
	var threads int
	cmd := &cobra.Command{
		Use:   "predict",
		Short: "Replay a trace or a synthetic workload on a virtual clock and report TTFT, ITL and throughput",
		Long: `predict replays a workload against simulated engines on a virtual clock, in seconds, and prints a
report in the style of 'vllm bench serve'. With no flags it runs a built-in demo: 1,000 synthetic
requests (1,024 prompt and 128 output tokens on average, a quarter of each prompt shared within 8
groups, Poisson arrivals at 8 req/s) on one vLLM worker serving Llama-3.1-8B on an H200, timed by the
op-level model (--timing default) on AIConfigurator's H200 tables built into the binary.

A --config YAML file takes the same keys as the flags; flags given on the command line win.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadSettings(cmd.Flags(), &cfg, configPath); err != nil {
				return err
			}
			if threads < 0 {
				return fmt.Errorf("--threads %d: must not be negative (0: every core)", threads)
			}
			stop, err := prof.start()
			if err != nil {
				return err
			}
			// Interrupted, the run stops and its report files, half written, are removed.
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			return errors.Join(predict(ctx, &cfg, threads, cmd.OutOrStdout(), cmd.ErrOrStderr()), stop())
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "YAML file of settings (keys as the flags)")
	cmd.Flags().IntVar(&threads, "threads", 0, "goroutines that simulate workers at once (0: GOMAXPROCS); the results are the same whatever the number")
	bindFlags(cmd.Flags(), &cfg)
	prof.bind(cmd.Flags())
	return cmd
}

// offlineHeap is the heap an offline run asks huge pages for (hugeHeap): more than a replay of the
// Mooncake conversation trace holds on eight workers; a heap beyond it grows on small pages.
const offlineHeap = 512 << 20

// readyOffline readies the process for the simulations of predict, recommend and sweep-worker: the heap on
// huge pages (hugeHeap), once. Each calls it when its settings have passed, so that a bad flag costs
// no reservation, madvise or forced GC. A variable so that tests can count the calls.
var readyOffline = sync.OnceFunc(func() { hugeHeap(offlineHeap) })

// predict runs cfg's workload with threads goroutines simulating workers (sim.Options.Threads). Once
// ctx is done the run stops at the next request that completes and predict returns ctx's error.
func predict(ctx context.Context, cfg *config.Config, threads int, stdout, stderr io.Writer) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The trace and the page watch the run: the trace records its window, the page buckets its series as
	// they come.
	trace, page := &timeline.Recorder{}, html.NewSeries(0)
	records := &output{"requests-jsonl", cfg.RequestsJSONL, func(res *sim.Result, w io.Writer) error { return res.Collector.WriteRequestsJSONL(w) }}
	outputs := []*output{
		{"report-json", cfg.ReportJSON, func(res *sim.Result, w io.Writer) error { return res.Summary.WriteJSON(w) }},
		records,
		{"scaling-jsonl", cfg.ScalingJSONL, writeScaling},
		{"perfetto", cfg.Perfetto, func(res *sim.Result, w io.Writer) error { return perfetto.Write(w, trace, res.Collector) }},
		{"html", cfg.HTML, func(res *sim.Result, w io.Writer) error {
			return html.WriteRun(w, &html.Run{Subtitle: describePredict(cfg, res.Summary.Timing), Summary: res.Summary,
				Collector: res.Collector, Series: page, End: res.End})
		}},
	}
	if err := checkOutputs(outputs, cfg); err != nil {
		return err
	}
	readyOffline()
	// The lifetime replay of --concurrency-desync-ms auto stops as the run does, once ctx is done.
	lifetime := func(src workload.Source, o sim.Options) (float64, error) {
		o.Finished = func(time.Duration, time.Duration, bool) bool { return ctx.Err() == nil }
		return sim.MeanE2EMs(src, o)
	}
	if ms, err := cfg.ResolveDesync(lifetime); errors.Is(err, sim.ErrStopped) && ctx.Err() != nil {
		return context.Cause(ctx)
	} else if err != nil {
		return err
	} else if ms > 0 {
		fmt.Fprintf(stderr, "concurrency-desync-ms auto: %.1f ms (mean E2E of a lock-step replay of %d requests)\n", ms, cfg.LifetimeRequests())
	}
	src, err := cfg.SourceWarn(func(msg string) { fmt.Fprintln(stderr, "warning:", msg) })
	if err != nil {
		return err
	}
	opts, err := cfg.SimOptions()
	if err != nil {
		return err
	}
	opts.Threads = threads
	finished := opts.Finished
	opts.Finished = func(ttft, e2e time.Duration, first bool) bool {
		return ctx.Err() == nil && (finished == nil || finished(ttft, e2e, first))
	}
	var watch sim.Observers
	if cfg.Perfetto != "" {
		if trace.From, trace.To, err = cfg.PerfettoRange(); err != nil {
			return err
		}
		watch = append(watch, trace)
	}
	if cfg.HTML != "" {
		watch = append(watch, page)
	}
	if len(watch) > 0 {
		opts.Observer = watch
	}
	timing, err := cfg.TimingInfo()
	if err != nil {
		return err
	}
	// Unless the Perfetto trace needs every request's lifetime at the end, the run keeps of an ended request
	// only what the summary needs, and the per-request records go to their file as requests end.
	opts.Compact = cfg.Perfetto == ""
	start := time.Now()
	bar := newProgress(stderr, src.Requests(), start)
	opts.Progress = bar.update
	var res *sim.Result
	var recordsErr error // writing the streamed records
	if opts.Compact && records.path != "" {
		path := records.path
		records.path = "" // written as the run goes
		recordsErr = report.WriteFile(path, func(w io.Writer) error {
			opts.Records = w
			if res, err = sim.Run(src, opts); err != nil {
				return err
			}
			return res.RecordsErr
		})
		if res == nil && err == nil {
			err = recordsErr // the file could not be created, so the run never started
		}
	} else {
		res, err = sim.Run(src, opts)
	}
	bar.finish()
	if errors.Is(err, sim.ErrStopped) && ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		return err
	}
	defer res.Collector.Close()
	wall := time.Since(start)
	res.Summary.Timing = timing

	// The summary comes first: a report file that fails to write late does not lose it.
	if err := res.Summary.WriteTable(stdout, ""); err != nil {
		return err
	}
	if len(res.Scaling) > 0 {
		fmt.Fprintln(stdout, "Workers over time:")
		for i, p := range res.Scaling {
			if i == 24 {
				fmt.Fprintf(stdout, "  ... %d more changes (--scaling-jsonl has them all)\n", len(res.Scaling)-i)
				break
			}
			fmt.Fprintf(stdout, "  %9.1fs  %-8s %d\n", p.At.Seconds(), p.Pool, p.Workers)
		}
	}
	errs := []error{recordsErr}
	for _, o := range outputs {
		if o.path != "" {
			errs = append(errs, report.WriteFile(o.path, func(w io.Writer) error { return o.write(res, w) }))
		}
	}
	// Wall-clock figures vary from run to run, so they go to stderr, never into the report.
	fmt.Fprintf(stderr, "simulated %.1f s in %.2f s of wall time (%.0fx real time), %d passes, peak RSS %s; timing %s\n",
		res.End.Seconds(), wall.Seconds(), res.End.Seconds()/wall.Seconds(), res.Passes, peakRSS(), timing)
	errs = append(errs, res.Collector.Err()) // reading back the samples the HTML page's CDFs are drawn from
	if err := res.Collector.SpillErr(); err != nil {
		fmt.Fprintln(stderr, "warning:", err) // the report is whole; the run's memory was not flat
	}
	errs = append(errs, rejections(res, cfg, stderr))
	return errors.Join(errs...)
}

// describePredict says what a predict run simulated, for the HTML report's heading.
func describePredict(cfg *config.Config, timing report.Timing) string {
	deploy := fmt.Sprintf("%d %s workers", cfg.Workers, cfg.Backend)
	if cfg.PrefillWorkers > 0 {
		deploy = fmt.Sprintf("%d prefill + %d decode %s workers", cfg.PrefillWorkers, cfg.DecodeWorkers, cfg.Backend)
	}
	load := fmt.Sprintf("%d synthetic requests", cfg.NumRequests)
	if cfg.Trace != "" {
		load = "trace " + filepath.Base(cfg.Trace)
	}
	return fmt.Sprintf("%s on %s, TP %d: %s, router %s; %s; timing %s; seed %d",
		cfg.Model, cfg.System, cfg.TP, deploy, cfg.Router, load, timing, cfg.Seed)
}

// rejections warns on stderr of rejected requests, saying how many and why the first was (contextHint);
// a run in which no request completed is an error, saying the same of its rejected and failed requests.
func rejections(res *sim.Result, cfg *config.Config, stderr io.Writer) error {
	s := &res.Summary
	total := s.CompletedRequests + s.RejectedRequests + s.FailedRequests + s.IncompleteRequests
	var whys []string
	if id, requestID, line, reason, ok := res.Collector.FirstRejection(); ok {
		whys = append(whys, fmt.Sprintf("%d of %d requests rejected; the first (%s): %s", s.RejectedRequests, total,
			requestName(id, requestID, line), contextHint(cfg, reason)))
	}
	if s.CompletedRequests > 0 {
		if len(whys) > 0 {
			fmt.Fprintf(stderr, "warning: %s\n", whys[0])
		}
		return nil // failures are in the summary
	}
	if id, requestID, line, reason, ok := res.Collector.FirstFailure(); ok {
		whys = append(whys, fmt.Sprintf("%d of %d requests failed; the first (%s): %s", s.FailedRequests, total,
			requestName(id, requestID, line), reason))
	}
	if len(whys) == 0 {
		return errors.New("no request completed")
	}
	return fmt.Errorf("no request completed: %s", strings.Join(whys, "; "))
}

// requestName names a request in a message: by its trace line, else its request_id, else its index.
func requestName(id int, requestID string, line int) string {
	switch {
	case line > 0:
		return fmt.Sprintf("trace line %d", line)
	case requestID == "":
		return fmt.Sprintf("request %d", id)
	}
	return fmt.Sprintf("request %q", requestID)
}

// contextHint is an engine's reason for rejecting a request, and where the bound came from when it is
// the model's context: with no --max-model-len a user may not know there was one. The engines' admission
// (sched/internal/book/book.go) words that rejection "... exceeds max-model-len N", the only bound it
// names so.
func contextHint(cfg *config.Config, reason string) string {
	if cfg.MaxModelLen == 0 && strings.Contains(reason, " exceeds max-model-len ") {
		return reason + " (the model's max_position_embeddings; --max-model-len sets another)"
	}
	return reason
}

// output is a report file of predict: its flag, its path ("" when not asked for) and what writes it.
type output struct {
	flag, path string
	write      func(*sim.Result, io.Writer) error
}

// checkOutputs makes sure, before a run that may take minutes, that every report file can be
// written: its directory exists and takes a new file, it is not a directory, no two outputs share
// a path, and none overwrites an input. A symbolic link is checked as the file it names; a device
// or a named pipe (/dev/null, /dev/stdout) is written as it is (report.Target), by any number of
// outputs.
func checkOutputs(outputs []*output, cfg *config.Config) error {
	seen := map[string]string{}
	for _, in := range []struct{ flag, path string }{
		{"trace", cfg.Trace}, {"planner-config", cfg.PlannerConfig}, {"model-config", cfg.ModelConfig}, {"profile", cfg.Profile},
	} {
		if in.path == "" {
			continue
		}
		target, _ := report.Target(in.path)
		if abs, err := filepath.Abs(target); err == nil {
			seen[abs] = in.flag
		}
	}
	for _, o := range outputs {
		if o.path == "" {
			continue
		}
		fail := func(err error) error { return fmt.Errorf("--%s %s: %w", o.flag, o.path, err) }
		if o.path == "-" { // a file named "-" is never what was meant
			return fail(errors.New("not a file name: give /dev/stdout for standard output"))
		}
		if fi, err := os.Stat(o.path); err == nil && fi.IsDir() {
			return fail(errors.New("is a directory"))
		} else if err := report.LinkError(o.path); err != nil {
			return fail(err) // a loop of links
		}
		target, inPlace := report.Target(o.path)
		if inPlace {
			continue
		}
		abs, err := filepath.Abs(target)
		if err != nil {
			return fail(err)
		}
		if other, ok := seen[abs]; ok {
			return fail(fmt.Errorf("is also --%s", other))
		}
		seen[abs] = o.flag
		dir := filepath.Dir(target)
		if fi, err := os.Stat(dir); err != nil {
			return fail(fmt.Errorf("directory %s: %w", dir, unwrapPath(err)))
		} else if !fi.IsDir() {
			return fail(fmt.Errorf("%s is not a directory", dir))
		}
		// The report is written beside its path and renamed over it (report.WriteFile): try that.
		f, err := os.CreateTemp(dir, "."+filepath.Base(o.path)+".check-*")
		if err != nil {
			return fail(fmt.Errorf("cannot create a file in %s: %w", dir, unwrapPath(err)))
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}

// unwrapPath drops an *os.PathError's operation and path, which the caller names better.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeScaling writes one JSON object per worker-count change and per planner decision, in time order.
func writeScaling(res *sim.Result, w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, p := range res.Scaling {
		if err := enc.Encode(struct {
			TimeS   float64 `json:"time_s"`
			Pool    string  `json:"pool"`
			Workers int     `json:"workers"`
		}{p.At.Seconds(), p.Pool, p.Workers}); err != nil {
			return err
		}
	}
	for _, d := range res.Decisions {
		if err := enc.Encode(struct {
			Decision string `json:"decision"`
		}{d}); err != nil {
			return err
		}
	}
	return nil
}

// progress shows a bar on a terminal once a run has taken longer than a moment.
type progress struct {
	w     io.Writer
	total int
	start time.Time
	tty   bool
	bar   *progressbar.ProgressBar
	n     int
}

func newProgress(w io.Writer, total int, start time.Time) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, total: total, start: start, tty: ok && isatty.IsTerminal(f.Fd())}
}

func (p *progress) update(ended int) {
	if !p.tty {
		return
	}
	if p.bar == nil {
		if ended%64 != 0 || time.Since(p.start) < time.Second {
			return
		}
		p.bar = progressbar.NewOptions(p.total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription("requests"),
			progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	p.bar.Add(ended - p.n)
	p.n = ended
}

func (p *progress) finish() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
