package radix

import (
	"fmt"
	"slices"
)

// pageIDs are an edge's page ids (its value), kept as runs of consecutive ids where that at least halves
// them. The pool hands out never-used pages in order, and an evicted leaf's pages go back to the free
// list so that they come out again in their order, so a prompt's pages often come in runs: one first id
// and one length a run, not 4 bytes a page. Pages scattered by the free list (one-page runs) keep the
// plain form, one id a page and no lengths. In the run form no run continues the one before it.
type pageIDs struct {
	firsts    []PageID // each run's first page
	lens      []int32  // each run's pages; unread in the plain form, where every run is one page
	n         int      // pages
	plainRuns int      // in the plain form, the runs of consecutive ids among firsts: counted as they come
	inRuns    bool     // the run form
}

// runLen is the number of pages of run i.
func (p *pageIDs) runLen(i int) int {
	if !p.inRuns {
		return 1
	}
	return int(p.lens[i])
}

// appendTo appends the first k pages to dst and returns it.
func (p *pageIDs) appendTo(dst []PageID, k int) []PageID {
	if !p.inRuns {
		return append(dst, p.firsts[:k]...)
	}
	dst = slices.Grow(dst, k)
	for i, first := range p.firsts {
		l := min(int(p.lens[i]), k)
		for j := range PageID(l) {
			dst = append(dst, first+j)
		}
		if k -= l; k == 0 {
			break
		}
	}
	return dst
}

// runs is the number of runs of consecutive ids in ids.
func runs(ids []PageID) int {
	n := 0
	for i, id := range ids {
		if i == 0 || id != ids[i-1]+1 {
			n++
		}
	}
	return n
}

// append adds ids at the edge's end. room is how many more pages the edge expects (see Cache.Extend): the
// plain form keeps capacity for them; runs grow as slices do, being few. The plain form turns to runs
// when ids hold a run of their own and the whole edge's runs would then be at most half its pages (a run
// of ids continuing the edge's last counting once): a leaf whose ids came scattered stays plain through
// its one-page decode appends. The plain form's runs are counted as its ids come, so that a long plain
// edge is not counted again at each append.
func (p *pageIDs) append(ids []PageID, room int) {
	if len(ids) == 0 {
		return
	}
	r := runs(ids)
	if !p.inRuns {
		added := r // the runs ids add to the edge's
		if p.n > 0 && p.firsts[p.n-1]+1 == ids[0] {
			added-- // ids' first run continues the edge's last
		}
		if r == len(ids) || 2*(p.plainRuns+added) > p.n+len(ids) {
			p.firsts = append(growFor(p.firsts, len(ids), room), ids...)
			p.n += len(ids)
			p.plainRuns += added
			return
		}
		p.toRuns()
	}
	p.firsts, p.lens = slices.Grow(p.firsts, r), slices.Grow(p.lens, r)
	last := len(p.firsts) - 1
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[j-1]+1 {
			j++
		}
		if last >= 0 && p.firsts[last]+PageID(p.lens[last]) == ids[i] {
			p.lens[last] += int32(j - i)
		} else {
			p.firsts = append(p.firsts, ids[i])
			p.lens = append(p.lens, int32(j-i))
		}
		last = -1 // only the first run may continue the edge's last
		i = j
	}
	p.n += len(ids)
}

// toRuns turns the plain form into runs, in place: a run's first id is written no later than it is read.
func (p *pageIDs) toRuns() {
	plain := p.firsts
	p.firsts, p.lens, p.plainRuns, p.inRuns = plain[:0], p.lens[:0], 0, true
	for _, id := range plain {
		if k := len(p.firsts) - 1; k >= 0 && p.firsts[k]+PageID(p.lens[k]) == id {
			p.lens[k]++
			continue
		}
		p.firsts = append(p.firsts, id)
		p.lens = append(p.lens, 1)
	}
}

// cut splits the edge after k pages (0 < k < p.n): lo, whose arrays may be reused, gets the first k and p
// keeps the rest. The half with less in it (the room past the edge counting with the later pages, which
// p keeps) moves to arrays of its own; a run across the cut is in both halves, so one of them is copied.
func (p *pageIDs) cut(k int, lo *pageIDs) {
	lo.n, p.n = k, p.n-k
	lo.inRuns = p.inRuns
	if !p.inRuns {
		// The halves' runs: the shorter half's counted, the other's what is left, a run across the cut in both.
		across := 0
		if p.firsts[k-1]+1 == p.firsts[k] {
			across = 1
		}
		if k <= p.n { // p.n: the upper half's pages
			lo.plainRuns = runs(p.firsts[:k])
			p.plainRuns += across - lo.plainRuns
		} else {
			hi := runs(p.firsts[k:])
			lo.plainRuns, p.plainRuns = p.plainRuns+across-hi, hi
		}
		lo.firsts, p.firsts = cutSlice(lo.firsts[:0], p.firsts, k, k <= cap(p.firsts)-k)
		return
	}
	var past int32
	lo.firsts, lo.lens, p.firsts, p.lens, past = cutRuns(lo.firsts[:0], lo.lens[:0], p.firsts, p.lens, k)
	if past > 0 { // the run across the cut: p's part starts after lo's
		p.firsts[0] += PageID(lo.lens[len(lo.lens)-1])
	}
}

// spare is the room past the edge's arrays, in entries.
func (p *pageIDs) spare() int { return cap(p.firsts) - len(p.firsts) }

// clone returns the ids in arrays of their own size.
func (p *pageIDs) clone() pageIDs {
	return pageIDs{firsts: slices.Clone(p.firsts), lens: slices.Clone(p.lens), n: p.n, plainRuns: p.plainRuns, inRuns: p.inRuns}
}

// reset empties the ids for a recycled node, in the plain form, keeping arrays of at most maxKeptPages.
func (p *pageIDs) reset() {
	p.firsts, p.lens = resetEdge(p.firsts, p.lens)
	p.n, p.plainRuns, p.inRuns = 0, 0, false
}

// check verifies that the ids count their pages, and in the plain form their runs, in runs of at least
// one page, none continuing the one before it in the run form.
func (p *pageIDs) check() error {
	if !p.inRuns {
		if len(p.firsts) != p.n {
			return fmt.Errorf("%d page ids for %d pages", len(p.firsts), p.n)
		}
		if r := runs(p.firsts); r != p.plainRuns {
			return fmt.Errorf("plain ids in %d runs, counted %d", r, p.plainRuns)
		}
		return nil
	}
	if len(p.lens) != len(p.firsts) {
		return fmt.Errorf("%d id runs and %d run lengths", len(p.firsts), len(p.lens))
	}
	n := 0
	for i, l := range p.lens {
		if l < 1 {
			return fmt.Errorf("id run %d of %d pages", i, l)
		}
		if i > 0 && p.firsts[i-1]+PageID(p.lens[i-1]) == p.firsts[i] {
			return fmt.Errorf("id runs %d and %d are one run", i-1, i)
		}
		n += int(l)
	}
	if n != p.n {
		return fmt.Errorf("id runs of %d pages for %d pages", n, p.n)
	}
	return nil
}
