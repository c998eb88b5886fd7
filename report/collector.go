package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Collector records per-request times during a run.
//
// Request ids are dense ints assigned by the caller in arrival order (0, 1, 2, ...); the calls
// for one id come in time order, starting with Arrived and ending with at most one of Finished
// or Rejected or Failed (Retried may come between). Calls that break this contract are caller bugs and
// panic.
//
// A Collector is not safe for concurrent use.
type Collector struct {
	// reqs holds the records of requests base, base+1, ...: every request's, unless Forget made the
	// collector keep only a window from the earliest that has not ended.
	reqs []request
	base int

	// With Forget: done is what Summary, Percentile and Quantiles need of the requests before base, and
	// out (if not nil) takes their per-request records.
	forget bool
	done   retired
	out    *bufio.Writer
	outErr error

	// gaps holds the recent ITL samples: the gap before every delivery except a request's first,
	// pooled over all requests in call order, with the id each belongs to, so Summary can leave
	// out requests that did not complete without per-request slices. Equal gaps of one request
	// in a row (a run of decode passes of one length) share an entry with their count; the gaps of a
	// run of passes several requests decoded (TokenRuns: an engine's coast) are kept once, with the
	// requests that share them (pushGroup). Fixed-size
	// chunks keep a run of millions of tokens from copying the samples over and over as one
	// slice grows. When the chunks fill, settleGaps moves the samples of requests that have ended
	// into itl (or drops them), so memory follows the requests in flight and the distinct gaps,
	// not the tokens of the run.
	gaps     [][]gap
	free     [][]gap // emptied chunks, for reuse
	settleAt int     // chunks in gaps that trigger the next settleGaps
	itl      samples // keys: durations
	group    []int32 // TokenRuns' members, reused

	// With Forget, the distributions' settled values beyond a bound go to spill; radix is their sort
	// scratch.
	spill *spillFile
	radix radix

	// reasons holds Rejected's and Failed's reason by id; they are rare, so a map beats a
	// string header in every record. A compact collector frees a reason as the request retires, or
	// once its ITL samples are settled.
	reasons map[int]string

	// names holds Identify's names from id base on, for the per-request records.
	names []name

	// header is how many tokens every reply opens with that its stream does not show (SetHeader).
	header int32
}

// retired is what a Collector that forgets ended requests keeps of them: the counts of the summary and
// the samples of its exact percentiles, a few numbers per request rather than its record.
type retired struct {
	tally
	cols        [nLatencies]samples // by latency; keys: floatKey of the milliseconds
	first       *rejection          // the earliest rejected request, if any
	firstFailed *rejection          // the earliest failed request, if any
}

// latency names a per-request distribution: each completed request has at most one sample of it.
type latency int

const (
	ttftLatency latency = iota
	ttstLatency
	tpotLatency
	e2eLatency
	nLatencies
)

// samplers reads each latency of a completed request record; ok is false for one it lacks.
var samplers = [nLatencies]func(*request) (float64, bool){
	ttftLatency: (*request).ttft,
	ttstLatency: (*request).ttst,
	tpotLatency: (*request).tpot,
	e2eLatency:  (*request).e2e,
}

// rejection is a rejected or failed request's name and reason, for FirstRejection and FirstFailure.
type rejection struct {
	id     int
	name   name
	reason string
}

// tally is the Summary's counts over some requests.
type tally struct {
	completed, rejected, failed, retried, incomplete int
	noTTFT                                           int           // completed requests that showed no token
	duration                                         time.Duration // latest finish of a completed request
	input, cached, output                            int           // tokens of completed requests
}

// add counts request record r, which arrived.
func (t *tally) add(r *request) {
	if r.retries > 0 {
		t.retried++
	}
	switch {
	case r.state&failed != 0:
		t.failed++
	case r.state&rejected != 0:
		t.rejected++
	case r.state&finished == 0:
		t.incomplete++
	default:
		t.completed++
		if r.deliveries == 0 {
			t.noTTFT++
		}
		t.duration = max(t.duration, r.end)
		t.input += int(r.inputTokens)
		t.cached += int(r.cachedTokens)
		t.output += int(r.outputTokens)
	}
}

// The samples of a completed request, in milliseconds; ok is false for one it lacks. TPOT spreads the
// time after the first token shown over the tokens shown after it.
func (r *request) ttst() (float64, bool) { return ms(r.secondToken - r.firstToken), r.deliveries >= 2 }
func (r *request) tpot() (float64, bool) {
	shown := r.outputTokens - r.hidden
	return ms(r.lastToken-r.firstToken) / float64(shown-1), shown >= 2
}

// Forget makes c keep of a request that has ended, once every request before it has ended too, only
// the few numbers Summary, Percentile and Quantiles need (its latencies and counts), so that its memory
// follows the requests in flight rather than the length of the run. If w is not nil, each request's
// line of WriteRequestsJSONL goes to w then, in id order; Flush writes the lines of the requests left.
// Lifetimes then yields only the requests kept, Latency takes only those, and WriteRequestsJSONL fails.
// An id skipped by Arrived leaves the window as a request that never came: it may not arrive later.
// Beyond a few thousand distinct values, the samples of the exact percentiles go to a temporary file
// (unlinked: nothing stays behind), so that memory stays flat however long the run; Close closes it. If it
// cannot be made, they stay in memory (SpillErr says why). Call Forget before the first Arrived.
func (c *Collector) Forget(w io.Writer) {
	if len(c.reqs) > 0 || c.base > 0 {
		panic("report: Forget after Arrived")
	}
	c.forget = true
	c.spill = newSpillFile()
	c.itl.spill, c.itl.radix, c.itl.recurring = c.spill, &c.radix, true
	for l := range c.done.cols {
		c.done.cols[l].spill, c.done.cols[l].radix = c.spill, &c.radix
	}
	if w != nil {
		c.out = bufio.NewWriterSize(w, 64<<10)
	}
}

// SpillErr says why a collector that forgets kept its samples in memory rather than in its temporary
// file (nil if it did not need to, or did not fail to): the statistics are the same, the memory not flat.
func (c *Collector) SpillErr() error {
	if c.spill == nil {
		return nil
	}
	return c.spill.err
}

// Err is the first error reading the samples back from the temporary file (Forget): the statistics
// computed since are wrong.
func (c *Collector) Err() error {
	if c.spill == nil {
		return nil
	}
	return c.spill.readErr
}

// Close lets go of the temporary file of Forget's samples; Summary, Percentile and Quantiles then fail to
// read them back (Err).
func (c *Collector) Close() error {
	if c.spill == nil {
		return nil
	}
	return c.spill.close()
}

// Flush writes to Forget's writer the lines of the requests it has not written yet, ended or not,
// and returns the first error writing any line. Call it once, when the run is over.
func (c *Collector) Flush() error {
	if c.out == nil {
		return c.outErr
	}
	var b []byte
	for i := range c.reqs {
		b = c.write(b, c.base+i)
	}
	if c.outErr == nil {
		c.outErr = c.out.Flush()
	}
	c.out = nil
	return c.outErr
}

// write writes request id's line to out, in buffer b, which it returns for the next.
func (c *Collector) write(b []byte, id int) []byte {
	if c.outErr != nil || c.reqs[id-c.base].state&arrived == 0 {
		return b
	}
	b = c.appendRecord(b[:0], id)
	_, c.outErr = c.out.Write(b)
	return b
}

// retire forgets the ended requests at the front of the window (Forget), keeping what the report needs,
// and the holes in the ids among them: ids come in arrival order, so a hole never arrives and must not
// pin the window.
func (c *Collector) retire() {
	k := 0
	var b []byte
	for ; k < len(c.reqs) && (c.reqs[k].state&ended != 0 || c.reqs[k].state&arrived == 0); k++ {
		id, r := c.base+k, &c.reqs[k]
		if r.state&arrived == 0 {
			continue
		}
		if c.out != nil {
			b = c.write(b, id)
		}
		d := &c.done
		d.add(r)
		if r.completed() {
			for l, sample := range samplers {
				if x, ok := sample(r); ok {
					d.cols[l].addFloat(x)
				}
			}
		}
		if r.state&rejected != 0 && d.first == nil {
			d.first = &rejection{id: id, name: c.name(id), reason: c.reasons[id]}
		}
		if r.state&failed != 0 && d.firstFailed == nil {
			d.firstFailed = &rejection{id: id, name: c.name(id), reason: c.reasons[id]}
		}
		if r.deliveries < 2 { // no ITL samples for settleGaps to drop by its reason
			delete(c.reasons, id)
		}
	}
	if k == 0 {
		return
	}
	c.reqs = c.reqs[k:]
	c.base += k
	k = min(k, len(c.names))
	clear(c.names[:k]) // the strings go now, not when the slice next moves
	c.names = c.names[k:]
}

// name is Identify's name of request id, at or after base; zero if none was given.
func (c *Collector) name(id int) name {
	if i := id - c.base; i < len(c.names) {
		return c.names[i]
	}
	return name{}
}

// record returns request id's record, or nil if it is not held (before base, or never arrived).
func (c *Collector) record(id int) *request {
	i := id - c.base
	if i < 0 || i >= len(c.reqs) || c.reqs[i].state&arrived == 0 {
		return nil
	}
	return &c.reqs[i]
}

// name is where a request came from: its id in the workload and, for a trace row, the line.
type name struct {
	requestID string
	line      int
}

// request is the fixed-size record of one request. Counts are int32 to keep it small: a run
// holds up to ~10^6 of them.
type request struct {
	arrival     time.Duration
	admission   time.Duration // first admission only
	firstToken  time.Duration
	secondToken time.Duration // second delivery, for TTST
	lastToken   time.Duration
	end         time.Duration // finish or rejection time
	last        time.Duration // latest call's time, to check calls come in time order

	inputTokens  int32
	maxTokens    int32
	worker       int32
	cachedTokens int32 // prefix tokens reused at first admission
	outputTokens int32
	hidden       int32 // leading tokens not shown (Collector.SetHeader), among outputTokens
	deliveries   int32
	retries      int32

	state state
}

type state uint8

const (
	arrived state = 1 << iota
	admitted
	finished
	rejected
	failed
)

const ended = finished | rejected | failed

func (r *request) completed() bool { return r.state&ended == finished }

// ttft is the request's time to first token in milliseconds; ok is false when it delivered none.
func (r *request) ttft() (v float64, ok bool) { return ms(r.firstToken - r.arrival), r.deliveries >= 1 }

// e2e is the end-to-end latency in milliseconds of a request that has ended; ok is always true.
func (r *request) e2e() (v float64, ok bool) { return ms(r.end - r.arrival), true }

// NewCollector returns an empty Collector.
func NewCollector() *Collector { return &Collector{} }

// SetHeader makes the first n tokens of every reply invisible to the client, as the tokens a model's
// chat format opens each reply with are when the server's stream carries no text for them (gpt-oss:
// its harmony header, model.Model.ReplyHeader): they count as output tokens, but no delivery is
// recorded until a token after them arrives, so TTFT, TTST, ITL and TPOT are what the client sees.
// Call it before the first Arrived.
func (c *Collector) SetHeader(n int) {
	if n < 0 || n > math.MaxInt32 {
		panic(fmt.Sprintf("report: SetHeader(%d): want 0 to %d", n, math.MaxInt32))
	}
	if len(c.reqs) > 0 || c.base > 0 {
		panic("report: SetHeader after Arrived")
	}
	c.header = int32(n)
}

// Arrived records that request id arrived at `at` with a prompt of inputTokens tokens, asking
// for at most maxTokens output tokens.
func (c *Collector) Arrived(id int, at time.Duration, inputTokens, maxTokens int) {
	if id < 0 || id > math.MaxInt32 {
		panic(fmt.Sprintf("report: Arrived: request id %d out of range", id))
	}
	if c.forget {
		c.retire()
	}
	// Ids are dense, so this appends one record in the normal case; a gap in the ids leaves
	// records that never arrived, which every output skips.
	for c.base+len(c.reqs) <= id {
		c.reqs = append(c.reqs, request{})
	}
	if id < c.base {
		panic(fmt.Sprintf("report: Arrived: request %d arrived twice or after a later id", id))
	}
	r := &c.reqs[id-c.base]
	if r.state&arrived != 0 {
		panic(fmt.Sprintf("report: Arrived: request %d arrived twice", id))
	}
	*r = request{
		arrival:     at,
		last:        at,
		inputTokens: count("Arrived", id, "inputTokens", inputTokens),
		maxTokens:   count("Arrived", id, "maxTokens", maxTokens),
		worker:      -1,
		state:       arrived,
	}
}

// Identify records the workload's own name of request id — a trace's request_id, or a stable id
// the workload gives a request without one — and, for a trace row, its 1-based line, so the
// per-request records join back to the trace.
func (c *Collector) Identify(id int, requestID string, line int) {
	c.live(id, latest, "Identify")
	for len(c.names) <= id-c.base {
		c.names = append(c.names, name{})
	}
	c.names[id-c.base] = name{requestID, line}
}

// FirstRejection returns the earliest-arriving rejected request — its id, and Identify's name and
// line if given — and why it was rejected; ok is false when no request was rejected.
func (c *Collector) FirstRejection() (id int, requestID string, line int, reason string, ok bool) {
	return c.firstEnded(rejected, c.done.first)
}

// FirstFailure is FirstRejection for the requests that failed: their worker failed, or none was left.
func (c *Collector) FirstFailure() (id int, requestID string, line int, reason string, ok bool) {
	return c.firstEnded(failed, c.done.firstFailed)
}

// firstEnded is the earliest-arriving request in state s (rejected or failed); f is the earliest of
// those the collector no longer holds.
func (c *Collector) firstEnded(s state, f *rejection) (id int, requestID string, line int, reason string, ok bool) {
	if f != nil { // before every request held
		return f.id, f.name.requestID, f.name.line, f.reason, true
	}
	id = -1
	for i := range c.reasons { // rejections' and failures' reasons
		if r := c.record(i); r != nil && r.state&s != 0 && (id < 0 || i < id) {
			id = i
		}
	}
	if id < 0 {
		return 0, "", 0, "", false
	}
	n := c.name(id)
	return id, n.requestID, n.line, c.reasons[id], true
}

// Routed records the worker request id was sent to (any stable number the caller chooses).
func (c *Collector) Routed(id int, worker uint64) {
	r := c.live(id, latest, "Routed")
	r.worker = to32("Routed", id, "worker", int(worker))
}

// Admitted records that request id was scheduled at `at` with cachedTokens of its prompt
// already in the prefix cache. Only the first admission counts, for both queueing time and
// prefix reuse; readmissions after preemption are ignored, because the report describes what
// the request found when it first reached the engine.
func (c *Collector) Admitted(id int, at time.Duration, cachedTokens int) {
	r := c.live(id, at, "Admitted")
	if r.state&admitted != 0 {
		return
	}
	r.state |= admitted
	r.admission = at
	r.cachedTokens = count("Admitted", id, "cachedTokens", cachedTokens)
}

// Tokens records one delivery of n ≥ 1 tokens of request id at `at`. A burst of several
// tokens in one call is one delivery: one ITL gap, as one SSE chunk is for vllm bench serve.
func (c *Collector) Tokens(id int, at time.Duration, n int) {
	r := c.live(id, at, "Tokens")
	if n < 1 {
		panic(fmt.Sprintf("report: Tokens: request %d: %d tokens, want at least 1", id, n))
	}
	hide := min(c.header-r.hidden, int32(n)) // the reply's header tokens among these
	r.hidden += hide
	if hide < int32(n) {
		c.deliver(r, id, at)
	}
	r.outputTokens = count("Tokens", id, "output tokens", int(r.outputTokens)+n)
}

// deliver records a delivery of request id (record r) at `at`: its first, its second, or a gap.
func (c *Collector) deliver(r *request, id int, at time.Duration) {
	switch r.deliveries {
	case 0:
		r.firstToken = at
	case 1:
		r.secondToken = at
		fallthrough
	default:
		c.addGap(at-r.lastToken, int32(id))
	}
	r.lastToken = at
	r.deliveries++
}

// TokenRun records deliveries of one token each for request id, at each of ats in turn (ascending): a
// run of decode passes. It is Tokens(id, at, 1) for each at.
func (c *Collector) TokenRun(id int, ats []time.Duration) {
	if len(ats) == 0 {
		return
	}
	r := c.live(id, ats[0], "TokenRun")
	for i := 1; i < len(ats); i++ {
		if ats[i] < ats[i-1] {
			panic(fmt.Sprintf("report: TokenRun: request %d at %v, before its previous event at %v", id, ats[i], ats[i-1]))
		}
	}
	r.last = ats[len(ats)-1]
	rest := ats
	for len(rest) > 0 && (r.hidden < c.header || r.deliveries < 2) { // the header's tokens, the first two deliveries
		if r.hidden < c.header {
			r.hidden++
		} else {
			c.deliver(r, id, rest[0])
		}
		rest = rest[1:]
	}
	if len(rest) > 0 {
		c.addGaps(r, int32(id), rest)
	}
	r.outputTokens = count("TokenRun", id, "output tokens", int(r.outputTokens)+len(ats))
}

// TokenRuns records deliveries of one token each for each request of ids at each of ats in turn
// (ascending): a run of decode passes that decoded them all. It is TokenRun(id, ats) for each id, but
// the gaps the requests share (every pass's after the first, for those past their first two deliveries)
// are kept once, with the requests, and count once per request that completes: a coast of k requests
// costs the gaps of one, and a settle looks each request up once.
func (c *Collector) TokenRuns(ids []int, ats []time.Duration) {
	if len(ats) == 0 {
		return
	}
	c.group = c.group[:0]
	for _, id := range ids {
		if r := c.live(id, ats[0], "TokenRuns"); len(ats) > 1 && r.hidden >= c.header && r.deliveries >= 2 {
			c.group = append(c.group, int32(id))
		}
	}
	if len(c.group) == 0 || len(c.group) == 1 && len(ats) <= soloGroup {
		for _, id := range ids {
			c.TokenRun(id, ats)
		}
		return
	}
	for i := 1; i < len(ats); i++ {
		if ats[i] < ats[i-1] {
			panic(fmt.Sprintf("report: TokenRuns: pass end %v before the previous one, %v", ats[i], ats[i-1]))
		}
	}
	m := 0
	for _, id := range ids {
		if m == len(c.group) || int(c.group[m]) != id {
			c.TokenRun(id, ats) // its hidden tokens or first deliveries are its own
			continue
		}
		m++
		r := c.record(id)
		c.addGap(ats[0]-r.lastToken, int32(id))
		r.last, r.lastToken = ats[len(ats)-1], ats[len(ats)-1]
		r.deliveries += int32(len(ats))
		r.outputTokens = count("TokenRuns", id, "output tokens", int(r.outputTokens)+len(ats))
	}
	c.pushGroup(ats)
}

// soloGroup is the longest run whose gaps TokenRuns leaves to one request as its own: beyond it, a group
// of one costs two entries more, and a settle looks the request up once, not once a gap.
const soloGroup = 8

// pushGroup records the gaps between ats as shared by the requests of c.group: a header entry (owner
// shared, n the members, d the gap entries), an entry per member (its id, n 0), then the gaps (owner
// shared), equal ones in a row in one entry. It settles first if the chunks are full or the group would
// start another (at most an entry a pass), never within.
func (c *Collector) pushGroup(ats []time.Duration) {
	c.settleIfFull(1 + len(c.group) + len(ats) - 1)
	head := c.push(gap{owner: shared, n: int32(len(c.group))})
	for _, id := range c.group {
		c.push(gap{owner: id})
	}
	var g *gap
	entries := 0
	for i := 1; i < len(ats); i++ {
		d := ats[i] - ats[i-1]
		if g != nil && g.d == d && g.n < math.MaxInt32 {
			g.n++
			continue
		}
		g = c.push(gap{d, shared, 1})
		entries++
	}
	head.d = time.Duration(entries) // chunks never move: head still points into its own
}

// addGaps records deliveries at each of ats (ascending) of request owner, record r, which has had two at
// least: each one's gap, as deliver and addGap would one by one, with the entry the last gap went to at
// hand, so that a run of equal gaps costs a comparison each.
func (c *Collector) addGaps(r *request, owner int32, ats []time.Duration) {
	prev := r.lastToken
	g := c.lastGap(owner)
	for _, at := range ats {
		d := at - prev
		prev = at
		if g != nil && g.d == d && g.n < math.MaxInt32 {
			g.n++
			continue
		}
		g = c.pushGap(d, owner)
	}
	r.lastToken = prev
	r.deliveries += int32(len(ats))
}

// Finished records that request id completed at `at`. A request that produced no output
// tokens finishes without any Tokens call.
func (c *Collector) Finished(id int, at time.Duration) {
	r := c.live(id, at, "Finished")
	r.state |= finished
	r.end = at
}

// Rejected records that request id was refused at `at`, for example because its prompt can
// never fit in the KV cache. Rejected requests count only toward rejected_requests.
func (c *Collector) Rejected(id int, at time.Duration, reason string) {
	c.abort(id, at, "Rejected", rejected, reason)
}

// Retried records that request id starts over at `at` because its worker failed: it is routed and
// prefilled again. What it got so far is dropped, as a client drops a broken stream: its worker,
// admission, tokens and ITL gaps; its arrival stays, so its TTFT and E2E include the lost work.
func (c *Collector) Retried(id int, at time.Duration) {
	r := c.live(id, at, "Retried")
	if r.deliveries > 1 {
		c.dropGaps(int32(id))
	}
	*r = request{arrival: r.arrival, last: at, inputTokens: r.inputTokens, maxTokens: r.maxTokens, worker: -1,
		retries: r.retries + 1, state: arrived}
}

// dropGaps removes request id's ITL samples (rare: a retry): its own entries go, and it leaves the groups
// it shares (its member entries become ones of nobody).
func (c *Collector) dropGaps(id int32) {
	for i, chunk := range c.gaps {
		for j := range chunk {
			if g := &chunk[j]; g.owner == id && g.n == 0 {
				g.owner = shared
			}
		}
		c.gaps[i] = slices.DeleteFunc(chunk, func(g gap) bool { return g.owner == id })
	}
}

// Failed records that request id ended at `at` without completing because the worker serving it
// failed (or none was left). Failed requests count only toward failed_requests.
func (c *Collector) Failed(id int, at time.Duration, reason string) {
	c.abort(id, at, "Failed", failed, reason)
}

// abort ends request id at `at` without completing it, in state s (rejected or failed), for reason.
func (c *Collector) abort(id int, at time.Duration, op string, s state, reason string) {
	r := c.live(id, at, op)
	r.state |= s
	r.end = at
	if c.reasons == nil {
		c.reasons = make(map[int]string)
	}
	c.reasons[id] = reason
}

// live returns the record of a request that arrived and has not ended, after checking that
// `at` does not go back in time for it; at == latest stands for the request's latest time.
func (c *Collector) live(id int, at time.Duration, op string) *request {
	r := c.record(id)
	switch {
	case r == nil && id >= 0 && id < c.base:
		panic(fmt.Sprintf("report: %s: request %d already ended", op, id))
	case r == nil:
		panic(fmt.Sprintf("report: %s: request %d never arrived", op, id))
	case at == latest:
		at = r.last
	}
	switch {
	case r.state&finished != 0:
		panic(fmt.Sprintf("report: %s: request %d already finished", op, id))
	case r.state&rejected != 0:
		panic(fmt.Sprintf("report: %s: request %d already rejected", op, id))
	case r.state&failed != 0:
		panic(fmt.Sprintf("report: %s: request %d already failed", op, id))
	case at < r.last:
		panic(fmt.Sprintf("report: %s: request %d at %v, before its previous event at %v", op, id, at, r.last))
	}
	r.last = at
	return r
}

// latest is live's time for a call that has none of its own.
const latest = time.Duration(math.MinInt64)

// count converts a token count, which must fit a record's int32 and not be negative.
func count(op string, id int, what string, v int) int32 {
	if v < 0 || v > math.MaxInt32 {
		panic(fmt.Sprintf("report: %s: request %d: %s %d out of range", op, id, what, v))
	}
	return int32(v)
}

func to32(op string, id int, what string, v int) int32 {
	if v < math.MinInt32 || v > math.MaxInt32 {
		panic(fmt.Sprintf("report: %s: request %d: %s %d out of range", op, id, what, v))
	}
	return int32(v)
}

// gapChunk is the number of ITL samples per chunk (256 KiB): small, so that the chunks that trigger a
// settle (minSettle) cost little memory; a compact run's settle merges into a bounded set of values (the
// spill file's limit), so settling often costs little time.
const gapChunk = 1 << 14

// gap is an entry of gaps: n samples of d in a row of request owner; or, for the gaps of a run that several
// requests share (pushGroup), the group's header (owner shared, n ≥ 1 members, d the gap entries after
// them), a member (owner its id, or shared once it left, n 0), or a gap of the group (owner shared).
type gap struct {
	d     time.Duration
	owner int32
	n     int32
}

// shared is the owner of a group's header and gaps, and of a member entry whose request left it.
const shared = -1

// addGap records one sample of d for request owner.
func (c *Collector) addGap(d time.Duration, owner int32) {
	if g := c.lastGap(owner); g != nil && g.d == d && g.n < math.MaxInt32 {
		g.n++
		return
	}
	c.pushGap(d, owner)
}

// lastGap returns the latest entry of gaps if it is owner's, else nil.
func (c *Collector) lastGap(owner int32) *gap {
	if n := len(c.gaps); n > 0 {
		if k := len(c.gaps[n-1]); k > 0 && c.gaps[n-1][k-1].owner == owner {
			return &c.gaps[n-1][k-1]
		}
	}
	return nil
}

// pushGap records one sample of d for request owner in an entry of its own, settling first when the
// chunks are full, and returns the entry.
func (c *Collector) pushGap(d time.Duration, owner int32) *gap {
	c.settleIfFull(1)
	return c.push(gap{d, owner, 1})
}

// settleIfFull settles the gaps when the chunks are full, or the next entries would start another.
func (c *Collector) settleIfFull(entries int) {
	if n := len(c.gaps); n >= max(c.settleAt, minSettle) && len(c.gaps[n-1])+entries > gapChunk {
		c.settleGaps()
	}
}

// push appends entry g to the chunks and returns it.
func (c *Collector) push(g gap) *gap {
	if n := len(c.gaps); n == 0 || len(c.gaps[n-1]) == gapChunk {
		var chunk []gap
		if k := len(c.free); k > 0 {
			chunk = c.free[k-1]
			c.free = c.free[:k-1]
		} else {
			chunk = make([]gap, 0, gapChunk)
		}
		c.gaps = append(c.gaps, chunk)
	}
	last := &c.gaps[len(c.gaps)-1]
	*last = append(*last, g)
	return &(*last)[len(*last)-1]
}

// minSettle is the fewest chunks of gaps (512 KiB) that make settleGaps worth its pass over them.
const minSettle = 2

// settleGaps moves the ITL samples of completed requests from gaps into itl and drops those of
// requests that ended otherwise (they never count); the samples of requests in flight stay in gaps,
// compacted. The next settle comes when gaps have doubled, and not before a quarter as many samples as
// there are distinct values have come, so the work stays linear in the samples (at most four steps of
// merging each) while the chunks, which a long run's many distinct values would otherwise multiply, stay
// few.
func (c *Collector) settleGaps() {
	n := 0
	for _, chunk := range c.gaps {
		n += len(chunk)
	}
	c.itl.reserve(n)
	w := 0 // entries kept, written over the ones read: the write position never passes the read one
	keep := func(g gap) {
		c.gaps[w/gapChunk] = append(c.gaps[w/gapChunk][:w%gapChunk], g)
		w++
	}
	// The group being read (pushGroup): its members and gap entries left to read, its members that
	// completed and those kept, and where its header was written.
	var members, entries, kept, head int
	var done uint64
	for i := range c.gaps {
		for _, g := range c.gaps[i] {
			switch {
			case members > 0:
				members--
				switch c.fate(g.owner) {
				case counts:
					done++
				case stays:
					keep(g)
					kept++
				}
				if members == 0 && kept == 0 {
					w = head // nobody is left to share the group's gaps
				} else if members == 0 {
					c.gaps[head/gapChunk][head%gapChunk].n = int32(kept)
				}
			case entries > 0:
				entries--
				for n := uint64(g.n) * done; n > 0; n -= min(n, math.MaxUint32) {
					c.itl.addRecurring(uint64(g.d), uint32(min(n, math.MaxUint32)))
				}
				if kept > 0 {
					keep(g)
				}
			case g.owner == shared:
				members, entries, kept, done, head = int(g.n), int(g.d), 0, 0, w
				keep(g)
			default:
				switch c.fate(g.owner) {
				case counts:
					c.itl.addRecurring(uint64(g.d), uint32(g.n))
				case stays:
					keep(g)
				}
			}
		}
	}
	chunks := (w + gapChunk - 1) / gapChunk
	if chunks > 0 {
		c.gaps[chunks-1] = c.gaps[chunks-1][:w-(chunks-1)*gapChunk]
	}
	for i := chunks; i < len(c.gaps); i++ {
		c.free = append(c.free, c.gaps[i][:0])
		c.gaps[i] = nil
	}
	c.gaps = c.gaps[:chunks]
	for id := range c.reasons { // the retired requests' samples are settled: their reasons go
		if id < c.base {
			delete(c.reasons, id)
		}
	}
	c.itl.settle()
	// A settle merges into every distinct value so far: waiting for a quarter as many new samples keeps it
	// linear.
	const quarter = 4 * gapChunk
	c.settleAt = max(minSettle, 2*chunks, chunks+(len(c.itl.keys)+quarter-1)/quarter)
}

// fate is what a settle does with request owner's ITL samples.
type fate int

const (
	counts fate = iota // the request completed: they join the distribution
	stays              // it is in flight: they wait for the next settle
	goes               // it ended otherwise, or left them (shared): they never count
)

func (c *Collector) fate(owner int32) fate {
	if owner == shared {
		return goes
	}
	r := c.record(int(owner))
	switch {
	case r == nil: // retired: completed, unless it has a reason for ending otherwise
		if _, aborted := c.reasons[int(owner)]; aborted {
			return goes
		}
		return counts
	case r.completed():
		return counts
	case r.state&ended == 0:
		return stays
	}
	return goes
}
