package html

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timeline"
)

// simulate runs a small workload that exercises every chart: two workers (or one prefill and one
// decode worker) with a KV pool small enough to preempt, and shared prefixes; set changes the settings.
func simulate(t testing.TB, disagg bool, set ...func(*config.Config)) *Run {
	t.Helper()
	return simulateWith(t, func(s *Series) sim.Observer { return s }, disagg, set...)
}

// simulateWith is simulate with the run shown to observe(series).
func simulateWith(t testing.TB, observe func(*Series) sim.Observer, disagg bool, set ...func(*config.Config)) *Run {
	t.Helper()
	c := config.Default()
	c.NumRequests, c.RequestRate = 200, 40
	c.InputTokens, c.OutputTokens = 512, 64
	c.NumGPUBlocks, c.BlockSize = 160, 16
	if disagg {
		c.PrefillWorkers, c.DecodeWorkers, c.KVTransferBandwidth = 1, 1, 5
	} else {
		c.Workers = 2
	}
	for _, f := range set {
		f(&c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	src, err := c.Source()
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.SimOptions()
	if err != nil {
		t.Fatal(err)
	}
	series := NewSeries(0)
	o.Observer = observe(series)
	res, err := sim.Run(src, o)
	if err != nil {
		t.Fatal(err)
	}
	return &Run{Subtitle: "test run", Summary: res.Summary, Collector: res.Collector, Series: series, End: res.End}
}

func render(t testing.TB, r *Run) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteRun(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// charts returns the page's SVG elements.
func charts(page string) []string {
	var out []string
	for _, part := range strings.Split(page, "<svg")[1:] {
		out = append(out, part[:strings.Index(part, "</svg>")])
	}
	return out
}

func TestWriteRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		disagg bool
		set    func(*config.Config)
		charts int
	}{
		{"agg", false, func(*config.Config) {}, 9},
		{"disagg", true, func(*config.Config) {}, 11},
		// Instant KV transfers (no bandwidth given) and two ranks per worker.
		{"disagg-instant-dp2", true, func(c *config.Config) { c.KVTransferBandwidth, c.DPSize = 0, 2 }, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := simulate(t, tc.disagg, tc.set)
			page := string(render(t, r))
			cs := charts(page)
			if len(cs) != tc.charts {
				t.Fatalf("%d charts, want %d", len(cs), tc.charts)
			}
			for _, c := range cs {
				title := c[strings.Index(c, "<title>")+7 : strings.Index(c, "</title>")]
				if n := strings.Count(c, `class="mark"`); n == 0 {
					t.Errorf("chart %q has no mark", title)
				}
			}
			for _, bad := range []string{"http://", "https://", "<script", "NaN", "Inf"} {
				if bad == "http://" {
					page = strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
				}
				if strings.Contains(page, bad) {
					t.Errorf("page contains %q", bad)
				}
			}
			if again := string(render(t, simulate(t, tc.disagg, tc.set))); again != string(render(t, r)) {
				t.Error("two runs of one seed give different pages")
			}
		})
	}
}

// TestCoastedPage: the page of a run whose plain decode passes are coasted (shown to the Series as
// runs) is the page of the same run shown pass by pass (beside a recorder, which turns coasting off).
func TestCoastedPage(t *testing.T) {
	for _, dp := range []int{1, 2} {
		set := func(c *config.Config) { c.DPSize, c.NumGPUBlocks = dp, 400 }
		coasted := render(t, simulate(t, false, set))
		stepped := render(t, simulateWith(t, func(s *Series) sim.Observer { return sim.Observers{s, &timeline.Recorder{}} }, false, set))
		if !bytes.Equal(coasted, stepped) {
			t.Errorf("DP %d: the page differs with coasting on", dp)
		}
	}
}

// TestSummaryTable: the page's summary table holds exactly the text report's rows.
func TestSummaryTable(t *testing.T) {
	s := report.Summary{CompletedRequests: 3, Duration: 1500000000, OutputTokenThroughput: 12.345,
		Pools: []report.PoolSummary{{Name: "prefill", Workers: 1}, {Name: "decode", Workers: 2}}}
	var text strings.Builder
	if err := s.WriteTable(&text, ""); err != nil {
		t.Fatal(err)
	}
	tab := textTable(text.String())
	var headings, rows int
	for _, r := range tab.Rows {
		if r.Heading != "" {
			headings++
			continue
		}
		rows++
		want := fmt.Sprintf("%-40s %s", r.Cells[0]+"", r.Cells[1])
		if !strings.Contains(text.String(), want+"\n") {
			t.Errorf("row %q | %q is not a line of the text report", r.Cells[0], r.Cells[1])
		}
	}
	lines := strings.Count(text.String(), "\n")
	// Every line is a row, a titled rule, or the closing rule.
	if headings+rows != lines-1 {
		t.Errorf("%d headings + %d rows, want %d (the text's lines but the closing rule)", headings, rows, lines-1)
	}
	if tab.Rows[0].Heading != "Serving Benchmark Result" || tab.Rows[1].Cells[0] != "Successful requests:" || tab.Rows[1].Cells[1] != "3" {
		t.Errorf("first rows %+v %+v", tab.Rows[0], tab.Rows[1])
	}
}

func TestWriteFrontier(t *testing.T) {
	f := sampleFrontier()
	var b bytes.Buffer
	if err := WriteFrontier(&b, f); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	cs := charts(page)
	if len(cs) != 1 {
		t.Fatalf("%d charts, want 1", len(cs))
	}
	// 5 points and the frontier's line.
	if n := strings.Count(cs[0], `class="mark"`); n != 6 {
		t.Errorf("%d marks, want 6", n)
	}
	if n := strings.Count(cs[0], `class="region"`); n != 1 {
		t.Errorf("%d SLA regions, want 1", n)
	}
	// The frontier runs through the Pareto candidates in order of tokens/s per user.
	c := f.Chart()
	front := c.Series[0]
	if fmt.Sprint(front.X, front.Y) != "[20 45 80] [900 700 300]" {
		t.Errorf("frontier %v %v, want [20 45 80] [900 700 300]", front.X, front.Y)
	}
	if !strings.Contains(page, "5 candidates, 4 meeting the SLA") {
		t.Error("page does not say how many candidates meet the SLA")
	}
	for i := range f.Candidates {
		f.Candidates[i].Pass = false
	}
	b.Reset()
	if err := WriteFrontier(&b, f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "No candidate meets the SLA (5 tried)") {
		t.Error("a page where no candidate passes does not say so")
	}
	if strings.Contains(page, "NaN") {
		t.Error("page has a NaN")
	}
	for _, want := range []string{`<tr class="pass"><td>agg TP2 ×4</td><td>8</td><td>700.0</td><td>45.0</td><td>meets</td><td>yes</td><td></td></tr>`,
		`<td>ITL p90 41 ms &gt; 30 ms</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

func sampleFrontier() *Frontier {
	return &Frontier{
		Title: "mocker recommend", Subtitle: "Llama-3.1-8B on H200; SLA: p90 TTFT 500 ms, p90 ITL 30 ms",
		MinTokensPerUser: 1000.0 / 30,
		Candidates: []Candidate{
			{Name: "agg TP1 ×8", GPUs: 8, TokensPerGPU: 900, TokensPerUser: 20, Pareto: true, Note: "ITL p90 41 ms > 30 ms"},
			{Name: "agg TP2 ×4", GPUs: 8, TokensPerGPU: 700, TokensPerUser: 45, Pass: true, Pareto: true},
			{Name: "disagg 1P(TP2):2D(TP1)", GPUs: 4, TokensPerGPU: 600, TokensPerUser: 40, Pass: true},
			{Name: "agg TP4 ×2", GPUs: 8, TokensPerGPU: 300, TokensPerUser: 80, Pass: true, Pareto: true},
			{Name: "agg TP8 ×1", GPUs: 8, TokensPerGPU: 150, TokensPerUser: 70, Pass: true},
		},
	}
}
