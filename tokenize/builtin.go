package tokenize

import (
	"fmt"
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// DefaultVocabSize is Llama-3's vocabulary size, the built-in tokenizer's default.
const DefaultVocabSize = 128256

// reserved ids are never produced by the built-in Encode: real vocabularies keep such a range for bytes
// and special tokens, and the engines may use it for their own markers.
const reserved = 256

// maxChunk is the most bytes one built-in token covers. Pieces longer than this (long or rare words,
// punctuation rulers, whitespace runs, non-Latin text) are cut into chunks of this size. On the same
// texts this gives counts close to real tokenizers': English prose about 4.8 characters a token (Llama-3
// 5.3, Llama-2 4.9), Go source about 3.2 (Llama-3 3.0), Chinese about 1.9 characters a token (Llama-3
// 1.4).
const maxChunk = 8

// Builtin returns the built-in tokenizer with DefaultVocabSize ids, the one used when no tokenizer file
// is given. It cuts text into the pieces Llama-3's pre-tokenizer would make (a word with its leading
// space or punctuation mark, English contractions, digits in groups of up to three, a punctuation run
// with its trailing newlines, whitespace runs), cuts pieces longer than 8 bytes into chunks, and maps
// each chunk to an id in [256, vocab) by its XXH3 hash. A "<|name|>" marker, such as ChatPrompt writes,
// is one token, as a special token is.
//
// A piece depends only on the text next to it, so Encode(a+b) starts with Encode(a) whenever a ends where
// a piece ends (after a non-space before a space, or after a marker, for instance), and identical prompt
// prefixes give identical leading ids, on every run and machine.
//
// Decode maps each id to one of 256 common English words, so any id sequence reads as (meaningless)
// text; Decode(Encode(s)) is not s.
func Builtin() Tokenizer { return defaultBuiltin }

var defaultBuiltin = &builtin{vocab: DefaultVocabSize}

// builtin is the tokenizer Builtin and NewBuiltin return.
type builtin struct {
	vocab int
}

// NewBuiltin returns a built-in tokenizer (see Builtin) with ids in [0, vocabSize).
func NewBuiltin(vocabSize int) (Tokenizer, error) {
	if vocabSize <= reserved || vocabSize > 1<<32 {
		return nil, fmt.Errorf("tokenize: built-in vocabulary size %d out of range (%d, 2^32]", vocabSize, reserved)
	}
	return &builtin{vocab: vocabSize}, nil
}

// Name implements Tokenizer.
func (b *builtin) Name() string { return "builtin" }

// VocabSize implements Tokenizer.
func (b *builtin) VocabSize() int { return b.vocab }

// Encode implements Tokenizer. It adds no special tokens.
func (b *builtin) Encode(text string) []uint32 {
	return b.appendEncode(make([]uint32, 0, encodeRoom(text)), text)
}

// encodeRoom is the room Encode makes for text's ids: enough for all but digit- and space-heavy text.
func encodeRoom(text string) int { return len(text)/3 + 4 }

// appendEncode appends text's ids to ids.
func (b *builtin) appendEncode(ids []uint32, text string) []uint32 {
	for i := 0; i < len(text); {
		end := asciiPiece(text, i)
		if end == 0 && text[i] == '<' {
			if m := markerEnd(text, i); m > 0 { // a marker is one token, never cut into chunks
				ids = append(ids, b.id(text[i:m]))
				i = m
				continue
			}
		}
		if end == 0 {
			end = nextPiece(text, i)
		}
		for i < end {
			j := chunkEnd(text, i, end)
			ids = append(ids, b.id(text[i:j]))
			i = j
		}
	}
	return ids
}

// Byte classes of ASCII, for asciiPiece.
const (
	cOther  = iota // punctuation and control characters
	cLetter        // a-z, A-Z
	cDigit         // 0-9
	cSpace         // ' ', '\t', '\v', '\f'
	cBreak         // '\r', '\n'
	cSlow          // '<' and '\'' (a marker or a contraction may start there) and non-ASCII bytes
)

var byteClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= utf8.RuneSelf || c == '<' || c == '\'':
			t[c] = cSlow
		case isASCIILetter(byte(c)):
			t[c] = cLetter
		case c >= '0' && c <= '9':
			t[c] = cDigit
		case c == '\r' || c == '\n':
			t[c] = cBreak
		case c == ' ' || c >= '\t' && c <= '\r':
			t[c] = cSpace
		}
	}
	return t
}()

// asciiPiece returns what nextPiece would for the commonest pieces of ASCII text (a word, with the space
// or punctuation mark before it; up to three digits; a space before a digit), found by byte class
// alone, or 0 where nextPiece (or a marker) must decide.
func asciiPiece(text string, i int) int {
	switch byteClass[text[i]] {
	case cLetter:
		return asciiLetterRunEnd(text, i+1)
	case cDigit:
		j := i + 1
		for ; j < len(text) && j < i+3; j++ {
			switch byteClass[text[j]] {
			case cDigit:
				continue
			case cSlow:
				return 0 // a non-ASCII number may continue the run
			}
			break
		}
		return j
	case cSpace, cOther:
		if i+1 == len(text) {
			return 0
		}
		switch byteClass[text[i+1]] {
		case cLetter:
			return asciiLetterRunEnd(text, i+2)
		case cDigit:
			if text[i] == ' ' {
				return i + 1 // a space alone: the digits are a piece of their own
			}
		}
	}
	return 0
}

// asciiLetterRunEnd is letterRunEnd, ASCII letters first.
func asciiLetterRunEnd(text string, i int) int {
	for i < len(text) && byteClass[text[i]] == cLetter {
		i++
	}
	if i < len(text) && text[i] >= utf8.RuneSelf {
		return letterRunEnd(text, i)
	}
	return i
}

// id maps a chunk of text to [reserved, vocab) by its hash.
func (b *builtin) id(chunk string) uint32 {
	hi, _ := bits.Mul64(xxh3.HashString(chunk), uint64(b.vocab-reserved))
	return reserved + uint32(hi)
}

// Decode implements Tokenizer.
func (b *builtin) Decode(ids []uint32) string {
	var sb strings.Builder
	sb.Grow(6 * len(ids))
	for _, id := range ids {
		sb.WriteString(words[id%uint32(len(words))])
	}
	return sb.String()
}

// DecodeToken implements Tokenizer, without a copy.
func (b *builtin) DecodeToken(id uint32) string { return words[id%uint32(len(words))] }

// chunkEnd returns the end of the chunk of text[i:end] that starts at i: at most maxChunk bytes, cut at a
// rune boundary, and never empty.
func chunkEnd(text string, i, end int) int {
	if end-i <= maxChunk {
		return end
	}
	j := i + maxChunk
	for j > i && !utf8.RuneStart(text[j]) {
		j--
	}
	if j == i {
		_, n := runeAt(text, i)
		j = i + n
	}
	return j
}

// nextPiece returns the end of the piece that starts at text[i]. It follows Llama-3's pre-tokenizer
// pattern, alternative by alternative:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// (the contractions are matched in ASCII case only), except that a punctuation run stops before a
// "<|name|>" marker, as text stops before a special token.
func nextPiece(text string, i int) int {
	r, n := runeAt(text, i)
	if r == '\'' {
		if j := contractionEnd(text, i+1); j > 0 {
			return j
		}
	}
	if isLetter(r) {
		return letterRunEnd(text, i+n)
	}
	if !isNumber(r) && r != '\r' && r != '\n' && i+n < len(text) {
		if r2, _ := runeAt(text, i+n); isLetter(r2) {
			return letterRunEnd(text, i+n)
		}
	}
	if isNumber(r) {
		j := i + n
		for k := 1; k < 3 && j < len(text); k++ {
			r2, n2 := runeAt(text, j)
			if !isNumber(r2) {
				break
			}
			j += n2
		}
		return j
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*"
	j := i
	if r == ' ' {
		j++
	}
	k := j
	for k < len(text) && markerEnd(text, k) == 0 {
		r2, n2 := runeAt(text, k)
		if isSpace(r2) || isLetter(r2) || isNumber(r2) {
			break
		}
		k += n2
	}
	if k > j {
		for k < len(text) && (text[k] == '\r' || text[k] == '\n') {
			k++
		}
		return k
	}
	// r is whitespace. "\s*[\r\n]+" ends after the run's last newline, if it has one.
	end, afterNewline := i, 0
	for end < len(text) {
		r2, n2 := runeAt(text, end)
		if !isSpace(r2) {
			break
		}
		end += n2
		if r2 == '\r' || r2 == '\n' {
			afterNewline = end
		}
	}
	if afterNewline > 0 {
		return afterNewline
	}
	// "\s+(?!\S)|\s+": a run followed by a non-space leaves its last character to the next piece.
	if end == len(text) || end-i == n {
		return end
	}
	_, last := utf8.DecodeLastRuneInString(text[i:end])
	return end - last
}

// markerEnd returns the end of a "<|name|>" marker (name of ASCII letters, digits and '_') at text[i],
// or 0.
func markerEnd(text string, i int) int {
	if !strings.HasPrefix(text[i:], "<|") {
		return 0
	}
	j := i + 2
	for j < len(text) && (isASCIILetter(text[j]) || text[j] >= '0' && text[j] <= '9' || text[j] == '_') {
		j++
	}
	if j == i+2 || !strings.HasPrefix(text[j:], "|>") {
		return 0
	}
	return j + 2
}

// contractionEnd returns the end of the contraction whose letters start at text[i] (after an
// apostrophe), or 0.
func contractionEnd(text string, i int) int {
	if i >= len(text) {
		return 0
	}
	switch text[i] | 0x20 {
	case 's', 't', 'm', 'd':
		return i + 1
	case 'r', 'v':
		if i+1 < len(text) && text[i+1]|0x20 == 'e' {
			return i + 2
		}
	case 'l':
		if i+1 < len(text) && text[i+1]|0x20 == 'l' {
			return i + 2
		}
	}
	return 0
}

func letterRunEnd(text string, i int) int {
	for i < len(text) {
		if c := text[i]; c < utf8.RuneSelf {
			if !isASCIILetter(c) {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsLetter(r) {
			break
		}
		i += n
	}
	return i
}

func runeAt(text string, i int) (rune, int) {
	if c := text[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(text[i:])
}

func isASCIILetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return isASCIILetter(byte(r))
	}
	return unicode.IsLetter(r)
}

func isNumber(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r)
}

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || r >= '\t' && r <= '\r'
	}
	return unicode.IsSpace(r)
}

// appendPieces appends the text of each id appendEncode would append for text: the same cuts, kept as
// strings (see Pieces).
func (b *builtin) appendPieces(pieces []string, text string) []string {
	for i := 0; i < len(text); {
		end := asciiPiece(text, i)
		if end == 0 && text[i] == '<' {
			if m := markerEnd(text, i); m > 0 {
				pieces = append(pieces, text[i:m])
				i = m
				continue
			}
		}
		if end == 0 {
			end = nextPiece(text, i)
		}
		for i < end {
			j := chunkEnd(text, i, end)
			pieces = append(pieces, text[i:j])
			i = j
		}
	}
	return pieces
}
