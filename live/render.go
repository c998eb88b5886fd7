package live

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/mocker-sim/mocker/tokenize"
)

// response writes one request's OpenAI response objects.
type response struct {
	s       *Server
	p       *sampling
	chat    bool
	id      uint64
	created int64
	prompts []prompt
	choices []*choice
}

// appendOutput appends the text c shows of its new tokens toks (a stop string cuts it), and their
// logprobs to lps when the request asks for them. Output is decoded one token at a time: a stream's
// chunks are cut between tokens, so its text is this, whatever the tokenizer.
func (rs *response) appendOutput(b []byte, c *choice, toks []uint32, lps *logprobs) []byte {
	for _, t := range toks {
		t = rs.s.outputID(t)
		piece := rs.s.o.Tokenizer.DecodeToken(t)
		shown := piece
		if c.limit >= 0 {
			shown = piece[:min(max(c.limit-c.shown, 0), len(piece))]
		}
		if rs.p.logprobs >= 0 {
			rs.tokenLogprob(lps, c.st.ID, c.generated, t, piece, c.chars, true)
		}
		b = append(b, shown...)
		c.shown += len(piece)
		c.chars += utf8.RuneCountInString(shown)
		c.generated++
	}
	return b
}

// echoLogprobs adds the logprobs of c's prompt, for echo (the first token has none, as in vLLM), and
// counts the echoed text's characters.
func (rs *response) echoLogprobs(c *choice, lps *logprobs) {
	pr := rs.prompts[c.prompt]
	if rs.p.logprobs >= 0 {
		// A prompt given as text shows its own pieces, which join into the echoed text that text_offset
		// indexes; the built-in tokenizer's DecodeToken is a word of another text. A prompt of ids is
		// echoed as its tokens decode.
		var pieces []string
		if pr.text != "" && !pr.decoded {
			pieces = tokenize.Pieces(rs.s.o.Tokenizer, pr.text)
		}
		if len(pieces) != len(pr.ids) {
			pieces = nil
		}
		at := 0
		for i, t := range pr.ids {
			var piece string
			if pieces != nil {
				piece = pieces[i]
			} else {
				piece = rs.s.o.Tokenizer.DecodeToken(t)
			}
			rs.tokenLogprob(lps, ^uint64(c.prompt), i, t, piece, at, i > 0)
			at += utf8.RuneCountInString(piece)
		}
	}
	c.chars += utf8.RuneCountInString(pr.text)
}

// logprobs are the logprobs of a run of tokens, in the chat API's form (content) or the completions
// API's (four parallel lists).
type logprobs struct {
	n                          int
	content                    []byte
	tokens, lps, tops, offsets []byte
}

func (l *logprobs) reset() {
	l.n = 0
	l.content, l.tokens, l.lps, l.tops, l.offsets = l.content[:0], l.tokens[:0], l.lps[:0], l.tops[:0], l.offsets[:0]
}

// tokenLogprob adds token t (text piece) at index i of sequence seq to l. The logprobs are synthetic
// and well-formed: the sampled token is the most likely, with probability in [0.5, 1) drawn from (seq,
// i); the k−1 alternatives (tokens with other texts) share the rest, each half the one before, so the
// probabilities sum to less than 1. known false leaves the token without logprobs (a prompt's first).
func (rs *response) tokenLogprob(l *logprobs, seq uint64, i int, t uint32, piece string, offset int, known bool) {
	sep := func(b []byte) []byte {
		if l.n > 0 {
			return append(b, ',')
		}
		return b
	}
	u := mix(seq*0x9e3779b97f4a7c15 + uint64(i))
	p := 0.5 + 0.5*float64(u>>11)/(1<<53)
	k := rs.p.logprobs
	alts := rs.alternatives(t, piece, max(k-1, 0))
	if rs.chat {
		l.content = sep(l.content)
		l.content = appendTopEntry(append(l.content, '{'), piece, math.Log(p))
		l.content = append(l.content, `,"top_logprobs":[`...)
		if k > 0 {
			l.content = appendTopEntry(append(l.content, '{'), piece, math.Log(p))
			l.content = append(l.content, '}')
		}
		q := 1 - p
		for _, a := range alts {
			q /= 2
			l.content = appendTopEntry(append(l.content, ",{"...), a, math.Log(q))
			l.content = append(l.content, '}')
		}
		l.content = append(l.content, "]}"...)
		l.n++
		return
	}
	l.tokens = appendJSONString(sep(l.tokens), piece)
	l.offsets = strconv.AppendInt(sep(l.offsets), int64(offset), 10)
	if !known {
		l.lps = append(sep(l.lps), "null"...)
		l.tops = append(sep(l.tops), "null"...)
		l.n++
		return
	}
	l.lps = appendFloat(sep(l.lps), math.Log(p))
	// The sampled token is always in the map, as OpenAI's "up to logprobs+1 elements" allows.
	l.tops = appendFloat(append(appendJSONString(append(sep(l.tops), '{'), piece), ':'), math.Log(p))
	q := 1 - p
	for _, a := range alts {
		q /= 2
		l.tops = appendFloat(append(appendJSONString(append(l.tops, ','), a), ':'), math.Log(q))
	}
	l.tops = append(l.tops, '}')
	l.n++
}

// alternatives are the texts of k tokens near t whose texts differ from piece and from each other.
func (rs *response) alternatives(t uint32, piece string, k int) []string {
	if k == 0 {
		return nil
	}
	vocab := uint32(max(rs.s.o.Tokenizer.VocabSize(), 1))
	out := make([]string, 0, k)
	for d := uint32(1); len(out) < k && d < uint32(64*k) && d < vocab; d++ {
		a := rs.s.o.Tokenizer.DecodeToken((t + d) % vocab)
		if a == piece || a == "" {
			continue
		}
		dup := false
		for _, o := range out {
			dup = dup || o == a
		}
		if !dup {
			out = append(out, a)
		}
	}
	return out
}

// appendTopEntry appends the chat API's token, logprob and bytes fields.
func appendTopEntry(b []byte, token string, lp float64) []byte {
	b = appendJSONString(append(b, `"token":`...), token)
	b = appendFloat(append(b, `,"logprob":`...), lp)
	b = append(b, `,"bytes":[`...)
	for i := 0; i < len(token); i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(token[i]), 10)
	}
	return append(b, ']')
}

func appendFloat(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'g', -1, 64) }

// mix is SplitMix64's finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// appendLogprobs appends the logprobs object of l, or null when the request asked for none.
func (rs *response) appendLogprobs(b []byte, l *logprobs) []byte {
	if rs.p.logprobs < 0 || l == nil {
		return append(b, "null"...)
	}
	if rs.chat {
		b = append(b, `{"content":[`...)
		b = append(b, l.content...)
		return append(b, "]}"...)
	}
	b = append(append(append(b, `{"text_offset":[`...), l.offsets...), `],"token_logprobs":[`...)
	b = append(append(b, l.lps...), `],"tokens":[`...)
	b = append(append(b, l.tokens...), `],"top_logprobs":[`...)
	return append(append(b, l.tops...), "]}"...)
}

func (rs *response) head(b []byte, object string) []byte {
	b = append(b, `{"id":"`...)
	if rs.chat {
		b = append(b, "chatcmpl-"...)
	} else {
		b = append(b, "cmpl-"...)
	}
	b = strconv.AppendUint(b, rs.id, 10)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, rs.created, 10)
	b = append(b, `,"model":`...)
	return appendJSONString(b, rs.model())
}

// model is the name a response answers with: vLLM's is the adapter's, when one is asked for.
func (rs *response) model() string { return cmp.Or(rs.p.lora, rs.s.o.ModelName) }

func appendUsage(b []byte, prompt, generated int, cached int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(generated), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+generated), 10)
	if cached >= 0 {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(cached), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// totalUsage is the request's usage as vLLM counts it: each prompt once, every choice's output, and
// the prompt tokens found cached (by each prompt's first choice).
func (rs *response) totalUsage(b []byte) []byte {
	prompt, generated, cached := 0, 0, 0
	for _, pr := range rs.prompts {
		prompt += len(pr.ids)
	}
	for _, c := range rs.choices {
		generated += c.generated
		if c.index%rs.p.n == 0 {
			cached += c.st.Cached()
		}
	}
	return appendUsage(b, prompt, generated, cached)
}

func (rs *response) appendFinish(b []byte, c *choice, final bool) []byte {
	b = append(b, `,"finish_reason":`...)
	if !final {
		return append(b, `null,"stop_reason":null`...)
	}
	b = append(append(append(b, '"'), c.finish...), `","stop_reason":`...)
	if c.reason == nil {
		return append(b, "null"...)
	}
	return append(b, c.reason...)
}

// whole appends the whole response to b.
func (rs *response) whole(b []byte) []byte {
	// Room for the envelope and every choice's text, with an eighth more for what escaping adds, so
	// a long answer costs at most one allocation rather than a doubling per size.
	n := 512
	for _, c := range rs.choices {
		n += len(c.text) + len(c.text)/8
	}
	b = slices.Grow(b, n)
	if rs.chat {
		b = rs.head(b, "chat.completion")
	} else {
		b = rs.head(b, "text_completion")
	}
	b = append(b, `,"choices":[`...)
	for i, c := range rs.choices {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"index":`...), int64(c.index), 10)
		if rs.chat {
			b = appendJSONString(append(b, `,"message":{"role":"assistant","content":`...), c.text)
			b = append(b, '}')
		} else {
			b = appendJSONString(append(b, `,"text":`...), c.text)
		}
		b = rs.appendLogprobs(append(b, `,"logprobs":`...), &c.lps)
		b = append(rs.appendFinish(b, c, true), '}')
	}
	b = rs.totalUsage(append(b, `],"usage":`...))
	return append(b, "}\n"...)
}

// chunk appends one SSE event carrying c's new text and its logprobs; final carries its finish_reason
// (a chat's in an event of its own with an empty delta, as OpenAI sends it and its SDKs' stream
// helpers expect).
func (rs *response) chunk(b []byte, c *choice, text []byte, lps *logprobs, final bool) []byte {
	if lps != nil && lps.n == 0 {
		lps = nil
	}
	if rs.chat && final {
		if len(text) > 0 || lps != nil {
			b = rs.chunk(b, c, text, lps, false)
		}
		b = rs.head(append(b, "data: "...), "chat.completion.chunk")
		b = strconv.AppendInt(append(b, `,"choices":[{"index":`...), int64(c.index), 10)
		b = append(rs.appendFinish(append(b, `,"delta":{},"logprobs":null`...), c, true), "}]"...)
		return append(rs.chunkUsage(b, c), "}\n\n"...)
	}
	b = append(b, "data: "...)
	if rs.chat {
		b = rs.head(b, "chat.completion.chunk")
		b = strconv.AppendInt(append(b, `,"choices":[{"index":`...), int64(c.index), 10)
		b = appendJSONString(append(b, `,"delta":{"content":`...), text)
		b = append(b, '}')
	} else {
		b = rs.head(b, "text_completion")
		b = strconv.AppendInt(append(b, `,"choices":[{"index":`...), int64(c.index), 10)
		b = appendJSONString(append(b, `,"text":`...), text)
	}
	b = rs.appendLogprobs(append(b, `,"logprobs":`...), lps)
	b = append(rs.appendFinish(b, c, final), "}]"...)
	return append(rs.chunkUsage(b, c), "}\n\n"...)
}

// streamBytes reckons what a (completions) stream whose choices hold toks tokens, all of them, takes
// rendered, erring high: each token alone in its chunk (a pass of one token, the most chunks its tokens
// can take), about 200 bytes and the model's name with its text, 120 more with logprobs and 30 a top
// logprob, 70 with running usage; and with echo, each choice's prompt text and its logprobs.
func (rs *response) streamBytes(toks int) int {
	chunk, lp := 200+len(rs.model()), 0
	if rs.p.logprobs >= 0 {
		lp = 120 + 30*rs.p.logprobs
	}
	if rs.p.running {
		chunk += 70
	}
	n := toks * (chunk + lp)
	if rs.p.echo {
		for _, c := range rs.choices {
			pr := &rs.prompts[c.prompt]
			n += len(pr.text) + len(pr.ids)*lp
		}
	}
	return n
}

// roleChunk announces the assistant on chat choice c, before its tokens, as vLLM does.
func (rs *response) roleChunk(b []byte, c *choice) []byte {
	b = rs.head(append(b, "data: "...), "chat.completion.chunk")
	b = strconv.AppendInt(append(b, `,"choices":[{"index":`...), int64(c.index), 10)
	b = append(b, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
	return append(rs.chunkUsage(b, c), "}\n\n"...)
}

// chunkUsage appends a chunk's usage: with include_usage, null, or with continuous_usage_stats (vLLM)
// the choice's running counts.
func (rs *response) chunkUsage(b []byte, c *choice) []byte {
	switch {
	case rs.p.running:
		return appendUsage(append(b, `,"usage":`...), len(rs.prompts[c.prompt].ids), c.generated, -1)
	case rs.p.usage:
		return append(b, `,"usage":null`...)
	}
	return b
}

func (rs *response) usageChunk(b []byte) []byte {
	b = append(b, "data: "...)
	if rs.chat {
		b = rs.head(b, "chat.completion.chunk")
	} else {
		b = rs.head(b, "text_completion")
	}
	b = rs.totalUsage(append(b, `,"choices":[],"usage":`...))
	return append(b, "}\n\n"...)
}
