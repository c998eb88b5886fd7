package tokenize

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// Hugging Face tokenizers run their Split patterns with Oniguruma, whose \s, \d and \w are Unicode
// classes and which has lookahead; Go's regexp has ASCII \s, \d and \w and no lookahead. compilePattern
// rewrites the classes, and emulates the one lookahead that tokenizer patterns use, the trailing
// `\s+(?!\S)|\s+` of GPT-2's, Llama-3's and Qwen's patterns: the last alternatives become one group
// `\s+`, and a match of that group followed by more text gives back its last character, which is what the
// lookahead's backtracking does. Anything else Go cannot run the same way is an error.

const (
	lookaheadTail = `\s+(?!\S)|\s+`
	wsGroup       = "mockerws"
	spaceClass    = `\t-\r\x{85}\p{Z}` // Unicode White_Space, Oniguruma's \s
)

// splitter finds the matches of a Split pattern, with Oniguruma's semantics.
type splitter struct {
	re *regexp.Regexp
	ws int // index of the emulated `\s+(?!\S)|\s+` group, or -1
}

func compilePattern(pattern string) (*splitter, error) {
	src, hasTail := strings.CutSuffix(pattern, lookaheadTail)
	if hasTail {
		src += `(?P<` + wsGroup + `>\s+)`
	}
	goSrc, err := translate(src)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	re, err := regexp.Compile(goSrc)
	if err != nil {
		msg := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) {
			msg = se.Code.String()
		}
		return nil, fmt.Errorf("pattern %q: Go's regexp: %s (lookaround other than a final %s, atomic groups and possessive quantifiers are not supported)", pattern, msg, lookaheadTail)
	}
	sp := &splitter{re: re, ws: -1}
	if hasTail {
		sp.ws = re.SubexpIndex(wsGroup)
	}
	return sp, nil
}

// translate rewrites Oniguruma's Unicode \s, \S, \d and \D for Go, and refuses what Go would read
// differently: anchors and word boundaries (matching restarts on a substring), \w and \W (Unicode
// Alphabetic, which Go's regexp lacks), nested and POSIX classes (ASCII in Go), backreferences and
// other escapes Go lacks.
func translate(p string) (string, error) {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			if i+1 == len(p) {
				return "", fmt.Errorf("trailing backslash")
			}
			i++
			e := p[i]
			switch {
			case e == 's' && inClass:
				b.WriteString(spaceClass)
			case e == 's':
				b.WriteString("[" + spaceClass + "]")
			case e == 'S' && !inClass:
				b.WriteString("[^" + spaceClass + "]")
			case e == 'd':
				b.WriteString(`\p{Nd}`)
			case e == 'D':
				b.WriteString(`\P{Nd}`)
			case strings.IndexByte("pPxtnrfva", e) >= 0,
				e < utf8.RuneSelf && !isASCIILetter(e) && (e < '0' || e > '9'):
				b.WriteByte('\\')
				b.WriteByte(e)
			default:
				return "", fmt.Errorf(`escape \%c is not supported`, e)
			}
			continue
		case inClass && (c == '[' || strings.HasPrefix(p[i:], "&&")):
			return "", fmt.Errorf("nested classes, POSIX classes and class intersections are not supported")
		case inClass && c == ']':
			inClass = false
		case !inClass && c == '[':
			inClass = true
			b.WriteByte(c)
			// A ']' right after '[' or '[^' is a literal.
			if strings.HasPrefix(p[i+1:], "^") {
				i++
				b.WriteByte('^')
			}
			if strings.HasPrefix(p[i+1:], "]") {
				i++
				b.WriteString(`\]`)
			}
			continue
		case !inClass && (c == '^' || c == '$'):
			return "", fmt.Errorf("anchor %c is not supported", c)
		}
		b.WriteByte(c)
	}
	if inClass {
		return "", fmt.Errorf("unterminated character class")
	}
	return b.String(), nil
}

// split calls emit for the consecutive parts of s: the matches and the text between them, in order, as
// Hugging Face's "Isolated" split behaviour keeps them. Empty matches are skipped.
func (sp *splitter) split(s string, emit func(part string)) {
	last := 0 // end of the previous part
	for at := 0; at < len(s); {
		m := sp.re.FindStringSubmatchIndex(s[at:])
		if m == nil {
			break
		}
		start, end := at+m[0], at+m[1]
		if sp.ws >= 0 && m[2*sp.ws] >= 0 && at+m[2*sp.ws+1] == end && end < len(s) {
			if _, n := utf8.DecodeLastRuneInString(s[start:end]); end-n > at+m[2*sp.ws] {
				end -= n
			}
		}
		if start == end {
			_, n := utf8.DecodeRuneInString(s[start:])
			at = start + n
			continue
		}
		if start > last {
			emit(s[last:start])
		}
		emit(s[start:end])
		last, at = end, end
	}
	if last < len(s) {
		emit(s[last:])
	}
}
