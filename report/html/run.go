package html

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/report/chart"
)

// Run is what a predict report is drawn from.
type Run struct {
	Title    string // the page's heading; "" is "mocker predict"
	Subtitle string // what ran (model, system, deployment), shown under the heading

	Summary   report.Summary
	Collector *report.Collector // for the latency CDFs
	Series    *Series           // for the series over time: it should have observed the whole run
	End       time.Duration     // the run's simulated end: the time axis is [0, End)

	// CDFPoints is the points of every CDF (0: 200); with the Series' buckets, they bound the page's
	// size, whatever the run's length.
	CDFPoints int
}

// WriteRun writes r's page to w.
func WriteRun(w io.Writer, r *Run) error {
	points := r.CDFPoints
	if points <= 0 {
		points = 200
	}
	title := r.Title
	if title == "" {
		title = "mocker predict"
	}
	var text strings.Builder
	if err := r.Summary.WriteTable(&text, ""); err != nil {
		return err
	}
	p := page{Title: title, Subtitle: r.Subtitle}
	p.Sections = append(p.Sections, section{Title: "Summary", Table: textTable(text.String())})

	ttft, itl, e2e := r.Collector.Quantiles(points)
	p.Sections = append(p.Sections, section{
		Title: "Latency",
		Note:  "Cumulative distributions over completed requests (ITL: every gap between deliveries, pooled).",
		Charts: svgs(
			cdf("Time to first token (TTFT)", ttft),
			cdf("Inter-token latency (ITL)", itl),
			cdf("End-to-end latency (E2E)", e2e),
		),
	})

	s := r.Series.draw(r.End)
	x := s.x
	note := fmt.Sprintf("Over simulated time in %s buckets: rates per second, levels as each bucket's time-weighted mean.", seconds(s.width))
	p.Sections = append(p.Sections, section{
		Title: "Throughput",
		Note:  note,
		Charts: svgs(chart.Chart{
			Title: "Output tokens per second", XLabel: "time (s)", YLabel: "tokens/s",
			Series: []chart.Series{{Name: "output tokens/s", X: x, Y: s.throughput}},
		}),
	})

	// With few workers, each line's bucket max is drawn faintly beside its mean; with many it would
	// only clutter.
	peaks := len(s.workers) <= 4
	perWorker := func(title, ylabel string, ymax float64, pick func(*drawnWorker) meanPeak) chart.Chart {
		c := chart.Chart{Title: title, XLabel: "time (s)", YLabel: ylabel, YMax: ymax}
		for i := range s.workers {
			w := &s.workers[i]
			color := chart.Palette[i%len(chart.Palette)]
			l := pick(w)
			c.Series = append(c.Series, chart.Series{Name: w.name, X: x, Y: l.mean, Color: color})
			if peaks {
				c.Series = append(c.Series, chart.Series{Name: w.name + " (bucket max)", X: x, Y: l.peak, Color: color, Faint: true})
			}
		}
		return c
	}
	workerNote := "Per worker, summed over its data-parallel ranks: the engine's state after each pass, held until " +
		"the next (a worker idle between passes may hold a queue and KV); during a pass, the requests finishing at its end count as running."
	if peaks {
		workerNote += " Faint lines: each bucket's maximum."
	}
	p.Sections = append(p.Sections, section{
		Title: "Workers",
		Note:  workerNote,
		Charts: svgs(
			perWorker("Queue depth (waiting requests)", "requests", 0, func(w *drawnWorker) meanPeak { return w.waiting }),
			perWorker("Running requests", "requests", 0, func(w *drawnWorker) meanPeak { return w.running }),
			perWorker("KV-cache usage", "fraction of blocks", 1, func(w *drawnWorker) meanPeak { return w.kvUsed }),
		),
	})

	preempt := chart.Chart{Title: "Preemptions per second", XLabel: "time (s)", YLabel: "preemptions/s"}
	prefix := chart.Chart{Title: "Prefix-cache hit rate", XLabel: "time (s)", YLabel: "cached / looked-up prompt tokens", YMax: 1}
	for _, pool := range s.pools {
		preempt.Series = append(preempt.Series, chart.Series{Name: pool, X: x, Y: s.preempt[pool]})
		hits := s.prefix[pool]
		prefix.Series = append(prefix.Series, chart.Series{Name: pool, Kind: sparse(hits), X: x, Y: hits})
	}
	p.Sections = append(p.Sections, section{
		Title:  "Preemption and prefix caching",
		Note:   "Per pool. The hit rate is over the prompt tokens looked up at admissions in each bucket (drawn as points when some bucket has none).",
		Charts: svgs(preempt, prefix),
	})

	if len(s.transfers.all) > 0 {
		mean, peak := s.transfers.mean, s.transfers.max
		p.Sections = append(p.Sections, section{
			Title: "KV transfers",
			Note:  fmt.Sprintf("%d transfers, from the decode worker's reservation to the KV's arrival; over time, each bucket's mean and max by completion.", len(s.transfers.all)),
			Charts: svgs(
				chart.Chart{
					Title: "Transfer time", XLabel: "time (s)", YLabel: "ms",
					Series: []chart.Series{
						{Name: "mean", Kind: sparse(mean), X: x, Y: mean},
						{Name: "max", Kind: sparse(peak), X: x, Y: peak},
					},
				},
				cdf("Transfer time", quantiles(s.transfers.all, points)),
			),
		})
	}
	return p.write(w)
}

// sparse is how to draw a series with a value in only some buckets: as a line when every bucket has one,
// else as points, since a line broken at every empty bucket shows little.
func sparse(y []float64) chart.Kind {
	for _, v := range y {
		if math.IsNaN(v) {
			return chart.Points
		}
	}
	return chart.Line
}

// cdf is the step chart of a distribution given at evenly spaced quantiles (ascending). Its x axis is
// logarithmic when the values are positive and span two decades or more (a latency's tail), else linear.
func cdf(title string, q []float64) chart.Chart {
	y := make([]float64, len(q))
	for i := range y {
		y[i] = float64(i) / float64(len(q)-1)
	}
	c := chart.Chart{
		Title: title, XLabel: "ms", YLabel: "fraction", YMax: 1,
		Series: []chart.Series{{Name: title, Kind: chart.Step, X: q, Y: y}},
	}
	if len(q) > 0 && q[0] > 0 && q[len(q)-1] >= 100*q[0] {
		c.XLog, c.XLabel = true, "ms (log scale)"
	}
	return c
}

// seconds formats a bucket width: "12.5 s", "250 ms".
func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%.3g ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.3g s", d.Seconds())
}
