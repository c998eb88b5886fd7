package tokens

import "testing"

// TestItemsSplitBlocks: the same tokens with a different image share the blocks before the image and none
// from the first block the image overlaps; the same image shares them all; a sequence without items hashes
// as before (ExtraHash with no keys is the identity).
func TestItemsSplitBlocks(t *testing.T) {
	const bs = 4
	toks := make([]uint32, 22) // blocks [0,4) [4,8) [8,12) [12,16) [16,20), tail 2
	for i := range toks {
		toks[i] = uint32(100 + i%3)
	}
	seq := func(items ...Item) []Block {
		s := NewSequence(bs)
		s.AddItems(items...)
		s.Append(toks...)
		return s.Blocks()
	}
	plain, a, a2, b := seq(), seq(Item{Key: 1, Start: 6, Len: 5}), seq(Item{Key: 1, Start: 6, Len: 5}), seq(Item{Key: 2, Start: 6, Len: 5})
	for i := range plain {
		if a[i] != a2[i] {
			t.Errorf("block %d: same image, %x != %x", i, a[i].Hash, a2[i].Hash)
		}
		if shared, want := a[i].Hash == b[i].Hash, i < 1; shared != want {
			t.Errorf("block %d: images 1 and 2 share it = %v, want %v", i, shared, want)
		}
		if shared, want := a[i].Hash == plain[i].Hash, i < 1; shared != want {
			t.Errorf("block %d: image 1 and no image share it = %v, want %v", i, shared, want)
		}
	}
	// Blocks 1 and 2 overlap [6,11); block 3 does not, so its tokens hash is the plain one (its sequence
	// hash still differs through the chain).
	for i, want := range []bool{false, true, true, false, false} {
		if got := a[i].TokensHash != plain[i].TokensHash; got != want {
			t.Errorf("block %d: tokens hash carries the key = %v, want %v", i, got, want)
		}
	}
	if got, want := a[1].TokensHash, ExtraHash(BlockHash(toks[4:8]), 1); got != want {
		t.Errorf("block 1 tokens hash = %x, want ExtraHash(tokens, 1) = %x", got, want)
	}
	if got := ExtraHash(42); got != 42 {
		t.Errorf("ExtraHash(42) = %d, want 42", got)
	}
	// Two items in one block fold both keys, in order.
	two := seq(Item{Key: 7, Start: 0, Len: 1}, Item{Key: 8, Start: 2, Len: 1})
	if got, want := two[0].TokensHash, ExtraHash(BlockHash(toks[:4]), 7, 8); got != want {
		t.Errorf("two items: %x, want %x", got, want)
	}
}

// TestItemsRunsAndCopies: appending by runs (traces) and copying a sequence keep the items' keys.
func TestItemsRunsAndCopies(t *testing.T) {
	it := Item{Key: 9, Start: 8, Len: 8}
	byToken := NewSequence(4)
	byToken.AddItems(it)
	byRun := NewSequence(4)
	byRun.AddItems(it)
	for _, h := range []uint32{5, 5, 6, 7, 7} {
		for range 4 {
			byToken.Append(h)
		}
		byRun.AppendRun(h, 4)
	}
	cp := NewSequence(4)
	cp.AppendSequence(byRun)
	for i, b := range byToken.Blocks() {
		if byRun.Blocks()[i] != b || cp.Blocks()[i] != b {
			t.Errorf("block %d: by token %x, by run %x, copied %x", i, b.Hash, byRun.Blocks()[i].Hash, cp.Blocks()[i].Hash)
		}
	}
	cp.AppendRun(1, 4) // block 5 follows the item: plain tokens hash
	if got, want := cp.Blocks()[5].TokensHash, BlockHash([]uint32{1, 1, 1, 1}); got != want {
		t.Errorf("block after the item: %x, want %x", got, want)
	}
	cp.Reset()
	if len(cp.Items()) != 0 {
		t.Errorf("Reset kept %d items", len(cp.Items()))
	}
}

// FuzzItems checks a sequence with items against a direct computation: each full block's tokens hash is
// ExtraHash of its tokens' hash and the keys of the items it overlaps, and appending the tokens at once,
// one by one, or as a copy gives the same blocks.
func FuzzItems(f *testing.F) {
	f.Add([]byte{4, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3}, []byte{2, 3, 9, 1, 7})
	f.Add([]byte{1, 5, 6}, []byte{0, 1, 1})
	f.Fuzz(func(t *testing.T, toks []byte, spec []byte) {
		if len(toks) == 0 || len(toks) > 4096 {
			return
		}
		bs := 1 + int(toks[0]%8)
		in := make([]uint32, len(toks)-1)
		for i, b := range toks[1:] {
			in[i] = uint32(b % 4) // few distinct tokens: uniform blocks and runs
		}
		// spec: (gap, len, key) triples make items in order.
		var items []Item
		at := 0
		for ; len(spec) >= 3; spec = spec[3:] {
			start, n := at+int(spec[0]%8), 1+int(spec[1]%16)
			items = append(items, Item{Key: uint64(spec[2]), Start: start, Len: n})
			at = start + n
		}
		whole, single := NewSequence(bs), NewSequence(bs)
		whole.AddItems(items...)
		single.AddItems(items...)
		whole.Append(in...)
		for _, tok := range in {
			single.Append(tok)
		}
		cp := NewSequence(bs)
		cp.AppendSequence(whole)
		var parent uint64
		for i, b := range whole.Blocks() {
			var keys []uint64
			for _, it := range items {
				if it.Start < (i+1)*bs && it.Start+it.Len > i*bs {
					keys = append(keys, it.Key)
				}
			}
			th := ExtraHash(BlockHash(in[i*bs:(i+1)*bs]), keys...)
			h := th
			if i > 0 {
				h = SeqHash(parent, th)
			}
			if b != (Block{Hash: h, TokensHash: th}) || single.Blocks()[i] != b || cp.Blocks()[i] != b {
				t.Fatalf("block %d: %+v, single %+v, copy %+v; want %x/%x", i, b, single.Blocks()[i], cp.Blocks()[i], h, th)
			}
			parent = h
		}
		if len(whole.Blocks()) != len(in)/bs || len(single.Blocks()) != len(in)/bs {
			t.Fatalf("%d and %d blocks of %d tokens at %d", len(whole.Blocks()), len(single.Blocks()), len(in), bs)
		}
	})
}
