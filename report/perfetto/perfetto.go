// Package perfetto writes a simulated run as a Chrome trace-event JSON file, which Perfetto
// (ui.perfetto.dev) and chrome://tracing open: what every worker did pass by pass, and where every
// request spent its time. Write is the whole package; its input is a timeline.Recorder that watched the
// run and the run's report.Collector.
//
// The trace's shape:
//
//   - one process per pool ("agg workers", or "prefill workers" and "decode workers"), one thread per
//     worker and data-parallel rank ("worker 3", "worker 3 rank 1"); every pass in which the rank worked
//     is a complete ("X") slice named "pass" with the batch in its args, and holds slices "prefill" and
//     "decode": the rank's priced prefill and decode time, from the pass start;
//   - counters per worker, one series per rank: KV usage %, running and waiting requests, as planned at
//     each pass start (written when they change);
//   - router decisions as instant ("i") events "route" on the rank's thread the request went to;
//   - a process "requests": one async ("b"/"e", id = the request id) slice "request" per request from
//     arrival to end, tiled by its phases — queued (to first admission), prefill (to the first token;
//     disaggregated: to the prompt's end), awaiting decode (disaggregated: to the decode worker's
//     reservation), transfer (of the KV), first token (the decode worker's first pass), decode (first
//     token to finish) — or one "rejected" or "failed" phase. A phase of no time is left out, so the
//     phases of a request add up to its E2E exactly.
//
// Timestamps are microseconds, written exactly from the simulated nanoseconds. Output is a function of
// its input: the same run writes the same bytes. With a window (Recorder.From, To) the file holds the
// passes and routes the recorder kept and the whole lifetime of every request that overlaps the window.
package perfetto

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/report"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timeline"
)

// Write writes the trace of a run: rec's passes, routes and hand-offs, and col's requests. It streams
// through a buffered writer, holding no more than the per-request hand-off times.
func Write(w io.Writer, rec *timeline.Recorder, col *report.Collector) error {
	t := &trace{bw: bufio.NewWriterSize(w, 64<<10)}
	t.bw.WriteString(`{"traceEvents":[`)
	t.layout(rec)
	t.metadata()
	for _, wk := range rec.Workers() {
		t.passes(wk)
	}
	for _, r := range rec.Routes {
		t.route(r)
	}
	for _, wk := range rec.Workers() {
		t.counters(wk)
	}
	if err := t.requests(rec, col); err != nil {
		return err
	}
	t.bw.WriteString("\n],\"displayTimeUnit\":\"ms\"}\n")
	return t.bw.Flush()
}

// ParseWindow parses a time window FROM:TO, each a Go duration or seconds (sim.ParseTime), TO after
// FROM.
func ParseWindow(s string) (from, to time.Duration, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("window %q: no colon (want FROM:TO, e.g. 30s:40s)", s)
	}
	if from, err = sim.ParseTime(a); err != nil {
		return 0, 0, fmt.Errorf("window %q: from: %w", s, err)
	}
	if to, err = sim.ParseTime(b); err != nil {
		return 0, 0, fmt.Errorf("window %q: to: %w", s, err)
	}
	if to <= from {
		return 0, 0, fmt.Errorf("window %q: TO must be after FROM", s)
	}
	return from, to, nil
}

// trace is the file being written: its processes and threads, and the line in progress.
type trace struct {
	bw     *bufio.Writer
	b      []byte // the event being built, reused
	n      int    // events written
	pools  []pool
	tracks map[track]int // thread id by worker serial and rank
	reqPid int
}

type pool struct {
	name string
	pid  int
}

// track is a worker's data-parallel rank: one thread of the trace.
type track struct {
	pid    int
	serial uint64
	rank   int
}

// layout gives every pool a process id and every worker rank that worked or was routed to in the
// window a thread id, in worker serial and rank order (prefill workers are numbered before decode
// workers); the requests' process comes last.
func (t *trace) layout(rec *timeline.Recorder) {
	type slot struct {
		serial uint64
		rank   int
		pool   string
	}
	var ss []slot
	for _, w := range rec.Workers() {
		for r := range w.Ranks {
			ss = append(ss, slot{w.Serial, r, w.Pool})
		}
	}
	for _, r := range rec.Routes {
		ss = append(ss, slot{r.Worker, r.Rank, r.Pool})
	}
	slices.SortFunc(ss, func(a, b slot) int { return cmp.Or(cmp.Compare(a.serial, b.serial), cmp.Compare(a.rank, b.rank)) })
	t.tracks = map[track]int{}
	for _, s := range slices.Compact(ss) {
		if !slices.ContainsFunc(t.pools, func(p pool) bool { return p.name == s.pool }) {
			t.pools = append(t.pools, pool{s.pool, len(t.pools) + 1})
		}
		t.tracks[track{t.pid(s.pool), s.serial, s.rank}] = len(t.tracks) + 1
	}
	t.reqPid = len(t.pools) + 1
}

// metadata names the processes and threads and orders them as laid out.
func (t *trace) metadata() {
	for _, p := range t.pools {
		t.meta(p.pid, 0, "process_name", p.name+" workers")
		t.sortIndex(p.pid, 0, "process_sort_index", p.pid)
	}
	t.meta(t.reqPid, 0, "process_name", "requests")
	t.sortIndex(t.reqPid, 0, "process_sort_index", t.reqPid)
	ks := make([]track, 0, len(t.tracks))
	ranks := map[uint64]int{}
	for k := range t.tracks {
		ks = append(ks, k)
		ranks[k.serial]++
	}
	slices.SortFunc(ks, func(a, b track) int { return cmp.Compare(t.tracks[a], t.tracks[b]) })
	for _, k := range ks {
		name := "worker " + strconv.FormatUint(k.serial, 10)
		if ranks[k.serial] > 1 || k.rank > 0 {
			name += " rank " + strconv.Itoa(k.rank)
		}
		tid := t.tracks[k]
		t.meta(k.pid, tid, "thread_name", name)
		t.sortIndex(k.pid, tid, "thread_sort_index", tid)
	}
}

func (t *trace) meta(pid, tid int, name, value string) {
	t.begin('M', name, pid, tid, 0)
	t.b = append(t.b, `,"args":{"name":`...)
	t.b = appendString(t.b, value)
	t.b = append(t.b, '}')
	t.end()
}

func (t *trace) sortIndex(pid, tid int, name string, i int) {
	t.begin('M', name, pid, tid, 0)
	t.b = append(t.b, `,"args":{"sort_index":`...)
	t.b = strconv.AppendInt(t.b, int64(i), 10)
	t.b = append(t.b, '}')
	t.end()
}

// passes writes a worker's passes: per rank that worked, a slice "pass" holding its priced parts.
func (t *trace) passes(w *timeline.Worker) {
	for _, p := range w.Passes {
		for ri := range p.Ranks {
			r := &p.Ranks[ri]
			if r.PrefillSeqs+r.DecodeSeqs+r.Admitted+r.Preempted+r.Finished == 0 {
				continue // the rank had nothing to do in this pass
			}
			k := track{t.pid(w.Pool), w.Serial, ri}
			tid := t.tracks[k]
			t.begin('X', "pass", k.pid, tid, p.Start)
			t.dur(p.End - p.Start)
			t.b = append(t.b, `,"args":{`...)
			t.intArg("prefill_seqs", r.PrefillSeqs, true)
			t.intArg("prefill_tokens", r.PrefillTokens, false)
			t.intArg("decode_seqs", r.DecodeSeqs, false)
			t.intArg("sampled", r.Sampled, false)
			t.intArg("admitted", r.Admitted, false)
			t.intArg("preempted", r.Preempted, false)
			t.intArg("finished", r.Finished, false)
			t.msArg("prefill_ms", r.Prefill)
			t.msArg("decode_ms", r.Decode)
			t.intArg("running", r.Running, false)
			t.intArg("waiting", r.Waiting, false)
			t.intArg("kv_blocks_active", r.ActiveBlocks, false)
			t.intArg("kv_blocks_total", r.TotalBlocks, false)
			t.b = append(t.b, '}')
			t.end()
			if r.Prefill > 0 {
				t.begin('X', "prefill", k.pid, tid, p.Start)
				t.dur(r.Prefill)
				t.end()
			}
			if r.Decode > 0 {
				t.begin('X', "decode", k.pid, tid, p.Start+r.Prefill)
				t.dur(r.Decode)
				t.end()
			}
		}
	}
}

// route writes a router decision on the thread of the rank that got the request.
func (t *trace) route(r timeline.Route) {
	k := track{t.pid(r.Pool), r.Worker, r.Rank}
	t.begin('i', "route", k.pid, t.tracks[k], r.At)
	t.b = append(t.b, `,"s":"t","args":{"request":`...)
	t.b = strconv.AppendUint(t.b, r.ID, 10)
	t.b = append(t.b, '}')
	t.end()
}

// counters writes a worker's KV usage, running and waiting requests per rank, at each pass start where
// one of them changed.
func (t *trace) counters(w *timeline.Worker) {
	pid := t.pid(w.Pool)
	tid := t.tracks[track{pid, w.Serial, 0}]
	prefix := "worker " + strconv.FormatUint(w.Serial, 10)
	series := []struct {
		name string
		v    func(*timeline.Rank) int64 // KV usage in hundredths of a percent, rounded
		pct  bool
	}{
		{prefix + " KV %", func(r *timeline.Rank) int64 {
			if r.TotalBlocks == 0 {
				return 0
			}
			return (int64(r.ActiveBlocks)*10000 + int64(r.TotalBlocks)/2) / int64(r.TotalBlocks)
		}, true},
		{prefix + " running", func(r *timeline.Rank) int64 { return int64(r.Running) }, false},
		{prefix + " waiting", func(r *timeline.Rank) int64 { return int64(r.Waiting) }, false},
	}
	for _, s := range series {
		last := make([]int64, w.Ranks)
		for i, p := range w.Passes {
			changed := i == 0
			for ri := range p.Ranks {
				if v := s.v(&p.Ranks[ri]); v != last[ri] {
					last[ri], changed = v, true
				}
			}
			if !changed {
				continue
			}
			t.begin('C', s.name, pid, tid, p.Start)
			t.b = append(t.b, `,"args":{`...)
			for ri, v := range last {
				if ri > 0 {
					t.b = append(t.b, ',')
				}
				t.b = append(t.b, `"rank `...)
				t.b = strconv.AppendInt(t.b, int64(ri), 10)
				t.b = append(t.b, `":`...)
				if s.pct {
					t.b = appendDecimal(t.b, v, 100)
				} else {
					t.b = strconv.AppendInt(t.b, v, 10)
				}
			}
			t.b = append(t.b, '}')
			t.end()
		}
	}
}

// phase is a request's phase, from at to the next phase's start or the request's end.
type phase struct {
	name string
	at   time.Duration
}

// requests writes every ended request that overlaps the window as an async slice tiled by its phases.
func (t *trace) requests(rec *timeline.Recorder, col *report.Collector) error {
	prefilled := make(map[uint64]time.Duration, len(rec.Prefills))
	for _, p := range rec.Prefills {
		prefilled[p.ID] = p.At // a retried request's last prefill is the one that counts
	}
	transfers := make(map[uint64]timeline.Transfer, len(rec.Transfers))
	for _, tr := range rec.Transfers {
		transfers[tr.ID] = tr
	}
	var phases []phase
	for id, l := range col.Lifetimes() {
		if !l.Completed && !l.Rejected && !l.Failed || rec.To > 0 && (l.Arrival >= rec.To || l.End < rec.From) {
			continue
		}
		phases = append(phases[:0], phase{"queued", l.Arrival})
		switch {
		case l.Rejected:
			phases[0].name = "rejected"
		case l.Failed:
			phases[0].name = "failed"
		default:
			if l.Admitted {
				phases = append(phases, phase{"prefill", l.Admission})
			}
			if tr, ok := transfers[uint64(id)]; ok {
				phases = append(phases, phase{"awaiting decode", prefilled[uint64(id)]}, phase{"transfer", tr.Start},
					phase{"first token", tr.End})
			}
			if l.Shown > 0 { // a reply no longer than its header has no first token, and no decode phase
				phases = append(phases, phase{"decode", l.FirstToken})
			}
		}
		for i, p := range phases {
			switch {
			case i > 0 && p.at < phases[i-1].at:
				return fmt.Errorf("perfetto: request %d: %s at %v is before %s at %v", id, p.name, p.at, phases[i-1].name, phases[i-1].at)
			case p.at > l.End:
				return fmt.Errorf("perfetto: request %d: %s at %v is after its end at %v", id, p.name, p.at, l.End)
			}
		}
		t.request(id, l, phases)
	}
	return nil
}

// request writes one request's slice and its phases of some time.
func (t *trace) request(id int, l report.Lifetime, phases []phase) {
	t.async('b', "request", id, l.Arrival)
	t.b = append(t.b, `,"args":{`...)
	t.intArg("id", id, true)
	if l.Worker >= 0 {
		t.intArg("worker", l.Worker, false)
	}
	t.intArg("input_tokens", l.InputTokens, false)
	t.intArg("cached_tokens", l.CachedTokens, false)
	t.intArg("output_tokens", l.Tokens, false)
	if l.Shown > 0 {
		t.msArg("ttft_ms", l.FirstToken-l.Arrival)
	}
	t.msArg("e2e_ms", l.End-l.Arrival)
	if l.Retries > 0 {
		t.intArg("retries", l.Retries, false)
	}
	if l.Reason != "" {
		t.b = append(t.b, `,"reason":`...)
		t.b = appendString(t.b, l.Reason)
	}
	t.b = append(t.b, '}')
	t.end()
	for i, p := range phases {
		end := l.End
		if i+1 < len(phases) {
			end = phases[i+1].at
		}
		if end == p.at {
			continue
		}
		t.async('b', p.name, id, p.at)
		t.end()
		t.async('e', p.name, id, end)
		t.end()
	}
	t.async('e', "request", id, l.End)
	t.end()
}

func (t *trace) pid(pool string) int {
	for _, p := range t.pools {
		if p.name == pool {
			return p.pid
		}
	}
	panic("perfetto: pool " + pool + " not laid out")
}

// begin starts an event: its phase type, name, process, thread and timestamp.
func (t *trace) begin(ph byte, name string, pid, tid int, ts time.Duration) {
	t.b = append(t.b[:0], `{"ph":"`...)
	t.b = append(t.b, ph)
	t.b = append(t.b, `","name":"`...)
	t.b = append(t.b, name...) // our own names, which need no escaping
	t.b = append(t.b, `","pid":`...)
	t.b = strconv.AppendInt(t.b, int64(pid), 10)
	t.b = append(t.b, `,"tid":`...)
	t.b = strconv.AppendInt(t.b, int64(tid), 10)
	t.b = append(t.b, `,"ts":`...)
	t.b = appendDecimal(t.b, int64(ts), 1000)
}

// async starts an event of request id's async slice.
func (t *trace) async(ph byte, name string, id int, ts time.Duration) {
	t.begin(ph, name, t.reqPid, 0, ts)
	t.b = append(t.b, `,"cat":"request","id":`...)
	t.b = strconv.AppendInt(t.b, int64(id), 10)
}

func (t *trace) dur(d time.Duration) {
	t.b = append(t.b, `,"dur":`...)
	t.b = appendDecimal(t.b, int64(d), 1000)
}

func (t *trace) intArg(key string, v int, first bool) {
	if !first {
		t.b = append(t.b, ',')
	}
	t.b = append(t.b, '"')
	t.b = append(t.b, key...)
	t.b = append(t.b, `":`...)
	t.b = strconv.AppendInt(t.b, int64(v), 10)
}

func (t *trace) msArg(key string, d time.Duration) {
	t.b = append(t.b, `,"`...)
	t.b = append(t.b, key...)
	t.b = append(t.b, `":`...)
	t.b = appendDecimal(t.b, int64(d), 1e6)
}

// end writes the event, one to a line.
func (t *trace) end() {
	t.b = append(t.b, '}')
	if t.n > 0 {
		t.bw.WriteByte(',')
	}
	t.bw.WriteByte('\n')
	t.bw.Write(t.b) // a write error sticks in bw and comes back from Flush
	t.n++
}

// appendDecimal appends v/unit exactly, unit a power of ten, without trailing zeros.
func appendDecimal(b []byte, v, unit int64) []byte {
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	b = strconv.AppendInt(b, v/unit, 10)
	frac := v % unit
	if frac == 0 {
		return b
	}
	b = append(b, '.')
	for unit /= 10; frac > 0; unit /= 10 {
		b = append(b, byte('0'+frac/unit))
		frac %= unit
	}
	return b
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
