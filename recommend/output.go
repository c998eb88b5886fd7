package recommend

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON; equal reports give byte-identical files.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Deployment names a candidate's deployment: "3 × vllm agg tp1 ..." or "2P+4D vllm disagg 1:2 ...".
func (c *Candidate) Deployment() string {
	if c.Shape.Disagg {
		return fmt.Sprintf("%dP+%dD %s", c.PrefillWorkers, c.DecodeWorkers, c.Shape)
	}
	return fmt.Sprintf("%d × %s", c.Workers, c.Shape)
}

// rows is how many candidates a table lists, refusedRows how many shapes refused.
const rows, refusedRows = 10, 4

// WriteTable writes the report for a terminal: what the search did, the candidates that pass, ranked,
// and the Pareto frontier; or, when none passes, the closest and what bounds them.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Targets: %s; objective: %s.\n", strings.Join(r.Targets, ", "), r.Objective)
	fmt.Fprintf(&b, "Searched %s: %s simulated (%d stopped early once a target was certainly missed), %s skipped (%s ruled out by a TTFT or ITL bound, the rest by bisection over workers).\n",
		count(len(r.Shapes), "shape"), count(r.Simulated, "run"), r.StoppedEarly, count(r.Skipped, "deployment"), count(r.BoundPruned, "shape"))
	if len(r.Refused) > 0 {
		// A typo in a list (--backends vllm,sglng) or a model too large for a TP shows here.
		fmt.Fprintf(&b, "%s not a valid deployment:\n", count(len(r.Refused), "shape of the space is", "shapes of the space are"))
		lines := r.refusedLines()
		for i, why := range lines {
			if i == refusedRows {
				more := "more lines" // a line may stand for many shapes (every sglng shape (6))
				if len(lines)-i == 1 {
					more = "more line"
				}
				fmt.Fprintf(&b, "  ... %d %s (--report-json lists every shape)\n", len(lines)-i, more)
				break
			}
			fmt.Fprintf(&b, "  %s\n", why)
		}
	}
	if r.Objective == MaxRate {
		r.rateTable(&b)
	}
	var pass []int
	for i, c := range r.Candidates {
		if c.Pass {
			pass = append(pass, i)
		}
	}
	if len(pass) == 0 {
		r.noCandidate(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	fmt.Fprintf(&b, "\n%s the targets; the best:\n", count(len(pass), "run meets", "runs meet"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "#\tGPUs\t")
	for _, t := range r.Targets {
		tg, _ := ParseTarget(t)
		fmt.Fprintf(tw, "%s ms\t", tg.Label())
	}
	fmt.Fprint(tw, "req/s\ttok/s/GPU\ttok/s/user\tpareto\t  deployment\n")
	var frontier []string
	for n, i := range pass {
		c := &r.Candidates[i]
		if c.Pareto {
			frontier = append(frontier, fmt.Sprintf("#%d (%.0f tok/s/GPU, %.1f tok/s/user)", n+1, c.Figures.PerGPU, c.Figures.PerUser))
		}
		if n >= rows {
			continue
		}
		fmt.Fprintf(tw, "%d\t%d\t", n+1, c.GPUs)
		for _, ch := range c.Checks {
			fmt.Fprintf(tw, "%.1f\t", ch.Ms)
		}
		mark := ""
		if c.Pareto {
			mark = "*"
		}
		fmt.Fprintf(tw, "%.2f\t%.0f\t%.1f\t%s\t  %s\n", c.Figures.RequestThroughput, c.Figures.PerGPU, c.Figures.PerUser, mark, c.rateNote())
	}
	tw.Flush()
	if len(pass) > rows {
		fmt.Fprintf(&b, "... %d more (--report-json has every run)\n", len(pass)-rows)
	}
	if n := len(frontier); n > rows {
		frontier = append(frontier[:rows], fmt.Sprintf("and %d more", n-rows))
	}
	fmt.Fprintf(&b, "Pareto frontier (output tokens/s per GPU vs per user): %s\n", strings.Join(frontier, ", "))
	_, err := io.WriteString(w, b.String())
	return err
}

// rateNote is the deployment, with its arrival-rate scale when it is not 1.
func (c *Candidate) rateNote() string {
	if c.RateScale != 1 {
		return fmt.Sprintf("%s at %.3g× the rate", c.Deployment(), c.RateScale)
	}
	return c.Deployment()
}

// noCandidate says that nothing passes, which runs came closest and what each misses, and what
// bounds the shapes.
func (r *Report) noCandidate(b *strings.Builder) {
	fmt.Fprintf(b, "\nNo deployment in the search space meets the targets.\n")
	shown := 0
	for i := range r.Candidates {
		c := &r.Candidates[i]
		if c.Figures == nil || shown == 3 {
			continue
		}
		if shown == 0 {
			fmt.Fprintln(b, "Closest:")
		}
		shown++
		fmt.Fprintf(b, "  %s (%d GPUs): %s\n", c.rateNote(), c.GPUs, c.Why)
		if sr := r.shape(c.Shape); sr != nil {
			for _, tb := range sr.Bounds {
				t, _ := ParseTarget(tb.Target)
				fmt.Fprintf(b, "    %s at least %.1f ms: %s\n", t.Label(), tb.Ms, tb.What)
			}
		}
	}
	if shown == 0 {
		for i := range r.Candidates[:min(3, len(r.Candidates))] {
			c := &r.Candidates[i]
			fmt.Fprintf(b, "  %s (%d GPUs): %s\n", c.rateNote(), c.GPUs, c.Why)
		}
	}
	var ruled []string
	for _, s := range r.Shapes {
		if s.Infeasible != "" {
			ruled = append(ruled, fmt.Sprintf("  %s: %s\n", s.Shape, s.Infeasible))
		}
	}
	if len(ruled) > 0 {
		fmt.Fprintf(b, "Ruled out at any worker count by a lower bound (a request alone on an idle worker, with the best prefix cache possible):\n")
		for i, l := range ruled {
			if i == rows {
				fmt.Fprintf(b, "  ... %d more (--report-json)\n", len(ruled)-i)
				break
			}
			b.WriteString(l)
		}
	}
}

// shape is the result of shape s.
func (r *Report) shape(s Shape) *ShapeResult {
	for i := range r.Shapes {
		if r.Shapes[i].Shape == s {
			return &r.Shapes[i]
		}
	}
	return nil
}

// rateTable lists each deployment's highest sustained arrival-rate scale.
func (r *Report) rateTable(b *strings.Builder) {
	fmt.Fprintf(b, "\nHighest arrival rate (× the workload's) each deployment sustains:\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "passes at\tfails at\t  deployment\n")
	for _, s := range r.Shapes {
		if s.Infeasible != "" {
			fmt.Fprintf(tw, "-\t-\t  %s: %s\n", s.Shape, s.Infeasible)
			continue
		}
		for _, br := range s.Rates {
			c := Candidate{Shape: s.Shape, Workers: br.Scale}
			if s.Shape.Disagg {
				c.PrefillWorkers, c.DecodeWorkers = br.Scale*s.Shape.ratio.Prefill, br.Scale*s.Shape.ratio.Decode
			}
			pass, fail := fmt.Sprintf("%.3g×", br.Pass), fmt.Sprintf("%.3g×", br.Fail)
			if br.Pass == 0 {
				pass = fmt.Sprintf("< %.3g×", 1.0/maxRateScale)
			}
			if br.Fail == 0 {
				fail = fmt.Sprintf("> %d×", maxRateScale)
			}
			fmt.Fprintf(tw, "%s\t%s\t  %s\n", pass, fail, c.Deployment())
		}
	}
	tw.Flush()
}

// refusedLines are the table's lines for the refused shapes (Refused, "shape: why"): one a shape, but
// a backend none of whose shapes was searched, all refused for one reason (a setting it cannot take:
// --timing default on trtllm, a profile measured for another model), has one line naming it.
func (r *Report) refusedLines() []string {
	why := map[string]string{}      // a backend's one reason, "" for none: several, or a shape searched
	shapes := map[string][]string{} // a backend's refused shapes, in order
	for _, s := range r.Shapes {
		why[s.Shape.Backend] = ""
	}
	for _, line := range r.Refused {
		shape, reason, _ := strings.Cut(line, ": ")
		backend, _, _ := strings.Cut(shape, " ")
		if w, ok := why[backend]; !ok {
			why[backend] = reason
		} else if w != reason {
			why[backend] = ""
		}
		shapes[backend] = append(shapes[backend], line)
	}
	var lines []string
	for _, line := range r.Refused {
		shape, _, _ := strings.Cut(line, ": ")
		backend, _, _ := strings.Cut(shape, " ")
		switch n := len(shapes[backend]); {
		case n < 2 || why[backend] == "":
			lines = append(lines, line)
		case shapes[backend][0] == line:
			lines = append(lines, fmt.Sprintf("every %s shape (%d): %s", backend, n, why[backend]))
		}
	}
	return lines
}

// count is "1 shape", "2 shapes"; plural, if given, replaces noun+"s".
func count(n int, noun string, plural ...string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case len(plural) > 0:
		return fmt.Sprintf("%d %s", n, plural[0])
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
