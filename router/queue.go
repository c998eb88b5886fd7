package router

// queue holds the requests waiting for a target, as a binary heap in queue-policy order. Keys are fixed
// at arrival (the arrival number, and for WSPT the new prefill tokens then), so the order of two waiting
// requests never changes and a heap suffices.
type queue struct {
	policy QueuePolicy
	heap   []*request
}

func (q *queue) len() int { return len(q.heap) }

// before reports whether a is served before b.
func (q *queue) before(a, b *request) bool {
	switch q.policy {
	case LCFS:
		return a.seq > b.seq
	case WSPT:
		if a.newTokens != b.newTokens {
			return a.newTokens < b.newTokens
		}
	}
	return a.seq < b.seq
}

func (q *queue) push(x *request) {
	x.heapAt = len(q.heap)
	q.heap = append(q.heap, x)
	q.up(x.heapAt)
}

// pop removes and returns the request served next.
func (q *queue) pop() *request {
	x := q.heap[0]
	q.removeAt(0)
	return x
}

// removeAt removes the request at heap index i (a request cancelled while queued).
func (q *queue) removeAt(i int) {
	n := len(q.heap) - 1
	if i != n {
		q.swap(i, n)
	}
	q.heap[n].heapAt = -1
	q.heap[n] = nil
	q.heap = q.heap[:n]
	if i < n && !q.down(i) {
		q.up(i)
	}
}

func (q *queue) swap(i, j int) {
	h := q.heap
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = i, j
}

func (q *queue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.before(q.heap[i], q.heap[p]) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

// down sifts index i down and reports whether it moved.
func (q *queue) down(i int) bool {
	start, n := i, len(q.heap)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && q.before(q.heap[r], q.heap[c]) {
			c = r
		}
		if !q.before(q.heap[c], q.heap[i]) {
			break
		}
		q.swap(i, c)
		i = c
	}
	return i > start
}
