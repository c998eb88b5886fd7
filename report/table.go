package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// tableWidth is the width of vllm bench serve's rules.
const tableWidth = 50

// WriteTable writes s as the human-readable block vllm bench serve prints, with title
// centred in the top rule ("Serving Benchmark Result" if title is empty). Floats have two
// decimals; lines carry no trailing spaces.
func (s Summary) WriteTable(w io.Writer, title string) error {
	if title == "" {
		title = "Serving Benchmark Result"
	}
	var b strings.Builder
	rule(&b, '=', " "+title+" ")
	row(&b, "Successful requests:", strconv.Itoa(s.CompletedRequests))
	row(&b, "Rejected requests:", strconv.Itoa(s.RejectedRequests))
	if s.IncompleteRequests > 0 {
		row(&b, "Incomplete requests:", strconv.Itoa(s.IncompleteRequests))
	}
	if s.NoTTFTRequests > 0 {
		row(&b, "Requests with no TTFT:", strconv.Itoa(s.NoTTFTRequests))
	}
	if s.WorkerFailures > 0 {
		row(&b, "Worker failures:", strconv.Itoa(s.WorkerFailures))
		row(&b, "Failed requests:", strconv.Itoa(s.FailedRequests))
		row(&b, "Retried requests:", strconv.Itoa(s.RetriedRequests))
	}
	row(&b, "Benchmark duration (s):", fixed(s.Duration.Seconds()))
	row(&b, "Total input tokens:", strconv.Itoa(s.TotalInputTokens))
	row(&b, "Total generated tokens:", strconv.Itoa(s.TotalOutputTokens))
	row(&b, "Request throughput (req/s):", fixed(s.RequestThroughput))
	row(&b, "Output token throughput (tok/s):", fixed(s.OutputTokenThroughput))
	var total float64
	if sec := s.Duration.Seconds(); sec > 0 {
		total = float64(s.TotalInputTokens+s.TotalOutputTokens) / sec
	}
	row(&b, "Total Token throughput (tok/s):", fixed(total))
	row(&b, "Prefix cache reused ratio:", fixed(s.PrefixCacheReusedRatio))
	row(&b, "Preemptions:", strconv.Itoa(s.Preemptions))
	if t := s.Tiers; t.On {
		row(&b, "KV hit ratio GPU/CPU/disk:", fixed(t.GPUHitRatio)+" / "+fixed(t.CPUHitRatio)+" / "+fixed(t.DiskHitRatio))
		row(&b, "KV blocks onboarded/offloaded:", strconv.FormatInt(t.OnboardedBlocks, 10)+" / "+strconv.FormatInt(t.OffloadedBlocks, 10))
		row(&b, "KV onboarding time (ms):", fixed(ms(t.OnboardTime)))
	}
	if s.SpecMeanAcceptedLength > 0 {
		row(&b, "Mean accepted length (spec decode):", fixed(s.SpecMeanAcceptedLength))
	}
	if s.ImagesEncoded+s.EncoderCacheHits > 0 {
		row(&b, "Images encoded:", strconv.FormatInt(s.ImagesEncoded, 10))
		row(&b, "Encoder cache hits:", strconv.FormatInt(s.EncoderCacheHits, 10))
	}
	if s.LoRA {
		row(&b, "LoRA adapter loads:", strconv.FormatInt(s.LoRALoads, 10))
	}
	for _, sec := range []struct {
		title, name string
		st          Stats
	}{
		{"Time to First Token", "TTFT", s.TTFT},
		{"Time per Output Token (excl. 1st token)", "TPOT", s.TPOT},
		{"Inter-token Latency", "ITL", s.ITL},
		{"End-to-end Latency", "E2E", s.E2E},
	} {
		rule(&b, '-', sec.title)
		row(&b, "Mean "+sec.name+" (ms):", fixed(sec.st.Mean))
		row(&b, "Median "+sec.name+" (ms):", fixed(sec.st.P50))
		row(&b, "P90 "+sec.name+" (ms):", fixed(sec.st.P90))
		row(&b, "P99 "+sec.name+" (ms):", fixed(sec.st.P99))
	}
	if len(s.Pools) > 1 {
		for _, p := range s.Pools {
			rule(&b, '-', strings.ToUpper(p.Name[:1])+p.Name[1:]+" pool")
			row(&b, "Workers:", strconv.Itoa(p.Workers))
			row(&b, "Busy ratio:", fixed(p.BusyRatio(s.Duration)))
			row(&b, "Prefix cache hit ratio:", fixed(p.PrefixHitRatio()))
			for _, st := range p.Stages {
				row(&b, "Mean "+st.Name+" (ms):", fixed(st.Stats.Mean))
				row(&b, "P99 "+st.Name+" (ms):", fixed(st.Stats.P99))
			}
		}
	}
	if s.GPUHours > 0 {
		rule(&b, '-', "Autoscaling")
		row(&b, "GPU-hours:", fixed(s.GPUHours))
	}
	b.WriteString(strings.Repeat("=", tableWidth))
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// rule writes text centred in a line of fill characters, like Python's
// "{:{c}^50}".format(text): an odd leftover goes to the right.
func rule(b *strings.Builder, fill byte, text string) {
	pad := max(tableWidth-utf8.RuneCountInString(text), 0)
	left := pad / 2
	b.WriteString(strings.Repeat(string(fill), left))
	b.WriteString(text)
	b.WriteString(strings.Repeat(string(fill), pad-left))
	b.WriteByte('\n')
}

// row writes a label padded to 40 columns and its value, like "{:<40} {:<10}" without the
// trailing padding.
func row(b *strings.Builder, label, value string) {
	fmt.Fprintf(b, "%-40s %s\n", label, value)
}

func fixed(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
