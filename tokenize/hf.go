package tokenize

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// FromFile loads a Hugging Face tokenizer.json with a BPE model. It runs the pipeline of the tokenizers
// library: added tokens are split off first (leftmost, then longest), the rest is normalized,
// pre-tokenized, and each piece is merged by the BPE model; then the post-processor's special tokens are
// added, so Encode adds BOS where the model's tokenizer does (as vLLM does for completions; ChatPrompt
// writes no BOS, so a chat gets it once; a BOS the client wrote into the text is kept, as in vLLM).
// Truncation and padding in the file are ignored, as transformers ignores them.
//
// Supported components, which cover GPT-2, Llama-3, Qwen2/2.5/3, DeepSeek, Llama-2 and Mistral:
//
//   - model: BPE, with unk_token, fuse_unk, byte_fallback, ignore_merges, merges as "a b" or ["a", "b"];
//   - normalizer: Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD, Lowercase, Strip;
//   - pre_tokenizer: Sequence, Split (Isolated, with the pattern run as described at compilePattern),
//     ByteLevel, Metaspace;
//   - post_processor: TemplateProcessing, ByteLevel, Sequence;
//   - decoder: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence.
//
// Anything else (another model type, BPE dropout, an added token with single_word, a pattern Go's regexp
// cannot run the same way) is an error naming the file and the component, rather than wrong ids.
//
// github.com/sugarme/tokenizer is not used: its pipeline gives wrong ids for these files. Its BPE breaks
// ties between equal merges in heap order rather than leftmost first ("aaaaa" becomes aa a aa), its
// ByteLevel pre-tokenizer lacks GPT-2's `\s+(?!\S)` rule ("\n\n" before a word becomes one piece), it
// drops text around repeated special tokens, ignores byte_fallback, ignore_merges, use_regex and
// Metaspace's split flag, and panics on Llama-3's pattern.
func FromFile(path string) (Tokenizer, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "tokenizer.json") // a model checkpoint directory
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %w", err)
	}
	t, err := parseTokenizer(data)
	if err != nil {
		return nil, fmt.Errorf("tokenize: %s: %w", path, err)
	}
	t.name = path
	return t, nil
}

// hfTokenizer is a loaded tokenizer.json.
type hfTokenizer struct {
	name      string
	model     *bpe
	normalize func(string) string // nil: none
	pre       []preTokenizer
	rawAdded  addedSet // added tokens matched in the text as given
	normAdded addedSet // added tokens matched in normalized text
	prefix    []uint32 // post-processor tokens before the sequence
	suffix    []uint32 // and after it
	decoders  []func([]string) []string
	noDecoder bool     // join tokens with spaces, as the library does without a decoder
	tokens    []string // by id
	special   []bool   // by id
	vocabSize int
}

type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         json.RawMessage  `json:"model"`
}

type addedTokenJSON struct {
	ID         uint32 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// component holds the fields of every supported normalizer, pre-tokenizer, post-processor and decoder;
// each reads the ones it needs.
type component struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	PreTokenizers  []json.RawMessage `json:"pretokenizers"`
	Processors     []json.RawMessage `json:"processors"`
	Decoders       []json.RawMessage `json:"decoders"`
	Pattern        *patternJSON      `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	Content        string            `json:"content"`
	Prepend        string            `json:"prepend"`
	StripLeft      bool              `json:"strip_left"`
	StripRight     bool              `json:"strip_right"`
	Start          int               `json:"start"`
	Stop           int               `json:"stop"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
	Replacement    string            `json:"replacement"`
	PrependScheme  string            `json:"prepend_scheme"`
	Split          *bool             `json:"split"`
	Single         []templatePiece   `json:"single"`
	SpecialTokens  map[string]struct {
		IDs []uint32 `json:"ids"`
	} `json:"special_tokens"`
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func parseComponent(raw json.RawMessage) (*component, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func parseTokenizer(data []byte) (*hfTokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %v", err)
	}
	if isNull(f.Model) {
		return nil, fmt.Errorf("no model")
	}
	m, err := newBPE(f.Model)
	if err != nil {
		return nil, err
	}
	t := &hfTokenizer{model: m}
	if !isNull(f.Normalizer) {
		if t.normalize, err = newNormalizer(f.Normalizer); err != nil {
			return nil, fmt.Errorf("normalizer: %w", err)
		}
	}
	if !isNull(f.PreTokenizer) {
		if t.pre, err = newPreTokenizer(f.PreTokenizer, nil); err != nil {
			return nil, fmt.Errorf("pre_tokenizer: %w", err)
		}
	}
	if err := t.addTokens(f.AddedTokens); err != nil {
		return nil, fmt.Errorf("added_tokens: %w", err)
	}
	if !isNull(f.PostProcessor) {
		if err := t.addPostProcessor(f.PostProcessor); err != nil {
			return nil, fmt.Errorf("post_processor: %w", err)
		}
	}
	if isNull(f.Decoder) {
		t.noDecoder = true
	} else if t.decoders, err = newDecoder(f.Decoder, nil); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	return t, nil
}

// addTokens builds the id tables and the added-token matchers.
func (t *hfTokenizer) addTokens(added []addedTokenJSON) error {
	for _, id := range t.model.vocab {
		t.vocabSize = max(t.vocabSize, int(id)+1)
	}
	for _, a := range added {
		t.vocabSize = max(t.vocabSize, int(a.ID)+1)
	}
	t.tokens = make([]string, t.vocabSize)
	t.special = make([]bool, t.vocabSize)
	for s, id := range t.model.vocab {
		t.tokens[id] = s
	}
	for _, a := range added {
		switch {
		case a.Content == "":
			return fmt.Errorf("token %d is empty", a.ID)
		case a.SingleWord:
			return fmt.Errorf("token %q: single_word is not supported", a.Content)
		}
		t.tokens[a.ID], t.special[a.ID] = a.Content, a.Special
		tok := addedToken{id: a.ID, content: a.Content, lstrip: a.LStrip, rstrip: a.RStrip}
		if a.Normalized && t.normalize != nil {
			tok.content = t.normalize(a.Content)
			t.normAdded.add(tok)
		} else {
			t.rawAdded.add(tok)
		}
	}
	t.rawAdded.sort()
	t.normAdded.sort()
	return nil
}

func (t *hfTokenizer) addPostProcessor(raw json.RawMessage) error {
	c, err := parseComponent(raw)
	if err != nil {
		return err
	}
	switch c.Type {
	case "ByteLevel": // it only trims offsets
		return nil
	case "Sequence":
		for _, p := range c.Processors {
			if err := t.addPostProcessor(p); err != nil {
				return err
			}
		}
		return nil
	case "TemplateProcessing":
		seen := false
		for _, p := range c.Single {
			switch {
			case p.Sequence != nil && p.Sequence.ID == "A" && !seen:
				seen = true
			case p.SpecialToken != nil:
				st, ok := c.SpecialTokens[p.SpecialToken.ID]
				if !ok {
					return fmt.Errorf("TemplateProcessing: special token %q is not in special_tokens", p.SpecialToken.ID)
				}
				if seen {
					t.suffix = append(t.suffix, st.IDs...)
				} else {
					t.prefix = append(t.prefix, st.IDs...)
				}
			default:
				return fmt.Errorf("TemplateProcessing: single template piece is neither a special token nor sequence A")
			}
		}
		if !seen {
			return fmt.Errorf("TemplateProcessing: single template has no sequence A")
		}
		return nil
	}
	return fmt.Errorf("type %q is not supported", c.Type)
}

// Name implements Tokenizer: the path the tokenizer was loaded from.
func (t *hfTokenizer) Name() string { return t.name }

// VocabSize implements Tokenizer: one more than the largest id of the vocab and the added tokens.
func (t *hfTokenizer) VocabSize() int { return t.vocabSize }

// Encode implements Tokenizer.
func (t *hfTokenizer) Encode(text string) []uint32 {
	ids := make([]uint32, 0, len(text)/3+len(t.prefix)+len(t.suffix)+1)
	ids = append(ids, t.prefix...)
	var pieces []piece
	t.rawAdded.split(text, func(seg string, start int, tok *addedToken) {
		if tok != nil {
			ids = append(ids, tok.id)
			return
		}
		if t.normalize != nil {
			seg = t.normalize(seg)
		}
		t.normAdded.split(seg, func(part string, start2 int, tok *addedToken) {
			if tok != nil {
				ids = append(ids, tok.id)
				return
			}
			pieces = append(pieces[:0], piece{text: part, first: start == 0 && start2 == 0})
			for _, p := range t.pre {
				pieces = p(pieces)
			}
			for _, pc := range pieces {
				ids = t.model.encode(pc.text, ids)
			}
		})
	})
	return append(ids, t.suffix...)
}

// Decode implements Tokenizer. Special tokens and ids outside the vocabulary are left out.
func (t *hfTokenizer) Decode(ids []uint32) string {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if int(id) < len(t.tokens) && !t.special[id] && t.tokens[id] != "" {
			toks = append(toks, t.tokens[id])
		}
	}
	return t.decode(toks)
}

// DecodeToken implements Tokenizer.
func (t *hfTokenizer) DecodeToken(id uint32) string {
	if int(id) >= len(t.tokens) || t.special[id] || t.tokens[id] == "" {
		return t.decode(nil)
	}
	return t.decode([]string{t.tokens[id]})
}

// decode runs the decoder over the text of tokens and joins what it returns.
func (t *hfTokenizer) decode(toks []string) string {
	if t.noDecoder {
		return strings.Join(toks, " ")
	}
	for _, d := range t.decoders {
		toks = d(toks)
	}
	return strings.Join(toks, "")
}

// addedToken is a token of added_tokens, found in the text before any other processing.
type addedToken struct {
	id             uint32
	content        string
	lstrip, rstrip bool
}

// addedSet finds added tokens in text, leftmost first and then longest, as the library's Aho-Corasick
// automaton does.
type addedSet struct {
	byFirst map[byte][]addedToken // by first byte of content, longest first
}

func (a *addedSet) add(tok addedToken) {
	if a.byFirst == nil {
		a.byFirst = make(map[byte][]addedToken)
	}
	a.byFirst[tok.content[0]] = append(a.byFirst[tok.content[0]], tok)
}

func (a *addedSet) sort() {
	for _, toks := range a.byFirst {
		sort.SliceStable(toks, func(i, j int) bool { return len(toks[i].content) > len(toks[j].content) })
	}
}

// split calls emit for the consecutive parts of s, in order: added tokens (tok != nil, with the
// whitespace that lstrip and rstrip take) and the non-empty text between them (tok == nil). start is the
// part's offset in s.
func (a *addedSet) split(s string, emit func(part string, start int, tok *addedToken)) {
	if len(a.byFirst) == 0 {
		if s != "" {
			emit(s, 0, nil)
		}
		return
	}
	last := 0
	for i := 0; i < len(s); i++ {
		toks := a.byFirst[s[i]]
		for k := range toks {
			tok := &toks[k]
			if !strings.HasPrefix(s[i:], tok.content) {
				continue
			}
			start, end := i, i+len(tok.content)
			if tok.lstrip {
				start = last + len(strings.TrimRightFunc(s[last:start], unicode.IsSpace))
			}
			if tok.rstrip {
				end = len(s) - len(strings.TrimLeftFunc(s[end:], unicode.IsSpace))
			}
			if start > last {
				emit(s[last:start], last, nil)
			}
			emit(s[start:end], start, tok)
			last, i = end, end-1
			break
		}
	}
	if last < len(s) {
		emit(s[last:], last, nil)
	}
}

func newNormalizer(raw json.RawMessage) (func(string) string, error) {
	c, err := parseComponent(raw)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var fs []func(string) string
		for _, n := range c.Normalizers {
			f, err := newNormalizer(n)
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, nil
	case "Prepend":
		return func(s string) string {
			if s == "" {
				return s
			}
			return c.Prepend + s
		}, nil
	case "Replace":
		return newReplace(c)
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return strings.ToLower, nil
	case "Strip":
		return func(s string) string {
			if c.StripLeft {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if c.StripRight {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("type %q is not supported", c.Type)
}

// newReplace serves the Replace normalizer and the Replace decoder.
func newReplace(c *component) (func(string) string, error) {
	switch {
	case c.Pattern != nil && c.Pattern.String != nil:
		old, content := *c.Pattern.String, c.Content
		return func(s string) string { return strings.ReplaceAll(s, old, content) }, nil
	case c.Pattern != nil && c.Pattern.Regex != nil:
		sp, err := compilePattern(*c.Pattern.Regex)
		if err == nil && sp.ws >= 0 {
			err = fmt.Errorf("pattern %q: lookahead is not supported here", *c.Pattern.Regex)
		}
		if err != nil {
			return nil, fmt.Errorf("Replace: %w", err)
		}
		content := c.Content
		return func(s string) string { return sp.re.ReplaceAllLiteralString(s, content) }, nil
	}
	return nil, fmt.Errorf("Replace: no pattern")
}
