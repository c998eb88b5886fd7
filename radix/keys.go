package radix

import (
	"fmt"
	"slices"

	"github.com/mocker-sim/mocker/tokens"
)

// keys are an edge's key: its pages' tokens hashes, kept as runs of equal hashes. A trace's prompt is made
// of runs of one token, one per hash id (512 tokens in Mooncake's), so at one-token pages an edge of a
// trace's prompt holds a few runs of hundreds of equal hashes: one hash and one length a run, not 8 bytes
// a page. Pages of distinct hashes (a random prompt's, decoded tokens) keep the plain form, one hash a
// page and no lengths, until a page repeats the one before it: then the keys take lengths for good.
// Either way no two adjacent runs have the same hash.
type keys struct {
	hashes []uint64 // each run's hash
	lens   []int32  // each run's pages; unread in the plain form, where every run is one page
	inRuns bool     // the run form
}

// first is the tokens hash of the edge's first page: the edge's name among its parent's children.
func (e *keys) first() uint64 { return e.hashes[0] }

// runLen is the number of pages of run i.
func (e *keys) runLen(i int) int {
	if !e.inRuns {
		return 1
	}
	return int(e.lens[i])
}

// commonPrefix is the number of leading pages of the edge and of pages with equal tokens hashes.
func (e *keys) commonPrefix(pages []tokens.Block) int {
	k := 0
	if !e.inRuns {
		for k < len(e.hashes) && k < len(pages) && e.hashes[k] == pages[k].TokensHash {
			k++
		}
		return k
	}
	for i, h := range e.hashes {
		end := min(k+int(e.lens[i]), len(pages))
		for ; k < end; k++ {
			if pages[k].TokensHash != h {
				return k
			}
		}
		if k == len(pages) {
			return k
		}
	}
	return k
}

// append adds the tokens hashes of pages at the edge's end. room is how many more pages the edge expects
// (see Cache.Extend): the plain form keeps capacity for them; runs grow as slices do, being few.
func (e *keys) append(pages []tokens.Block, room int) {
	if len(pages) == 0 {
		return
	}
	runs, h := 1, pages[0].TokensHash // runs pages make among themselves
	for _, b := range pages[1:] {
		if b.TokensHash != h {
			runs++
			h = b.TokensHash
		}
	}
	last := len(e.hashes) - 1
	if !e.inRuns && runs == len(pages) && (last < 0 || e.hashes[last] != pages[0].TokensHash) {
		e.hashes = growFor(e.hashes, len(pages), room)
		for _, b := range pages {
			e.hashes = append(e.hashes, b.TokensHash)
		}
		return
	}
	if !e.inRuns {
		e.toRuns()
	}
	e.hashes, e.lens = slices.Grow(e.hashes, runs), slices.Grow(e.lens, runs)
	for i := 0; i < len(pages); {
		h := pages[i].TokensHash
		j := i + 1
		for j < len(pages) && pages[j].TokensHash == h {
			j++
		}
		if last >= 0 && e.hashes[last] == h {
			e.lens[last] += int32(j - i)
		} else {
			e.hashes = append(e.hashes, h)
			e.lens = append(e.lens, int32(j-i))
		}
		last = -1 // only the first run may continue the edge's last
		i = j
	}
}

// toRuns turns the plain form into runs of one page each.
func (e *keys) toRuns() {
	e.lens = slices.Grow(e.lens[:0], len(e.hashes))[:len(e.hashes)]
	for i := range e.lens {
		e.lens[i] = 1
	}
	e.inRuns = true
}

// cut splits the edge after k pages (0 < k < its pages): lo, whose arrays may be reused, gets the first k
// and e keeps the rest. The half with less in it (the room past the edge counting with the later pages,
// which e keeps) moves to arrays of its own; a run across the cut is in both halves, so one of them is copied.
func (e *keys) cut(k int, lo *keys) {
	lo.inRuns = e.inRuns
	if !e.inRuns {
		lo.hashes, e.hashes = cutSlice(lo.hashes[:0], e.hashes, k, k <= cap(e.hashes)-k)
		return
	}
	lo.hashes, lo.lens, e.hashes, e.lens, _ = cutRuns(lo.hashes[:0], lo.lens[:0], e.hashes, e.lens, k)
}

// cutRuns splits runs (vals[i] repeated or counted on lens[i] pages) after k pages, 0 < k < their pages,
// into lo, made in loVals and loLens where that half is copied, and hi. A run across the cut is in both:
// lo's last keeps the pages before the cut and hi's first the past pages after it; past is 0 when the
// cut falls between runs. The half with fewer runs (the room past the arrays counting with hi, the half
// the node keeps) is the one copied.
func cutRuns[T any](loVals []T, loLens []int32, vals []T, lens []int32, k int) (lv []T, ll []int32, hv []T, hl []int32, past int32) {
	i, end := 0, int(lens[0]) // i: the run holding page k-1, end: the page after it
	for end < k {
		i++
		end += int(lens[i])
	}
	past = int32(end - k)
	if past == 0 {
		copyLo := i+1 <= cap(vals)-i-1
		lv, hv = cutSlice(loVals, vals, i+1, copyLo)
		ll, hl = cutSlice(loLens, lens, i+1, copyLo)
		return lv, ll, hv, hl, 0
	}
	if i+1 <= cap(vals)-i {
		lv, ll = append(loVals, vals[:i+1]...), append(loLens, lens[:i+1]...)
		hv, hl = vals[i:], lens[i:]
	} else {
		lv, ll = vals[:i+1:i+1], lens[:i+1:i+1]
		hv = append(make([]T, 0, cap(vals)-i), vals[i:]...)
		hl = append(make([]int32, 0, cap(lens)-i), lens[i:]...)
	}
	ll[i] -= past
	hl[0] = past
	return lv, ll, hv, hl, past
}

// growFor returns s with room for n more elements, reserving room more past them when it has to grow,
// and always for an empty s (a new leaf, maybe on a recycled node's array): an edge that still has room
// for a pass's pages is not copied to reserve the request's remaining output again at every pass.
func growFor[T any](s []T, n, room int) []T {
	if cap(s)-len(s) >= n && (len(s) > 0 || cap(s) >= n+room) {
		return s
	}
	return slices.Grow(s, n+room)
}

// cutSlice splits s after k elements into lo and hi, copying lo into dst if copyLo, else hi into a new
// array with s's room. The other keeps s's array. Kept there, lo's capacity ends at its length: the
// entries past it (hi's old ones and s's room, which hi's copy now has) are not lo's, so lo (the interior
// node) shows no spare room, and an append to it moves it to an array of its own rather than growing
// into that one and keeping it for good.
func cutSlice[T any](dst, s []T, k int, copyLo bool) (lo, hi []T) {
	if copyLo {
		return append(dst, s[:k]...), s[k:]
	}
	return s[:k:k], append(make([]T, 0, cap(s)-k), s[k:]...)
}

// spare is the room past the edge's arrays, in entries.
func (e *keys) spare() int { return cap(e.hashes) - len(e.hashes) }

// clone returns the keys in arrays of their own size.
func (e *keys) clone() keys {
	return keys{hashes: slices.Clone(e.hashes), lens: slices.Clone(e.lens), inRuns: e.inRuns}
}

// reset empties the keys for a recycled node, in the plain form, keeping arrays of at most maxKeptPages.
func (e *keys) reset() {
	e.hashes, e.lens = resetEdge(e.hashes, e.lens)
	e.inRuns = false
}

// resetEdge empties an edge's arrays (keys' or pageIDs', either form) for a recycled node, keeping those
// of at most maxKeptPages entries: a long request's whole edge is not pinned by the node that held it.
func resetEdge[T any](vals []T, lens []int32) ([]T, []int32) {
	vals, lens = vals[:0], lens[:0]
	if cap(vals) > maxKeptPages {
		vals = nil
	}
	if cap(lens) > maxKeptPages {
		lens = nil
	}
	return vals, lens
}

// check verifies that the keys hold pages pages in runs of at least one page, no two adjacent ones with
// the same hash, and lengths only in the run form.
func (e *keys) check(pages int) error {
	if e.inRuns && len(e.lens) != len(e.hashes) {
		return fmt.Errorf("%d run hashes and %d run lengths", len(e.hashes), len(e.lens))
	}
	n := 0
	for i := range e.hashes {
		l := e.runLen(i)
		if l < 1 {
			return fmt.Errorf("run %d of %d pages", i, l)
		}
		n += l
		if i > 0 && e.hashes[i] == e.hashes[i-1] {
			return fmt.Errorf("runs %d and %d have the same hash %#x", i-1, i, e.hashes[i])
		}
	}
	if n != pages {
		return fmt.Errorf("keys of %d pages for %d page ids", n, pages)
	}
	return nil
}
