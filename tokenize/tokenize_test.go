package tokenize

import (
	"slices"
	"strings"
	"testing"
)

func TestChatPrompt(t *testing.T) {
	got := ChatPrompt([]Message{{"system", "Be brief."}, {"user", "Hi!"}})
	want := "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>" +
		"<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>" +
		"<|start_header_id|>assistant<|end_header_id|>\n\n"
	if got != want {
		t.Errorf("ChatPrompt = %q, want %q", got, want)
	}
	if got := ChatPrompt(nil); got != assistantHeader {
		t.Errorf("ChatPrompt(nil) = %q", got)
	}
}

// TestChatPromptPrefix checks that each turn of a conversation starts with the text, and the built-in
// ids, of the turns before it, so a follow-up request reuses the KV blocks of the previous one.
func TestChatPromptPrefix(t *testing.T) {
	b := Builtin()
	chat := []Message{{"system", "You are helpful."}, {"user", "What is 2+2?"}, {"assistant", "4."}, {"user", "And 3+3?"}}
	for n := 1; n < len(chat); n++ {
		head := strings.TrimSuffix(ChatPrompt(chat[:n]), assistantHeader)
		whole := ChatPrompt(chat[:n+1])
		if !strings.HasPrefix(whole, head) {
			t.Fatalf("%q does not start with %q", whole, head)
		}
		if h, w := b.Encode(head), b.Encode(whole); !slices.Equal(w[:len(h)], h) {
			t.Errorf("%d messages: %v does not start with %v", n+1, w, h)
		}
	}
}

func TestWithBOS(t *testing.T) {
	tk := WithBOS(Builtin(), 128000)
	ids := tk.Encode("hi")
	if len(ids) != 2 || ids[0] != 128000 || ids[1] != Builtin().Encode("hi")[0] {
		t.Fatalf(`Encode("hi") = %v, want [128000 %v]`, ids, Builtin().Encode("hi"))
	}
	if got, want := tk.Decode(ids), Builtin().Decode(ids[1:]); got != want {
		t.Fatalf("Decode = %q, want %q (BOS left out)", got, want)
	}
	if got := tk.VocabSize(); got != DefaultVocabSize {
		t.Fatalf("VocabSize = %d, want %d", got, DefaultVocabSize)
	}
}

// DecodeToken is Decode of one id, for every id of each tokenizer's vocabulary and some beyond it
// (special tokens, a WithBOS's BOS, out-of-vocabulary ids).
func TestDecodeToken(t *testing.T) {
	toks := map[string]Tokenizer{"builtin": Builtin(), "builtin+bos": WithBOS(Builtin(), 7)}
	for _, f := range []string{"bytelevel.json", "metaspace.json", "sentencepiece.json"} {
		toks[f] = load(t, f)
	}
	for name, tok := range toks {
		n := uint32(min(tok.VocabSize(), 1<<12))
		for id := range n + 300 {
			if got, want := tok.DecodeToken(id), tok.Decode([]uint32{id}); got != want {
				t.Errorf("%s: DecodeToken(%d) = %q, want %q", name, id, got, want)
			}
		}
		if got, want := tok.DecodeToken(1<<31), tok.Decode([]uint32{1 << 31}); got != want {
			t.Errorf("%s: DecodeToken(1<<31) = %q, want %q", name, got, want)
		}
	}
}
