package tokenize

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// piece is a span of text on its way to the BPE model. first marks the piece that starts the text,
// where Metaspace's "first" prepend scheme applies.
type piece struct {
	text  string
	first bool
}

// preTokenizer cuts pieces into smaller ones (and may rewrite them, as ByteLevel and Metaspace do).
type preTokenizer func([]piece) []piece

// gpt2Pattern is what ByteLevel splits with when use_regex is set.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// newPreTokenizer appends the steps of the pre-tokenizer in raw to steps.
func newPreTokenizer(raw json.RawMessage, steps []preTokenizer) ([]preTokenizer, error) {
	c, err := parseComponent(raw)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		for _, p := range c.PreTokenizers {
			if steps, err = newPreTokenizer(p, steps); err != nil {
				return nil, err
			}
		}
		return steps, nil
	case "Split":
		var sp *splitter
		switch {
		case c.Behavior != "Isolated" || c.Invert:
			return nil, fmt.Errorf("Split: behavior %q (invert %v) is not supported, only Isolated", c.Behavior, c.Invert)
		case c.Pattern != nil && c.Pattern.Regex != nil:
			sp, err = compilePattern(*c.Pattern.Regex)
		case c.Pattern != nil && c.Pattern.String != nil:
			sp, err = compilePattern(regexpQuote(*c.Pattern.String))
		default:
			err = fmt.Errorf("no pattern")
		}
		if err != nil {
			return nil, fmt.Errorf("Split: %w", err)
		}
		return append(steps, splitStep(sp)), nil
	case "ByteLevel":
		var sp *splitter
		if c.UseRegex == nil || *c.UseRegex {
			if sp, err = compilePattern(gpt2Pattern); err != nil {
				return nil, err
			}
		}
		return append(steps, byteLevelStep(c.AddPrefixSpace, sp)), nil
	case "Metaspace":
		return newMetaspace(c, steps)
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

// regexpQuote quotes s for compilePattern, which reads Oniguruma syntax.
func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < utf8.RuneSelf && strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func splitStep(sp *splitter) preTokenizer {
	return func(in []piece) []piece {
		out := make([]piece, 0, len(in))
		for _, p := range in {
			first := p.first
			sp.split(p.text, func(part string) {
				out = append(out, piece{text: part, first: first})
				first = false
			})
		}
		return out
	}
}

// byteLevelStep is GPT-2's byte-level pre-tokenizer: an optional space before each piece, an optional
// split with GPT-2's pattern, then every byte written as the printable character that stands for it.
func byteLevelStep(addPrefixSpace bool, sp *splitter) preTokenizer {
	return func(in []piece) []piece {
		out := make([]piece, 0, len(in))
		for _, p := range in {
			text := p.text
			if addPrefixSpace && !strings.HasPrefix(text, " ") {
				text = " " + text
			}
			if sp == nil {
				out = append(out, piece{text: byteChars(text), first: p.first})
				continue
			}
			first := p.first
			sp.split(text, func(part string) {
				out = append(out, piece{text: byteChars(part), first: first})
				first = false
			})
		}
		return out
	}
}

func byteChars(s string) string {
	var b strings.Builder
	b.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteRune[s[i]])
	}
	return b.String()
}

// byteRune is GPT-2's bytes_to_unicode table: printable Latin-1 bytes stand for themselves, the others
// for the characters from U+0100 on, in byte order. runeByte is its inverse.
var byteRune, runeByte = func() ([256]rune, map[rune]byte) {
	var br [256]rune
	rb := make(map[rune]byte, 256)
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE) {
			r = next
			next++
		}
		br[b], rb[r] = r, byte(b)
	}
	return br, rb
}()

// newMetaspace is SentencePiece's pre-tokenizer: spaces become the replacement character (▁), which is
// also prepended (always, only at the start of the text, or never), and with split set each ▁ starts a
// new piece.
func newMetaspace(c *component, steps []preTokenizer) ([]preTokenizer, error) {
	scheme, err := prependScheme(c)
	if err != nil {
		return nil, err
	}
	repl := c.Replacement
	if utf8.RuneCountInString(repl) != 1 {
		return nil, fmt.Errorf("Metaspace: replacement %q is not one character", repl)
	}
	split := c.Split == nil || *c.Split
	return append(steps, func(in []piece) []piece {
		out := make([]piece, 0, len(in))
		for _, p := range in {
			text := strings.ReplaceAll(p.text, " ", repl)
			if (scheme == "always" || scheme == "first" && p.first) && !strings.HasPrefix(text, repl) {
				text = repl + text
			}
			if !split {
				out = append(out, piece{text: text, first: p.first})
				continue
			}
			first := p.first
			for text != "" {
				_, n := utf8.DecodeRuneInString(text)
				j := strings.Index(text[n:], repl)
				if j < 0 {
					j = len(text)
				} else {
					j += n
				}
				out = append(out, piece{text: text[:j], first: first})
				text, first = text[j:], false
			}
		}
		return out
	}), nil
}

// prependScheme reads Metaspace's prepend_scheme, or the add_prefix_space of older files.
func prependScheme(c *component) (string, error) {
	switch c.PrependScheme {
	case "":
		if c.AddPrefixSpace {
			return "always", nil
		}
		return "never", nil
	case "always", "first", "never":
		return c.PrependScheme, nil
	}
	return "", fmt.Errorf("Metaspace: prepend_scheme %q is not supported", c.PrependScheme)
}

// newDecoder appends the steps of the decoder in raw to steps. Each step maps the token strings to new
// ones; Decode joins what the last one returns.
func newDecoder(raw json.RawMessage, steps []func([]string) []string) ([]func([]string) []string, error) {
	c, err := parseComponent(raw)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		for _, d := range c.Decoders {
			if steps, err = newDecoder(d, steps); err != nil {
				return nil, err
			}
		}
		return steps, nil
	case "ByteLevel":
		return append(steps, decodeByteLevel), nil
	case "Metaspace":
		scheme, err := prependScheme(c)
		if err != nil {
			return nil, err
		}
		repl := c.Replacement
		return append(steps, func(toks []string) []string {
			for i, t := range toks {
				if i == 0 && scheme != "never" {
					toks[i] = strings.ReplaceAll(t, repl, "")
				} else {
					toks[i] = strings.ReplaceAll(t, repl, " ")
				}
			}
			return toks
		}), nil
	case "Replace":
		f, err := newReplace(c)
		if err != nil {
			return nil, err
		}
		return append(steps, func(toks []string) []string {
			for i, t := range toks {
				toks[i] = f(t)
			}
			return toks
		}), nil
	case "ByteFallback":
		return append(steps, decodeByteFallback), nil
	case "Fuse":
		return append(steps, func(toks []string) []string { return []string{strings.Join(toks, "")} }), nil
	case "Strip":
		if utf8.RuneCountInString(c.Content) != 1 {
			return nil, fmt.Errorf("Strip: content %q is not one character", c.Content)
		}
		return append(steps, func(toks []string) []string {
			for i, t := range toks {
				for k := 0; k < c.Start && strings.HasPrefix(t, c.Content); k++ {
					t = t[len(c.Content):]
				}
				for k := 0; k < c.Stop && strings.HasSuffix(t, c.Content); k++ {
					t = t[:len(t)-len(c.Content)]
				}
				toks[i] = t
			}
			return toks
		}), nil
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

// decodeByteLevel turns byte characters back into bytes (a token with other characters is kept as it
// is) and the whole into one string, invalid UTF-8 replaced.
func decodeByteLevel(toks []string) []string {
	var b []byte
	for _, t := range toks {
		n := len(b)
		for _, r := range t {
			c, ok := runeByte[r]
			if !ok {
				b = append(b[:n], t...)
				break
			}
			b = append(b, c)
		}
	}
	return []string{strings.ToValidUTF8(string(b), "\uFFFD")}
}

// decodeByteFallback turns runs of "<0xXX>" tokens into the text they spell, or one U+FFFD per byte
// where that is not valid UTF-8.
func decodeByteFallback(toks []string) []string {
	out := make([]string, 0, len(toks))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			out = append(out, strings.Repeat("\uFFFD", len(run)))
		}
		run = run[:0]
	}
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// byteToken reads a "<0xXX>" token.
func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(t[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | (c - '0')
		case c >= 'A' && c <= 'F':
			b = b<<4 | (c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return b, true
}
