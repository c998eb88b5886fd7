package config

import (
	"fmt"

	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/workload"
)

// Settings that only one kind of workload reads, refused by name where the run's workload would leave
// them unread. Serve reads --tokenizer, --default-max-tokens, --output-length-dist and --image-tokens
// for every request, so these are checked where predict and recommend open their workload (SourceWarn),
// not in Validate, which serve shares.

// traceOnly are the settings only a trace's rows read, each with what the synthetic workload has in
// their place ("" for nothing).
var traceOnly = []unreadSetting{
	{"trace-format", ""},
	{"trace-block-size", ""},
	{"tokenizer", "its prompts are token ids, never text"},
	{"default-max-tokens", "a request's output length is drawn from --output-tokens"},
	{"output-length-dist", "a request's output length is drawn from --output-tokens"},
}

// validateSyntheticGiven refuses, on the synthetic workload, a setting given that only a trace reads,
// and one whose subject the synthetic workload, as set, does not have.
func (c *Config) validateSyntheticGiven() error {
	if key, err := c.firstGiven(traceOnly, "applies to a trace, not to the synthetic workload"); err != nil {
		return c.at(key, err)
	}
	fields := c.fieldsByKey()
	const turns = "is the wait between a session's turns, and --turns-per-session is 1"
	for _, s := range []struct {
		key, why string
		unread   bool
	}{
		{"image-tokens", "sizes images, and the synthetic prompts have none (--images-per-request 0)", c.ImagesPerRequest == 0},
		{"dataset-sampling-strategy", "orders the requests' picks from the pool of --num-dataset-entries, which is 0 (every prompt new)", c.NumDatasetEntries == 0},
		{"inter-turn-delay-ms", turns, c.TurnsPerSession <= 1},
		{"inter-turn-delay-dist", turns, c.TurnsPerSession <= 1},
	} {
		if s.unread && c.isGiven(s.key) {
			return c.at(s.key, bad(s.key, fields[s.key].Interface(), s.why))
		}
	}
	return nil
}

// traceReads records what reading a trace used of the settings its rows may leave unread: the
// tokenizer (rows given as text) and the output-length draw (rows without output_length).
type traceReads struct {
	encoded, drawn bool
}

// watch makes opts, whose Tokenizer and OutputLen are set, record in r whether the trace's reading
// tokenises a prompt or draws an output length.
func (r *traceReads) watch(opts *workload.TraceOptions) {
	opts.Tokenizer = encodeWatch{opts.Tokenizer, &r.encoded}
	draw := opts.OutputLen
	opts.OutputLen = func(key uint64) int {
		r.drawn = true
		return draw(key)
	}
}

// encodeWatch is a tokenizer that records, in used, whether it encoded anything.
type encodeWatch struct {
	tokenize.Tokenizer
	used *bool
}

func (w encodeWatch) Encode(text string) []uint32 {
	*w.used = true
	return w.Tokenizer.Encode(text)
}

// validateTraceRead refuses the settings given that the trace's rows, as read (r), left unread:
// --tokenizer where no row is text, --default-max-tokens and --output-length-dist where every row
// gives its output length.
func (c *Config) validateTraceRead(r traceReads) error {
	if c.isGiven("tokenizer") && !r.encoded {
		return c.at("tokenizer", bad("tokenizer", c.Tokenizer, fmt.Sprintf("applies to rows given as text_input or messages, and trace %s has none (its prompts are token counts or hash ids)", c.Trace)))
	}
	for _, key := range []string{"default-max-tokens", "output-length-dist"} {
		if c.isGiven(key) && !r.drawn {
			return c.at(key, bad(key, c.fieldsByKey()[key].Interface(), fmt.Sprintf("applies to rows without output_length, and every row of trace %s gives one", c.Trace)))
		}
	}
	return nil
}
