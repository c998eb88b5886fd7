package tokenize

import "slices"

// WithBOS returns t with bos put before every encoded text, as a model whose tokenizer.json adds a BOS
// does (Llama-3: "hi" is 2 prompt tokens in vLLM), for a tokenizer that adds none itself (Builtin).
// Decode leaves bos out, as a special token.
func WithBOS(t Tokenizer, bos uint32) Tokenizer { return &bosTokenizer{t: t, bos: bos} }

type bosTokenizer struct {
	t   Tokenizer
	bos uint32
}

func (b *bosTokenizer) Encode(text string) []uint32 {
	if bt, ok := b.t.(*builtin); ok { // the ids straight after the BOS, without moving them
		return bt.appendEncode(append(make([]uint32, 0, 1+encodeRoom(text)), b.bos), text)
	}
	ids := b.t.Encode(text)
	return slices.Insert(ids, 0, b.bos)
}

func (b *bosTokenizer) Decode(ids []uint32) string {
	if !slices.Contains(ids, b.bos) {
		return b.t.Decode(ids)
	}
	return b.t.Decode(slices.DeleteFunc(slices.Clone(ids), func(id uint32) bool { return id == b.bos }))
}

func (b *bosTokenizer) DecodeToken(id uint32) string {
	if id == b.bos {
		return ""
	}
	return b.t.DecodeToken(id)
}

func (b *bosTokenizer) VocabSize() int { return max(b.t.VocabSize(), int(b.bos)+1) }

func (b *bosTokenizer) Name() string { return b.t.Name() + "+bos" }
