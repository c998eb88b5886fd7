package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/recommend"
)

// small is a workload and timing quick to search: 100 requests on fixed timing.
var small = []string{"recommend", "--num-requests", "100", "--request-rate", "100", "--input-tokens", "256", "--input-tokens-stddev", "0",
	"--output-tokens", "16", "--output-tokens-stddev", "0", "--timing", "fixed", "--prefill-ms", "20", "--decode-ms", "5", "--max-num-batched-tokens", "512"}

// tableRow is one row of recommend's table of the runs that meet the targets: its figures by the
// column they are printed under ("#", "GPUs", "p90 TTFT ms", "req/s" ...), as printed, and whether the
// run is on the Pareto frontier.
type tableRow struct {
	figures map[string]string
	pareto  bool
}

// rowOf is the table row of deployment, the whole of its last column ("2 × vllm agg tp1 seqs
// auto=1024 mbt 512 round-robin"), in recommend's output; the test fails unless exactly one row names it.
func rowOf(t *testing.T, out, deployment string) tableRow {
	t.Helper()
	var header []string
	var rows []tableRow
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "#" {
			header = regexp.MustCompile(` {2,}`).Split(strings.TrimSpace(l), -1) // names hold single spaces
			continue
		}
		cells, ok := strings.CutSuffix(l, "  "+deployment)
		if header == nil || !ok {
			continue
		}
		f := strings.Fields(cells)
		r := tableRow{figures: map[string]string{}}
		if len(f) > 0 && f[len(f)-1] == "*" {
			r.pareto, f = true, f[:len(f)-1]
		}
		if len(f) != len(header)-2 { // but the pareto mark and the deployment
			t.Fatalf("row %q: %d figures under %q", l, len(f), header)
		}
		for i, v := range f {
			r.figures[header[i]] = v
		}
		rows = append(rows, r)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows of %q in:\n%s", len(rows), deployment, out)
	}
	return rows[0]
}

// TestRowOf: rowOf reads a row's figures under their own columns, the Pareto mark apart, and the row
// of the deployment named, not one whose name merely contains it.
func TestRowOf(t *testing.T) {
	out := `2 runs meet the targets; the best:
  #  GPUs  p90 TTFT ms  p90 ITL ms  req/s  tok/s/GPU  tok/s/user  pareto  deployment
  1     1         22.4         5.2  17.13        636       183.0       *  1 × vllm agg tp1 seqs auto=1024 mbt 8192 round-robin
  2     2        113.0         3.4  17.79        331       279.2          1 × vllm agg tp1 ep2 seqs auto=1024 mbt 8192 round-robin
`
	r := rowOf(t, out, "1 × vllm agg tp1 seqs auto=1024 mbt 8192 round-robin")
	if got := fmt.Sprintln(r.figures["#"], r.figures["GPUs"], r.figures["p90 TTFT ms"], r.figures["p90 ITL ms"], r.figures["tok/s/user"], r.pareto); got != "1 1 22.4 5.2 183.0 true\n" {
		t.Errorf("first row: %s", got)
	}
	r = rowOf(t, out, "1 × vllm agg tp1 ep2 seqs auto=1024 mbt 8192 round-robin")
	if got := fmt.Sprintln(r.figures["p90 TTFT ms"], r.figures["req/s"], r.pareto); got != "113.0 17.79 false\n" {
		t.Errorf("second row: %s", got)
	}
}

func TestRecommendReportJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.json")
	out, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--sla", "e2e:p50:300", "--tp-list", "1,2", "--max-workers", "4", "--report-json", path)...)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Targets    []string
		Candidates []struct {
			GPUs    int
			Workers int
			Pass    bool
			Checks  []struct{ Target string }
		}
		Simulated, Skipped int
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Targets, " ") != "ttft:p90:60 e2e:p50:300" || rep.Simulated != len(rep.Candidates) || rep.Simulated+rep.Skipped != 8 {
		t.Errorf("targets %v, %d candidates, %d simulated, %d skipped: want both targets and 8 sizes in all", rep.Targets, len(rep.Candidates), rep.Simulated, rep.Skipped)
	}
	// One worker misses p90 TTFT 60 ms; two meet both targets.
	if c, r := rep.Candidates[0], rowOf(t, out, "2 × vllm agg tp1 seqs auto=1024 mbt 512 round-robin"); !c.Pass || c.Workers != 2 || c.GPUs != 2 || r.figures["#"] != "1" || !r.pareto {
		t.Errorf("first candidate %+v, its row %+v; table:\n%s", c, r, out)
	}
}

// TestRecommendConfigFile: a --config file's tp is the space's one TP, as the flag would be, and
// contradicts --tp-list as the flag does.
func TestRecommendConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("tp: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--max-workers", "2", "--config", path)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Searched 1 shape:") || !strings.Contains(out, "vllm agg tp2 ") || strings.Contains(out, "tp1") {
		t.Errorf("want the one shape at TP 2:\n%s", out)
	}
	_, _, err = mocker(t, append(small, "--ttft-p90-ms", "60", "--tp-list", "1,2", "--config", path)...)
	if want := "--tp-list and --tp (config " + path + " line 1): give the list"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestRecommendSeqsAuto: --max-num-seqs-list takes auto, as --max-num-seqs does, mixed with numbers; the
// report names each shape's value and what auto came to on it (vLLM's 1,024 on an H200; auto is 0 in
// the JSON, beside auto_max_num_seqs).
func TestRecommendSeqsAuto(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rec.json")
	out, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--tp-list", "1", "--max-workers", "2", "--max-num-seqs-list", "auto,4", "--report-json", path)...)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Shapes []struct {
			Shape struct {
				MaxNumSeqs     int `json:"max_num_seqs"`
				AutoMaxNumSeqs int `json:"auto_max_num_seqs"`
			}
		}
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	var seqs []int
	for _, s := range rep.Shapes {
		seqs = append(seqs, s.Shape.MaxNumSeqs, s.Shape.AutoMaxNumSeqs)
	}
	// Four running requests at most queue the 100 requests/s: only auto (vLLM's 1,024 on an H200) passes.
	if r := rowOf(t, out, "2 × vllm agg tp1 seqs auto=1024 mbt 512 round-robin"); fmt.Sprint(seqs) != "[0 1024 4 0]" || !strings.Contains(out, "Searched 2 shapes:") || r.figures["#"] != "1" {
		t.Errorf("shapes' max_num_seqs and auto_max_num_seqs %v, want [0 1024 4 0], and the first row auto=1024's; table:\n%s", seqs, out)
	}
	_, _, err = mocker(t, "recommend", "--ttft-p90-ms", "60", "--max-num-seqs-list", "auto,x")
	if want := `"x": want integers or auto, as in auto,256,512`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

func TestRecommendRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"recommend"}, "no latency target: give --ttft-p90-ms, --itl-p90-ms, --e2e-p90-ms or --sla METRIC:pN:MS"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--tp", "2", "--tp-list", "1,2"}, "--tp-list and --tp: give the list (the space), or the one value"},
		{[]string{"recommend", "--sla", "ttft:p90"}, `--sla "ttft:p90": want METRIC:pN:MS, as in ttft:p95:500`},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--requests-jsonl", "x"}, "--requests-jsonl: a file of one run; run predict"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--prefill-tp", "2"}, "--prefill-tp: recommend sizes the pools itself"},
		// A pool's own setting configures the disaggregated shapes, and there are none.
		{[]string{"recommend", "--ttft-p90-ms", "500", "--prefill-max-num-seqs", "9"}, "--prefill-max-num-seqs 9: sets the prefill workers of disaggregated shapes, and --modes is agg (add disagg)"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--ratios", "1:0", "--modes", "disagg"}, `--ratios: ratio "1:0": want PREFILL:DECODE workers`},
		// A pool's own setting of a key a list sweeps would run every value of the list as that one.
		{[]string{"recommend", "--ttft-p90-ms", "500", "--modes", "disagg", "--ratios", "1:1", "--max-num-seqs-list", "16,64", "--decode-max-num-seqs", "8"},
			"--decode-max-num-seqs 8: cannot be given with --max-num-seqs-list, which sweeps it"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--modes", "disagg", "--ratios", "1:1", "--max-num-batched-tokens-list", "512", "--prefill-max-num-batched-tokens", "256"},
			"--prefill-max-num-batched-tokens 256: cannot be given with --max-num-batched-tokens-list, which sweeps it"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--model", "qwen3-30b-a3b", "--modes", "disagg", "--ratios", "1:1", "--tp-list", "2", "--ep-list", "1,2", "--prefill-ep", "2"},
			"--prefill-ep 2: cannot be given with --ep-list, which sweeps it"},
		// Without disaggregated shapes that pool's setting is read by none, which says what to do.
		{[]string{"recommend", "--ttft-p90-ms", "500", "--model", "qwen3-30b-a3b", "--tp-list", "2", "--ep-list", "1,2", "--prefill-ep", "2"},
			"--prefill-ep 2: sets the prefill workers of disaggregated shapes, and --modes is agg (add disagg)"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--report-json", "/nonexistent/r.json"}, "--report-json /nonexistent/r.json: directory /nonexistent"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--find-max-rate", "--objective", "tokens-per-gpu"}, "--find-max-rate and --objective"},
		// Only the op-level timing model reads the experts' sharding.
		{[]string{"recommend", "--ttft-p90-ms", "500", "--model", "qwen3-30b-a3b", "--ep-list", "1,2", "--timing", "fixed"}, "--ep-list 1,2: applies to --timing default, and the passes are priced by --timing fixed"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--model", "qwen3-30b-a3b", "--ep-list", "2", "--backends", "trtllm"}, "--ep-list 2: applies to --timing default, and the passes are priced by --timing profile"},
		{[]string{"recommend", "--ttft-p90-ms", "500", "--model", "qwen3-30b-a3b", "--tp", "2", "--ep", "2", "--timing", "polynomial"}, "ep 2: applies to --timing default, and the passes are priced by --timing polynomial"},
	} {
		_, _, err := mocker(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestRecommendEPListOnAPool: --ep-list is read where some shape has a pool priced by the op-level
// model, a disaggregated prefill pool on its own --prefill-timing default beside a shared polynomial
// (whose ep8 shape is priced apart from its ep1 one), and refused where no pool is. The label says what
// each pool ran: EP 8 where the op-level model prices it, EP 1 in the pool priced by polynomial (ep8/1,
// and the report's pools say so), and a shape none of whose pools reads it is refused under its ep8.
func TestRecommendEPListOnAPool(t *testing.T) {
	args := []string{"recommend", "--num-requests", "20", "--request-rate", "100", "--input-tokens", "256", "--input-tokens-stddev", "0",
		"--output-tokens", "4", "--output-tokens-stddev", "0", "--ttft-p90-ms", "1000", "--max-workers", "2", "--model", "qwen3-30b-a3b",
		"--modes", "disagg", "--ratios", "1:1", "--tp-list", "8", "--timing", "polynomial", "--ep-list", "1,8"}
	path := filepath.Join(t.TempDir(), "rec.json")
	out, _, err := mocker(t, append(args, "--prefill-timing", "default", "--report-json", path)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Searched 2 shapes:") {
		t.Errorf("want 2 shapes searched in:\n%s", out)
	}
	for deployment, want := range map[string]string{
		"1P+1D vllm disagg 1:1 tp8/8 seqs auto=1024 mbt 8192 round-robin":       "23.0",
		"1P+1D vllm disagg 1:1 tp8/8 ep8/1 seqs auto=1024 mbt 8192 round-robin": "25.8",
	} {
		if got := rowOf(t, out, deployment).figures["p90 TTFT ms"]; got != want {
			t.Errorf("%s: p90 TTFT %s, want %s", deployment, got, want)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep recommend.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	var pools []string
	for _, s := range rep.Shapes {
		pools = append(pools, fmt.Sprintf("ep %d: prefill %d, decode %d", s.Shape.EP, s.Shape.Pools.Prefill.EP, s.Shape.Pools.Decode.EP))
	}
	if want := "[ep 1: prefill 1, decode 1 ep 8: prefill 8, decode 1]"; fmt.Sprint(pools) != want {
		t.Errorf("shapes' pools %v, want %s", pools, want)
	}
	// The decode pool on the op-level model: ep1/8.
	out, _, err = mocker(t, append(args, "--decode-timing", "default")...)
	if err != nil {
		t.Fatal(err)
	}
	if got := rowOf(t, out, "1P+1D vllm disagg 1:1 tp8/8 ep1/8 seqs auto=1024 mbt 8192 round-robin").figures["p90 TTFT ms"]; got != "56.5" {
		t.Errorf("decode pool on default: p90 TTFT %s, want 56.5", got)
	}
	_, _, err = mocker(t, args...)
	if want := "--ep-list 1,8: applies to --timing default, and the passes are priced by --timing polynomial"; err == nil || err.Error() != want {
		t.Errorf("no pool on the op-level model: error %v, want %q", err, want)
	}
	// Beside them, an aggregated shape priced by polynomial does not run at EP 8 as EP 1 under another name.
	args[slices.Index(args, "disagg")] = "agg,disagg"
	out, _, err = mocker(t, append(args, "--prefill-timing", "default")...)
	if err != nil {
		t.Fatal(err)
	}
	want := "1 shape of the space is not a valid deployment:\n  vllm agg tp8 ep8 seqs auto mbt 8192 round-robin: ep 8: applies to --timing default, and the passes that run it are priced by --timing polynomial\n"
	if !strings.Contains(out, want) || !strings.Contains(out, "Searched 3 shapes:") {
		t.Errorf("want %q and 3 shapes searched in:\n%s", want, out)
	}
	// Nor a disaggregated one whose pools are both: it is refused under the EP it was given.
	out, _, err = mocker(t, append(args, "--timing", "default", "--prefill-timing", "polynomial", "--decode-timing", "polynomial")...)
	want = "1 shape of the space is not a valid deployment:\n  vllm disagg 1:1 tp8/8 ep8 seqs auto mbt 8192 round-robin: ep 8: applies to --timing default, and the passes that run it are priced by --timing polynomial\n"
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "Searched 3 shapes:") {
		t.Errorf("error %v; want %q and 3 shapes searched in:\n%s", err, want, out)
	}
}

// TestRecommendTimingOfSomeBackends: a --timing that some swept backends cannot take (the op-level
// model has no TensorRT-LLM tables) refuses their shapes in one line naming the backend, and the others
// are searched.
func TestRecommendTimingOfSomeBackends(t *testing.T) {
	out, _, err := mocker(t, "recommend", "--num-requests", "20", "--request-rate", "100", "--input-tokens", "256", "--output-tokens", "4",
		"--ttft-p90-ms", "1000", "--tp-list", "1,2", "--max-workers", "1", "--backends", "vllm,trtllm", "--timing", "default")
	if err != nil {
		t.Fatal(err)
	}
	want := "2 shapes of the space are not a valid deployment:\n  every trtllm shape (2): timing default: no TensorRT-LLM tables are supported"
	if !strings.Contains(out, want) || !strings.Contains(out, "Searched 2 shapes:") || strings.Count(out, "trtllm") != 1 {
		t.Errorf("want the vllm shapes searched and %q alone of trtllm in:\n%s", want, out)
	}
}

// TestRecommendTakesEPOne: --ep-list 1 and --ep 1 are no expert parallelism, every timing model's: a
// search under fixed timing takes them.
func TestRecommendTakesEPOne(t *testing.T) {
	for _, flag := range []string{"--ep-list", "--ep"} {
		out, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--model", "qwen3-30b-a3b", "--tp-list", "1", "--max-workers", "1", flag, "1")...)
		if err != nil || !strings.Contains(out, "Searched 1 shape") {
			t.Errorf("%s 1: error %v; output:\n%s", flag, err, out)
		}
	}
}

// TestRecommendBackendOwnFlags: a backend's own setting applies to that backend's shapes and refuses
// none of the others; one that no backend of the space reads is refused.
func TestRecommendBackendOwnFlags(t *testing.T) {
	out, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--tp-list", "1", "--max-workers", "2", "--backends", "vllm,sglang", "--sglang-schedule-policy", "lpm")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Searched 2 shapes:") || strings.Contains(out, "not valid") {
		t.Errorf("want both shapes valid:\n%s", out)
	}
	_, _, err = mocker(t, append(small, "--ttft-p90-ms", "60", "--backends", "vllm,trtllm", "--page-size", "4")...)
	if want := "page-size 4: applies to --backend sglang, and the deployment runs vllm and trtllm"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestRecommendPoolSettings: a pool's own setting (--decode-max-num-seqs) applies to the disaggregated
// shapes' pool and to no aggregated shape, beside --workers, which sizes both, and the label says what
// each pool ran; a bad one is refused once, before the search.
func TestRecommendPoolSettings(t *testing.T) {
	search := append(small, "--ttft-p90-ms", "500", "--tp-list", "1", "--workers", "2", "--modes", "agg,disagg", "--ratios", "1:1")
	search = search[:len(search):len(search)] // each run appends its own
	out, _, err := mocker(t, append(search, "--decode-max-num-seqs", "7")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Searched 2 shapes:") {
		t.Errorf("want 2 shapes searched in:\n%s", out)
	}
	rowOf(t, out, "2 × vllm agg tp1 seqs auto=1024 mbt 512 round-robin")
	rowOf(t, out, "1P+1D vllm disagg 1:1 tp1/1 seqs auto=1024/7 mbt 512 round-robin")
	// The label names what each pool ran: the decode pool's 8, not the shape's 16.
	out, _, err = mocker(t, append(search, "--max-num-seqs", "16", "--decode-max-num-seqs", "8")...)
	if err != nil {
		t.Fatal(err)
	}
	rowOf(t, out, "1P+1D vllm disagg 1:1 tp1/1 seqs 16/8 mbt 512 round-robin")
	out, _, err = mocker(t, append(search, "--prefill-max-num-batched-tokens", "0")...)
	if want := "prefill-max-num-batched-tokens 0: must be at least 1"; err == nil || err.Error() != want || out != "" {
		t.Errorf("error %v, stdout %q; want %s", err, out, want)
	}
}

// TestRecommendSettingsAtListTPs: a setting the TP decides (--ep, --decode-ep must divide it) is checked
// before the search at the TPs the space's lists give the shapes, not at the shared --tp's default 1.
func TestRecommendSettingsAtListTPs(t *testing.T) {
	search := []string{"recommend", "--model", "qwen3-30b-a3b", "--ttft-p90-ms", "5000", "--num-requests", "20", "--max-workers", "2"}
	for _, tc := range []struct{ args, want string }{
		{"--tp-list 8 --ep 8", "1 × vllm agg tp8 ep8 seqs auto=1024 mbt 8192 round-robin"},
		{"--modes disagg --ratios 1:1 --prefill-tp-list 8 --decode-tp-list 8 --decode-ep 8", "1P+1D vllm disagg 1:1 tp8/8 ep1/8 seqs auto=1024 mbt 8192 round-robin"},
	} {
		out, _, err := mocker(t, append(search[:len(search):len(search)], strings.Fields(tc.args)...)...)
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		rowOf(t, out, tc.want)
	}
	// No TP of the lists takes it.
	_, _, err := mocker(t, append(search, "--modes", "disagg", "--ratios", "1:1", "--prefill-tp-list", "8", "--decode-tp-list", "2,4", "--decode-ep", "8")...)
	if want := "decode-ep 8: must divide tp 2"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
}

// TestRecommendBaseOnSweptBackends: the base settings are checked on the backends swept, not on
// --backend's default: --profile is taken where trtllm (priced by profile) is swept, alone or beside
// vllm, whose shapes run on what they read (the op-level model) rather than being refused for it; where
// no swept backend reads it, it is refused once.
func TestRecommendBaseOnSweptBackends(t *testing.T) {
	args := []string{"recommend", "--num-requests", "20", "--request-rate", "100", "--input-tokens", "256", "--input-tokens-stddev", "0",
		"--output-tokens", "4", "--output-tokens-stddev", "0", "--ttft-p90-ms", "1000", "--tp-list", "1", "--max-workers", "1",
		"--profile", "h200-llama-3.1-8b-bf16"}
	out, _, err := mocker(t, append(args, "--backends", "trtllm")...)
	if err != nil || !strings.Contains(out, "Searched 1 shape:") {
		t.Errorf("trtllm alone: error %v\n%s", err, out)
	}
	out, _, err = mocker(t, append(args, "--backends", "vllm,trtllm")...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "not a valid deployment") {
		t.Errorf("vllm,trtllm: want no shape refused in:\n%s", out)
	}
	for deployment, want := range map[string]string{
		"1 × vllm agg tp1 seqs auto=1024 mbt 8192 round-robin":  "19.9", // --backends vllm, no --profile: the op-level model
		"1 × trtllm agg tp1 seqs auto=256 mbt 8192 round-robin": "47.6", // --backends trtllm alone
	} {
		if ttft := rowOf(t, out, deployment).figures["p90 TTFT ms"]; ttft != want {
			t.Errorf("vllm,trtllm: %s: p90 TTFT %s, want %s", deployment, ttft, want)
		}
	}
	_, _, err = mocker(t, append(args, "--backends", "vllm,sglang")...)
	if want := "profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the passes are priced by --timing default"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("no swept backend priced by profile: error %v, want %q", err, want)
	}
}

// TestRecommendSharedTimingForAgg: with both pools on their own --timing, the shared --profile is the
// aggregated shapes' to read: the space of both modes is searched, its aggregated shapes priced by the
// profile and its disaggregated ones by the pools' model (the p90 TTFTs each prices alone); a space
// without aggregated shapes, which nothing would read it in, still refuses it.
func TestRecommendSharedTimingForAgg(t *testing.T) {
	args := []string{"recommend", "--num-requests", "20", "--request-rate", "100", "--input-tokens", "256", "--input-tokens-stddev", "0",
		"--output-tokens", "4", "--output-tokens-stddev", "0", "--ttft-p90-ms", "1000", "--tp-list", "1", "--max-workers", "2", "--ratios", "1:1",
		"--timing", "profile", "--profile", "h200-llama-3.1-8b-bf16", "--prefill-timing", "polynomial", "--decode-timing", "polynomial"}
	out, _, err := mocker(t, append(args, "--modes", "agg,disagg")...)
	if err != nil {
		t.Fatal(err)
	}
	for deployment, want := range map[string]string{
		"1 × vllm agg tp1 seqs auto=1024 mbt 8192 round-robin":            "47.6", // --modes agg --timing profile alone
		"1P+1D vllm disagg 1:1 tp1/1 seqs auto=1024 mbt 8192 round-robin": "57.9", // --modes disagg, pools polynomial alone (default: 24.5)
	} {
		if ttft := rowOf(t, out, deployment).figures["p90 TTFT ms"]; ttft != want {
			t.Errorf("%s: p90 TTFT %s, want %s in:\n%s", deployment, ttft, want, out)
		}
	}
	_, _, err = mocker(t, append(args, "--modes", "disagg")...)
	if want := "profile h200-llama-3.1-8b-bf16: applies to --timing profile, and the passes are priced by --timing polynomial"; err == nil || err.Error() != want {
		t.Errorf("disagg alone: error %v, want %q", err, want)
	}
}

func TestRecommendFindMaxRate(t *testing.T) {
	out, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--tp-list", "1", "--find-max-rate")...)
	if err != nil {
		t.Fatal(err)
	}
	// One deployment (one worker, the default range): its bracket, within 5 %.
	var pass, fail float64
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, "  1 × vllm agg tp1 seqs auto=1024 mbt 512 round-robin") {
			if _, err := fmt.Sscanf(strings.TrimSpace(l), "%g×%g×", &pass, &fail); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
		}
	}
	if !(pass > 0 && fail > pass && fail <= pass*1.05) {
		t.Errorf("bracket %v to %v: want 0 < pass < fail <= pass × 1.05; output:\n%s", pass, fail, out)
	}
}

// TestRecommendAsPredict: each run is predict's run of the same flags at its size, here with closed-loop
// clients (--concurrency, whose desync is auto by default): the figures agree.
func TestRecommendAsPredict(t *testing.T) {
	dir := t.TempDir()
	flags := []string{"--num-requests", "100", "--input-tokens", "256", "--output-tokens", "16", "--timing", "fixed",
		"--prefill-ms", "20", "--decode-ms", "5", "--max-num-batched-tokens", "512", "--concurrency", "8"}
	rec := filepath.Join(dir, "rec.json")
	if _, _, err := mocker(t, append(append([]string{"recommend"}, flags...), "--ttft-p90-ms", "60", "--sla", "e2e:p99:400", "--tp-list", "1", "--max-workers", "3", "--report-json", rec)...); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Candidates []struct {
			Workers      int
			StoppedEarly bool `json:"stopped_early"`
			Checks       []struct{ Ms float64 }
		}
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, c := range rep.Candidates {
		if c.StoppedEarly {
			continue
		}
		pred := filepath.Join(dir, fmt.Sprintf("predict%d.json", c.Workers))
		if _, _, err := mocker(t, append(append([]string{"predict"}, flags...), "--workers", fmt.Sprint(c.Workers), "--report-json", pred)...); err != nil {
			t.Fatal(err)
		}
		r := readReport(t, pred)
		if c.Checks[0].Ms != r["p90_ttft_ms"] || c.Checks[1].Ms != r["p99_e2e_ms"] {
			t.Errorf("%d workers: recommend's p90 TTFT %v, p99 E2E %v; predict's %v, %v", c.Workers, c.Checks[0].Ms, c.Checks[1].Ms, r["p90_ttft_ms"], r["p99_e2e_ms"])
		}
		compared++
	}
	if compared == 0 {
		t.Error("no run to compare")
	}
}

// TestRecommendHTML: --html draws every completed run of the search (a run stopped early has no figures
// to place), with the ITL target's region shaded; --perfetto, a file of one run, is refused.
func TestRecommendHTML(t *testing.T) {
	dir := t.TempDir()
	page, js := filepath.Join(dir, "rec.html"), filepath.Join(dir, "rec.json")
	if _, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--itl-p90-ms", "25", "--tp-list", "1,2", "--max-workers", "4",
		"--report-json", js, "--html", page)...); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var rep recommend.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(got)
	if len(rep.Candidates) < 2 || !strings.Contains(doc, "SLA: ≥ 40.0 tokens/s per user") {
		t.Fatalf("%d candidates; page without the ITL target's region:\n%.2000s", len(rep.Candidates), doc)
	}
	drawn := 0
	for _, c := range rep.Candidates {
		if named := strings.Contains(doc, c.Deployment()); named != (c.Figures != nil) {
			t.Errorf("run %s (completed %v) named on the page: %v", c.Deployment(), c.Figures != nil, named)
		}
		if c.Figures != nil {
			drawn++
		}
	}
	if drawn < 2 {
		t.Errorf("%d completed runs drawn: the test lost its teeth", drawn)
	}
	if _, _, err := mocker(t, append(small, "--ttft-p90-ms", "60", "--perfetto", filepath.Join(dir, "t.json"))...); err == nil ||
		!strings.Contains(err.Error(), "--perfetto: a file of one run") {
		t.Errorf("recommend --perfetto: %v, want it refused", err)
	}
}

// TestRecommendRefusesBeyondContext: a workload with requests beyond the context is refused before
// the search, which no deployment could pass: the bound is the model's (Qwen3-32B: 40,960) or
// --max-model-len's, not the deployment's. The count is predict's, a conversation's history included.
func TestRecommendRefusesBeyondContext(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	rows := `{"timestamp": 0, "input_length": 100, "output_length": 5}
{"timestamp": 1, "input_length": 40000, "output_length": 960}
{"timestamp": 2, "input_length": 40000, "output_length": 961}
`
	os.WriteFile(trace, []byte(rows), 0o644)
	search := []string{"recommend", "--model", "qwen3-32b", "--ttft-p90-ms", "20000", "--tp-list", "2", "--max-workers", "2"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trace", trace}, "1 of 3 requests exceed the model's context, 40960 tokens (its max_position_embeddings), so every deployment would reject them and fail: " +
			"the first (trace line 3) has prompt (40000 tokens) + max_tokens (961); give --max-model-len to serve a longer context"},
		{[]string{"--trace", trace, "--max-model-len", "4096"}, "max-model-len 4096: 2 of 3 requests exceed it, so every deployment would reject them and fail: " +
			"the first (trace line 2) has prompt (40000 tokens) + max_tokens (960)"},
		// The third turn of each conversation carries 32,000 tokens of history: 47,000 + 1,000.
		{[]string{"--num-requests", "4", "--turns-per-session", "3", "--input-tokens", "15000", "--output-tokens", "1000", "--synthetic-lengths", "fixed"},
			`4 of 12 requests exceed the model's context, 40960 tokens (its max_position_embeddings), so every deployment would reject them and fail: ` +
				`the first (request "2") has prompt (47000 tokens) + max_tokens (1000); give --max-model-len to serve a longer context`},
	} {
		out, _, err := mocker(t, append(search, tc.args...)...)
		if err == nil || err.Error() != tc.want || out != "" {
			t.Errorf("%v: %v, stdout %q; want %s", tc.args, err, out, tc.want)
		}
	}
	// predict rejects as many, the same first.
	_, stderr, err := mocker(t, "predict", "--model", "qwen3-32b", "--num-requests", "4", "--turns-per-session", "3", "--input-tokens", "15000",
		"--output-tokens", "1000", "--synthetic-lengths", "fixed")
	if want := `warning: 4 of 12 requests rejected; the first (request "2"): prompt (47000 tokens) + max_tokens (1000) exceeds max-model-len 40960`; err != nil || !strings.Contains(stderr, want) {
		t.Errorf("predict: %v, stderr %q; want %s", err, stderr, want)
	}
}

// TestRecommendSharedErrorOnce: an error no shape of the space changes (an input file, the model, the
// system, the timing model's data) is raised once, before the search, not once per shape; where it
// holds on one swept backend only, the others' shapes are searched.
func TestRecommendSharedErrorOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	enoent := ": no such file or directory"
	search := []string{"recommend", "--ttft-p90-ms", "500", "--num-requests", "20", "--tp-list", "1,2,4", "--max-workers", "2"}
	for _, tc := range []struct{ env, args, want string }{
		{"", "--model-config " + missing, "--model-config " + missing + enoent},
		{"", "--perf-db " + missing, "--perf-db " + missing + enoent},
		{missing, "", "$MOCKER_PERF_DB " + missing + enoent},
		{"", "--timing profile --profile " + missing, "--profile " + missing + ": not a built-in profile (h200-llama-3.1-8b-bf16, h200-qwen3-32b-bf16) nor a file" + enoent},
		// A pool's own, which its disaggregated shapes read.
		{"", "--modes agg,disagg --ratios 1:1 --prefill-timing profile --prefill-profile " + missing,
			"--prefill-profile " + missing + ": not a built-in profile (h200-llama-3.1-8b-bf16, h200-qwen3-32b-bf16) nor a file" + enoent},
		{"", "--system h900", `system: hardware: unknown system "h900" (known: b200_sxm, h100_sxm, h200_sxm; or load an AIConfigurator system YAML)`},
		{"", "--quantization mxfp4", "timing default: quantization mxfp4 quantizes only routed experts (the gpt-oss format) and model llama-3.1-8b has none"},
		{"", "--backends trtllm --model qwen3-30b-a3b", "timing profile: no built-in profile for qwen3-30b-a3b on h200_sxm (h200-qwen3-30b-a3b-bf16); give --profile PATH, or --timing polynomial"},
	} {
		t.Setenv("MOCKER_PERF_DB", tc.env)
		out, _, err := mocker(t, append(search, strings.Fields(tc.args)...)...)
		if err == nil || err.Error() != tc.want || out != "" {
			t.Errorf("%s: %v, stdout %q; want %s", tc.args, err, out, tc.want)
		}
	}
	// TensorRT-LLM's shapes are priced by a profile qwen3-30b-a3b has none of; vLLM's are searched.
	out, _, err := mocker(t, append(search[:len(search)-4], "--tp-list", "1", "--max-workers", "1", "--backends", "vllm,trtllm", "--model", "qwen3-30b-a3b")...)
	if err != nil || !strings.Contains(out, "1 × vllm agg tp1") || !strings.Contains(out, "trtllm agg tp1 seqs auto mbt 8192 round-robin: timing profile: no built-in profile") {
		t.Errorf("vllm and trtllm: %v\n%s", err, out)
	}
}
