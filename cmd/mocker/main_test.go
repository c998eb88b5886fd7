package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mocker-sim/mocker/config"
)

// TestMain lets a test run the real binary: with MOCKER_RUN_MAIN set, the test executable is mocker.
func TestMain(m *testing.M) {
	if os.Getenv("MOCKER_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mocker runs the command in-process and returns stdout, stderr and the error.
func mocker(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

func sharedData(t *testing.T, parts ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{"..", "..", "..", "shared", "data"}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared data not available (%v): skipping", err)
	}
	return p
}

func readReport(t *testing.T, path string) map[string]float64 {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]any
	if err := json.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	m := map[string]float64{}
	for k, v := range all {
		if f, ok := v.(float64); ok {
			m[k] = f
		}
	}
	return m
}

// estimateJSON reads estimate's output: its numbers, and its timing_model.
func estimateJSON(t *testing.T, out string) (map[string]float64, string) {
	t.Helper()
	var all map[string]any
	if err := json.Unmarshal([]byte(out), &all); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	m := map[string]float64{}
	for k, v := range all {
		if f, ok := v.(float64); ok {
			m[k] = f
		}
	}
	model, _ := all["timing_model"].(string)
	return m, model
}

// readTiming returns the timing keys of a report file.
func readTiming(t *testing.T, path string) (model, source, version string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Model   string `json:"timing_model"`
		Source  string `json:"timing_source"`
		Version string `json:"timing_version"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r.Model, r.Source, r.Version
}

// TestPredictDefaultTimingOnCleanMachine: with no --perf-db, no $MOCKER_PERF_DB and no python3 (so no
// AIConfigurator package), predict prices passes with the op-level model on the embedded tables,
// and says so in the report and on stderr.
func TestPredictDefaultTimingOnCleanMachine(t *testing.T) {
	t.Setenv("MOCKER_PERF_DB", "")
	t.Setenv("PATH", t.TempDir())
	for _, backend := range []string{"vllm", "sglang"} {
		path := filepath.Join(t.TempDir(), "report.json")
		_, stderr, err := mocker(t, "predict", "--num-requests", "50", "--backend", backend, "--report-json", path)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"vllm": "vllm 0.24.0", "sglang": "sglang 0.5.14"}[backend]
		model, source, version := readTiming(t, path)
		if model != "default" || source != "embedded" || version != want {
			t.Errorf("%s: report timing %q, %q, %q; want default, embedded, %s", backend, model, source, version, want)
		}
		if line := "; timing default (embedded, " + want + ")\n"; !strings.Contains(stderr, line) {
			t.Errorf("%s: stderr lacks %q:\n%s", backend, line, stderr)
		}
	}
	// The profile stays, opt-in, and is named as such.
	path := filepath.Join(t.TempDir(), "report.json")
	if _, _, err := mocker(t, "predict", "--num-requests", "50", "--timing", "profile", "--report-json", path); err != nil {
		t.Fatal(err)
	}
	if model, source, version := readTiming(t, path); model != "profile" || source != "h200-llama-3.1-8b-bf16" || version != "" {
		t.Errorf("--timing profile: report timing %q, %q, %q", model, source, version)
	}
}

// TestPredictDefaultTimingMissingData: a system the embedded tables lack is an error that says what
// is missing and how to get it.
func TestPredictDefaultTimingMissingData(t *testing.T) {
	t.Setenv("MOCKER_PERF_DB", "")
	t.Setenv("PATH", t.TempDir())
	_, _, err := mocker(t, "predict", "--num-requests", "10", "--system", "b200_sxm")
	if err == nil {
		t.Fatal("predict on b200_sxm with the embedded tables: no error")
	}
	for _, want := range []string{`no data for system "b200_sxm"`, "--perf-db", "MOCKER_PERF_DB", "aiconfigurator Python package", "--timing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestPredictDemo(t *testing.T) {
	out, stderr, err := mocker(t, "predict")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Successful requests:                     1000") || !strings.Contains(stderr, "real time") {
		t.Fatalf("demo output:\n%s\n%s", out, stderr)
	}
}

func TestReportIsByteIdenticalForASeed(t *testing.T) {
	dir := t.TempDir()
	var reports [3][]byte
	for i, seed := range []string{"5", "5", "6"} {
		path := filepath.Join(dir, "r"+string(rune('a'+i))+".json")
		if _, _, err := mocker(t, "predict", "--num-requests", "300", "--turns-per-session", "2", "--workers", "2",
			"--seed", seed, "--report-json", path); err != nil {
			t.Fatal(err)
		}
		reports[i], _ = os.ReadFile(path)
	}
	if !bytes.Equal(reports[0], reports[1]) {
		t.Fatal("same seed, different --report-json")
	}
	if bytes.Equal(reports[0], reports[2]) {
		t.Fatal("different seeds, same --report-json")
	}
	for _, key := range []string{"completed_requests", "rejected_requests", "duration_ms", "request_throughput",
		"input_token_throughput", "output_token_throughput", "prefix_cache_reused_ratio", "preemptions",
		"mean_ttft_ms", "p99_itl_ms", "std_e2e_ms", "p75_ttst_ms", "max_tpot_ms"} {
		if !bytes.Contains(reports[0], []byte(`"`+key+`"`)) {
			t.Errorf("report lacks %q", key)
		}
	}
}

// TestMooncakeFirst20 replays Dynamo's 20-request fixture on every engine shape.
func TestMooncakeFirst20(t *testing.T) {
	trace := sharedData(t, "mooncake", "mooncake_trace_first20.jsonl")
	for _, args := range [][]string{
		{}, {"--backend", "sglang"}, {"--backend", "sglang", "--page-size", "16", "--sglang-schedule-policy", "lpm"},
		{"--backend", "trtllm"}, {"--dp-size", "2"}, {"--backend", "sglang", "--dp-size", "2"},
		{"--spec-num-tokens", "2"},
	} {
		path := filepath.Join(t.TempDir(), "r.json")
		if _, _, err := mocker(t, append([]string{"predict", "--trace", trace, "--report-json", path, "--check-invariants"}, args...)...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if r := readReport(t, path); r["completed_requests"] != 20 || r["rejected_requests"] != 0 {
			t.Fatalf("%v: completed %v rejected %v", args, r["completed_requests"], r["rejected_requests"])
		}
	}
}

// TestConversationTraceReuse: with a pool that never evicts, the reused fraction of prompt tokens
// approaches the trace's token-weighted theoretical maximum, 0.3736 (shared/data/README.md).
func TestConversationTraceReuse(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 12,031 requests")
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if _, _, err := mocker(t, "predict", "--trace", sharedData(t, "mooncake", "conversation_trace.jsonl"),
		"--block-size", "64", "--num-gpu-blocks", "4000000", "--report-json", path); err != nil {
		t.Fatal(err)
	}
	r := readReport(t, path)
	if got := r["prefix_cache_reused_ratio"]; got < 0.35 || got > 0.3736 || r["completed_requests"] != 12031 || r["preemptions"] != 0 {
		t.Fatalf("reuse %v, completed %v, preemptions %v", got, r["completed_requests"], r["preemptions"])
	}
}

func TestBadTraceFailsWithFileAndLine(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(trace, []byte("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2}\n{\"timestamp\": 1, \"input_length\": -5, \"output_length\": 2}\n"), 0o644)
	report := filepath.Join(dir, "r.json")
	_, _, err := mocker(t, "predict", "--trace", trace, "--report-json", report)
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl") || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "input_length") {
		t.Fatalf("error %v: want the file, line 2 and the field", err)
	}
	if _, err := os.Stat(report); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a report was written for a failed run")
	}
}

// TestExitStatus runs the binary itself: a failure prints "mocker: ..." and exits non-zero.
func TestExitStatus(t *testing.T) {
	cmd := exec.Command(os.Args[0], "predict", "--block-size", "-1")
	cmd.Env = append(os.Environ(), "MOCKER_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "mocker: block-size -1") {
		t.Fatalf("exit %v, output %q", err, out)
	}
}

func TestInvalidSettingsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--block-size", "-1"}, "block-size"},
		{[]string{"--num-gpu-blocks", "-4"}, "num-gpu-blocks"},
		{[]string{"--max-num-seqs", "-1"}, "max-num-seqs"},
		{[]string{"--workers", "0"}, "workers"},
		{[]string{"--timing", "roofline"}, "timing"},
		{[]string{"--preemption-mode", "random"}, "preemption-mode"},
		{[]string{"--input-tokens", "0"}, "input-tokens"},
		{[]string{"--arrival", "weibull"}, "arrival"},
		{[]string{"--speedup-ratio", "0"}, "speedup-ratio"},
		// Settings each within its bound whose passes add up past a century stop the run with an error
		// (the clock wrapped to negative times and the report panicked).
		{[]string{"--model", "llama-3.1-8b", "--timing", "fixed", "--prefill-ms", "10", "--decode-ms", "3600000", "--speedup-ratio", "0.001", "--num-requests", "1", "--output-tokens", "3000"},
			"simulated time passed a century (100 years, after 876 passes, 1 requests in flight)"},
		{[]string{"--tp", "8", "--ep", "3"}, "ep 3: must divide tp 8"},
		{[]string{"--model", "llama-3.1-8b", "--tp", "2", "--ep", "2"}, "ep 2: shards routed experts, and model llama-3.1-8b has none"},
		{[]string{"--model", "qwen3-30b-a3b", "--backend", "vllm", "--tp", "8", "--ep", "4"}, "ep 4: vLLM shards the experts over all the GPUs or none (--enable-expert-parallel): ep 1 or 8 (tp 8)"},
		{[]string{"--block-size", "x"}, "block-size"},
		{[]string{"--num-gpu-blocks", "many"}, `invalid argument "many" for "--num-gpu-blocks" flag: want an integer or auto`},
		{[]string{"--concurrency-desync-ms", "nan"}, `invalid argument "nan" for "--concurrency-desync-ms" flag: want a number or auto`},
		{[]string{"--concurrency-desync-ms", "auto"}, "concurrency-desync-ms auto: spreads the clients of --concurrency, which is 0"},
	} {
		_, _, err := mocker(t, append([]string{"predict"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to name %s", tc.args, err, tc.want)
		}
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	good := write("good.yaml", "num-requests: 40\nworkers: 2\nenable-prefix-caching: false\nseed: 3\nspec-num-tokens: 2\nspec-accept-rates: [1, 1]\n")
	out, _, err := mocker(t, "predict", "--config", good, "--num-requests", "30", "--spec-accept-rates", "0,0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Successful requests:                     30", "Prefix cache reused ratio:               0.00",
		"Mean accepted length (spec decode):      1.00"} {
		if !strings.Contains(out, want) {
			t.Fatalf("flags must override the file, the file the defaults: no %q in\n%s", want, out)
		}
	}
	out, _, err = mocker(t, "predict", "--config", good, "--num-requests", "30")
	if err != nil || !strings.Contains(out, "Mean accepted length (spec decode):      2.98") { // 3, but for bursts capped at a request's end
		t.Fatalf("list from the file not applied (%v):\n%s", err, out)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"unknown.yaml", "num-requests: 10\nblok-size: 4\n", `line 2: unknown key "blok-size"`},
		{"type.yaml", "seed: 1\nblock-size: large\n", "line 2: block-size: want an integer"},
		{"auto.yaml", "num-gpu-blocks: lots\n", `line 1: num-gpu-blocks: want an integer or auto, got "lots"`},
		{"noauto.yaml", "block-size: auto\n", `line 1: block-size: want an integer, got "auto"`},
		{"nan.yaml", "concurrency-desync-ms: .nan\n", `line 1: concurrency-desync-ms: want a number or auto, got ".nan"`},
		{"twice.yaml", "seed: 1\nseed: 2\n", `line 2: key "seed" given twice`},
		{"bad.yaml", "block-size: -2\n", "block-size -2: must be at least 1"},
		{"list.yaml", "- 1\n", "want a mapping"},
	} {
		_, _, err := mocker(t, "predict", "--config", write(tc.name, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestAutoValues: "auto" on the command line and in a file; --concurrency-desync-ms auto replays the
// workload in lock step first and says what it chose.
func TestAutoValues(t *testing.T) {
	p := filepath.Join(t.TempDir(), "auto.yaml")
	os.WriteFile(p, []byte("num-gpu-blocks: auto\nconcurrency: 4\nconcurrency-desync-ms: auto\nnum-requests: 40\nrequest-rate: .inf\n"), 0o644)
	for _, args := range [][]string{
		{"predict", "--config", p},
		{"predict", "--num-gpu-blocks", "auto", "--concurrency", "4", "--concurrency-desync-ms", "auto", "--num-requests", "40", "--request-rate", "inf"},
	} {
		out, errs, err := mocker(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(errs, "concurrency-desync-ms auto: ") || !strings.Contains(errs, "lock-step replay of 8 requests") {
			t.Errorf("%v: stderr does not report the desync chosen:\n%s", args, errs)
		}
		if !strings.Contains(out, "Successful requests:                     40") {
			t.Errorf("%v: report\n%s", args, out)
		}
	}
}

// TestConcurrencyDrifts: --concurrency alone spreads its clients (the default is auto, and predict says
// what it chose); --concurrency-desync-ms 0 keeps them in lock step, with nothing to resolve.
func TestConcurrencyDrifts(t *testing.T) {
	plain := []string{"predict", "--concurrency", "4", "--num-requests", "40"}
	_, errs, err := mocker(t, plain...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errs, "concurrency-desync-ms auto: ") {
		t.Errorf("--concurrency alone: stderr does not report a desync:\n%s", errs)
	}
	_, errs, err = mocker(t, append(plain, "--concurrency-desync-ms", "0")...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(errs, "concurrency-desync-ms") {
		t.Errorf("--concurrency-desync-ms 0: stderr reports a desync:\n%s", errs)
	}
	// A deployment that cannot run is refused for what it is, not as a failed desync.
	if _, _, err := mocker(t, "predict", "--model", "llama-3.1-70b", "--concurrency", "4"); err == nil || !strings.HasPrefix(err.Error(), "num-gpu-blocks auto (llama-3.1-70b on h200_sxm, tp 1): hardware: model does not fit") {
		t.Errorf("70B on one GPU with --concurrency: %v", err)
	}
}

// TestGenaiPerfExample: the documented genai-perf replay loads and runs, its prompts reused from the pool.
func TestGenaiPerfExample(t *testing.T) {
	out, errs, err := mocker(t, "predict", "--config", filepath.Join("..", "..", "docs", "examples", "genai-perf.yaml"), "--concurrency", "8", "--num-requests", "200")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errs, "concurrency-desync-ms auto: ") || !strings.Contains(out, "Successful requests:                     200") {
		t.Fatalf("stderr:\n%s\nreport:\n%s", errs, out)
	}
	// 200 requests over 100 prompts of 2,000 tokens: the second pass over the pool is cached but for each
	// prompt's last block.
	if !strings.Contains(out, "Prefix cache reused ratio:               0.50") {
		t.Errorf("reuse of a 100-prompt pool over 200 requests:\n%s", out)
	}
}

func TestNoFlagNegates(t *testing.T) {
	out, _, err := mocker(t, "predict", "--num-requests", "50", "--no-enable-prefix-caching")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Prefix cache reused ratio:               0.00") {
		t.Fatalf("--no-enable-prefix-caching did not disable caching:\n%s", out)
	}
}

// TestFlagsMatchYAMLKeys: every setting is reachable both ways under one name, as a flag of predict or
// of serve, and every flag of either is a setting.
func TestFlagsMatchYAMLKeys(t *testing.T) {
	cfg := config.Default()
	cmds := []*cobra.Command{newPredictCmd(), newServeCmd()}
	keys := map[string]bool{}
	typ := reflect.TypeOf(cfg)
	for i := range typ.NumField() {
		if !typ.Field(i).IsExported() {
			continue
		}
		key := typ.Field(i).Tag.Get("yaml")
		if typ.Field(i).Type == reflect.TypeFor[config.Role]() {
			// A pool's section: its keys are flags prefixed with its name.
			for _, k := range config.RoleKeys() {
				keys[key+"-"+k] = true
				for _, cmd := range cmds {
					if cmd.Flags().Lookup(key+"-"+k) == nil {
						t.Errorf("%s: YAML key %s.%s has no flag", cmd.Name(), key, k)
					}
				}
			}
			continue
		}
		keys[key] = true
		if cmds[0].Flags().Lookup(key) == nil && cmds[1].Flags().Lookup(key) == nil {
			t.Errorf("YAML key %q has no flag", key)
		}
	}
	// --cpuprofile and --memprofile are hidden diagnostics of one run, not settings; --threads changes
	// how fast a run goes, never what it reports.
	for _, name := range []string{"config", "help", "cpuprofile", "memprofile", "threads"} {
		keys[name] = true
	}
	for _, cmd := range cmds {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !keys[strings.TrimPrefix(f.Name, "no-")] {
				t.Errorf("%s: flag --%s has no YAML key", cmd.Name(), f.Name)
			}
		})
	}
}

// TestBackendOwnFlagsMatchHelp: a flag whose help begins with backends ("sglang: ...", "vllm, trtllm:
// ...") is one config refuses on the others, for exactly those backends, and no other flag is.
func TestBackendOwnFlagsMatchHelp(t *testing.T) {
	backends := []string{"vllm", "sglang", "trtllm"}
	newPredictCmd().Flags().VisitAll(func(f *pflag.Flag) {
		var want []string
		if head, _, ok := strings.Cut(f.Usage, ": "); ok {
			for _, b := range strings.Split(head, ", ") {
				if !slices.Contains(backends, b) {
					want = nil
					break
				}
				want = append(want, b)
			}
		}
		if got := config.BackendOwn(f.Name); !slices.Equal(got, want) {
			t.Errorf("--%s: config reads it on %v, its help on %v", f.Name, got, want)
		}
	})
}

// TestEstimate prices passes with the reference's formulas: prefill of 1,000 new tokens =
// 4.209989e-07·1000² + 1.518344e-02·1000 + 16.50142 ms; the decode part at KV usage 1000/16000.
func TestEstimate(t *testing.T) {
	out, _, err := mocker(t, "estimate", "--timing", "polynomial", "--num-gpu-blocks", "1000", "--block-size", "16", "--prefill-tokens", "1000")
	if err != nil {
		t.Fatal(err)
	}
	got, model := estimateJSON(t, out)
	if model != "polynomial" {
		t.Errorf("timing_model %q, want polynomial", model)
	}
	x := 1000.0 / 16000
	want := map[string]float64{
		"prefill_ms": 4.209989e-07*1e6 + 1.518344e-02*1000 + 16.50142,
		"decode_ms":  -25.74*x*x + 54.01*x + 5.74,
	}
	want["pass_ms"] = want["prefill_ms"] + want["decode_ms"]
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-5 {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	// Host overhead: 16 µs for each of the 4 requests, on the decode part.
	out, _, err = mocker(t, "estimate", "--timing", "fixed", "--prefill-ms", "10", "--decode-ms", "5", "--decode-requests", "4",
		"--decode-context", "100", "--host-overhead-us", "16")
	if err != nil || strings.TrimSpace(out) != `{"pass_ms":5.064,"prefill_ms":0,"decode_ms":5.064,"timing_model":"fixed"}` {
		t.Errorf("host overhead: %q, %v", out, err)
	}
	// --breakdown: a model without an itemization is one "pass" part, and the host cost its own.
	out, _, err = mocker(t, "estimate", "--timing", "fixed", "--prefill-ms", "10", "--decode-ms", "5", "--decode-requests", "4",
		"--decode-context", "100", "--host-overhead-us", "16", "--breakdown")
	if want := `{"pass_ms":5.064,"prefill_ms":0,"decode_ms":5.064,"timing_model":"fixed","ops":[{"op":"pass","ms":5},{"op":"host","ms":0.064}]}`; err != nil || strings.TrimSpace(out) != want {
		t.Errorf("breakdown: %q, %v; want %s", out, err, want)
	}
	if _, _, err := mocker(t, "predict", "--host-overhead-us", "-2"); err == nil || !strings.Contains(err.Error(), "host-overhead-us -2") {
		t.Errorf("negative host overhead: error %v", err)
	}
	if _, _, err := mocker(t, "estimate", "--decode-requests", "4"); err == nil || !strings.Contains(err.Error(), "decode-context") {
		t.Errorf("decodes without a context: error %v", err)
	}
	if _, _, err := mocker(t, "estimate", "--model", "llama-3.1-70b", "--prefill-tokens", "10"); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("70B on one GPU: error %v", err)
	}
	// The flags that change the pass are in the help: attention data parallelism prices the MoE layers.
	out, _, err = mocker(t, "estimate", "--help")
	for _, want := range []string{"--dp-size int", "--dp-attention[=true|false]", "stands for every rank's"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("estimate --help: no %q (%v)", want, err)
		}
	}
}

// TestKVRouterBeatsRoundRobin: on the Mooncake conversation trace with 8 workers, routing by KV-cache
// overlap reuses more of the prompts and answers sooner than round robin.
func TestKVRouterBeatsRoundRobin(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 12,031 requests twice")
	}
	trace := sharedData(t, "mooncake", "conversation_trace.jsonl")
	reports := map[string]map[string]float64{}
	for _, router := range []string{"round-robin", "kv"} {
		path := filepath.Join(t.TempDir(), router+".json")
		if _, _, err := mocker(t, "predict", "--trace", trace, "--workers", "8", "--router", router, "--timing", "polynomial",
			"--block-size", "64", "--num-gpu-blocks", "16384", "--report-json", path); err != nil {
			t.Fatal(err)
		}
		reports[router] = readReport(t, path)
	}
	rr, kv := reports["round-robin"], reports["kv"]
	t.Logf("reuse %.3f → %.3f, mean TTFT %.1f → %.1f ms", rr["prefix_cache_reused_ratio"], kv["prefix_cache_reused_ratio"], rr["mean_ttft_ms"], kv["mean_ttft_ms"])
	if kv["prefix_cache_reused_ratio"] <= rr["prefix_cache_reused_ratio"] || kv["mean_ttft_ms"] >= rr["mean_ttft_ms"] || kv["completed_requests"] != 12031 {
		t.Fatalf("kv router: reuse %v, TTFT %v; round robin: %v, %v", kv["prefix_cache_reused_ratio"], kv["mean_ttft_ms"], rr["prefix_cache_reused_ratio"], rr["mean_ttft_ms"])
	}
}

func TestDisaggregatedAndPlannerCLI(t *testing.T) {
	out, _, err := mocker(t, "predict", "--num-requests", "200", "--prefill-workers", "1", "--decode-workers", "2",
		"--kv-transfer-bandwidth", "50", "--router", "kv", "--check-invariants")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Successful requests:                     200", "Prefill pool", "Mean transfer (ms):", "Decode pool"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
	scaling := filepath.Join(t.TempDir(), "scaling.jsonl")
	out, _, err = mocker(t, "predict", "--num-requests", "2000", "--request-rate", "40", "--planner-config", filepath.Join("..", "..", "docs", "examples", "planner.yaml"),
		"--scaling-jsonl", scaling)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "GPU-hours:") || !strings.Contains(out, "Workers over time:") {
		t.Fatalf("no autoscaling section in\n%s", out)
	}
	if data, err := os.ReadFile(scaling); err != nil || !bytes.Contains(data, []byte(`"decision"`)) {
		t.Fatalf("scaling file: %v %q", err, data)
	}
	if _, _, err := mocker(t, "predict", "--prefill-workers", "1"); err == nil || !strings.Contains(err.Error(), "decode-workers") {
		t.Fatalf("prefill without decode workers: %v", err)
	}
}

// TestConfigFileValuesNamed: no silent truncation, and every invalid value of a file names the
// file, the line and the key; a flag over the file is named as a flag.
func TestConfigFileValuesNamed(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		body string
		args []string
		want string
	}{
		{"num-requests: 10\nworkers: 2.9\n", nil, `line 2: workers: want an integer, got "2.9"`},
		{"num-requests: 10\nworkers: 0\n", nil, "line 2: workers 0: must be at least 1"},
		{"workers: 3\n", []string{"--workers", "0"}, "workers 0: must be at least 1"},
		{"prefill-workers: 1\ndecode-workers: 1\n", []string{"--workers", "2"}, "workers 2: contradicts --prefill-workers/--decode-workers"},
		{"num-requests: 10\n", []string{"--workers", "10000"}, "workers 10000: at most 1024"},
		{"num-requests: 10\n", []string{"--workers", "1", "--prefill-workers", "1", "--decode-workers", "1"}, "workers 1: contradicts"},
	} {
		p := filepath.Join(dir, "c.yaml")
		os.WriteFile(p, []byte(tc.body), 0o644)
		_, _, err := mocker(t, append([]string{"predict", "--config", p}, tc.args...)...)
		want := tc.want
		if tc.args == nil {
			want = "config " + p + " " + tc.want
		}
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q %v: error %v, want %q", tc.body, tc.args, err, want)
		}
	}
	for _, args := range [][]string{{"--config", "/dev/zero"}, {"--trace", "/dev/zero"}} {
		if _, err := os.Stat("/dev/zero"); err != nil {
			t.Skip("no /dev/zero")
		}
		_, _, err := mocker(t, append([]string{"predict"}, args...)...)
		if err == nil || !(strings.Contains(err.Error(), "config /dev/zero: larger than 1024 KiB") ||
			strings.Contains(err.Error(), "trace /dev/zero line 1: line longer than 1 MiB")) {
			t.Errorf("%v: error %v", args, err)
		}
	}
}

// TestRejectionsAreReported: a run with rejections says so on stderr, how many and why the first
// was; a run where nothing completed still prints its summary and fails.
func TestRejectionsAreReported(t *testing.T) {
	out, stderr, err := mocker(t, "predict", "--num-requests", "20", "--num-gpu-blocks", "1")
	if err == nil || !strings.HasPrefix(err.Error(), `no request completed: 20 of 20 requests rejected; the first (request "0"): needs `) ||
		!strings.Contains(err.Error(), "the pool has 1") {
		t.Errorf("all rejected: error %v", err)
	}
	if !strings.Contains(out, "Rejected requests:                       20") || !strings.Contains(stderr, "simulated") {
		t.Errorf("all rejected: no summary:\n%s\n%s", out, stderr)
	}

	trace := filepath.Join(t.TempDir(), "t.jsonl")
	os.WriteFile(trace, []byte(`{"request_id": "short", "timestamp": 0, "input_length": 100, "output_length": 5}
{"request_id": "long", "timestamp": 1, "input_length": 5000, "output_length": 5}
{"timestamp": 2, "input_length": 6000, "output_length": 5}
`), 0o644)
	out, stderr, err = mocker(t, "predict", "--trace", trace, "--max-model-len", "4096")
	if err != nil {
		t.Fatal(err)
	}
	if want := "warning: 2 of 3 requests rejected; the first (trace line 2): prompt (5000 tokens) + max_tokens (5) exceeds max-model-len 4096\n"; !strings.Contains(stderr, want) {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if !strings.Contains(out, "Successful requests:                     1") {
		t.Errorf("summary:\n%s", out)
	}
}

// TestPredictModelContext: without --max-model-len, predict bounds a request by the model's
// max_position_embeddings (Qwen3-32B: 40,960), as vLLM's max_model_len and SGLang's context length
// default to: a prompt + output of exactly 40,960 runs, one token more is rejected and counted, in the
// summary, the report and the warning naming its trace line.
func TestPredictModelContext(t *testing.T) {
	dir := t.TempDir()
	trace, rep := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "r.json")
	os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 100, "output_length": 5}
{"timestamp": 1, "input_length": 40000, "output_length": 960}
{"timestamp": 2, "input_length": 40000, "output_length": 961}
`), 0o644)
	for _, backend := range []string{"vllm", "sglang"} {
		out, stderr, err := mocker(t, "predict", "--trace", trace, "--model", "qwen3-32b", "--backend", backend, "--report-json", rep)
		if err != nil {
			t.Fatalf("%s: %v", backend, err)
		}
		if want := "warning: 1 of 3 requests rejected; the first (trace line 3): prompt (40000 tokens) + max_tokens (961) exceeds max-model-len 40960 (the model's max_position_embeddings; --max-model-len sets another)\n"; !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr %q, want %q", backend, stderr, want)
		}
		if !strings.Contains(out, "Successful requests:                     2\nRejected requests:                       1\n") {
			t.Errorf("%s: summary:\n%s", backend, out)
		}
		if r := readReport(t, rep); r["rejected_requests"] != 1 || r["completed_requests"] != 2 {
			t.Errorf("%s: report: rejected %v, completed %v", backend, r["rejected_requests"], r["completed_requests"])
		}
	}
	// A synthetic workload too; --max-model-len still sets the bound.
	_, _, err := mocker(t, "predict", "--model", "qwen3-32b", "--num-requests", "2", "--input-tokens", "40960", "--output-tokens", "1", "--synthetic-lengths", "fixed")
	if err == nil || err.Error() != `no request completed: 2 of 2 requests rejected; the first (request "0"): prompt (40960 tokens) + max_tokens (1) exceeds max-model-len 40960 (the model's max_position_embeddings; --max-model-len sets another)` {
		t.Errorf("synthetic: %v", err)
	}
	if _, _, err := mocker(t, "predict", "--model", "qwen3-32b", "--num-requests", "2", "--input-tokens", "40960", "--output-tokens", "1", "--synthetic-lengths", "fixed", "--max-model-len", "65536"); err != nil {
		t.Errorf("--max-model-len 65536: %v", err)
	}
	_, _, err = mocker(t, "predict", "--model", "qwen3-32b", "--num-requests", "2", "--input-tokens", "40960", "--output-tokens", "1", "--synthetic-lengths", "fixed", "--max-model-len", "40960")
	if err == nil || err.Error() != `no request completed: 2 of 2 requests rejected; the first (request "0"): prompt (40960 tokens) + max_tokens (1) exceeds max-model-len 40960` {
		t.Errorf("--max-model-len 40960: %v", err)
	}
}

// TestContextHint: a request beyond the model's context says where that bound came from; one beyond a
// --max-model-len given, or rejected for another reason, is left as the engine says it.
func TestContextHint(t *testing.T) {
	const beyond = "prompt (40000 tokens) + max_tokens (961) exceeds max-model-len 40960"
	const pool = "needs 3 KV blocks for prompt (40 tokens) + max_tokens (1), the pool has 1"
	for _, tc := range []struct {
		maxModelLen  int
		reason, want string
	}{
		{0, beyond, beyond + " (the model's max_position_embeddings; --max-model-len sets another)"},
		{40960, beyond, beyond},
		{0, pool, pool},
	} {
		cfg := config.Default()
		cfg.MaxModelLen = tc.maxModelLen
		if got := contextHint(&cfg, tc.reason); got != tc.want {
			t.Errorf("--max-model-len %d, %q: %q, want %q", tc.maxModelLen, tc.reason, got, tc.want)
		}
	}
}

// TestOutputsCheckedBeforeTheRun: a report file that cannot be written fails at once, naming the
// flag and the path (not a temporary file), before anything is simulated.
func TestOutputsCheckedBeforeTheRun(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 100, "output_length": 5}`+"\n"), 0o644)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--report-json", "/nonexistent/x.json"}, "--report-json /nonexistent/x.json: directory /nonexistent: no such file or directory"},
		{[]string{"--requests-jsonl", dir}, "--requests-jsonl " + dir + ": is a directory"},
		{[]string{"--planner-config", "../../docs/examples/planner.yaml", "--scaling-jsonl", filepath.Join(file, "x")}, "--scaling-jsonl " + filepath.Join(file, "x") + ": " + file + " is not a directory"},
		{[]string{"--report-json", filepath.Join(dir, "r"), "--requests-jsonl", filepath.Join(dir, "r")}, "--requests-jsonl " + filepath.Join(dir, "r") + ": is also --report-json"},
		{[]string{"--report-json", trace}, "--report-json " + trace + ": is also --trace"},
		{[]string{"--html", dir}, "--html " + dir + ": is a directory"},
		{[]string{"--report-json", "-"}, "--report-json -: not a file name: give /dev/stdout for standard output"},
	} {
		out, stderr, err := mocker(t, append([]string{"predict", "--trace", trace}, tc.args...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
		if out != "" || strings.Contains(stderr, "simulated") {
			t.Errorf("%v: ran before failing:\n%s%s", tc.args, out, stderr)
		}
	}
	if names, _ := filepath.Glob(filepath.Join(dir, ".*")); len(names) > 0 {
		t.Errorf("left behind %v", names)
	}
}

// TestRequestRecordsJoinTheTrace: --requests-jsonl carries each trace row's request_id and line;
// synthetic requests get their stable workload id.
func TestRequestRecordsJoinTheTrace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "t.jsonl")
	os.WriteFile(trace, []byte(`{"request_id": "b", "timestamp": 0, "input_length": 100, "output_length": 5}

{"timestamp": 0, "input_length": 100, "output_length": 5}
{"request_id": 7, "timestamp": 3, "input_length": 100, "output_length": 5}
`), 0o644)
	records := func(args ...string) []string {
		p := filepath.Join(dir, "r.jsonl")
		if _, _, err := mocker(t, append([]string{"predict", "--requests-jsonl", p}, args...)...); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(p)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r struct {
				ID        int             `json:"id"`
				RequestID json.RawMessage `json:"request_id"`
				Line      json.RawMessage `json:"trace_line"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d %s %s", r.ID, r.RequestID, r.Line))
		}
		return got
	}
	if got, want := records("--trace", trace), []string{`0 "b" 1`, `1 "1" 3`, `2 "7" 4`}; !slices.Equal(got, want) {
		t.Errorf("trace records %q, want %q", got, want)
	}
	if got, want := records("--num-requests", "3"), []string{`0 "0" null`, `1 "1" null`, `2 "2" null`}; !slices.Equal(got, want) {
		t.Errorf("synthetic records %q, want %q", got, want)
	}
}

// TestRoleFlags: --decode-max-num-seqs bounds the decode pool alone, over a file's decode: section; a
// per-role flag without disaggregated serving is refused.
func TestRoleFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	os.WriteFile(file, []byte("prefill-workers: 1\ndecode-workers: 1\ndecode:\n  max-num-seqs: 4\n"), 0o644)
	jsonl := filepath.Join(dir, "r.jsonl")
	// Four 100-token prompts at once, one prefill pass of 10 ms; the decode pool runs two at a time
	// (1 ms a pass, 4 tokens each, the first from the decode worker).
	_, _, err := mocker(t, "predict", "--config", file, "--num-requests", "4", "--input-tokens", "100", "--input-tokens-stddev", "0",
		"--output-tokens", "4", "--output-tokens-stddev", "0", "--request-rate", "inf", "--shared-prefix-ratio", "0",
		"--timing", "fixed", "--prefill-ms", "10", "--decode-ms", "1", "--decode-max-num-seqs", "2", "--requests-jsonl", jsonl)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	var ttft []float64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			TTFT float64 `json:"ttft_ms"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		ttft = append(ttft, r.TTFT)
	}
	if fmt.Sprint(ttft) != "[11 11 15 15]" {
		t.Errorf("TTFT %v, want [11 11 15 15]", ttft)
	}
	if _, _, err := mocker(t, "predict", "--prefill-tp", "2"); err == nil || err.Error() != "prefill-tp 2: sets the prefill workers of disaggregated serving; give --prefill-workers and --decode-workers (aggregated workers take --tp)" {
		t.Errorf("--prefill-tp without disaggregation: %v", err)
	}
	if _, _, err := mocker(t, "predict", "--prefill-workers", "1", "--decode-workers", "1", "--decode-tp", "x"); err == nil || !strings.Contains(err.Error(), `invalid argument "x" for "--decode-tp" flag: want an integer`) {
		t.Errorf("--decode-tp x: %v", err)
	}
}

// TestDisaggExample replays docs/examples/disagg.yaml: prefill TP 2 and decode TP 4 of Llama-3.1-70B.
func TestDisaggExample(t *testing.T) {
	db := sharedData(t, "aiconfigurator")
	out, _, err := mocker(t, "predict", "--config", filepath.Join("..", "..", "docs", "examples", "disagg.yaml"), "--perf-db", db, "--num-requests", "50")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Successful requests:                     50", "Prefill pool", "Decode pool"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
}

// TestPredictThreads: predict writes the same report, per-request records, Perfetto trace and HTML page,
// byte for byte, with one thread and with three (sim.Options.Threads); a negative --threads is refused.
func TestPredictThreads(t *testing.T) {
	dir := t.TempDir()
	files := []string{"report-json", "requests-jsonl", "perfetto", "html"}
	var got [2][][]byte
	for i, threads := range []string{"1", "3"} {
		args := []string{"predict", "--num-requests", "600", "--request-rate", "40", "--workers", "4", "--router", "kv",
			"--seed", "3", "--threads", threads}
		for _, f := range files {
			args = append(args, "--"+f, filepath.Join(dir, threads+"."+f))
		}
		if _, stderr, err := mocker(t, args...); err != nil {
			t.Fatalf("--threads %s: %v\n%s", threads, err, stderr)
		}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(dir, threads+"."+f))
			if err != nil {
				t.Fatal(err)
			}
			got[i] = append(got[i], b)
		}
	}
	for j, f := range files {
		if len(got[0][j]) == 0 || !bytes.Equal(got[0][j], got[1][j]) {
			t.Errorf("--%s: %d bytes with one thread, %d with three, not the same", f, len(got[0][j]), len(got[1][j]))
		}
	}
	if _, _, err := mocker(t, "predict", "--threads", "-1"); err == nil || !strings.Contains(err.Error(), "--threads -1: must not be negative") {
		t.Errorf("--threads -1: %v", err)
	}
}
