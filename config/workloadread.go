package config

import (
	"fmt"

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

// validateTraceRead refuses the settings given that the trace's rows, as read (u), left unread:
// --tokenizer where no row is text, --trace-block-size where none has hash ids, --image-tokens where
// no messages row has an image_url part, --default-max-tokens and --output-length-dist where every
// row gives its output length.
func (c *Config) validateTraceRead(u workload.TraceUse) error {
	const lengthGiven = "applies to rows without output_length, and every row of trace %s gives one"
	for _, s := range []struct {
		key, why string
		read     bool
	}{
		{"tokenizer", "applies to rows given as text_input or messages, and trace %s has none (its prompts are token counts or hash ids)", u.Tokenizer},
		{"trace-block-size", "applies to rows with hash_ids, and trace %s has none (its prompts are text or token counts)", u.BlockSize},
		{"image-tokens", "applies to the image_url parts of messages rows, and trace %s has none", u.ImageTokens},
		{"default-max-tokens", lengthGiven, u.OutputLen},
		{"output-length-dist", lengthGiven, u.OutputLen},
	} {
		if !s.read && c.isGiven(s.key) {
			return c.at(s.key, bad(s.key, c.fieldsByKey()[s.key].Interface(), fmt.Sprintf(s.why, c.Trace)))
		}
	}
	return nil
}
