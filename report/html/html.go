// Package html renders a run as one self-contained HTML page: the summary table and charts drawn as
// inline SVG by package chart, with no script, font or style sheet from the network, so the file opens
// anywhere, offline, and can be mailed or archived as it is.
//
// Start with [WriteRun] (mocker predict --html): latency CDFs from the report.Collector, and series
// over time — throughput, queue, running requests and KV usage per worker, preemptions and
// prefix-cache hit rate per pool, KV transfer times — from a timeline.Recorder, bucketed over the run
// so a trace of any length gives a page of about the same size. [WriteFrontier] draws a deployment
// search's candidates (mocker recommend --html) from plain values, so its caller converts its results
// and this package imports no search code. Equal inputs give byte-identical pages.
package html

import (
	_ "embed"
	"html/template"
	"io"
	"strings"

	"github.com/mocker-sim/mocker/report/chart"
)

//go:embed page.html.tmpl
var pageText string

var pageTmpl = template.Must(template.New("page").Parse(pageText))

// page is what the template lays out.
type page struct {
	Title, Subtitle string
	Sections        []section
}

// section is a heading, an optional table, and charts side by side.
type section struct {
	Title  string
	Note   string
	Table  *table
	Charts []template.HTML
}

type table struct {
	Class string // "notes": the last column is text, aligned left
	Head  []string
	Rows  []tableRow
}

// tableRow is a row of cells, or a sub-heading spanning the table when Heading is set.
type tableRow struct {
	Heading string
	Cells   []string
	Class   string // "pass", "fail" or ""
}

// svgs renders charts for the template. Their text is escaped by package chart.
func svgs(cs ...chart.Chart) []template.HTML {
	out := make([]template.HTML, len(cs))
	for i := range cs {
		out[i] = template.HTML(cs[i].SVG())
	}
	return out
}

func (p *page) write(w io.Writer) error { return pageTmpl.Execute(w, p) }

// textTable turns report.Summary.WriteTable's text (rules with a centred title, then "label  value"
// rows) into a table, so the page shows exactly the figures the terminal does.
func textTable(text string) *table {
	t := &table{}
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\n")
		if line == "" {
			continue
		}
		if c := line[0]; (c == '=' || c == '-') && strings.HasSuffix(line, string(c)) {
			if title := strings.Trim(line, string(c)+" "); title != "" {
				t.Rows = append(t.Rows, tableRow{Heading: title})
			}
			continue
		}
		label, value := line, ""
		if i := strings.LastIndex(line, " "); i >= 0 {
			label, value = strings.TrimSpace(line[:i]), line[i+1:]
		}
		t.Rows = append(t.Rows, tableRow{Cells: []string{label, value}})
	}
	return t
}
