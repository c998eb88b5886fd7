package tokens

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSequenceChainsFullBlocks(t *testing.T) {
	s := NewSequence(4)
	s.Append(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	if s.Len() != 10 {
		t.Fatalf("Len = %d, want 10", s.Len())
	}
	b0, b1 := BlockHash([]uint32{1, 2, 3, 4}), BlockHash([]uint32{5, 6, 7, 8})
	want := []Block{{Hash: b0, TokensHash: b0}, {Hash: SeqHash(b0, b1), TokensHash: b1}}
	if !slices.Equal(s.Blocks(), want) {
		t.Fatalf("Blocks = %x, want %x", s.Blocks(), want)
	}
	if !slices.Equal(s.Tail(), []uint32{9, 10}) {
		t.Fatalf("Tail = %v, want [9 10]", s.Tail())
	}
}

// TestSequenceAppendIsIncremental: appending token by token (as decoding does) gives the same identities
// as appending the whole sequence at once.
func TestSequenceAppendIsIncremental(t *testing.T) {
	toks := make([]uint32, 103)
	for i := range toks {
		toks[i] = uint32(i*2654435761) >> 7
	}
	for _, bs := range []int{1, 4, 16, 64} {
		whole := NewSequence(bs)
		whole.Append(toks...)
		pieces := NewSequence(bs)
		for i := 0; i < len(toks); {
			k := min(1+i%5, len(toks)-i)
			pieces.Append(toks[i : i+k]...)
			i += k
		}
		if !slices.Equal(whole.Blocks(), pieces.Blocks()) || !slices.Equal(whole.Tail(), pieces.Tail()) || pieces.Len() != len(toks) {
			t.Errorf("block size %d: incremental append differs from whole append", bs)
		}
		ones := NewSequence(bs) // a token at a time, as decode steps append, keeping them
		ones.KeepTokens()
		for _, tok := range toks {
			ones.Append(tok)
		}
		if !slices.Equal(whole.Blocks(), ones.Blocks()) || !slices.Equal(whole.Tail(), ones.Tail()) || ones.Len() != len(toks) ||
			!slices.Equal(ones.Tokens(), toks) {
			t.Errorf("block size %d: appending a token at a time differs from whole append", bs)
		}
		if got, want := len(whole.Blocks()), len(toks)/bs; got != want {
			t.Errorf("block size %d: %d full blocks, want %d", bs, got, want)
		}
	}
}

// TestSequenceSharedPrefix: two sequences share exactly the block hashes of their common full-block prefix.
func TestSequenceSharedPrefix(t *testing.T) {
	a, b := NewSequence(4), NewSequence(4)
	a.Append(1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)
	b.Append(1, 1, 1, 1, 2, 2, 2, 2, 4, 3, 3, 3)
	ab, bb := a.Blocks(), b.Blocks()
	if ab[0] != bb[0] || ab[1] != bb[1] || ab[2].Hash == bb[2].Hash {
		t.Fatalf("prefix sharing wrong: %x vs %x", ab, bb)
	}
	// Same tokens at a different position have the same tokens hash but a different identity.
	c := NewSequence(4)
	c.Append(2, 2, 2, 2)
	if c.Blocks()[0].TokensHash != ab[1].TokensHash || c.Blocks()[0].Hash == ab[1].Hash {
		t.Fatal("position must change the sequence hash but not the tokens hash")
	}
}

func TestSequenceKeepTokens(t *testing.T) {
	s := NewSequence(2)
	s.KeepTokens()
	s.Append(5, 6, 7)
	s.Append(8)
	if !slices.Equal(s.Tokens(), []uint32{5, 6, 7, 8}) {
		t.Fatalf("Tokens = %v", s.Tokens())
	}
	if NewSequence(2).Tokens() != nil {
		t.Fatal("tokens kept without KeepTokens")
	}
}

func BenchmarkSequenceAppend12k(b *testing.B) {
	toks := make([]uint32, 12000)
	for i := range toks {
		toks[i] = uint32(i / 512)
	}
	b.SetBytes(int64(4 * len(toks)))
	for b.Loop() {
		s := NewSequence(16)
		s.Append(toks...)
	}
}

// TestSequenceUniformBlocks: blocks of one repeated token (how traces synthesise prompts) hash exactly as
// any other block, whether or not the previous block was the same.
func TestSequenceUniformBlocks(t *testing.T) {
	toks := []uint32{7, 7, 7, 7, 7, 7, 7, 7, 9, 9, 9, 9, 7, 7, 7, 7, 7, 7, 7, 8}
	s := NewSequence(4)
	s.Append(toks...)
	for i, b := range s.Blocks() {
		if want := BlockHash(toks[4*i : 4*i+4]); b.TokensHash != want {
			t.Fatalf("block %d tokens hash %#x, want %#x", i, b.TokensHash, want)
		}
	}
	s.Reset()
	s.Append(9, 9, 9, 9)
	if got, want := s.Blocks()[0].TokensHash, BlockHash([]uint32{9, 9, 9, 9}); got != want || s.Len() != 4 {
		t.Fatalf("after Reset: %#x, want %#x", got, want)
	}
}

// TestAppendRunOracle: random runs of one token, some as long as many blocks, some declared items among
// them, make the same blocks and tail under AppendRun as under Append of their tokens.
func TestAppendRunOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 200 {
		bs := 1 + rng.IntN(16)
		a, b := NewSequence(bs), NewSequence(bs)
		if round%4 == 0 {
			items := []Item{{Key: 0xfeed, Start: rng.IntN(50), Len: 1 + rng.IntN(20)}}
			a.AddItems(items...)
			b.AddItems(items...)
		}
		var toks []uint32
		for range 1 + rng.IntN(12) {
			tok, n := uint32(rng.IntN(3)), rng.IntN(6*bs)
			a.AppendRun(tok, n)
			for range n {
				toks = append(toks, tok)
			}
		}
		b.Append(toks...)
		if !slices.Equal(a.Blocks(), b.Blocks()) || !slices.Equal(a.Tail(), b.Tail()) || a.Len() != b.Len() {
			t.Fatalf("round %d (block size %d): AppendRun %x/%v, Append %x/%v", round, bs, a.Blocks(), a.Tail(), b.Blocks(), b.Tail())
		}
	}
}

func TestAppendRunAndSequence(t *testing.T) {
	var toks []uint32
	a := NewSequence(4)
	for _, run := range []struct {
		tok uint32
		n   int
	}{{7, 3}, {7, 6}, {9, 1}, {5, 12}, {5, 2}} {
		a.AppendRun(run.tok, run.n)
		for range run.n {
			toks = append(toks, run.tok)
		}
	}
	b := NewSequence(4)
	b.Append(toks...)
	if !slices.Equal(a.Blocks(), b.Blocks()) || !slices.Equal(a.Tail(), b.Tail()) || a.Len() != b.Len() {
		t.Fatalf("AppendRun %x/%v, Append %x/%v", a.Blocks(), a.Tail(), b.Blocks(), b.Tail())
	}
	c := NewSequence(4)
	c.AppendSequence(a)
	c.Append(1, 2, 3)
	b.Append(1, 2, 3)
	if !slices.Equal(c.Blocks(), b.Blocks()) || !slices.Equal(c.Tail(), b.Tail()) || c.Len() != b.Len() {
		t.Fatalf("AppendSequence then Append differs")
	}
	k := NewSequence(4)
	k.KeepTokens()
	k.AppendRun(3, 5)
	kk := NewSequence(4)
	kk.KeepTokens()
	kk.AppendSequence(k)
	if !slices.Equal(kk.Tokens(), []uint32{3, 3, 3, 3, 3}) {
		t.Fatalf("kept tokens %v", kk.Tokens())
	}
}

// TestSequenceSeed: a sequence seeded for an adapter shares no block with the base model's or another
// adapter's, the uniform-run shortcut hashes with the seed, and Reset and AppendSequence carry it right.
func TestSequenceSeed(t *testing.T) {
	const bs = 4
	toks := []uint32{1, 2, 3, 4, 7, 7, 7, 7, 9, 9}
	mk := func(lora string) *Sequence {
		s := NewSequence(bs)
		s.SetSeed(LoRASeed(lora))
		s.Append(toks...)
		return s
	}
	base, a, a2, b := mk(""), mk("a"), mk("a"), mk("b")
	if !slices.Equal(a.Blocks(), a2.Blocks()) {
		t.Fatalf("same adapter: %v and %v", a.Blocks(), a2.Blocks())
	}
	seen := map[uint64]string{}
	for name, s := range map[string]*Sequence{"base": base, "a": a, "b": b} {
		if len(s.Blocks()) != 2 {
			t.Fatalf("%s: %d blocks, want 2", name, len(s.Blocks()))
		}
		for _, blk := range s.Blocks() {
			if other, ok := seen[blk.Hash]; ok {
				t.Fatalf("%s and %s share block %#x", name, other, blk.Hash)
			}
			seen[blk.Hash] = name
		}
	}
	if got, want := a.Blocks()[0].TokensHash, BlockHashSeed(toks[:4], LoRASeed("a")); got != want {
		t.Errorf("a's block 0 tokens hash %#x, want %#x", got, want)
	}
	// Block 1 of a is one repeated token: AppendRun's shortcut must agree with Append.
	run := NewSequence(bs)
	run.SetSeed(LoRASeed("a"))
	run.Append(toks[:4]...)
	run.AppendRun(7, 4)
	run.Append(9, 9)
	if !slices.Equal(run.Blocks(), a.Blocks()) {
		t.Errorf("AppendRun under a seed: %v, want %v", run.Blocks(), a.Blocks())
	}
	cp := NewSequence(bs)
	cp.AppendSequence(a)
	if cp.Seed() != LoRASeed("a") {
		t.Errorf("AppendSequence: seed %#x, want %#x", cp.Seed(), LoRASeed("a"))
	}
	cp.Append(5, 6) // completes block 2 with a's seed
	a.Append(5, 6)
	if !slices.Equal(cp.Blocks(), a.Blocks()) {
		t.Errorf("after AppendSequence: %v, want %v", cp.Blocks(), a.Blocks())
	}
	a.Reset()
	a.Append(toks...)
	if a.Seed() != Seed || !slices.Equal(a.Blocks(), base.Blocks()) {
		t.Errorf("after Reset: seed %#x, blocks %v, want the base model's %v", a.Seed(), a.Blocks(), base.Blocks())
	}
}

// TestSequenceGrow: after Grow(n), appending n tokens (runs and single tokens, a partial block left over,
// tokens kept) grows neither array, and makes the blocks and tokens a sequence without Grow makes.
func TestSequenceGrow(t *testing.T) {
	fill := func(s *Sequence) {
		s.Append(7, 8, 9)
		s.AppendRun(3, 40)
		s.AppendRun(5, 21)
		s.Append(1, 2)
	}
	plain := NewSequence(4)
	plain.KeepTokens()
	plain.Append(6)
	fill(plain)
	grown := NewSequence(4)
	grown.KeepTokens()
	grown.Append(6)
	grown.Grow(66)
	blocks, toks := cap(grown.Blocks()), cap(grown.Tokens())
	fill(grown)
	if cap(grown.Blocks()) != blocks || cap(grown.Tokens()) != toks || blocks < 16 {
		t.Errorf("appending 66 tokens after Grow(66) took the arrays from %d blocks and %d tokens to %d and %d", blocks, toks, cap(grown.Blocks()), cap(grown.Tokens()))
	}
	if !slices.Equal(grown.Blocks(), plain.Blocks()) || !slices.Equal(grown.Tokens(), plain.Tokens()) || grown.Len() != 67 {
		t.Errorf("grown sequence: %d tokens, blocks %v, tokens %v; want 67, %v, %v", grown.Len(), grown.Blocks(), grown.Tokens(), plain.Blocks(), plain.Tokens())
	}
}

// BenchmarkAppendRunTrace makes a conversation-trace prompt: 24 hash ids of 512 tokens, at block 16.
func BenchmarkAppendRunTrace(b *testing.B) {
	s := NewSequence(16)
	for range b.N {
		s.Reset()
		for id := range uint32(24) {
			s.AppendRun(id, 512)
		}
		s.AppendRun(99, 300)
	}
}
