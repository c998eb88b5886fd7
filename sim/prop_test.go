package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
	"github.com/mocker-sim/mocker/workload"
)

// propCase is one random workload on one random deployment.
type propCase struct {
	seed  uint64
	o     Options
	trace string // JSONL, when the workload is a trace
	syn   *workload.SyntheticOptions

	requests int // requests the workload holds
	capacity int // tokens of one (prefill) rank's pool: a longer prompt can never be served
}

func (c *propCase) source(t *testing.T) workload.Source {
	if c.syn != nil {
		src, err := workload.NewSynthetic(*c.syn)
		if err != nil {
			t.Fatalf("seed %d: %v", c.seed, err)
		}
		return src
	}
	src, err := workload.ReadTrace(strings.NewReader(c.trace), "prop.jsonl", workload.TraceOptions{TraceBlockSize: 4})
	if err != nil {
		t.Fatalf("seed %d: %v", c.seed, err)
	}
	return src
}

// describe prints the case so that a failure can be read and replayed.
func (c *propCase) describe() string {
	var b strings.Builder
	o := c.o
	fmt.Fprintf(&b, "replay: go test ./sim/ -run 'TestProperties/seed=%d$'\n", c.seed)
	if o.PrefillWorkers > 0 {
		fmt.Fprintf(&b, "disaggregated %d prefill + %d decode workers, transfer %+v\n", o.PrefillWorkers, o.DecodeWorkers, o.Transfer)
		fmt.Fprintf(&b, "prefill engine %s\ndecode engine %s\n", engineString(o.PrefillEngine), engineString(o.DecodeEngine))
	} else {
		fmt.Fprintf(&b, "%d workers, engine %s\n", o.Workers, engineString(o.Engine))
	}
	fmt.Fprintf(&b, "router %+v\nevents at pass end %v, event delay %v, frontend %v, concurrency %d\n",
		o.Router, o.RouterEventsAtPassEnd, o.RouterEventDelay, o.FrontendLatency, o.Concurrency)
	if len(o.Failures) > 0 {
		fmt.Fprintf(&b, "failures %v, on failure %v\n", o.Failures, o.OnFailure)
	}
	if c.syn != nil {
		fmt.Fprintf(&b, "synthetic workload %+v\n", *c.syn)
	} else {
		b.WriteString("trace:\n")
		for _, line := range strings.SplitAfter(c.trace, "\n") {
			if len(line) > 300 {
				line = line[:300] + "...\n"
			}
			b.WriteString(line)
		}
	}
	return b.String()
}

func engineString(e engine.Options) string {
	s := fmt.Sprintf("%v dp %d timing %+v ", e.Backend, e.DPSize, e.Timing)
	if e.Backend == engine.SGLang {
		return s + fmt.Sprintf("%+v", e.SGLang)
	}
	return s + fmt.Sprintf("%+v", e.VLLM)
}

// newPropCase draws a case from its seed: the backend, pool size (tiny or large), chunked prefill, prefix
// caching, DP ranks, speculative decoding, aggregated or disaggregated workers behind a router of random
// policy, and a workload of bursts or Poisson arrivals, shared prefixes, multi-turn sessions and lengths
// that sometimes can never fit.
func newPropCase(seed uint64) *propCase {
	rng := rand.New(rand.NewPCG(seed, 0x70726f70))
	pick := func(xs ...int) int { return xs[rng.IntN(len(xs))] }
	c := &propCase{seed: seed}
	defer c.addFailures()

	backend := engine.Backend(rng.IntN(3))
	bs := pick(1, 2, 4, 16)
	blocks := 2 + rng.IntN(12) // tiny: most prompts preempt or never fit
	if rng.IntN(2) == 0 {
		blocks = 64 + rng.IntN(1000)
	}
	caching := rng.IntN(4) > 0
	vo := vllm.Options{
		BlockSize: bs, NumBlocks: blocks, MaxNumSeqs: pick(0, 1, 4, 16), MaxBatchedTokens: pick(8, 16, 64, 512),
		ChunkedPrefill: rng.IntN(3) > 0, PrefixCaching: caching, Preemption: vllm.Preemption(rng.IntN(2)),
		Capacity: []vllm.Capacity{vllm.MaxUtilization, vllm.ChunkFit}[rng.IntN(2)], Events: true,
	}
	if !vo.ChunkedPrefill {
		vo.MaxBatchedTokens = 512
	}
	so := sglang.Options{
		PageSize: bs, NumPages: blocks, MaxRunning: vo.MaxNumSeqs, MaxPrefillTokens: pick(16, 128, 16384),
		ChunkedPrefillSize: pick(0, 64, 8192) / bs * bs, ClipMaxNewTokens: pick(4, 4096), Conservativeness: []float64{0.3, 1}[rng.IntN(2)],
		Policy: sglang.Policy(rng.IntN(2)), MixedChunk: rng.IntN(3) == 0, Overlap: rng.IntN(2) == 0, PrefixCaching: caching, Events: true,
		ReservedDecode: []int{0, 16}[seed%2], // from the seed, so the draws of older cases stay as they were
	}
	if rng.IntN(3) == 0 {
		spec := sched.Spec{Tokens: 1 + rng.IntN(3), AcceptRates: []float64{0.8, 0.5}}
		vo.Spec, so.Spec = spec, spec
	}
	eo := engine.Options{Backend: backend, DPSize: 1 + rng.IntN(4), VLLM: vo, SGLang: so,
		Timing: timing.Fixed{PrefillMs: float64(1 + rng.IntN(20)), DecodeMs: float64(1 + rng.IntN(5))}, Seed: seed}

	ro := router.DefaultOptions()
	ro.Policy = router.Policy(rng.IntN(4))
	ro.QueueThreshold = []float64{0, 0.5, 4}[rng.IntN(3)]
	ro.Temperature = []float64{0, 0, 0.5}[rng.IntN(3)]
	ro.Seed = seed
	c.o = Options{Router: ro, RouterEventsAtPassEnd: rng.IntN(2) == 0}
	if rng.IntN(5) == 0 {
		c.o.RouterEventDelay = time.Duration(1+rng.IntN(20)) * time.Millisecond
	}
	if rng.IntN(5) == 0 {
		c.o.FrontendLatency = time.Duration(rng.IntN(3000)) * time.Microsecond
	}
	c.capacity = blocks * bs
	if rng.IntN(4) == 0 {
		de := eo
		de.DPSize = 1 + rng.IntN(4)
		de.VLLM.NumBlocks = blocks + rng.IntN(64)
		de.SGLang.NumPages = de.VLLM.NumBlocks
		de.VLLM.Events, de.SGLang.Events = false, false
		dr := router.DefaultOptions()
		dr.OverlapScoreWeight, dr.TrackPrefillTokens, dr.Seed = 0, false, seed+1
		c.o.PrefillWorkers, c.o.DecodeWorkers = 1+rng.IntN(3), 1+rng.IntN(3)
		c.o.PrefillEngine, c.o.DecodeEngine, c.o.DecodeRouter = eo, de, dr
		c.o.Transfer = disagg.Transfer{GBps: 1, BytesPerToken: pick(0, 1000, 100000), Mode: disagg.Mode(rng.IntN(2))}
	} else {
		c.o.Workers, c.o.Engine = 1+rng.IntN(4), eo
	}

	maxIn := max(4, c.capacity*3/2) // some prompts never fit
	maxIn = min(maxIn, 2000)
	if rng.IntN(3) == 0 {
		// Synthetic sessions: multi-turn chats whose prompts carry the history, prefix groups.
		c.syn = &workload.SyntheticOptions{
			NumRequests: 3 + rng.IntN(15), Input: workload.Length{Mean: float64(1 + rng.IntN(maxIn)), Stddev: float64(rng.IntN(50))},
			Output: workload.Length{Mean: float64(rng.IntN(40)), Stddev: float64(rng.IntN(10))}, RequestRate: float64(10 + rng.IntN(500)),
			Arrival: []string{"poisson", "burst", "gamma"}[rng.IntN(3)], SharedPrefixRatio: []float64{0, 0.5, 0.9}[rng.IntN(3)],
			NumPrefixGroups: 1 + rng.IntN(3), TurnsPerSession: 1 + rng.IntN(3), InterTurnDelay: time.Duration(rng.IntN(30)) * time.Millisecond,
			InterTurnDist: "exponential", Seed: seed,
		}
		if c.syn.Arrival == "gamma" {
			c.syn.Burstiness = 0.5
		}
		c.requests = c.syn.NumRequests * c.syn.TurnsPerSession
		if rng.IntN(4) == 0 && c.syn.TurnsPerSession == 1 {
			c.o.Concurrency = 1 + rng.IntN(4)
		}
		return c
	}
	c.trace, c.requests = propTrace(rng, maxIn)
	return c
}

// addFailures makes a third of the cases kill one or two workers during the run, for a while or for good,
// with their requests retried or failed. It draws from its own stream, so the rest of a case is the same
// with or without them.
func (c *propCase) addFailures() {
	rng := rand.New(rand.NewPCG(c.seed, 0x6661696c))
	if rng.IntN(3) > 0 {
		return
	}
	workers := c.o.Workers + c.o.PrefillWorkers + c.o.DecodeWorkers
	c.o.OnFailure = OnFailure(rng.IntN(2))
	busy := map[int]time.Duration{} // worker → when it is back (-1: never)
	for range 1 + rng.IntN(2) {
		f := Failure{Worker: rng.IntN(workers), At: time.Duration(rng.IntN(300)) * time.Millisecond}
		if rng.IntN(3) > 0 {
			f.Duration = time.Duration(1+rng.IntN(200)) * time.Millisecond
		}
		if back, ok := busy[f.Worker]; ok {
			if back < 0 {
				continue
			}
			f.At = max(f.At, back)
		}
		busy[f.Worker] = f.At + f.Duration
		if f.Duration == 0 {
			busy[f.Worker] = -1
		}
		c.o.Failures = append(c.o.Failures, f)
	}
}

// propTrace writes a Mooncake trace: bursts or Poisson arrivals, prompts made of a shared prefix group's
// hash ids then their own, sessions of several turns.
func propTrace(rng *rand.Rand, maxIn int) (string, int) {
	var b strings.Builder
	sessions := 2 + rng.IntN(20)
	burst := rng.IntN(2) == 0
	at, n, nextHash := 0.0, 0, 1000
	for s := range sessions {
		if burst {
			if rng.IntN(4) == 0 {
				at += float64(rng.IntN(200))
			}
		} else {
			at += rng.ExpFloat64() * 20
		}
		group := rng.IntN(3)
		turns := 1
		if rng.IntN(3) == 0 {
			turns = 2 + rng.IntN(2)
		}
		for turn := range turns {
			in := 1 + rng.IntN(maxIn)
			if rng.IntN(4) == 0 {
				in = 1 + rng.IntN(16)
			}
			out := rng.IntN(30)
			if rng.IntN(8) == 0 {
				out = rng.IntN(300)
			}
			ids := make([]string, (in+3)/4)
			shared := rng.IntN(len(ids) + 1)
			for i := range ids {
				if i < shared {
					ids[i] = strconv.Itoa(group*100 + i) // group g's prefix
				} else {
					ids[i] = strconv.Itoa(nextHash)
					nextHash++
				}
			}
			if turns > 1 {
				fmt.Fprintf(&b, `{"session_id": "s%d", `, s)
				if turn > 0 {
					fmt.Fprintf(&b, `"delay": %d, `, rng.IntN(50))
				} else {
					fmt.Fprintf(&b, `"timestamp": %.3f, `, at)
				}
			} else {
				fmt.Fprintf(&b, `{"timestamp": %.3f, `, at)
			}
			fmt.Fprintf(&b, `"input_length": %d, "output_length": %d, "hash_ids": [%s]}`+"\n", in, out, strings.Join(ids, ", "))
			n++
		}
	}
	return b.String(), n
}

// propLimit bounds the simulated time and the passes a case may take. Served one after another, each
// request needs at most one pass per prompt token (a chunk holds at least one) and one per output token
// (a draft burst holds at least one), each no longer than a prefill plus a decode; a preemption recomputes
// at most all of that again. The wait before a request (arrival, frontend, inter-turn delay, KV transfer)
// adds at most the trace's span and delays. Serving them all in series on one rank with four recomputes
// each is a far cry from what any case needs: a run past it is a livelock.
func (c *propCase) limit(src workload.Source) (time.Duration, int64) {
	var tokens, waits int64
	var last time.Duration
	for {
		s, err := src.Next()
		if err != nil {
			break
		}
		last = max(last, s.Turns[0].At)
		var history int64
		for i := range s.Len() {
			t := s.Turn(i)
			prompt := int64(t.InputLen)
			if t.History {
				prompt += history
			}
			history = prompt + int64(t.OutputLen)
			tokens += prompt + int64(t.OutputLen) + 2
			waits += int64(t.Delay)
		}
	}
	eo := c.o.Engine
	if c.o.PrefillWorkers > 0 {
		eo = c.o.PrefillEngine
	}
	f := eo.Timing.(timing.Fixed)
	pass := time.Duration((f.PrefillMs + max(f.DecodeMs, 1)) * float64(time.Millisecond))
	per := int64(c.requests) * int64(c.o.FrontendLatency+c.o.RouterEventDelay)
	if c.o.PrefillWorkers > 0 {
		tokens *= 2                                       // the decode worker's passes too
		per += int64(c.o.Transfer.BytesPerToken) * tokens // at 1 GB/s: one ns per byte
	}
	// A failure loses at most all the work so far, and its worker's downtime.
	for _, f := range c.o.Failures {
		tokens *= 2
		last = max(last, f.At) + f.Duration
	}
	passes := 5 * tokens
	return last + time.Duration(waits+per) + time.Duration(passes)*pass, passes
}

// checkIndex: the router's index of each of w's ranks is exactly what the rank's cache holds. A rank whose
// events reach the router at pass end is compared only between passes; with delayed events, only at the
// end (when every delayed event has been applied).
func checkIndex(r *runner, w *worker) error {
	p := w.pool
	if p == r.decode || w.state == gone || (r.o.RouterEventDelay > 0 && r.timeline.len() > 0) || (p.atEnd && w.pass != nil) {
		return nil
	}
	for rank := range w.eng.DPSize() {
		idx := r.ingress.router.AppendIndexed(router.Target{Worker: w.id, Rank: rank}, nil)
		cached := w.eng.AppendCached(rank, nil)
		slices.Sort(idx)
		slices.Sort(cached)
		if !slices.Equal(idx, cached) {
			return fmt.Errorf("rank %d: router indexes %d blocks, engine caches %d (router only %v, engine only %v)", rank,
				len(idx), len(cached), missing(idx, cached), missing(cached, idx))
		}
	}
	return nil
}

// shadowIndex returns hooks that index every GPU KV event the ingress router is handed, per target (as
// a router without mirrors would), and check, before each request is routed, that the router's overlap
// of its prompt on every target is the index's: a router reading caches in place (runner.mirror)
// credits what one indexing their events would, request by request, events at pass end and delayed
// included. A worker's failure starts its targets' index afresh (its new epoch).
func shadowIndex() (func(*pool, router.Target, uint32, time.Duration, kvcache.Event), func(*runner, []tokens.Block) error) {
	type shadow struct {
		epoch uint32
		set   map[uint64]bool
	}
	index := map[router.Target]*shadow{}
	heard := func(p *pool, t router.Target, epoch uint32, _ time.Duration, ev kvcache.Event) {
		if p.name == "decode" || ev.Medium != kvcache.GPU {
			return
		}
		sh := index[t]
		if sh == nil || sh.epoch != epoch || ev.Kind == kvcache.Cleared {
			sh = &shadow{epoch: epoch, set: map[uint64]bool{}}
			index[t] = sh
		}
		for _, b := range ev.Blocks {
			sh.set[b.Hash] = true
		}
		for _, h := range ev.Hashes {
			delete(sh.set, h)
		}
	}
	routing := func(r *runner, blocks []tokens.Block) error {
		rt := r.ingress.router
		got := slices.Clone(rt.Overlap(blocks))
		for i, t := range rt.Targets() {
			want := 0
			if sh := index[t]; sh != nil && sh.epoch == r.ingress.workers[t.Worker].epoch {
				for want < len(blocks) && sh.set[blocks[want].Hash] {
					want++
				}
			}
			if got[i] != want {
				return fmt.Errorf("router's overlap on %v is %d blocks of %d, its events' %d", t, got[i], len(blocks), want)
			}
		}
		return nil
	}
	return heard, routing
}

// missing lists (up to 5 of) the elements of sorted a not in sorted b.
func missing(a, b []uint64) []uint64 {
	var out []uint64
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok && len(out) < 5 {
			out = append(out, x)
		}
	}
	return out
}

// propRecord is what the properties read of a per-request record.
type propRecord struct {
	ID           int      `json:"id"`
	Finish       *float64 `json:"finish_ms"`
	InputTokens  int      `json:"input_tokens"`
	MaxTokens    int      `json:"max_tokens"`
	OutputTokens int      `json:"output_tokens"`
	Rejected     bool     `json:"rejected"`
	Failed       bool     `json:"failed"`
}

// runProp runs the case once with every check on, and returns its report (summary JSON, then per-request
// records).
func runProp(t *testing.T, c *propCase) []byte {
	o := c.o
	o.CheckInvariants = true
	o.limit, o.maxPasses = c.limit(c.source(t))
	o.inspect = checkIndex
	o.heard, o.routing = shadowIndex()
	var res *Result
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		res, err = Run(c.source(t), o)
		return err
	}()
	if err != nil {
		t.Fatalf("%v\n%s", err, c.describe())
	}
	var b bytes.Buffer
	if err := res.Summary.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	summary := b.Len()
	if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
		t.Fatal(err)
	}
	// One terminal record per request, and every request served asks for and gets its tokens.
	var recs []propRecord
	for dec := json.NewDecoder(bytes.NewReader(b.Bytes()[summary:])); dec.More(); {
		var rec propRecord
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	if len(recs) != c.requests {
		t.Fatalf("%d request records, want %d\n%s", len(recs), c.requests, c.describe())
	}
	done := 0
	for i, rec := range recs {
		switch {
		case rec.ID != i || rec.Finish == nil:
			t.Fatalf("record %d: %+v: want id %d, ended\n%s", i, rec, i, c.describe())
		case rec.Rejected || rec.Failed:
		case rec.OutputTokens != rec.MaxTokens:
			t.Fatalf("request %d emitted %d tokens, asked for %d\n%s", i, rec.OutputTokens, rec.MaxTokens, c.describe())
		case rec.InputTokens > c.capacity:
			t.Fatalf("request %d: a %d-token prompt served by ranks of %d tokens\n%s", i, rec.InputTokens, c.capacity, c.describe())
		default:
			done++
		}
	}
	s := res.Summary
	if s.CompletedRequests != done || s.CompletedRequests+s.RejectedRequests+s.FailedRequests != c.requests ||
		len(c.o.Failures) == 0 && s.FailedRequests+s.RetriedRequests > 0 || c.o.OnFailure == Retry && s.FailedRequests > 0 && !c.lastWorkerLost() {
		t.Fatalf("summary: %d completed, %d rejected, %d failed, %d retried; records: %d completed of %d\n%s",
			s.CompletedRequests, s.RejectedRequests, s.FailedRequests, s.RetriedRequests, done, c.requests, c.describe())
	}
	return b.Bytes()
}

// TestProperties runs random workloads on random deployments (see newPropCase) and checks that every
// request ends, completed with the tokens it asked for or rejected, within a bounded simulated time
// (propLimit); that the engines' accounting holds after every pass; that the router's index equals the
// engines' caches; and that a second run, whose routers index every KV event instead of reading prefix
// caches in place (pools or radix views), gives the same report, byte for byte. MOCKER_PROP_CASES sets the number of cases (500
// by default), MOCKER_PROP_FROM the first seed (1); a failure prints its seed, its configuration and the
// command that replays it.
func TestProperties(t *testing.T) {
	n, from := uint64(500), uint64(1)
	if s := os.Getenv("MOCKER_PROP_CASES"); s != "" {
		var err error
		if n, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MOCKER_PROP_CASES=%q: %v", s, err)
		}
	}
	if s := os.Getenv("MOCKER_PROP_FROM"); s != "" {
		var err error
		if from, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MOCKER_PROP_FROM=%q: %v", s, err)
		}
	}
	if testing.Short() {
		n = min(n, 100)
	}
	for seed := from; seed < from+n; seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			propCheck(t, seed)
		})
	}
}

func propCheck(t *testing.T, seed uint64) {
	c := newPropCase(seed)
	a := runProp(t, c)
	// The second run's routers index every KV event where the first's may read prefix caches in place
	// (pools or radix views, runner.mirror): the same report says that the two are one, and checkIndex checks the index.
	c.o.noMirror = true
	if b := runProp(t, c); !bytes.Equal(a, b) {
		t.Fatalf("same seed, different reports (the second indexing KV events, not reading prefix caches in place)\n%s", c.describe())
	}
}

// TestPropertyRegressions replays the cases that found a defect (each fixed), whatever range TestProperties
// runs.
func TestPropertyRegressions(t *testing.T) {
	for _, tc := range []struct {
		seed   uint64
		defect string
	}{
		{12, "vLLM: the Stored events of blocks completed by accepted draft tokens left with the next pass (never, after the last): the router's index missed them"},
		{18, "vLLM decode worker: an activated one-token prompt (computed 0) was admitted as a fresh request, leaking its reserved block"},
		{32, "TRT-LLM with speculative decoding: a request whose prompt and output fit the pool but not with the draft tokens was accepted and waited forever"},
		{54, "SGLang decode worker: activated transfers joined the running batch beyond max-running-requests"},
		{174, "SGLang decode worker (with worker failures): activated transfers joined the running batch beyond max-running-requests"},
		{22, "SGLang with speculative decoding: a lone running request took pages for its drafts that the pool lacked (private pages miscounted)"},
		{220, "SGLang with speculative decoding: the same, then a radix panic (extend with a free page)"},
		{466, "SGLang decode worker with one-token pages: a transfer of a prompt it cached whole shared the last page, which Activate then freed from the tree (radix panic)"},
		{60, "TRT-LLM decode worker: reservations ignored the output the running requests may still claim; they filled the pool and nothing preempts (stall)"},
		{357, "SGLang decode worker: a lone running request that could not grow waited for pages held by activated transfers waiting behind it (stall)"},
		{1489, "vLLM decode worker: a preempted request at the queue's front waited for blocks held by activated transfers behind it (stall)"},
		{252, "SGLang mixed chunk: the running request's next token found no page after the extend took them (private pages miscounted)"},
	} {
		t.Run("seed="+strconv.FormatUint(tc.seed, 10), func(t *testing.T) {
			t.Log(tc.defect)
			propCheck(t, tc.seed)
		})
	}
}

// lastWorkerLost reports whether some pool loses all its workers for good, when requests fail even with
// retries.
func (c *propCase) lastWorkerLost() bool {
	gone := map[int]bool{}
	for _, f := range c.o.Failures {
		if f.Duration == 0 {
			gone[f.Worker] = true
		}
	}
	all := func(from, n int) bool {
		for w := from; w < from+n; w++ {
			if !gone[w] {
				return false
			}
		}
		return n > 0
	}
	if c.o.PrefillWorkers > 0 {
		return all(0, c.o.PrefillWorkers) || all(c.o.PrefillWorkers, c.o.DecodeWorkers)
	}
	return all(0, c.o.Workers)
}

// TestLimitStopsARun: a run past its limit of simulated time or passes fails, naming it, rather than
// running on (how the property tests catch a livelock).
func TestLimitStopsARun(t *testing.T) {
	for _, o := range []Options{{limit: 20 * time.Millisecond}, {maxPasses: 2}} {
		o.Workers, o.Engine = 1, small()
		_, err := Run(trace(t, failTrace), o)
		if err == nil || !strings.Contains(err.Error(), "ran past its limit") {
			t.Errorf("limit %v, %d passes: %v", o.limit, o.maxPasses, err)
		}
	}
}
