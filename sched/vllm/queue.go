package vllm

import "github.com/mocker-sim/mocker/sched"

// queue is the waiting deque: new requests at the back, preempted ones back at the front. It keeps the
// queued-token statistics of the forward-pass metrics.
type queue struct {
	buf        []*request // ring buffer
	head, n    int
	fresh, old sched.Moments // never-admitted (prefill) and preempted (decode) requests, by length
	transfers  int           // activated transfers (the only waiting requests holding blocks)
}

func (q *queue) len() int { return q.n }

func (q *queue) at(i int) *request { return q.buf[(q.head+i)%len(q.buf)] }

// parts returns the queue's requests in order as the two runs of its ring buffer.
func (q *queue) parts() (front, back []*request) {
	end := q.head + q.n
	if end <= len(q.buf) {
		return q.buf[q.head:end], nil
	}
	return q.buf[q.head:], q.buf[:end-len(q.buf)]
}

func (q *queue) front() *request { return q.at(0) }

func (q *queue) grow() {
	if q.n < len(q.buf) {
		return
	}
	nb := make([]*request, max(8, 2*len(q.buf)))
	for i := range q.n {
		nb[i] = q.at(i)
	}
	q.buf, q.head = nb, 0
}

func (q *queue) pushBack(r *request) {
	q.grow()
	q.buf[(q.head+q.n)%len(q.buf)] = r
	q.n++
	q.count(r, 1)
}

func (q *queue) pushFront(r *request) {
	q.grow()
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = r
	q.n++
	q.count(r, 1)
}

// removeAt deletes the i-th request, moving those before it back one place; O(i).
func (q *queue) removeAt(i int) *request {
	r := q.at(i)
	for j := i; j > 0; j-- {
		q.buf[(q.head+j)%len(q.buf)] = q.at(j - 1)
	}
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	q.count(r, -1)
	return r
}

// remove deletes r wherever it is (cancellation); O(n).
func (q *queue) remove(r *request) bool {
	for i := range q.n {
		if q.at(i) != r {
			continue
		}
		for j := i; j < q.n-1; j++ {
			q.buf[(q.head+j)%len(q.buf)] = q.at(j + 1)
		}
		q.buf[(q.head+q.n-1)%len(q.buf)] = nil
		q.n--
		q.count(r, -1)
		return true
	}
	return false
}

func (q *queue) count(r *request, sign int) {
	if len(r.table) > 0 {
		q.transfers += sign
	}
	m := &q.fresh
	if r.Preemptions > 0 {
		m = &q.old
	}
	if sign > 0 {
		m.Add(r.Length())
	} else {
		m.Remove(r.Length())
	}
}
