package radix

import (
	"slices"
	"testing"
)

// TestPageIDsRuns: consecutive ids make runs, which the next ids extend when they continue the last;
// scattered ids stay plain (with room) until runs would at least halve the edge's, a run continuing the
// edge's last counting once; a cut inside a run leaves its first part below and the rest above, each half
// spelling out its own pages.
func TestPageIDsRuns(t *testing.T) {
	var p pageIDs
	p.append([]PageID{5, 6, 7}, 0)
	p.append([]PageID{8, 20}, 0)
	if !slices.Equal(p.firsts, []PageID{5, 20}) || !slices.Equal(p.lens, []int32{4, 1}) || p.n != 5 {
		t.Fatalf("runs %v %v of %d pages, want [5 20] [4 1] of 5", p.firsts, p.lens, p.n)
	}

	var q pageIDs
	q.append([]PageID{3, 9, 4}, 2)
	q.append([]PageID{10, 11, 12, 13}, 0) // 4 runs for 7 pages: not half
	if q.inRuns || !slices.Equal(q.firsts, []PageID{3, 9, 4, 10, 11, 12, 13}) {
		t.Fatalf("plain ids %v (lengths %v), want [3 9 4 10 11 12 13] and none", q.firsts, q.lens)
	}
	q.append([]PageID{14, 15, 16, 17, 18}, 0) // 4 runs for 12 pages
	if !slices.Equal(q.firsts, []PageID{3, 9, 4, 10}) || !slices.Equal(q.lens, []int32{1, 1, 1, 9}) || q.n != 12 {
		t.Fatalf("runs %v %v of %d pages, want [3 9 4 10] [1 1 1 9] of 12", q.firsts, q.lens, q.n)
	}

	var r pageIDs
	r.append([]PageID{10, 20, 30}, 0)
	r.append([]PageID{31, 32}, 0) // continues 30: 3 runs for 5 pages
	if r.inRuns || r.plainRuns != 3 {
		t.Fatalf("plain %v counted %d runs (form: runs %v), want [10 20 30 31 32] in 3", r.firsts, r.plainRuns, r.inRuns)
	}
	r.append([]PageID{33}, 0)     // one page: stays plain
	r.append([]PageID{34, 35}, 0) // continues 33: 3 runs for 8 pages
	if !slices.Equal(r.firsts, []PageID{10, 20, 30}) || !slices.Equal(r.lens, []int32{1, 1, 6}) || r.n != 8 {
		t.Fatalf("runs %v %v of %d pages, want [10 20 30] [1 1 6] of 8", r.firsts, r.lens, r.n)
	}
	var s pageIDs
	s.append([]PageID{10, 20, 30}, 0)
	s.append([]PageID{31, 32, 33}, 0) // continues 30: 3 runs for 6 pages, half
	if !slices.Equal(s.firsts, []PageID{10, 20, 30}) || !slices.Equal(s.lens, []int32{1, 1, 4}) || s.n != 6 {
		t.Fatalf("runs %v %v of %d pages, want [10 20 30] [1 1 4] of 6", s.firsts, s.lens, s.n)
	}

	var lo pageIDs
	p.cut(2, &lo)
	if got := lo.appendTo(nil, lo.n); !slices.Equal(got, []PageID{5, 6}) {
		t.Errorf("lower half %v, want [5 6]", got)
	}
	if got := p.appendTo(nil, p.n); !slices.Equal(got, []PageID{7, 8, 20}) {
		t.Errorf("upper half %v, want [7 8 20]", got)
	}
	if got := q.appendTo(nil, 5); !slices.Equal(got, []PageID{3, 9, 4, 10, 11}) {
		t.Errorf("first 5 of q: %v, want [3 9 4 10 11]", got)
	}
	for _, ids := range []pageIDs{p, q, r, s, lo} {
		if err := ids.check(); err != nil {
			t.Error(err)
		}
	}
}

// TestPageIDsCountRuns: the plain form counts its runs as ids come (an append continuing the edge's last
// run adds none) and as cuts divide them (a run across the cut counts in both halves), whichever half the
// cut counts.
func TestPageIDsCountRuns(t *testing.T) {
	var p pageIDs
	p.append([]PageID{3, 4, 9, 1, 7}, 0) // 4 runs for 5 pages: plain
	p.append([]PageID{8}, 0)             // continues 7
	if p.inRuns || p.plainRuns != 4 {
		t.Fatalf("plain %v counted %d runs (form: runs %v), want [3 4 9 1 7 8] in 4", p.firsts, p.plainRuns, p.inRuns)
	}
	var lo pageIDs
	p.cut(1, &lo) // [3] | [4 9 1 7 8]: the run 3 4 across the cut; the lower half counted
	if lo.plainRuns != 1 || p.plainRuns != 4 {
		t.Errorf("cut after 1: %d and %d runs, want 1 and 4", lo.plainRuns, p.plainRuns)
	}
	var lo2 pageIDs
	p.cut(4, &lo2) // [4 9 1 7] | [8]: the run 7 8 across the cut; the upper half counted
	if lo2.plainRuns != 4 || p.plainRuns != 1 {
		t.Errorf("cut after 4: %d and %d runs, want 4 and 1", lo2.plainRuns, p.plainRuns)
	}
	for _, ids := range []pageIDs{p, lo, lo2} {
		if err := ids.check(); err != nil {
			t.Error(err)
		}
	}
}
