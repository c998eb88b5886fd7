package radix

import (
	"testing"

	"github.com/mocker-sim/mocker/tokens"
)

// request is what an SGLang-style scheduler keeps per running request: its tokens, its page table (the
// first locked pages are the tree's, locked through node; the rest are private), and how many of its
// tokens are computed.
type request struct {
	seq      *tokens.Sequence
	table    []PageID
	node     *Node
	locked   int // pages of table owned by the tree and locked through node
	computed int // tokens whose KV is computed
}

// harness drives a Cache the way sched/sglang does (doc.go) and checks, after every step, what the cache
// cannot check alone: every page is free, cached or private to exactly one live request.
type harness struct {
	t    *testing.T
	c    *Cache
	live map[*request]bool
}

func newHarness(t *testing.T, ps, numPages int) *harness {
	return &harness{t: t, c: newCache(t, ps, numPages), live: map[*request]bool{}}
}

func (h *harness) check() {
	h.t.Helper()
	check(h.t, h.c)
	private := 0
	for r := range h.live {
		private += len(r.table) - r.locked
	}
	if got := h.c.FreePages() + h.c.CachedPages() + private; got != h.c.Capacity() {
		h.t.Fatalf("free %d + cached %d + private %d = %d, capacity %d", h.c.FreePages(), h.c.CachedPages(), private, got, h.c.Capacity())
	}
}

func (h *harness) pagesFor(tokens int) int { return (tokens + h.c.PageSize() - 1) / h.c.PageSize() }

// reserve makes room for n more pages, evicting if it must, and allocates them.
func (h *harness) reserve(r *request, n int) bool {
	if short := n - h.c.FreePages(); short > 0 {
		h.c.Evict(short)
	}
	var ok bool
	r.table, ok = h.c.Alloc(n, r.table)
	return ok
}

// admit matches and locks the prompt's cached prefix and allocates the rest of its pages.
func (h *harness) admit(prompt []uint32) *request {
	h.t.Helper()
	r := &request{seq: tokens.NewSequence(h.c.PageSize())}
	r.seq.Append(prompt...)
	r.table, r.node = h.c.Match(r.seq.Blocks(), nil)
	h.c.Lock(r.node)
	r.locked = len(r.table)
	r.computed = r.locked * h.c.PageSize()
	h.live[r] = true
	if !h.reserve(r, h.pagesFor(r.seq.Len())-len(r.table)) {
		h.t.Fatalf("no room for a %d-token prompt", r.seq.Len())
	}
	h.check()
	return r
}

// cache inserts the request's computed full pages, frees its duplicates of pages others cached first,
// and moves its lock down to the new deepest node.
func (h *harness) cache(r *request) {
	full := r.computed / h.c.PageSize()
	blocks := r.seq.Blocks()[:full]
	present := h.c.Insert(blocks, r.table[:full])
	h.c.Free(r.table[r.locked:present])
	ids, node := h.c.Match(blocks, nil)
	if len(ids) != full {
		h.t.Fatalf("after inserting %d pages Match finds %d", full, len(ids))
	}
	copy(r.table, ids)
	h.c.Lock(node)
	h.c.Unlock(r.node)
	r.node, r.locked = node, full
	h.check()
}

// prefill computes n more prompt tokens (a chunk) and caches the pages they complete.
func (h *harness) prefill(r *request, n int) {
	r.computed += n
	h.cache(r)
}

// decode appends one sampled token, allocating a page when it starts one. Its KV is computed by the next
// step, as in the engine, so it does not change what is cached.
func (h *harness) decode(r *request, tok uint32) {
	h.t.Helper()
	r.seq.Append(tok)
	if need := h.pagesFor(r.seq.Len()) - len(r.table); need > 0 && !h.reserve(r, need) {
		h.t.Fatal("no room to decode")
	}
	h.check()
}

// finish caches the request's computed full pages and frees everything else it holds; its cached pages
// stay, evictable.
func (h *harness) finish(r *request) {
	full := r.computed / h.c.PageSize()
	present := h.c.Insert(r.seq.Blocks()[:full], r.table[:full])
	h.c.Free(r.table[r.locked:present])
	h.c.Free(r.table[full:])
	h.c.Unlock(r.node)
	delete(h.live, r)
	h.check()
}

func span(from, n int) []uint32 {
	t := make([]uint32, n)
	for i := range t {
		t[i] = uint32(from + i)
	}
	return t
}

// TestFinishedRequestStaysCached is sglang tests.rs ordinary_completion_keeps_default_cleanup (reference
// §13): an 8-token request's pages stay cached after it finishes.
func TestFinishedRequestStaysCached(t *testing.T) {
	h := newHarness(t, 4, 6)
	r := h.admit(span(0, 8))
	h.prefill(r, 8)
	h.decode(r, 100) // the first token starts a third page
	if h.c.FreePages() != 3 || h.c.ProtectedPages() != 2 {
		t.Fatalf("running: %+v, want 3 free, 2 protected", countsOf(h.c))
	}
	r.computed++ // the last step computed token 100's KV too (it still fills no page)
	h.finish(r)
	if got := h.c.EvictablePages() * h.c.PageSize(); got != 8 {
		t.Fatalf("finished request leaves %d tokens cached, want 8", got)
	}
	if got, want := countsOf(h.c), (counts{free: 4, cached: 2, evictable: 2, nodes: 1}); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	// The next identical prompt hits both pages.
	r2 := h.admit(span(0, 8))
	if r2.locked != 2 || r2.computed != 8 {
		t.Fatalf("second request hits %d pages, want 2", r2.locked)
	}
}

// TestConcurrentDuplicatesAndChunks: two requests compute the same prefix at once, in chunks; the second
// to insert frees its duplicates and adopts the first's pages; a later request hits everything shared.
func TestConcurrentDuplicatesAndChunks(t *testing.T) {
	const ps = 2
	h := newHarness(t, ps, 20)
	shared := span(0, 8) // 4 pages
	a := h.admit(append(append([]uint32{}, shared...), span(100, 4)...))
	b := h.admit(append(append([]uint32{}, shared...), span(200, 5)...))
	if a.locked != 0 || b.locked != 0 || h.c.FreePages() != 20-6-7 {
		t.Fatalf("both miss: locked %d %d, free %d", a.locked, b.locked, h.c.FreePages())
	}
	h.prefill(a, 6)  // a caches pages 0-2
	h.prefill(b, 10) // b: pages 0-2 are duplicates, 3-4 new
	if got, want := countsOf(h.c), (counts{free: 10, cached: 5, protected: 5, nodes: 2}); got != want {
		t.Fatalf("after chunks: %+v, want %+v", got, want)
	}
	if b.table[0] != a.table[0] || b.table[2] != a.table[2] || b.table[3] == a.table[3] {
		t.Fatalf("b's table %v does not share a's pages %v", b.table, a.table)
	}
	h.prefill(a, 6) // a: page 3 is b's now (b's node splits after it); 4-5 new
	if a.table[3] != b.table[3] || a.table[4] == b.table[4] {
		t.Fatalf("a's table %v should share page 3 only with b's %v", a.table, b.table)
	}
	h.finish(a)
	h.prefill(b, 3)
	h.finish(b)
	if got, want := countsOf(h.c), (counts{free: 12, cached: 8, evictable: 8, nodes: 5}); got != want {
		t.Fatalf("after both finish: %+v, want %+v", got, want)
	}
	c := h.admit(append(append([]uint32{}, shared...), span(300, 2)...))
	if c.locked != 4 {
		t.Fatalf("third request hits %d pages, want the 4 shared", c.locked)
	}
}

// TestEvictionMakesRoomButSparesRunning: when the pool is short, finished requests' pages are evicted
// (least recently used first), never a running request's.
func TestEvictionMakesRoomButSparesRunning(t *testing.T) {
	h := newHarness(t, 1, 10)
	old := h.admit(span(0, 3))
	h.prefill(old, 3)
	h.finish(old) // 3 evictable
	run := h.admit(span(10, 4))
	h.prefill(run, 4) // 4 protected
	recent := h.admit(span(20, 2))
	h.prefill(recent, 2)
	h.finish(recent) // 2 evictable, more recent than old
	h.c.TakeEvents(nil)
	if h.c.FreePages() != 1 {
		t.Fatalf("free %d, want 1", h.c.FreePages())
	}
	// 3 pages needed: old goes whole (3), recent stays.
	big := h.admit(span(30, 3))
	evs := h.c.TakeEvents(nil)
	if len(evs) != 1 || len(evs[0].Hashes) != 3 {
		t.Fatalf("events %+v, want one Removed of old's 3 pages", evs)
	}
	if ids, _ := h.c.Match(recent.seq.Blocks(), nil); len(ids) != 2 {
		t.Fatalf("recent lost pages: %d left", len(ids))
	}
	h.prefill(big, 3)
	h.finish(big)
	// Now only run's 4 pages are protected; asking for everything frees the other 5.
	if freed := h.c.Evict(100); freed != 5 || h.c.ProtectedPages() != 4 {
		t.Fatalf("Evict(100) freed %d leaving %d protected, want 5 and 4", freed, h.c.ProtectedPages())
	}
	h.check()
}
