// Package tokenize turns request text into token ids for the simulated engines, and token ids back into
// text for the responses of the live server.
//
// Two implementations share the Tokenizer interface:
//
//   - Builtin, used when no tokenizer file is given: deterministic, allocation-free apart from its output,
//     and local (it cuts text into pieces as a Llama-3 pre-tokenizer would and hashes each piece to an id),
//     so identical prompt prefixes give identical leading ids and hence identical KV blocks. Its ids belong
//     to no real model, and its Decode writes common English words, so Decode(Encode(s)) is not s.
//   - FromFile, a Hugging Face tokenizer.json with a BPE model (GPT-2/Llama-3/Qwen byte-level BPE,
//     Llama-2/Mistral SentencePiece-style BPE), giving the ids the real model would see.
//
// ChatPrompt renders a chat as one prompt string, the same for both.
package tokenize

import (
	"slices"
	"strings"
)

// Tokenizer turns text into token ids and back. Implementations are safe for concurrent use.
type Tokenizer interface {
	// Encode returns the token ids of text, including the special tokens the tokenizer adds to every
	// sequence (none for Builtin; a tokenizer.json's post-processor, such as Llama's BOS).
	Encode(text string) []uint32
	// Decode returns the text of ids, leaving out special tokens.
	Decode(ids []uint32) string
	// DecodeToken is Decode of the one id: a server's output is decoded a token at a time.
	DecodeToken(id uint32) string
	// VocabSize is one more than the largest id Encode can return.
	VocabSize() int
	// Name identifies the tokenizer in logs and reports.
	Name() string
}

// Message is one turn of a chat.
type Message struct {
	Role    string // "system", "user", "assistant", or any other role, rendered as given
	Content string
}

// ChatPrompt renders messages as one prompt in the shape of Llama-3's chat template, then opens the
// assistant's turn:
//
//	<|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>   (for each message)
//	<|start_header_id|>assistant<|end_header_id|>\n\n
//
// Content is copied verbatim, so two chats that share their leading messages share a text prefix, and so
// cached KV blocks. No BOS is written: Encode adds it where the tokenizer's post-processor does, exactly
// once. A chat_template in tokenizer_config.json is not run (that needs Jinja); this generic template is
// used for every model, and with a Llama-3 tokenizer.json its markers encode to Llama-3's special tokens.
func ChatPrompt(messages []Message) string {
	var b strings.Builder
	n := len(assistantHeader)
	for _, m := range messages {
		n += len(headerStart) + len(m.Role) + len(headerEnd) + len(m.Content) + len(endOfTurn)
	}
	b.Grow(n)
	for _, m := range messages {
		b.WriteString(headerStart)
		b.WriteString(m.Role)
		b.WriteString(headerEnd)
		b.WriteString(m.Content)
		b.WriteString(endOfTurn)
	}
	b.WriteString(assistantHeader)
	return b.String()
}

const (
	headerStart     = "<|start_header_id|>"
	headerEnd       = "<|end_header_id|>\n\n"
	endOfTurn       = "<|eot_id|>"
	assistantHeader = headerStart + "assistant" + headerEnd
)

// EncodeChatImages renders a chat whose messages hold images between their pieces of text — pieces[i] is
// message i's text, cut at its images (one more piece than images; msgs[i].Content is ignored) — and
// encodes it with size copies of a placeholder token (the last of "<image>"'s) in each image's place. It
// returns the tokens and where each image starts, in message order. The text between images is encoded
// piece by piece, what Encode adds to every sequence (a BOS) kept only at the start.
func EncodeChatImages(tk Tokenizer, msgs []Message, pieces [][]string, size int) (ids []uint32, starts []int) {
	// The chat is rendered with a mark in each image's place, a run of NULs no text or role holds, and
	// split at the marks.
	mark := "\x00"
	for clash := true; clash; {
		clash = false
		for i, m := range msgs {
			if strings.Contains(m.Role, mark) || slices.ContainsFunc(pieces[i], func(t string) bool { return strings.Contains(t, mark) }) {
				clash, mark = true, mark+"\x00"
				break
			}
		}
	}
	marked := slices.Clone(msgs)
	for i := range marked {
		marked[i].Content = strings.Join(pieces[i], mark)
	}
	special := len(tk.Encode(""))
	ph := tk.Encode("<image>")
	placeholder := ph[len(ph)-1]
	for k, piece := range strings.Split(ChatPrompt(marked), mark) {
		enc := tk.Encode(piece)
		if k > 0 {
			enc = enc[min(special, len(enc)):]
			starts = append(starts, len(ids))
			for range size {
				ids = append(ids, placeholder)
			}
		}
		ids = append(ids, enc...)
	}
	return ids, starts
}

// Pieces returns the text each id of t.Encode(text) stands for, where t's tokens are pieces of the text
// they encode but its DecodeToken does not give them back (Builtin, whose Decode writes common words;
// with WithBOS, "" for the BOS): they join into text, as a real tokenizer's decoded tokens do, so that
// an echoed prompt's tokens are its own. nil for any other tokenizer, whose DecodeToken is the text.
func Pieces(t Tokenizer, text string) []string {
	switch t := t.(type) {
	case *builtin:
		return t.appendPieces(make([]string, 0, encodeRoom(text)), text)
	case *bosTokenizer:
		if bt, ok := t.t.(*builtin); ok {
			return bt.appendPieces(append(make([]string, 0, 1+encodeRoom(text)), ""), text)
		}
	}
	return nil
}
