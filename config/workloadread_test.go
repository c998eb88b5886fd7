package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSyntheticRefusesTraceOnly: a setting only a trace reads, given to a run of the synthetic workload,
// is refused by name where the workload opens; serve, which shares Validate, reads each of them, so
// Validate lets them pass.
func TestSyntheticRefusesTraceOnly(t *testing.T) {
	for _, tc := range []struct {
		key, value, want string
	}{
		{"tokenizer", "tk.json", "tokenizer tk.json: applies to a trace, not to the synthetic workload (its prompts are token ids, never text)"},
		{"trace-format", "azure", "trace-format azure: applies to a trace, not to the synthetic workload"},
		{"trace-block-size", "16", "trace-block-size 16: applies to a trace, not to the synthetic workload"},
		{"default-max-tokens", "5", "default-max-tokens 5: applies to a trace, not to the synthetic workload (a request's output length is drawn from --output-tokens)"},
		{"output-length-dist", "fixed", "output-length-dist fixed: applies to a trace, not to the synthetic workload (a request's output length is drawn from --output-tokens)"},
		{"image-tokens", "100", "image-tokens 100: sizes images, and the synthetic prompts have none (--images-per-request 0)"},
		{"dataset-sampling-strategy", "random", "dataset-sampling-strategy random: orders the requests' picks from the pool of --num-dataset-entries, which is 0 (every prompt new)"},
		{"inter-turn-delay-ms", "5", "inter-turn-delay-ms 5: is the wait between a session's turns, and --turns-per-session is 1"},
		{"inter-turn-delay-dist", "exponential", "inter-turn-delay-dist exponential: is the wait between a session's turns, and --turns-per-session is 1"},
	} {
		c := Default()
		path := filepath.Join(t.TempDir(), "c.yaml")
		os.WriteFile(path, []byte(tc.key+": "+tc.value+"\n"), 0o644)
		if err := c.Load(path); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v, want nil (serve reads it)", tc.key, err)
		}
		want := "config " + path + " line 1: " + tc.want
		if _, err := c.Source(); err == nil || err.Error() != want {
			t.Errorf("%s: Source() = %v, want %q", tc.key, err, want)
		}
	}
	// Images, a pool of prompts and turns make them read.
	// (a pool of prompts does not combine with turns: two runs).
	for _, set := range []func(c *Config){
		func(c *Config) {
			c.ImagesPerRequest, c.ImageTokens, c.NumDatasetEntries, c.DatasetSampling = 1, 100, 10, "random"
			c.Given("image-tokens", "")
			c.Given("dataset-sampling-strategy", "")
		},
		func(c *Config) {
			c.TurnsPerSession, c.InterTurnDelayMs, c.InterTurnDelayDist = 2, 5, "exponential"
			c.Given("inter-turn-delay-ms", "")
			c.Given("inter-turn-delay-dist", "")
		},
	} {
		c := Default()
		set(&c)
		if _, err := c.Source(); err != nil {
			t.Errorf("read where the workload has their subject: Source() = %v", err)
		}
	}
}

// TestTraceRefusesUnread: --tokenizer is refused with a trace none of whose rows is text,
// --trace-block-size with one none of whose rows has hash_ids, --image-tokens with one none of whose
// messages has an image_url part, and --default-max-tokens and --output-length-dist with one whose every
// row gives its output length; a trace that reads them takes them.
func TestTraceRefusesUnread(t *testing.T) {
	dir := t.TempDir()
	write := func(name, rows string) string {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(rows), 0o644)
		return path
	}
	ids := write("ids.jsonl", `{"timestamp":0,"input_length":100,"output_length":10,"hash_ids":[1]}`+"\n")
	text := write("text.jsonl", `{"timestamp":0,"text_input":"hello there"}`+"\n")
	// Lengths, text beside ignored hash ids and images sized by the row: no hash ids read, no image_url.
	unhashed := write("unhashed.jsonl", `{"timestamp":0,"input_length":100,"output_length":10}`+"\n"+
		`{"timestamp":1,"text_input":"hi","hash_ids":[1],"output_length":10}`+"\n"+
		`{"timestamp":2,"input_length":100,"output_length":10,"images":[{"id":"cat","tokens":50}]}`+"\n")
	azure := write("azure.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,100,10\n")
	// One row of hash ids among lengths reads the block size; one image_url part, the image size.
	someIDs := write("someids.jsonl", `{"timestamp":0,"input_length":100,"output_length":10}`+"\n"+
		`{"timestamp":1,"output_length":10,"hash_ids":[1,2]}`+"\n")
	chat := write("chat.jsonl", `{"timestamp":0,"output_length":10,"messages":[{"role":"user","content":[{"type":"text","text":"what is it?"},{"type":"image_url","image_url":{"url":"u"}}]}]}`+"\n")
	tk, err := filepath.Abs("../tokenize/testdata/bytelevel.json")
	if err != nil {
		t.Fatal(err)
	}
	noIDs := ": applies to rows with hash_ids, and trace %s has none (its prompts are text or token counts)"
	noURLs := ": applies to the image_url parts of messages rows, and trace %s has none"
	for _, tc := range []struct {
		trace, key, value, want string
	}{
		{ids, "tokenizer", tk, "tokenizer " + tk + ": applies to rows given as text_input or messages, and trace " + ids + " has none (its prompts are token counts or hash ids)"},
		{ids, "default-max-tokens", "5", "default-max-tokens 5: applies to rows without output_length, and every row of trace " + ids + " gives one"},
		{ids, "output-length-dist", "fixed", "output-length-dist fixed: applies to rows without output_length, and every row of trace " + ids + " gives one"},
		{text, "tokenizer", tk, ""},
		{text, "default-max-tokens", "5", ""},
		{text, "output-length-dist", "fixed", ""},
		{text, "trace-block-size", "16", "trace-block-size 16" + fmt.Sprintf(noIDs, text)},
		{unhashed, "trace-block-size", "16", "trace-block-size 16" + fmt.Sprintf(noIDs, unhashed)},
		{azure, "trace-block-size", "16", "trace-block-size 16" + fmt.Sprintf(noIDs, azure)},
		{ids, "trace-block-size", "100", ""},
		{someIDs, "trace-block-size", "50", ""},
		{ids, "image-tokens", "64", "image-tokens 64" + fmt.Sprintf(noURLs, ids)},
		{unhashed, "image-tokens", "64", "image-tokens 64" + fmt.Sprintf(noURLs, unhashed)},
		{chat, "image-tokens", "64", ""},
	} {
		c := Default()
		c.Trace = tc.trace
		c.Given("trace", "")
		switch tc.key {
		case "tokenizer":
			c.Tokenizer = tc.value
		case "default-max-tokens":
			c.DefaultMaxTokens = 5
		case "output-length-dist":
			c.OutputLengthDist = tc.value
		case "trace-block-size":
			c.TraceBlockSize, _ = strconv.Atoi(tc.value)
		case "image-tokens":
			c.ImageTokens, _ = strconv.Atoi(tc.value)
		}
		c.Given(tc.key, "")
		if err := c.Validate(); err != nil {
			t.Fatalf("%s with %s: Validate() = %v", tc.key, tc.trace, err)
		}
		_, err := c.Source()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s with %s: Source() = %v, want nil", tc.key, filepath.Base(tc.trace), err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s with %s: Source() = %v, want %q", tc.key, filepath.Base(tc.trace), err, tc.want)
		}
	}
}
