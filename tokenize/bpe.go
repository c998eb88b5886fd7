package tokenize

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// bpe is a Hugging Face BPE model: a word's characters become symbols, and adjacent pairs are merged by
// rank, lowest first and, between equal ranks, leftmost first, as the tokenizers library does.
type bpe struct {
	vocab        map[string]uint32
	merges       map[uint64]merge // key: left id << 32 | right id
	unk          uint32
	hasUnk       bool
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	bytes        [256]uint32 // ids of the "<0xXX>" byte tokens, when byteFallback
	hasBytes     [256]bool
}

type merge struct{ rank, id uint32 }

type bpeJSON struct {
	Type                    string            `json:"type"`
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]uint32 `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

func newBPE(raw json.RawMessage) (*bpe, error) {
	var j bpeJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("model: %v", err)
	}
	switch {
	case j.Type != "BPE":
		return nil, fmt.Errorf("model type %q is not supported (only BPE)", j.Type)
	case j.Dropout != nil && *j.Dropout != 0:
		return nil, fmt.Errorf("model: BPE dropout %g is not supported (it makes encoding random)", *j.Dropout)
	case j.ContinuingSubwordPrefix != nil && *j.ContinuingSubwordPrefix != "",
		j.EndOfWordSuffix != nil && *j.EndOfWordSuffix != "":
		return nil, fmt.Errorf("model: BPE continuing_subword_prefix and end_of_word_suffix are not supported")
	case len(j.Vocab) == 0:
		return nil, fmt.Errorf("model: empty vocab")
	}
	m := &bpe{vocab: j.Vocab, fuseUnk: j.FuseUnk, byteFallback: j.ByteFallback, ignoreMerges: j.IgnoreMerges}
	if j.UnkToken != nil {
		id, ok := j.Vocab[*j.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model: unk_token %q is not in the vocab", *j.UnkToken)
		}
		m.unk, m.hasUnk = id, true
	}
	if m.byteFallback {
		for b := range m.bytes {
			m.bytes[b], m.hasBytes[b] = j.Vocab[fmt.Sprintf("<0x%02X>", b)]
		}
	}
	m.merges = make(map[uint64]merge, len(j.Merges))
	for rank, raw := range j.Merges {
		left, right, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("model: merge %d: %v", rank, err)
		}
		a, okA := j.Vocab[left]
		b, okB := j.Vocab[right]
		id, okID := j.Vocab[left+right]
		if !okA || !okB || !okID {
			return nil, fmt.Errorf("model: merge %d (%q, %q) uses a token that is not in the vocab", rank, left, right)
		}
		m.merges[uint64(a)<<32|uint64(b)] = merge{rank: uint32(rank), id: id}
	}
	return m, nil
}

// parseMerge reads a merge in either of tokenizer.json's forms: "left right" or ["left", "right"].
func parseMerge(raw json.RawMessage) (left, right string, err error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		l, r, ok := strings.Cut(s, " ")
		if !ok {
			return "", "", fmt.Errorf("%q has no space", s)
		}
		return l, r, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("%s is neither \"left right\" nor [left, right]", raw)
	}
	return pair[0], pair[1], nil
}

// symbol is one node of a word being merged; a merged-away symbol has size 0.
type symbol struct {
	id         uint32
	prev, next int
	size       int
}

// candidate is a possible merge of the symbol at pos with its next one.
type candidate struct {
	pos      int
	rank, id uint32
}

type candidates []candidate

func (q candidates) Len() int { return len(q) }
func (q candidates) Less(i, j int) bool {
	if q[i].rank != q[j].rank {
		return q[i].rank < q[j].rank
	}
	return q[i].pos < q[j].pos
}
func (q candidates) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *candidates) Push(x any)   { *q = append(*q, x.(candidate)) }
func (q *candidates) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// encode appends the ids of word to ids.
func (m *bpe) encode(word string, ids []uint32) []uint32 {
	if word == "" {
		return ids
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(ids, id)
		}
	}
	syms := m.symbols(word)
	q := make(candidates, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[uint64(syms[i].id)<<32|uint64(syms[i+1].id)]; ok {
			q = append(q, candidate{pos: i, rank: mg.rank, id: mg.id})
		}
	}
	heap.Init(&q)
	for q.Len() > 0 {
		top := heap.Pop(&q).(candidate)
		cur := &syms[top.pos]
		if cur.size == 0 || cur.next < 0 {
			continue
		}
		right := syms[cur.next]
		// A candidate is stale when either side has been merged since it was queued.
		if mg, ok := m.merges[uint64(cur.id)<<32|uint64(right.id)]; !ok || mg.id != top.id {
			continue
		}
		cur.id = top.id
		cur.size += right.size
		syms[cur.next].size = 0
		cur.next = right.next
		if cur.next >= 0 {
			syms[cur.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mg, ok := m.merges[uint64(syms[cur.prev].id)<<32|uint64(cur.id)]; ok {
				heap.Push(&q, candidate{pos: cur.prev, rank: mg.rank, id: mg.id})
			}
		}
		if cur.next >= 0 {
			if mg, ok := m.merges[uint64(cur.id)<<32|uint64(syms[cur.next].id)]; ok {
				heap.Push(&q, candidate{pos: top.pos, rank: mg.rank, id: mg.id})
			}
		}
	}
	for _, s := range syms {
		if s.size > 0 {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// symbols splits word into its initial symbols: one per character in the vocab; a character that is not
// becomes its "<0xXX>" byte tokens under byte_fallback, or else the unknown token (one for a run of them
// under fuse_unk), or else nothing, as in the tokenizers library.
func (m *bpe) symbols(word string) []symbol {
	syms := make([]symbol, 0, len(word))
	add := func(id uint32, size int) {
		syms = append(syms, symbol{id: id, prev: len(syms) - 1, next: len(syms) + 1, size: size})
	}
	unkSize := 0 // bytes of the pending unknown token
	for i := 0; i < len(word); {
		_, n := utf8.DecodeRuneInString(word[i:])
		ch := word[i : i+n]
		i += n
		if id, ok := m.vocab[ch]; ok {
			if unkSize > 0 {
				add(m.unk, unkSize)
				unkSize = 0
			}
			add(id, n)
			continue
		}
		if m.byteFallback && m.hasAllBytes(ch) {
			// The tokenizers library adds the byte tokens without flushing a pending unknown token.
			for k := 0; k < len(ch); k++ {
				add(m.bytes[ch[k]], 1)
			}
			continue
		}
		if !m.hasUnk {
			continue
		}
		if unkSize > 0 && !m.fuseUnk {
			add(m.unk, unkSize)
			unkSize = 0
		}
		unkSize += n
	}
	if unkSize > 0 {
		add(m.unk, unkSize)
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

func (m *bpe) hasAllBytes(ch string) bool {
	for k := 0; k < len(ch); k++ {
		if !m.hasBytes[ch[k]] {
			return false
		}
	}
	return true
}
