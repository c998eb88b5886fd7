package live

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mocker-sim/mocker/live/metrics"
	"github.com/mocker-sim/mocker/live/outlen"
	"github.com/mocker-sim/mocker/sched"
)

// admit submits one engine request of maxTokens for prompt, as a choice with ignore_eos is submitted;
// the stream carries its output.
func (s *Server) admit(ctx context.Context, prompt []uint32, maxTokens int) (*Stream, *apiError) {
	if _, e := s.fit(&sampling{maxTokens: maxTokens, maxName: "max_tokens"}, len(prompt)); e != nil {
		return nil, e
	}
	req := s.newRequest(prompt, maxTokens, "")
	st := newStream(req.ID, len(prompt), time.Now(), nil)
	if err := s.submit(ctx, req, st); err != nil {
		return nil, submitError(err)
	}
	return st, nil
}

func mustParse(t *testing.T, dist string) outlen.Model {
	t.Helper()
	m, err := outlen.Parse(dist)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantLength is the length the server's output-length model gives choice j of a request for prompt.
func wantLength(s *Server, prompt []uint32, j, maxTokens int) int {
	return s.o.OutputLength.Draw(s.o.Engine.Seed, new(planBuf).choiceKey(prompt, j, &sampling{n: 1}), maxTokens)
}

var ctx = context.Background()

// The SDK's chat streaming helpers see finish_reason "stop" where the output-length model ends a
// choice early, the usage the stream reports, and "length" with exactly max_tokens under ignore_eos.
func TestChatStreamStop(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.OutputLength = mustParse(t, "lognormal:5:0") // every choice meets its end-of-sequence at 5 tokens
	_, _, c := start(t, o)
	params := openai.ChatCompletionNewParams{
		Model:         testModel,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me a story")},
		MaxTokens:     openai.Int(40),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	for _, tc := range []struct {
		name   string
		opts   []option.RequestOption
		tokens int64
		finish string
	}{
		{"eos", nil, 5, "stop"},
		{"ignore_eos", []option.RequestOption{option.WithJSONSet("ignore_eos", true)}, 40, "length"},
		{"min_tokens", []option.RequestOption{option.WithJSONSet("min_tokens", 12)}, 12, "stop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := c.Chat.Completions.NewStreaming(ctx, params, tc.opts...)
			var acc openai.ChatCompletionAccumulator
			finished := false
			for st.Next() {
				acc.AddChunk(st.Current())
				if _, ok := acc.JustFinishedContent(); ok {
					finished = true
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != tc.finish || acc.Choices[0].Message.Content == "" {
				t.Fatalf("accumulated %+v, want one choice with content and finish_reason %q", acc.Choices, tc.finish)
			}
			if !finished {
				t.Error("the accumulator never reported the content finished")
			}
			if acc.Usage.CompletionTokens != tc.tokens {
				t.Errorf("completion_tokens = %d, want %d", acc.Usage.CompletionTokens, tc.tokens)
			}
		})
	}
}

// n = 3 gives three choices, each of the length the output-length model draws for it (the same,
// streamed or whole), with the usage summed as vLLM sums it.
func TestNChoices(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.OutputLength = mustParse(t, "uniform")
	mx := metrics.New(metrics.Options{Model: testModel, MaxModelLen: 4096})
	o.Metrics, o.Recorder = mx.Handler(), func(w, r int) Recorder { return mx.Rank(w, r) }
	s, hs, c := start(t, o)
	const max = 60
	prompt := "why is the sky blue"
	ids := s.o.Tokenizer.Encode(tokenizeChat(prompt))
	var want []int
	total := 0
	for j := range 3 {
		want = append(want, wantLength(s, ids, j, max))
		total += want[j]
	}
	if want[0] == want[1] && want[1] == want[2] {
		t.Fatalf("lengths %v: the test needs different ones", want)
	}
	params := openai.ChatCompletionNewParams{
		Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens: openai.Int(max), N: openai.Int(3), Logprobs: openai.Bool(true),
	}
	whole, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(whole.Choices) != 3 {
		t.Fatalf("%d choices, want 3", len(whole.Choices))
	}
	for j, ch := range whole.Choices {
		finish := "stop"
		if want[j] == max {
			finish = "length"
		}
		if ch.Index != int64(j) || len(ch.Logprobs.Content) != want[j] || ch.FinishReason != finish {
			t.Errorf("choice %d: index %d, %d tokens, %q; want index %d, %d tokens, %q", j, ch.Index, len(ch.Logprobs.Content), ch.FinishReason, j, want[j], finish)
		}
	}
	if u := whole.Usage; u.CompletionTokens != int64(total) || u.PromptTokens != int64(len(ids)) {
		t.Errorf("usage %d prompt + %d completion tokens, want %d + %d (the prompt once)", u.PromptTokens, u.CompletionTokens, len(ids), total)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := c.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	got := make([]int, 3)
	for st.Next() {
		ch := st.Current()
		acc.AddChunk(ch)
		for _, x := range ch.Choices {
			got[x.Index] += len(x.Logprobs.Content)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) || acc.Usage.CompletionTokens != int64(total) {
		t.Errorf("streamed choices of %v tokens (usage %d), want %v (%d)", got, acc.Usage.CompletionTokens, want, total)
	}
	for j := range 3 {
		if _, ok := acc.JustFinishedContentForChoice(j); !ok && acc.Choices[j].Message.Content == "" {
			t.Errorf("choice %d: no content", j)
		}
	}
	// Each choice is a request to the engine, counted under its own finished_reason.
	stops := 0
	for _, n := range want {
		if n < max {
			stops++
		}
	}
	for _, m := range scrape(t, hs.Client(), hs.URL)["vllm:request_success_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "finished_reason" && l.GetValue() == "stop" && m.GetCounter().GetValue() != float64(2*stops) {
				t.Errorf("request_success_total{finished_reason=stop} = %v, want %d", m.GetCounter().GetValue(), 2*stops)
			}
		}
	}
}

func tokenizeChat(user string) string {
	return "<|start_header_id|>user<|end_header_id|>\n\n" + user + "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
}

// A list of prompts on /v1/completions gets n choices each, numbered prompt × n + j, as vLLM serves a
// batch; the usage counts each prompt once and every choice's output.
func TestPromptList(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	_, _, c := start(t, o)
	prompts := []string{"the cat sat", "on the mat today"}
	res, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfStrings: prompts},
		MaxTokens: openai.Int(4), N: openai.Int(2), Echo: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 4 {
		t.Fatalf("%d choices, want 4", len(res.Choices))
	}
	for i, ch := range res.Choices {
		if ch.Index != int64(i) || !strings.HasPrefix(ch.Text, prompts[i/2]) || len(ch.Text) == len(prompts[i/2]) || ch.FinishReason != "length" {
			t.Errorf("choice %d = index %d %q %q; want the echoed prompt %q and more, length", i, ch.Index, ch.Text, ch.FinishReason, prompts[i/2])
		}
	}
	if u := res.Usage; u.PromptTokens != 3+4 || u.CompletionTokens != 4*4 {
		t.Errorf("usage %+v, want 7 prompt tokens and 16 completion tokens", u)
	}
	// Token-id prompts too.
	res, err = c.Completions.New(ctx, openai.CompletionNewParams{
		Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokenArrays: [][]int64{{300, 301}, {302}, {303, 304, 305}}},
		MaxTokens: openai.Int(2),
	})
	if err != nil || len(res.Choices) != 3 || res.Usage.PromptTokens != 6 || res.Usage.CompletionTokens != 6 {
		t.Fatalf("token prompts: %v, %+v", err, res)
	}
}

// Stop strings cut the synthetic text where they first occur, ending the choice with finish_reason
// "stop" and the string as stop_reason, streamed or whole; stop_token_ids end it at the token.
func TestStop(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	// The first request to a fresh server is request 1: its text is the same on every server.
	fresh := func() (*Server, openai.Client) {
		s, _, c := start(t, o)
		return s, c
	}
	s, c := fresh()
	params := openai.CompletionNewParams{Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello there")},
		MaxTokens: openai.Int(30)}
	full, err := c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	var pieces []string
	for i := range 30 {
		pieces = append(pieces, s.o.Tokenizer.DecodeToken(s.outputID(sched.OutputToken(1, i, nil))))
	}
	text := full.Choices[0].Text
	if text != strings.Join(pieces, "") {
		t.Fatalf("text %q is not its tokens' %q", text, strings.Join(pieces, ""))
	}
	// A stop string that spans tokens 10 and 11: the first occurrence decides.
	at := len(strings.Join(pieces[:10], "")) - 2
	stop := text[at : at+4]
	first := strings.Index(text, stop)
	tokens := 0
	for n := 0; n < first+len(stop); tokens++ {
		n += len(pieces[tokens])
	}

	type result struct {
		text, finish, reason string
		tokens               int64
	}
	// With min_tokens one past the token that completes it, only a later occurrence may stop the choice.
	later := tokens + 1
	afterMin := result{text, "length", "null", 30}
	from := len(strings.Join(pieces[:later-1], "")) - len(stop) + 1
	if k := strings.Index(text[from:], stop); k >= 0 {
		n, end := 0, 0
		for ; end < from+k+len(stop); n++ {
			end += len(pieces[n])
		}
		afterMin = result{text[:from+k], "stop", string(appendJSONString(nil, stop)), int64(n)}
	}
	decode := func(ch openai.CompletionChoice) (string, string) {
		return string(ch.FinishReason), ch.JSON.ExtraFields["stop_reason"].Raw()
	}
	for _, tc := range []struct {
		name string
		opt  []option.RequestOption
		want result
	}{
		{"stop string", []option.RequestOption{option.WithJSONSet("stop", []string{"zzz", stop})},
			result{text[:first], "stop", string(appendJSONString(nil, stop)), int64(tokens)}},
		{"include_stop_str_in_output", []option.RequestOption{option.WithJSONSet("stop", stop), option.WithJSONSet("include_stop_str_in_output", true)},
			result{text[:first+len(stop)], "stop", string(appendJSONString(nil, stop)), int64(tokens)}},
		{"min_tokens past the stop string", []option.RequestOption{option.WithJSONSet("stop", stop), option.WithJSONSet("min_tokens", later)},
			afterMin},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, c := fresh()
			res, err := c.Completions.New(ctx, params, tc.opt...)
			if err != nil {
				t.Fatal(err)
			}
			finish, reason := decode(res.Choices[0])
			got := result{res.Choices[0].Text, finish, reason, res.Usage.CompletionTokens}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			// Streamed, the same text, cut at the same place.
			if tc.want.finish != "stop" {
				return
			}
			_, c = fresh()
			st := c.Completions.NewStreaming(ctx, params, tc.opt...)
			var b strings.Builder
			var last openai.CompletionChoice
			for st.Next() {
				for _, ch := range st.Current().Choices {
					b.WriteString(ch.Text)
					last = ch
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			finish, reason = decode(last)
			if b.String() != tc.want.text || finish != "stop" || reason != tc.want.reason {
				t.Fatalf("streamed %q (%s, %s), want %q (stop, %s)", b.String(), finish, reason, tc.want.text, tc.want.reason)
			}
		})
	}
	t.Run("stop_token_ids", func(t *testing.T) {
		s, c := fresh()
		id := s.outputID(sched.OutputToken(1, 6, nil))
		want := 7
		for i := range 6 {
			if s.outputID(sched.OutputToken(1, i, nil)) == id {
				want = i + 1
				break
			}
		}
		res, err := c.Completions.New(ctx, params, option.WithJSONSet("stop_token_ids", []uint32{id}))
		if err != nil {
			t.Fatal(err)
		}
		finish, reason := decode(res.Choices[0])
		if res.Choices[0].Text != strings.Join(pieces[:want], "") || finish != "stop" || reason != jsonNumber(id) || res.Usage.CompletionTokens != int64(want) {
			t.Fatalf("got %q %s %s %d tokens, want %q stop %d %d", res.Choices[0].Text, finish, reason, res.Usage.CompletionTokens, strings.Join(pieces[:want], ""), id, want)
		}
	})
}

func jsonNumber(id uint32) string { b, _ := json.Marshal(id); return string(b) }

// Logprobs follow OpenAI's two schemas: the chat API's content entries with top_logprobs lists, the
// completions API's four parallel lists; the sampled token is the most likely and the probabilities
// sum to at most 1.
func TestLogprobs(t *testing.T) {
	_, _, c := start(t, testOptions(5, 1, math.Inf(1)))
	chat, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		MaxTokens: openai.Int(8), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(3),
	})
	if err != nil {
		t.Fatal(err)
	}
	content := chat.Choices[0].Logprobs.Content
	var joined strings.Builder
	if len(content) != 8 {
		t.Fatalf("%d logprobs entries, want 8", len(content))
	}
	for i, e := range content {
		joined.WriteString(e.Token)
		sum := 0.0
		if len(e.TopLogprobs) != 3 || e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob || string(bytesOf(e.Bytes)) != e.Token {
			t.Fatalf("entry %d = %+v: want 3 top logprobs, the sampled token first, its bytes", i, e)
		}
		seen := map[string]bool{}
		for k, top := range e.TopLogprobs {
			if top.Logprob >= 0 || k > 0 && top.Logprob >= e.TopLogprobs[k-1].Logprob || seen[top.Token] {
				t.Fatalf("entry %d: top logprobs %+v are not distinct, negative and decreasing", i, e.TopLogprobs)
			}
			seen[top.Token] = true
			sum += math.Exp(top.Logprob)
		}
		if sum > 1 {
			t.Fatalf("entry %d: probabilities sum to %v", i, sum)
		}
	}
	if joined.String() != chat.Choices[0].Message.Content {
		t.Errorf("tokens %q do not make the content %q", joined.String(), chat.Choices[0].Message.Content)
	}

	cmp, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello")},
		MaxTokens: openai.Int(6), Logprobs: openai.Int(2), Echo: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	lp := cmp.Choices[0].Logprobs
	// The SDK drops the list for its null first entry (OpenAI's own shape with echo): read it raw.
	var tops []map[string]float64
	if err := json.Unmarshal([]byte(lp.JSON.TopLogprobs.Raw()), &tops); err != nil {
		t.Fatal(err)
	}
	n := 1 + 6 // the echoed prompt's one token, then the output
	if len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(tops) != n || len(lp.TextOffset) != n {
		t.Fatalf("logprobs lists of %d, %d, %d, %d entries, want %d each", len(lp.Tokens), len(lp.TokenLogprobs), len(tops), len(lp.TextOffset), n)
	}
	if !strings.HasPrefix(cmp.Choices[0].Text, "hello") || !strings.HasSuffix(cmp.Choices[0].Text, strings.Join(lp.Tokens[1:], "")) {
		t.Errorf("text %q: want the prompt, then the tokens %q", cmp.Choices[0].Text, lp.Tokens[1:])
	}
	// The echoed prompt's token is its own text, at 0 (the built-in tokenizer's DecodeToken gave a word
	// of another text, so the tokens did not join into the text their offsets index).
	if lp.Tokens[0] != "hello" || lp.TextOffset[0] != 0 || lp.TextOffset[1] != int64(len("hello")) {
		t.Errorf("echoed prompt: token %q at %d, output from %d; want \"hello\" at 0, output from 5", lp.Tokens[0], lp.TextOffset[0], lp.TextOffset[1])
	}
	three, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hello big world")},
		MaxTokens: openai.Int(1), Logprobs: openai.Int(0), Echo: openai.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := three.Choices[0].Logprobs, []string{"hello", " big", " world"}; len(got.Tokens) != 4 || !slices.Equal(got.Tokens[:3], want) ||
		!slices.Equal(got.TextOffset, []int64{0, 5, 9, 15}) || strings.Join(got.Tokens, "") != three.Choices[0].Text {
		t.Errorf("echoed \"hello big world\": tokens %q at %v, text %q; want %q at 0, 5, 9, then the output at 15, joining into the text",
			got.Tokens, got.TextOffset, three.Choices[0].Text, want)
	}
	if tops[0] != nil || !strings.HasPrefix(lp.JSON.TokenLogprobs.Raw(), "[null,") {
		t.Errorf("the prompt's first token has logprobs %v, %s", tops[0], lp.JSON.TokenLogprobs.Raw())
	}
	off := int64(len("hello"))
	for i := 1; i < n; i++ {
		top := tops[i]
		if len(top) != 2 || top[lp.Tokens[i]] != lp.TokenLogprobs[i] {
			t.Errorf("entry %d: top %v, want 2 entries with the sampled %q at %v", i, top, lp.Tokens[i], lp.TokenLogprobs[i])
		}
		if i > 1 && lp.TextOffset[i] != off {
			t.Errorf("entry %d: text_offset %d, want %d", i, lp.TextOffset[i], off)
		}
		if i > 1 {
			off += int64(len(lp.Tokens[i]))
		} else {
			off += int64(len(lp.Tokens[1]))
		}
	}
}

func bytesOf(b []int64) []byte {
	out := make([]byte, len(b))
	for i, x := range b {
		out[i] = byte(x)
	}
	return out
}

// A prompt over max_model_len, or a prompt + max_tokens over it, gets vLLM's 400 at once, with its
// message and param, before any worker sees it.
func TestMaxModelLen(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	o.MaxModelLen = 64
	s, _, c := start(t, o)
	long := strings.Repeat(" word", 100) // 100 tokens
	_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(long)}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != "input_tokens" || ae.Type != "BadRequestError" ||
		ae.Message != "This model's maximum context length is 64 tokens. However, your request has 100 input tokens. Please reduce the length of the input messages." {
		t.Fatalf("long prompt: %v", err)
	}
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: testModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxCompletionTokens: openai.Int(60)})
	n := len(s.o.Tokenizer.Encode(tokenizeChat("hi")))
	want := "'max_tokens' or 'max_completion_tokens' is too large: 60. This model's maximum context length is 64 tokens and your request has " +
		itoa(n) + " input tokens (60 > 64 - " + itoa(n) + ")."
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != "max_completion_tokens" || ae.Message != want {
		t.Fatalf("max_completion_tokens 60: %v, want %q", err, want)
	}
	for _, w := range s.Workers() {
		if m := w.State()[0]; m.Waiting+m.Running != 0 {
			t.Fatalf("a worker saw a refused request: %+v", m)
		}
	}
	// Without max_tokens a prompt near the limit is served: the default shrinks to fit, as vLLM's does.
	res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(strings.Repeat(" word", 60))}})
	if err != nil || res.Usage.CompletionTokens != 4 {
		t.Fatalf("60-token prompt without max_tokens: %v, %+v; want 4 tokens", err, res)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// stream_options.continuous_usage_stats (vLLM's extension) puts each choice's running usage in every
// chunk; the last chunk has the totals.
func TestContinuousUsage(t *testing.T) {
	_, hs, _ := start(t, testOptions(5, 1, math.Inf(1)))
	body := `{"model": "test-model", "prompt": "a b c", "max_tokens": 5, "n": 2, "stream": true,
		"stream_options": {"include_usage": true, "continuous_usage_stats": true}}`
	res, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	type chunk struct {
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
		Usage *struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
			Total      int `json:"total_tokens"`
		} `json:"usage"`
	}
	var chunks []chunk
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch chunk
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		chunks = append(chunks, ch)
	}
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	last := map[int]int{}
	for _, ch := range chunks[:len(chunks)-1] {
		if len(ch.Choices) != 1 || ch.Usage == nil || ch.Usage.Prompt != 3 || ch.Usage.Total != 3+ch.Usage.Completion {
			t.Fatalf("chunk %+v: want one choice and its usage", ch)
		}
		i := ch.Choices[0].Index
		if ch.Usage.Completion <= last[i] && ch.Choices[0].Text != "" {
			t.Fatalf("choice %d: completion_tokens %d after %d", i, ch.Usage.Completion, last[i])
		}
		last[i] = ch.Usage.Completion
	}
	end := chunks[len(chunks)-1]
	if len(end.Choices) != 0 || end.Usage == nil || end.Usage.Prompt != 3 || end.Usage.Completion != 10 || last[0] != 5 || last[1] != 5 {
		t.Fatalf("final chunk %+v (choices' last counts %v), want 3 prompt + 10 completion tokens", end, last)
	}
}

// An unstreamed response is held whole until it is written: one that could hold more than
// wholeTokens token entries is refused at once; the same request streamed is not.
func TestWholeBudget(t *testing.T) {
	s, hs, _ := start(t, testOptions(5, 1, math.Inf(1)))
	body := `{"model": "test-model", "prompt": "hi", "n": 256, "max_tokens": 16000, "logprobs": 20}`
	status, e := post(t, hs.URL+"/v1/completions", body)
	if status != 400 || e["param"] != "n" || !strings.Contains(e["message"].(string), "would hold 90112000 token entries") {
		t.Fatalf("%d %v", status, e)
	}
	p := &sampling{n: 256, logprobs: 20, stream: true}
	if e := p.wholeBudget([]int{16000}); e != nil {
		t.Fatalf("streamed: %v", e)
	}
	for _, w := range s.Workers() {
		if m := w.State()[0]; m.Waiting+m.Running != 0 {
			t.Fatalf("a worker saw the refused request: %+v", m)
		}
	}
}
