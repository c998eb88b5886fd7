package tokenize

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// prose is an English paragraph; Llama-3 encodes it in 172 tokens, Llama-2 in 186.
const prose = `The history of the printing press is a story about how ideas travel. Before Gutenberg built his machine in the middle of the fifteenth century, books were copied by hand, usually by monks working in quiet rooms for months at a time. A single Bible could take a year to finish, and only the richest churches and nobles could afford one. Movable metal type changed that almost overnight. Within fifty years, printers in more than two hundred European cities had produced millions of volumes, from religious texts to grammar books, maps, and pamphlets arguing about politics. Prices fell, literacy spread, and scholars could compare identical copies of the same work instead of guessing which handwritten version was correct. Historians still argue about how much credit the press deserves for the Reformation and the scientific revolution, but few doubt that it made both of them faster and harder to stop.`

// pieces returns the chunks the built-in Encode hashes, as text, found by markerEnd and nextPiece alone:
// what Encode did before its ASCII fast path (asciiPiece), and the oracle that path is checked against.
func pieces(text string) []string {
	var out []string
	for i := 0; i < len(text); {
		if end := markerEnd(text, i); end > 0 {
			out = append(out, text[i:end])
			i = end
			continue
		}
		for end := nextPiece(text, i); i < end; {
			j := chunkEnd(text, i, end)
			out = append(out, text[i:j])
			i = j
		}
	}
	return out
}

func TestBuiltinPieces(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"It's 12345 apples!!\n\nOk", []string{"It", "'s", " ", "123", "45", " apples", "!!\n\n", "Ok"}},
		{"DON'T (stop)", []string{"DON", "'T", " (", "stop", ")"}},
		{"a  b", []string{"a", " ", " b"}},
		{"a\n\nb  \n c", []string{"a", "\n\n", "b", "  \n", " c"}},
		{"x   ", []string{"x", "   "}},
		{"\tif x {", []string{"\tif", " x", " {"}},
		{"<|eot_id|><|start_header_id|>user", []string{"<|eot_id|>", "<|start_header_id|>", "user"}},
		{"<|not a marker|>", []string{"<|", "not", " a", " marker", "|>"}},
		{" extraordinarily", []string{" extraor", "dinarily"}},
		{"中文中文中文", []string{"中文", "中文", "中文"}},
		{"x = 1_000;", []string{"x", " =", " ", "1", "_", "000", ";"}},
	} {
		if got := pieces(c.text); !slices.Equal(got, c.want) {
			t.Errorf("pieces(%q) = %q, want %q", c.text, got, c.want)
		}
		checkFastPath(t, c.text)
	}
}

// checkFastPath checks that Encode, with its ASCII fast path, hashes the chunks pieces finds.
func checkFastPath(t testing.TB, text string) {
	t.Helper()
	b := defaultBuiltin
	var want []uint32
	for _, p := range pieces(text) {
		want = append(want, b.id(p))
	}
	if got := b.Encode(text); !slices.Equal(got, want) {
		t.Fatalf("Encode(%q) = %v, want %v (the chunks %q)", text, got, want, pieces(text))
	}
	if got := Pieces(b, text); !slices.Equal(got, pieces(text)) {
		t.Fatalf("Pieces(%q) = %q, want the chunks %q", text, got, pieces(text))
	}
}

// TestPieces: the pieces of a built-in tokenizer's ids are the text they encode, one per id (with WithBOS,
// "" for the BOS), joining into the text, which DecodeToken's words do not; a tokenizer.json's
// DecodeToken is its tokens' text, so it has no pieces.
func TestPieces(t *testing.T) {
	const text = "Hello world, it's <|eot_id|> extraordinarily 12345"
	for _, tc := range []struct {
		t    Tokenizer
		want []string
	}{
		{Builtin(), []string{"Hello", " world", ",", " it", "'s", " ", "<|eot_id|>", " extraor", "dinarily", " ", "123", "45"}},
		{WithBOS(Builtin(), 128000), []string{"", "Hello", " world", ",", " it", "'s", " ", "<|eot_id|>", " extraor", "dinarily", " ", "123", "45"}},
	} {
		got := Pieces(tc.t, text)
		if !slices.Equal(got, tc.want) || strings.Join(got, "") != text || len(got) != len(tc.t.Encode(text)) {
			t.Errorf("%s: Pieces = %q, want %q: one per id of %v, joining into the text", tc.t.Name(), got, tc.want, tc.t.Encode(text))
		}
	}
	hf, err := FromFile("testdata/bytelevel.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := Pieces(hf, text); got != nil {
		t.Errorf("%s: Pieces = %q, want nil", hf.Name(), got)
	}
}

// TestBuiltinFastPath compares Encode with the general path (pieces) on random text drawn from
// fragments that sit at the fast path's edges: ASCII next to non-ASCII letters, digits and spaces, markers
// and their near misses, contractions, control characters and invalid UTF-8.
func TestBuiltinFastPath(t *testing.T) {
	frags := []string{" ", "  ", "\t", "\v", "\f", "\r", "\n", "\r\n", "\x00", "\x7f", "a", "Z", "word", "Please",
		"extraordinarily", "0", "7", "42", "123", "4567", "٣", "²", "Ⅻ", "é", "ñ", "中文", "🙂", "\u00a0", "\u2028",
		"\u3000", "'", "'s", "'S", "'ll", "'LL", "'re", "'ve", "'m", "'d", "'x", "<", "<|", "|>", "<|eot_id|>",
		"<|a|", "<||>", ".", ",", "!", "\"", "_", "-", "(", ")", "{", "|", "\xff", "\xc3", "\xe4\xb8"}
	r := rand.New(rand.NewPCG(5, 6))
	for range 20000 {
		var sb strings.Builder
		for range r.IntN(12) + 1 {
			sb.WriteString(frags[r.IntN(len(frags))])
		}
		checkFastPath(t, sb.String())
	}
	for range 2000 {
		checkFastPath(t, randomText(r, r.IntN(40)))
		raw := make([]byte, r.IntN(24)+1)
		for i := range raw {
			raw[i] = "a1 '<|\n\x80\xe4"[r.IntN(9)]
			if r.IntN(4) == 0 {
				raw[i] = byte(r.IntN(256))
			}
		}
		checkFastPath(t, string(raw))
	}
	checkFastPath(t, prose)
}

// FuzzBuiltinFastPath compares Encode with the general path (pieces) on any text.
func FuzzBuiltinFastPath(f *testing.F) {
	for _, s := range []string{prose, "It's 12345 apples!!\n\nOk", " 1٣ x²", "<|eot_id|>a", "a'LL \xff9", "\t\v\f x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkFastPath(t, s) })
}

// TestBuiltinIDs pins ids, so that a change of the hash or of the cutting, which would change every
// simulated prompt's KV blocks, is noticed.
func TestBuiltinIDs(t *testing.T) {
	b := Builtin()
	for _, c := range []struct {
		text string
		want []uint32
	}{
		{"Hello world", []uint32{28697, 112761}},
		{"It's 12345 apples!!\n\nOk", []uint32{11625, 9558, 126297, 32401, 63104, 105648, 70570, 17837}},
		{"<|eot_id|>", []uint32{21168}},
		{"", []uint32{}},
	} {
		if got := b.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	small, err := NewBuiltin(1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range small.Encode(prose) {
		if id < reserved || id >= 1000 {
			t.Fatalf("id %d outside [%d, 1000)", id, reserved)
		}
	}
}

func TestBuiltinVocabSize(t *testing.T) {
	if b := Builtin(); b.VocabSize() != DefaultVocabSize || b.Name() != "builtin" {
		t.Errorf("default: VocabSize %d, Name %q", b.VocabSize(), b.Name())
	}
	for _, n := range []int{-1, 0, reserved, 1<<32 + 1} {
		if _, err := NewBuiltin(n); err == nil {
			t.Errorf("NewBuiltin(%d): no error", n)
		}
	}
}

// randomText draws text from fragments that exercise every kind of piece.
func randomText(r *rand.Rand, n int) string {
	frags := []string{" ", " ", " ", "  ", "\n", "\n\n", "\t", "\r\n", "the", "The", "cat", "'s", "'", "re", "x",
		"extraordinary", "1", "42", "12345", ".", ",", "!?", "(", ")", "-", "_", "é", "中文", "🙂", "\u00a0",
		"<|eot_id|>", "<|", "|>", "DON'T"}
	var b strings.Builder
	for range n {
		b.WriteString(frags[r.IntN(len(frags))])
	}
	return b.String()
}

// TestBuiltinPrefixStable checks that Encode(a+b) starts with Encode(a) wherever b starts with a space
// and a does not end with whitespace: the boundary a shared prompt prefix usually ends at.
func TestBuiltinPrefixStable(t *testing.T) {
	b := Builtin()
	r := rand.New(rand.NewPCG(1, 2))
	cuts := 0
	for range 2000 {
		s := randomText(r, r.IntN(30))
		whole := b.Encode(s)
		for i := 1; i < len(s); i++ {
			last := []rune(s[:i])
			if s[i] != ' ' || unicode.IsSpace(last[len(last)-1]) {
				continue
			}
			cuts++
			if head := b.Encode(s[:i]); !slices.Equal(whole[:min(len(head), len(whole))], head) {
				t.Fatalf("Encode(%q) = %v does not start with Encode(%q) = %v", s, whole, s[:i], head)
			}
		}
	}
	if cuts < 1000 {
		t.Fatalf("only %d cuts tested", cuts)
	}
}

func TestBuiltinDeterministic(t *testing.T) {
	b1 := Builtin()
	b2, err := NewBuiltin(DefaultVocabSize)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		s := randomText(r, 50)
		if x, y := b1.Encode(s), b2.Encode(s); !slices.Equal(x, y) {
			t.Fatalf("Encode(%q): %v, then %v", s, x, y)
		}
	}
}

func TestBuiltinTokensPerChar(t *testing.T) {
	n := len(Builtin().Encode(prose))
	if ratio := float64(n) / float64(len(prose)); ratio < 0.2 || ratio > 0.35 {
		t.Errorf("%d tokens for %d characters: %.3f tokens a character, want 0.2-0.35", n, len(prose), ratio)
	}
}

func TestBuiltinAllocs(t *testing.T) {
	b := Builtin()
	if n := testing.AllocsPerRun(10, func() { b.Encode(prose) }); n != 1 {
		t.Errorf("Encode allocates %v times, want 1 (the output)", n)
	}
	// A server decodes its output one token at a time.
	if n := testing.AllocsPerRun(10, func() { b.DecodeToken(256 + 254) }); n != 0 {
		t.Errorf("DecodeToken allocates %v times, want 0", n)
	}
	for _, id := range []uint32{0, 1, 255, 256, 1 << 31} {
		if got, want := b.Decode([]uint32{id}), b.Decode([]uint32{id, id})[:len(b.Decode([]uint32{id, id}))/2]; got != want {
			t.Errorf("Decode(%d) = %q, want %q", id, got, want)
		}
	}
}

func TestBuiltinDecode(t *testing.T) {
	b := Builtin()
	if got, want := b.Decode([]uint32{0, 1, 2, 256 + 254, 256 + 255}), " the of and,."; got != want {
		t.Errorf("Decode = %q, want %q", got, want)
	}
	text := b.Decode(b.Encode(prose))
	if text == prose || text != b.Decode(b.Encode(prose)) {
		t.Errorf("Decode(Encode(prose)) = %q: want different from the prose, and the same every time", text)
	}
	seen := map[string]bool{}
	for _, w := range words {
		if seen[w] || strings.TrimSpace(w) == "" || strings.ContainsFunc(strings.TrimPrefix(w, " "), func(r rune) bool { return !unicode.IsLetter(r) && r != ',' && r != '.' }) {
			t.Errorf("word %q is duplicated, empty or not a word", w)
		}
		seen[w] = true
	}
}

func BenchmarkBuiltinEncode4K(b *testing.B) {
	text := strings.Repeat(prose+"\n\n", 5)[:4096]
	tok := Builtin()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(text)
	}
}

// BenchmarkBuiltinEncodePrompt encodes bench/serve's 100-token prompt, BOS included, as the live API does.
func BenchmarkBuiltinEncodePrompt(b *testing.B) {
	text := "Request 000001 asks the simulated model a short question about the weather in a city it has never seen, politely." + strings.Repeat(" Please", 72)
	tok := WithBOS(Builtin(), 128000)
	if n := len(tok.Encode(text)); n != 100 {
		b.Fatalf("%d tokens, want 100", n)
	}
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(text)
	}
}
