package workload

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/tokens"
)

func TestTraceImages(t *testing.T) {
	rows := `{"timestamp": 0, "input_length": 2000, "output_length": 4, "hash_ids": [1, 2, 3, 4], "images": [{"id": "cat.png", "tokens": 576}, {"id": 7, "width": 1024, "height": 768, "offset": 900}]}
{"timestamp": 1, "input_length": 600, "output_length": 4, "images": [{"id": "cat.png", "tokens": 576, "offset": 24}]}
{"timestamp": 2, "input_length": 10, "output_length": 4}
`
	reqs := requests(readMooncakeString(t, rows, TraceOptions{}))
	cat := ImageKey("cat.png")
	for i, want := range [][]tokens.Item{
		{{Key: cat, Start: 0, Len: 576}, {Key: ImageKey("7"), Start: 900, Len: 37 * 28}}, // 1024/28 → 37, 768/28 → 28 (27.4)
		{{Key: cat, Start: 24, Len: 576}},
		nil,
	} {
		if !slices.Equal(reqs[i].Images, want) {
			t.Errorf("row %d: images %+v, want %+v", i+1, reqs[i].Images, want)
		}
	}
	if got := imageTokens(reqs[0]); got != 576+1036 {
		t.Errorf("row 1: %d image tokens, want %d", got, 576+1036)
	}
	// The images' keys enter the hashes of the blocks they overlap (512 tokens per block at the
	// trace's block size): row 1's blocks all carry an image, a copy of it without images shares none.
	withImages := tokens.NewSequence(512)
	reqs[0].AppendSequence(withImages)
	plain := reqs[0]
	plain.Images = nil
	without := tokens.NewSequence(512)
	plain.AppendSequence(without)
	for i, b := range withImages.Blocks() {
		if b == without.Blocks()[i] {
			t.Errorf("block %d: the same with and without images", i)
		}
	}
}

func TestTraceImageErrors(t *testing.T) {
	ok := `{"timestamp": 0, "input_length": 100, "output_length": 4}` + "\n"
	for _, tc := range []struct{ images, field, sub string }{
		{`{"id": "a"}`, "images", "want an array of images, got object"},
		{`["a"]`, "images[0]", "want an object, got string"},
		{`[{"tokens": 10}]`, "images[0].id", "missing"},
		{`[{"id": "a"}]`, "images[0].tokens", "missing (give tokens, or width and height)"},
		{`[{"id": "a", "tokens": 10}, {"id": "b", "tokens": 0}]`, "images[1].tokens", "must be >= 1, got 0"},
		{`[{"id": "a", "tokens": 10, "width": 5, "height": 5}]`, "images[0].tokens", "give tokens or width and height, not both"},
		{`[{"id": "a", "width": 5}]`, "images[0].tokens", "missing (give tokens, or width and height)"},
		{`[{"id": "a", "tokens": 10, "offset": -1}]`, "images[0].offset", "must be >= 0, got -1"},
		{`[{"id": "a", "tokens": 10, "offset": 50}, {"id": "b", "tokens": 5, "offset": 55}]`, "images[1].offset", "55 is before the end of image 0 (60)"},
		{`[{"id": "a", "tokens": 10, "size": 5}]`, "images[0].size", "unknown field (want id, tokens, width, height, offset)"},
		{`[{"id": true, "tokens": 10}]`, "images[0].id", "want a string or an integer, got true"},
		{`[{"id": "a", "tokens": 60}, {"id": "b", "tokens": 50}]`, "images[1]", "tokens [60, 110) end past the prompt's 100 tokens (input_length counts the images' tokens)"},
		{`[{"id": "a", "width": 200000, "height": 200000}]`, "images[0].width", "200000 × 200000 pixels make 51022449 tokens, more than 16777216"},
	} {
		row := `{"timestamp": 1, "input_length": 100, "output_length": 4, "images": ` + tc.images + "}\n"
		_, err := ReadTrace(strings.NewReader(ok+row), "t.jsonl", TraceOptions{})
		checkTraceError(t, err, "t.jsonl", 2, tc.field, tc.sub)
	}
}

// TestSyntheticImages: images follow the shared prefix as placeholder tokens and add to the prompt's
// length; a pool of 2 images repeats them, and without a pool no two images are the same.
func TestSyntheticImages(t *testing.T) {
	opts := SyntheticOptions{NumRequests: 40, Input: Length{Mean: 100}, Output: Length{Mean: 4}, RequestRate: math.Inf(1),
		SharedPrefixRatio: 0.5, NumPrefixGroups: 1, ImagesPerRequest: 2, ImageTokens: 30, ImagePool: 2, Seed: 3}
	src, err := NewSynthetic(opts)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[uint64]int{}
	for _, r := range requests(collect(t, src)) {
		if r.InputLen != 160 || len(r.Images) != 2 || r.Images[0].Start != 50 || r.Images[1].Start != 80 || r.Images[1].Len != 30 {
			t.Fatalf("request %d: input %d, images %+v; want 160 tokens, images at 50 and 80 of 30", r.Key, r.InputLen, r.Images)
		}
		toks := r.AppendTokens(nil)
		for i := 50; i < 110; i++ {
			if toks[i] != ImageToken {
				t.Fatalf("request %d: token %d is %d, want the image placeholder %d", r.Key, i, toks[i], ImageToken)
			}
		}
		if toks[49] == ImageToken || toks[110] == ImageToken {
			t.Fatalf("request %d: placeholders outside the images", r.Key)
		}
		for _, im := range r.Images {
			keys[im.Key]++
		}
	}
	if len(keys) != 2 {
		t.Errorf("pool of 2: %d distinct images", len(keys))
	}
	opts.ImagePool = 0
	src, _ = NewSynthetic(opts)
	clear(keys)
	for _, r := range requests(collect(t, src)) {
		for _, im := range r.Images {
			keys[im.Key]++
		}
	}
	if len(keys) != 80 {
		t.Errorf("no pool: %d distinct images of 80", len(keys))
	}
	// Without images, the workload is the one it was: the image streams draw nothing.
	opts.ImagesPerRequest, opts.ImageTokens = 0, 0
	a, _ := NewSynthetic(opts)
	b, _ := NewSynthetic(SyntheticOptions{NumRequests: 40, Input: Length{Mean: 100}, Output: Length{Mean: 4}, RequestRate: math.Inf(1),
		SharedPrefixRatio: 0.5, NumPrefixGroups: 1, Seed: 3})
	ra, rb := requests(collect(t, a)), requests(collect(t, b))
	for i := range ra {
		if !slices.Equal(ra[i].AppendTokens(nil), rb[i].AppendTokens(nil)) || ra[i].Images != nil {
			t.Fatalf("request %d differs without images", i)
		}
	}
}

func TestSyntheticImageErrors(t *testing.T) {
	base := SyntheticOptions{NumRequests: 1, Input: Length{Mean: 10}, RequestRate: 1}
	for _, tc := range []struct {
		set  func(*SyntheticOptions)
		want string
	}{
		{func(o *SyntheticOptions) { o.ImagesPerRequest = -1 }, "synthetic: images-per-request: must be >= 0, got -1"},
		{func(o *SyntheticOptions) { o.ImagePool = 3 }, "synthetic: image-pool: needs images-per-request >= 1"},
		{func(o *SyntheticOptions) { o.ImageTokens = 3 }, "synthetic: image-tokens: needs images-per-request >= 1"},
		{func(o *SyntheticOptions) { o.ImagesPerRequest = 1 }, "synthetic: image-tokens: must be >= 1 with images, got 0"},
		{func(o *SyntheticOptions) { o.ImagesPerRequest, o.ImageTokens, o.ImagePool = 1, 5, -1 }, "synthetic: image-pool: must be >= 0, got -1"},
		{func(o *SyntheticOptions) { o.ImagesPerRequest, o.ImageTokens = 4, 1<<22 }, "synthetic: image-tokens: 4 images of 4194304 tokens are more than 8388608 tokens"},
		{func(o *SyntheticOptions) { o.ImagesPerRequest, o.ImageTokens, o.TurnsPerSession = 1, 5, 2 }, "synthetic: images-per-request: images do not combine with turns-per-session > 1 yet"},
	} {
		o := base
		tc.set(&o)
		if _, err := NewSynthetic(o); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// TestTraceMessageImages: a messages row's image_url parts are images of TraceOptions.ImageTokens tokens
// in their place, keyed by their URL, as serve makes them.
func TestTraceMessageImages(t *testing.T) {
	row := `{"timestamp": 0, "output_length": 2, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "what is this? "}, {"type": "image_url", "image_url": {"url": "https://h/cat.png"}}, {"type": "text", "text": " and this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}` + "\n"
	r := requests(readMooncakeString(t, row, TraceOptions{ImageTokens: 10}))[0]
	tk := tokenize.Builtin()
	msgs := []tokenize.Message{{Role: "system", Content: "be brief"}, {Role: "user"}}
	ids, starts := tokenize.EncodeChatImages(tk, msgs, [][]string{{"be brief"}, {"what is this? ", " and this?", ""}}, 10)
	want := []tokens.Item{{Key: ImageKey("https://h/cat.png"), Start: starts[0], Len: 10}, {Key: ImageKey("data:image/png;base64,AAAA"), Start: starts[1], Len: 10}}
	if !slices.Equal(r.Images, want) || !slices.Equal(r.AppendTokens(nil), ids) {
		t.Fatalf("images %+v, want %+v; tokens %v, want %v", r.Images, want, r.AppendTokens(nil), ids)
	}
	before := "<|start_header_id|>system<|end_header_id|>\n\nbe brief<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nwhat is this? "
	if starts[0] != len(tk.Encode(before)) || imageTokens(r) != 20 {
		t.Errorf("first image at %d, want %d; %d image tokens, want 20", starts[0], len(tk.Encode(before)), imageTokens(r))
	}
}

// imageTokens is the number of image tokens of a request.
func imageTokens(r Request) int {
	n := 0
	for _, it := range r.Images {
		n += it.Len
	}
	return n
}
