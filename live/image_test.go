package live

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/vllmevents"
	"github.com/mocker-sim/mocker/tokenize"
	"github.com/mocker-sim/mocker/tokens"
)

// TestChatImages: image_url parts count --image-tokens each in the prompt and their identity (the URL,
// never fetched) splits prefix caching: the same chat hits its image's blocks, the same text with another
// image shares only the blocks before it.
func TestChatImages(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.ImageTokens = 40
	_, _, c := start(t, o)
	const cat, dog = "data:image/png;base64,iVBORw0KGgo=", "https://example.com/dog.jpg"
	chat := func(image string, text ...string) *openai.ChatCompletion {
		t.Helper()
		first := longPrompt + " What is in this picture? "
		if len(text) > 0 {
			first = text[0]
		}
		parts := []openai.ChatCompletionContentPartUnionParam{openai.TextContentPart(first)}
		if image != "" {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: image, Detail: "low"}))
		}
		parts = append(parts, openai.TextContentPart(" Answer briefly."))
		r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: testModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(parts)}, MaxTokens: openai.Int(2)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	text := chat("")
	first := chat(cat)
	if got, want := first.Usage.PromptTokens, text.Usage.PromptTokens+40; got != want {
		t.Errorf("prompt_tokens with an image = %d, want %d (the text's and 40)", got, want)
	}
	// The tokens before the image: the chat's header and the first text part.
	before := int64(len(tokenize.Builtin().Encode("<|start_header_id|>user<|end_header_id|>\n\n" + longPrompt + " What is in this picture? ")))
	again := chat(cat)
	if got, want := again.Usage.PromptTokensDetails.CachedTokens, (first.Usage.PromptTokens-1)/16*16; got != want {
		t.Errorf("the same chat again: cached_tokens = %d, want %d", got, want)
	}
	// A text holding NULs, which mark the images while the chat is rendered, is still split only there.
	if got, want := chat(dog, "a\x00b\x00\x00 ").Usage.PromptTokens, chat("", "a\x00b\x00\x00 ").Usage.PromptTokens+40; got != want {
		t.Errorf("text with NULs and an image: prompt_tokens = %d, want %d", got, want)
	}
	other := chat(dog)
	if got, want := other.Usage.PromptTokensDetails.CachedTokens, before/16*16; got != want {
		t.Errorf("the same text with another image: cached_tokens = %d, want %d (the blocks before the image at %d)", got, want, before)
	}
}

// TestChatImageErrors: a malformed image_url part is an OpenAI-shaped 400 naming its part.
func TestChatImageErrors(t *testing.T) {
	_, hs, _ := start(t, testOptions(5, 1, math.Inf(1)))
	for _, tc := range []struct{ part, msg string }{
		{`{"type": "image_url"}`, `an image_url part needs "image_url": {"url": ...}`},
		{`{"type": "image_url", "image_url": {}}`, `an image_url part needs "image_url": {"url": ...}`},
		{`{"type": "image_url", "image_url": {"url": "ftp://x/y.png"}}`, "image_url.url: want a data: URL or an http(s) URL"},
		{`{"type": "image_url", "image_url": {"url": "data:image/png;base64"}}`, "image_url.url: a data: URL needs a comma before its data"},
		{`{"type": "image_url", "image_url": {"url": "data:image/png;base64,"}}`, "image_url.url: the data: URL has no data"},
		{`{"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}`, "image_url.url: invalid base64 data"},
		{`{"type": "image_url", "image_url": {"url": "data:text/plain,hello"}}`, `image_url.url: the data: URL's media type "text/plain" is not an image`},
		{`{"type": "image_url", "image_url": {"url": "https://"}}`, "image_url.url: not a valid http(s) URL"},
		{`{"type": "image_url", "image_url": {"url": "https://a/b.png", "detail": "ultra"}}`, `image_url.detail "ultra": want auto, low, high or original`},
		{`{"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}}`, `unsupported part type "input_audio" (want text or image_url)`},
		{`{"type": "text"}`, `a text part needs "text", a string`},
	} {
		body := `{"model": "` + testModel + `", "max_tokens": 2, "messages": [{"role": "system", "content": "hi"}, {"role": "user", "content": [{"type": "text", "text": "look"}, ` + tc.part + `]}]}`
		resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Message, Type, Param string }
		}
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		const param = "messages[1].content[1]"
		if err != nil || resp.StatusCode != http.StatusBadRequest || e.Error.Param != param || e.Error.Type != "invalid_request_error" ||
			!strings.HasPrefix(e.Error.Message, param+": "+tc.msg) {
			t.Errorf("%s: %d %+v (%v), want 400 param %s message %q", tc.part, resp.StatusCode, e.Error, err, param, tc.msg)
		}
	}
}

// TestZMQImageBlocks: a prompt's blocks reach vLLM's event format whole when it has images, and a block
// overlapping an image hashes with the image's key as its extra_keys (the others as plain blocks).
func TestZMQImageBlocks(t *testing.T) {
	zs, err := NewZMQSink(ZMQOptions{Host: "127.0.0.1", Workers: 1, BlockSize: 4, Topics: []string{"kv"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zs.Close() })
	prompt := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	img := tokens.Item{Key: 0xbeef, Start: 5, Len: 2} // block 1 only
	zs.PromptImages(7, prompt, "", []tokens.Item{img})
	seq := tokens.NewSequence(4)
	seq.AddItems(img)
	seq.Append(prompt...)
	ev, ok := zs.translate(kvcache.Event{Kind: kvcache.Stored, Blocks: seq.Blocks()}).(vllmevents.BlockStored)
	if !ok || len(ev.BlockHashes) != 3 {
		t.Fatalf("stored %+v, want the prompt's 3 blocks", ev)
	}
	h := vllmevents.NewHasher("")
	b0 := h.Block(h.NoneHash(), prompt[:4])
	b1 := h.BlockExtra(b0, prompt[4:8], []string{"beef"})
	b2 := h.Block(b1, prompt[8:12])
	for i, want := range [][32]byte{b0, b1, b2} {
		if ev.BlockHashes[i] != vllmevents.External(want) {
			t.Errorf("block %d: %x, want %x", i, ev.BlockHashes[i], vllmevents.External(want))
		}
	}
	if b1 == h.Block(b0, prompt[4:8]) {
		t.Error("the image's block hashes as a plain one")
	}
}

// TestFleetImages: a fleet frontend sends a chat's images to its worker, so the worker's blocks and
// cache hits are those of one process.
func TestFleetImages(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	url := embeddedNATS(t, 0)
	startFleetWorker(t, url, o, 7)
	f, cf := startFrontend(t, url, o, time.Minute)
	fleetWait(t, "the frontend to find the worker", func() bool { return len(f.FleetWorkers()) == 1 })
	_, _, local := start(t, o)
	for _, image := range []string{"https://example.com/cat.png", "https://example.com/cat.png", "https://example.com/dog.png"} {
		var usage [2]openai.CompletionUsage
		for i, c := range []openai.Client{cf, local} {
			r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: testModel, MaxTokens: openai.Int(2),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
					openai.TextContentPart(longPrompt), openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: image}),
					openai.TextContentPart("What is it?")})}})
			if err != nil {
				t.Fatal(err)
			}
			usage[i] = r.Usage
		}
		if f, l := usage[0], usage[1]; f.PromptTokens != l.PromptTokens || f.PromptTokensDetails.CachedTokens != l.PromptTokensDetails.CachedTokens {
			t.Errorf("%s: fleet prompt %d cached %d; one process %d, %d", image, f.PromptTokens, f.PromptTokensDetails.CachedTokens,
				l.PromptTokens, l.PromptTokensDetails.CachedTokens)
		}
	}
	for _, tc := range []struct {
		images []tokens.Item
		ok     bool
	}{
		{[]tokens.Item{{Key: 1, Start: 0, Len: 2}, {Key: 2, Start: 2, Len: 2}}, true},
		{[]tokens.Item{{Key: 1, Start: 0, Len: 0}}, false},
		{[]tokens.Item{{Key: 1, Start: -1, Len: 2}}, false},
		{[]tokens.Item{{Key: 1, Start: 2, Len: 2}, {Key: 2, Start: 3, Len: 1}}, false},
		{[]tokens.Item{{Key: 1, Start: 3, Len: 2}}, false},
		{[]tokens.Item{{Key: 1, Start: 1, Len: math.MaxInt}}, false},
	} {
		if err := checkImages(tc.images, 4); (err == nil) != tc.ok {
			t.Errorf("checkImages(%+v, 4) = %v, want ok %v", tc.images, err, tc.ok)
		}
	}
}
