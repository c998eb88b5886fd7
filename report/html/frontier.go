package html

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/mocker-sim/mocker/report/chart"
)

// Candidate is one simulated deployment of a search, as the frontier chart needs it.
type Candidate struct {
	Name          string  // the deployment, e.g. "agg vllm TP2 ×4"
	GPUs          int     // GPUs it holds
	TokensPerGPU  float64 // output tokens/s per GPU
	TokensPerUser float64 // output tokens/s per request while decoding (1000 / mean TPOT in ms)
	Pass          bool    // meets every SLA target
	Pareto        bool    // on the frontier: no candidate is better on both axes
	Note          string  // why it failed, or anything else to show beside it
}

// Frontier is a deployment search's result to draw.
type Frontier struct {
	Title, Subtitle string
	Candidates      []Candidate // in the caller's order (its ranking), which the table keeps
	// MinTokensPerUser is the SLA's floor on tokens/s per user (1000 / the ITL or TPOT target in ms),
	// shaded as the region meeting it; 0: none.
	MinTokensPerUser float64
}

// Chart is the Pareto chart: every candidate by tokens/s per user and per GPU, passing and failing
// ones apart, the frontier joined by a line, the SLA's region shaded.
func (f *Frontier) Chart() chart.Chart {
	c := chart.Chart{
		Title:  "Pareto frontier: throughput per GPU vs per user",
		XLabel: "output tokens/s per user", YLabel: "output tokens/s per GPU",
		Width: 900, Height: 420,
	}
	if f.MinTokensPerUser > 0 {
		c.Regions = []chart.Region{{X0: f.MinTokensPerUser, X1: math.Inf(1), Y0: math.Inf(-1), Y1: math.Inf(1),
			Label: "SLA: ≥ " + strconv.FormatFloat(f.MinTokensPerUser, 'f', 1, 64) + " tokens/s per user"}}
	}
	fail := chart.Series{Name: "fails the SLA", Kind: chart.Points, Color: "#bab0ac"}
	pass := chart.Series{Name: "meets the SLA", Kind: chart.Points, Color: "#4e79a7"}
	var pareto []Candidate
	for _, cand := range f.Candidates {
		s := &fail
		if cand.Pass {
			s = &pass
		}
		s.X = append(s.X, cand.TokensPerUser)
		s.Y = append(s.Y, cand.TokensPerGPU)
		s.Labels = append(s.Labels, candidateLabel(cand))
		if cand.Pareto {
			pareto = append(pareto, cand)
		}
	}
	slices.SortStableFunc(pareto, func(a, b Candidate) int { return cmp.Compare(a.TokensPerUser, b.TokensPerUser) })
	front := chart.Series{Name: "Pareto frontier", Color: "#f28e2b"}
	for _, cand := range pareto {
		front.X = append(front.X, cand.TokensPerUser)
		front.Y = append(front.Y, cand.TokensPerGPU)
	}
	c.Series = []chart.Series{front, fail, pass} // the line under the points
	return c
}

func candidateLabel(c Candidate) string {
	verdict := "fails the SLA"
	if c.Pass {
		verdict = "meets the SLA"
	}
	s := fmt.Sprintf("%s: %d GPUs, %.1f tokens/s per GPU, %.1f per user, %s", c.Name, c.GPUs, c.TokensPerGPU, c.TokensPerUser, verdict)
	if c.Note != "" {
		s += " (" + c.Note + ")"
	}
	return s
}

// WriteFrontier writes f's page: the Pareto chart and a table of every candidate.
func WriteFrontier(w io.Writer, f *Frontier) error {
	title := f.Title
	if title == "" {
		title = "mocker recommend"
	}
	t := &table{Class: "notes", Head: []string{"deployment", "GPUs", "tokens/s per GPU", "tokens/s per user", "SLA", "Pareto", "note"}}
	for _, c := range f.Candidates {
		row := tableRow{Class: "fail", Cells: []string{c.Name, strconv.Itoa(c.GPUs), fixed(c.TokensPerGPU), fixed(c.TokensPerUser), "fails", "", c.Note}}
		if c.Pass {
			row.Class, row.Cells[4] = "pass", "meets"
		}
		if c.Pareto {
			row.Cells[5] = "yes"
		}
		t.Rows = append(t.Rows, row)
	}
	passing := 0
	for _, c := range f.Candidates {
		if c.Pass {
			passing++
		}
	}
	note := fmt.Sprintf("%d candidates, %d meeting the SLA; hover a point for its figures.", len(f.Candidates), passing)
	if passing == 0 {
		note = fmt.Sprintf("No candidate meets the SLA (%d tried); hover a point for its figures.", len(f.Candidates))
	}
	p := page{Title: title, Subtitle: f.Subtitle, Sections: []section{
		{Title: "Candidates", Note: note, Charts: svgs(f.Chart())},
		{Title: "Every candidate", Table: t},
	}}
	return p.write(w)
}

func fixed(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
