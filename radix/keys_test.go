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
		t.Fatalf("after growing the lower half: %v %v and %v %v", lo.hashes, lo.lens, e.hashes, e.lens)
	}
	var lo2 keys
	e.cut(4, &lo2) // between the run of 3s and 5
	if !slices.Equal(lo2.hashes, []uint64{2, 3}) || !slices.Equal(lo2.lens, []int32{1, 3}) ||
		!slices.Equal(e.hashes, []uint64{5}) || !slices.Equal(e.lens, []int32{1}) {
		t.Fatalf("cut after 4: %v %v and %v %v", lo2.hashes, lo2.lens, e.hashes, e.lens)
	}
	for i, k := range []keys{e, lo, lo2} {
		if err := k.check([]int{1, 5, 4}[i]); err != nil {
			t.Error(err)
		}
	}
}

// TestKeysCutInPlace: a cut inside a run late in a full edge leaves the lower half in the edge's arrays,
// both clipped to its runs (no spare room: the entries past them are the upper half's, which is copied
// out), and grows it, the run across the cut first, then past its capacity, the upper half staying as it
// was. (TestKeysRuns's cut copies the lower half.)
func TestKeysCutInPlace(t *testing.T) {
	hashes, lens := []uint64{1, 2, 3, 5}, []int32{1, 3, 3, 1} // no room past the edge
	e := keys{hashes: hashes, lens: lens, inRuns: true}
	var lo keys
	e.cut(6, &lo) // inside the run of 3s: 1 2 2 2 3 3 | 3 5
	if &lo.hashes[0] != &hashes[0] || &e.hashes[0] == &hashes[2] {
		t.Fatalf("cut after 6: lower half in the edge's array %v, upper half copied %v; want both",
			&lo.hashes[0] == &hashes[0], &e.hashes[0] != &hashes[2])
	}
	if lo.spare() != 0 || cap(lo.lens) != 3 {
		t.Fatalf("cut after 6: the lower half's arrays have room for %d hashes and %d lengths, want none",
			lo.spare(), cap(lo.lens)-len(lo.lens))
	}
	if !slices.Equal(lo.hashes, []uint64{1, 2, 3}) || !slices.Equal(lo.lens, []int32{1, 3, 2}) ||
		!slices.Equal(e.hashes, []uint64{3, 5}) || !slices.Equal(e.lens, []int32{1, 1}) {
		t.Fatalf("cut after 6: %v %v and %v %v", lo.hashes, lo.lens, e.hashes, e.lens)
	}
	lo.append(blocks(3, 4), 0)
	if !slices.Equal(lo.hashes, []uint64{1, 2, 3, 4}) || !slices.Equal(lo.lens, []int32{1, 3, 3, 1}) ||
		!slices.Equal(e.hashes, []uint64{3, 5}) || !slices.Equal(e.lens, []int32{1, 1}) {
		t.Fatalf("after growing the lower half: %v %v and %v %v", lo.hashes, lo.lens, e.hashes, e.lens)
	}
	for i, k := range []keys{e, lo} {
		if err := k.check([]int{2, 8}[i]); err != nil {
			t.Error(err)
		}
	}
}

// TestAppendUsesItsRoom: an edge that has room for the pages appended takes them where they are, though
// the caller expects as much room again (a running request's remaining output, the same at each pass):
// the plain form is not copied to reserve it anew at every append; once full, it reserves the room again.
func TestAppendUsesItsRoom(t *testing.T) {
	var e keys
	var p pageIDs
	e.append(blocks(1), 8)
	p.append([]PageID{100}, 8)
	h0, i0 := &e.hashes[0], &p.firsts[0]
	if cap(e.hashes) < 9 || cap(p.firsts) < 9 {
		t.Fatalf("room for %d hashes and %d ids, want 9", cap(e.hashes), cap(p.firsts))
	}
	for i := 0; len(e.hashes) < cap(e.hashes) && i < 64; i++ { // bounded: a copy at each append grows cap with len
		e.append(blocks(uint64(2+i)), 8)
	}
	for i := 0; len(p.firsts) < cap(p.firsts) && i < 64; i++ {
		p.append([]PageID{PageID(200 + 2*i)}, 8)
	}
	if &e.hashes[0] != h0 || &p.firsts[0] != i0 || e.inRuns || p.inRuns {
		t.Fatalf("appends within the room moved the arrays (hashes %v, ids %v)", &e.hashes[0] != h0, &p.firsts[0] != i0)
	}
	e.append(blocks(1000), 8)
	p.append([]PageID{1000}, 8)
	if cap(e.hashes)-len(e.hashes) < 8 || cap(p.firsts)-len(p.firsts) < 8 {
		t.Errorf("past the room: room for %d more hashes and %d more ids, want 8 reserved again",
			cap(e.hashes)-len(e.hashes), cap(p.firsts)-len(p.firsts))
	}
}
