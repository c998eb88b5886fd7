package tokenize

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The testdata tokenizers are small hand-made ones of the three kinds FromFile is for:
//
//   - bytelevel.json: Llama-3's pipeline (Split with Llama-3's pattern, ByteLevel, BOS post-processor,
//     ignore_merges) over a 256-byte alphabet and a few merges; "Ġworld" is only reachable through
//     ignore_merges, "<mask>" is an lstrip added token;
//   - metaspace.json: Mistral's (Metaspace with prepend_scheme "first" and split false, byte_fallback,
//     BOS), with "[INST]" and "[/INST]";
//   - sentencepiece.json: Llama-2's (Prepend and Replace normalizers, no pre-tokenizer), without
//     byte_fallback, so unknown characters become one fused <unk>.
//
// The expected ids were checked against Hugging Face's tokenizers.js 0.2.0, as were 3,000 random strings
// per file and, with Llama-3's real tokenizer.json, the official examples and 3,000 more.

func load(t *testing.T, name string) Tokenizer {
	t.Helper()
	tok, err := FromFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestFromFileIDs(t *testing.T) {
	for _, c := range []struct {
		file, text string
		want       []uint32
	}{
		{"bytelevel.json", "Hello world", []uint32{275, 39, 265, 78, 274}},
		{"bytelevel.json", "hello world", []uint32{275, 267, 274}},
		{"bytelevel.json", " world", []uint32{275, 274}},
		{"bytelevel.json", "aaaaa", []uint32{275, 271, 271, 64}}, // equal merges go leftmost first
		{"bytelevel.json", "a\n\nb", []uint32{275, 64, 269, 65}},
		{"bytelevel.json", "it's 123456", []uint32{275, 72, 83, 6, 82, 220, 273, 19, 20, 21}},
		{"bytelevel.json", "x <mask> y", []uint32{275, 87, 280, 220, 88}},
		{"bytelevel.json", "🙂", []uint32{275, 172, 253, 247, 224}},
		{"bytelevel.json", ChatPrompt([]Message{{"user", "hello"}}),
			[]uint32{275, 277, 84, 82, 68, 81, 278, 269, 267, 279, 277, 64, 82, 82, 72, 82, 83, 64, 77, 83, 278, 269}},
		{"bytelevel.json", "", []uint32{275}},
		{"metaspace.json", "Hello World", []uint32{1, 259, 299, 306}},
		{"metaspace.json", " Hello  World", []uint32{1, 259, 299, 300, 288, 302, 305}},
		{"metaspace.json", "é!", []uint32{1, 259, 198, 172, 291}}, // byte fallback
		{"metaspace.json", "[INST] Hello [/INST]", []uint32{1, 308, 259, 299, 259, 309}},
		{"metaspace.json", "<s>Hello", []uint32{1, 1, 299}},
		{"sentencepiece.json", "Hello World", []uint32{1, 259, 299, 306}},
		{"sentencepiece.json", "ÄÖ Hello", []uint32{1, 259, 0, 259, 299}},
		{"sentencepiece.json", "Hello <s>World", []uint32{1, 259, 299, 259, 1, 306}},
	} {
		if got := load(t, c.file).Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", c.file, c.text, got, c.want)
		}
	}
}

func TestFromFileDecode(t *testing.T) {
	for _, c := range []struct{ file, text, want string }{
		{"bytelevel.json", "Hello world 🙂", "Hello world 🙂"},
		{"bytelevel.json", ChatPrompt([]Message{{"user", "hi"}}), "user\n\nhiassistant\n\n"},
		{"metaspace.json", "Hello  World é", "Hello  World é"},
		{"metaspace.json", "[INST] Hello", "Hello"},
		{"sentencepiece.json", "Hello World", "Hello World"},
	} {
		tok := load(t, c.file)
		if got := tok.Decode(tok.Encode(c.text)); got != c.want {
			t.Errorf("%s: Decode(Encode(%q)) = %q, want %q", c.file, c.text, got, c.want)
		}
	}
}

func TestFromFileVocab(t *testing.T) {
	tok := load(t, "bytelevel.json")
	if tok.VocabSize() != 281 || tok.Name() != filepath.Join("testdata", "bytelevel.json") {
		t.Errorf("VocabSize %d, Name %q", tok.VocabSize(), tok.Name())
	}
}

// TestFromFileChatPrefix checks that a conversation's next turn starts with the ids of the turns
// before it, Llama-3's markers being special tokens.
func TestFromFileChatPrefix(t *testing.T) {
	tok := load(t, "bytelevel.json")
	chat := []Message{{"system", "be terse"}, {"user", "hello"}, {"assistant", "hello world"}, {"user", "and the"}}
	for n := 1; n < len(chat); n++ {
		head := tok.Encode(strings.TrimSuffix(ChatPrompt(chat[:n]), assistantHeader))
		if whole := tok.Encode(ChatPrompt(chat[:n+1])); !slices.Equal(whole[:len(head)], head) {
			t.Errorf("%d messages: %v does not start with %v", n+1, whole, head)
		}
	}
}

func TestFromFileErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.json")
	if _, err := FromFile(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	orig, err := os.ReadFile(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, old, new string
		want           []string // in the error, besides the path
	}{
		{"truncated", `"model"`, `"model`, []string{"not a tokenizer.json"}},
		{"model type", `"type": "BPE"`, `"type": "WordPiece"`, []string{"model", "WordPiece"}},
		{"dropout", `"dropout": null`, `"dropout": 0.1`, []string{"dropout"}},
		{"merge", `"merges": [
   [
    "Ġ"`, `"merges": [
   [
    "☃"`, []string{"merge 0", "☃"}},
		{"pre-tokenizer", `"type": "Split"`, `"type": "Whitespace"`, []string{"pre_tokenizer", "Whitespace"}},
		{"lookbehind", `(?i:'s`, `(?<=x)(?i:'s`, []string{"pre_tokenizer", "Split", "pattern"}},
		{"word boundary", `(?i:'s`, `\\b(?i:'s`, []string{"Split", `escape \b`}},
		{"behavior", `"behavior": "Isolated"`, `"behavior": "MergedWithNext"`, []string{"Split", "MergedWithNext"}},
		{"single_word", `"single_word": false`, `"single_word": true`, []string{"added_tokens", "single_word"}},
		{"post-processor", `"type": "TemplateProcessing"`, `"type": "BertProcessing"`, []string{"post_processor", "BertProcessing"}},
		{"decoder", `"decoder": {
  "type": "ByteLevel"`, `"decoder": {
  "type": "WordPiece"`, []string{"decoder", "WordPiece"}},
	} {
		text := strings.Replace(string(orig), c.old, c.new, 1)
		if text == string(orig) {
			t.Fatalf("%s: %q not found", c.name, c.old)
		}
		path := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := FromFile(path)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range append(c.want, path) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, w)
			}
		}
	}
}

func TestSplitLookahead(t *testing.T) {
	sp, err := compilePattern(gpt2Pattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []string
	}{
		{"a   b", []string{"a", "  ", " b"}},
		{"a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"a \u00a0b", []string{"a", " ", "\u00a0", "b"}}, // \s is Unicode White_Space
		{"x  ", []string{"x", "  "}},
		{"it's 42!", []string{"it", "'s", " 42", "!"}},
	} {
		var got []string
		sp.split(c.text, func(part string) { got = append(got, part) })
		if !slices.Equal(got, c.want) {
			t.Errorf("split(%q) = %q, want %q", c.text, got, c.want)
		}
	}
	for _, p := range []string{`^a`, `a$`, `\w+`, `(a)\1`, `[[:alpha:]]`, `[a-z&&[^b]]`, `\s+(?!\S)`, `\h`} {
		if _, err := compilePattern(p); err == nil {
			t.Errorf("compilePattern(%q): no error", p)
		}
	}
}

func BenchmarkFromFileEncode4K(b *testing.B) {
	tok, err := FromFile(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat(prose+"\n\n", 5)[:4096]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(text)
	}
}

// TestFromFileDirectory: a model directory stands for its tokenizer.json, as vLLM's --tokenizer takes
// one.
func TestFromFileDirectory(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("testdata", "bytelevel.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := FromFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(tok.Encode("hello world")), fmt.Sprint(load(t, "bytelevel.json").Encode("hello world")); got != want {
		t.Errorf("directory: %s, file: %s", got, want)
	}
	if _, err := FromFile(t.TempDir()); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("empty directory: %v, want an error naming tokenizer.json", err)
	}
}
