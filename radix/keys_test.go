package radix

import (
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// blocks makes one page per tokens hash.
func blocks(ths ...uint64) []tokens.Block {
	bs := make([]tokens.Block, len(ths))
	for i, th := range ths {
		bs[i].TokensHash = th
	}
	return bs
}

// TestKeysRuns: distinct pages stay plain (one hash a page, no lengths); a page repeating the one before
// turns the keys into runs, which later pages extend; commonPrefix counts pages across runs; a cut inside
// a run leaves it in both halves, a cut between runs in one.
func TestKeysRuns(t *testing.T) {
	var e keys
	e.append(blocks(1, 2), 4)
	if e.inRuns || !slices.Equal(e.hashes, []uint64{1, 2}) || cap(e.hashes) < 6 {
		t.Fatalf("plain keys: hashes %v (capacity %d), lengths %v; want [1 2] with room for 4 more, no lengths", e.hashes, cap(e.hashes), e.lens)
	}
	e.append(blocks(2, 2, 3, 3, 3, 5), 0)
	if !slices.Equal(e.hashes, []uint64{1, 2, 3, 5}) || !slices.Equal(e.lens, []int32{1, 3, 3, 1}) {
		t.Fatalf("runs: hashes %v, lengths %v; want [1 2 3 5], [1 3 3 1]", e.hashes, e.lens)
	}
	if err := e.check(8); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		pages []uint64
		want  int
	}{
		{[]uint64{1, 2, 2, 2, 3, 3, 3, 5, 6}, 8},
		{[]uint64{1, 2, 2, 3}, 3},
		{[]uint64{1, 2, 2}, 3},
		{[]uint64{2}, 0},
	} {
		if got := e.commonPrefix(blocks(tc.pages...)); got != tc.want {
			t.Errorf("commonPrefix(%v) = %d, want %d", tc.pages, got, tc.want)
		}
	}

	var lo keys
	e.cut(3, &lo) // inside the run of 2s
	if !slices.Equal(lo.hashes, []uint64{1, 2}) || !slices.Equal(lo.lens, []int32{1, 2}) ||
		!slices.Equal(e.hashes, []uint64{2, 3, 5}) || !slices.Equal(e.lens, []int32{1, 3, 1}) {
		t.Fatalf("cut after 3: %v %v and %v %v", lo.hashes, lo.lens, e.hashes, e.lens)
	}
	lo.append(blocks(2, 4), 0) // the halves share no run: growing one leaves the other as it was
	if !slices.Equal(e.lens, []int32{1, 3, 1}) || !slices.Equal(lo.lens, []int32{1, 3, 1}) {
		t.Fatalf("after growing the upper half: %v %v and %v %v", lo.hashes, lo.lens, e.hashes, e.lens)
	}
	var lo2 keys
	e.cut(4, &lo2) // between the run of 3s and 5
	if !slices.Equal(lo2.hashes, []uint64{2, 3}) || !slices.Equal(lo2.lens, []int32{1, 3}) ||
		!slices.Equal(e.hashes, []uint64{5}) || !slices.Equal(e.lens, []int32{1}) {
		t.Fatalf("cut after 4: %v %v and %v %v", lo2.hashes, lo2.lens, e.hashes, e.lens)
	}
	for _, k := range []keys{e, lo, lo2} {
		if err := k.check(len(pageRuns(k))); err != nil {
			t.Error(err)
		}
	}
}

// pageRuns spells out the keys' page hashes.
func pageRuns(e keys) []uint64 {
	return pageHashes(&Node{keys: e})
}
