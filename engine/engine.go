package engine

import (
	"fmt"
	"time"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/radix"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/sglang"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

// Options configure an Engine.
type Options struct {
	Backend Backend
	DPSize  int            // data-parallel ranks, each with its own scheduler and pool; 0 means 1
	VLLM    vllm.Options   // the scheduler of every rank for VLLM and TRTLLM
	SGLang  sglang.Options // the scheduler of every rank for SGLang
	Timing  timing.Model   // prices each rank's pass
	// Seed drives the speculative-decoding draws; each rank gets its own stream.
	Seed uint64
	// Role is the worker's place in disaggregated serving (both schedulers' Role is set from it).
	Role sched.Role
	// LoRALoad is the time to load a LoRA adapter that is not resident: a pass that first uses one waits
	// for it (see vllm.Options.MaxCPULoRAs).
	LoRALoad time.Duration
	// Encoder prices and caches the vision encoding of requests with images.
	Encoder EncoderOptions
}

// scheduler is what the engine needs of one rank's scheduler.
type scheduler = sched.Scheduler

// decoder is a scheduler whose coasts may cross KV block boundaries (vLLM's): its decode passes allocate and
// commit blocks, emit KV events, and may leave requests waiting that they cannot admit
// (vllm.Scheduler.DecodePass).
type decoder interface {
	DecodePass() bool
	TakeEvents([]kvcache.Event) []kvcache.Event
}

// clocked is a scheduler that reads the time of its passes (vLLM's, for its lower KV tiers' transfers).
type clocked interface{ SetNow(time.Duration) }

// Engine is one worker. It is not safe for concurrent use.
type Engine struct {
	backend Backend
	ranks   []scheduler
	model   timing.Model
	pass    Pass
	load    time.Duration // per LoRA adapter loaded
	enc     []*encoder    // per rank, made by the first request with images
	encOpts EncoderOptions

	// Coast's scratch: the coasting ranks (their numbers, and those whose passes may allocate and commit
	// blocks) and their batches, or with plain, their plain passes.
	batches  []timing.Batch
	coasting []scheduler
	coastIDs []int
	decoders []decoder                           // per coasting rank, nil for one that coasts plain passes only
	plain    func(*timing.PlainPass) timing.Cost // the model's pricer of plain passes; nil: it has none
	plains   []timing.PlainPass

	stepPlain timing.PlainPass // cost's: a local would escape to the heap through plain
}

// RankPass is one rank's share of a pass.
type RankPass struct {
	*sched.Pass
	Rank int
	Cost timing.Cost // modelled duration of this rank's work, the vision encoder's included (in Prefill)
}

// Pass is one forward pass of the engine. It is owned by the engine and valid until the next Step.
type Pass struct {
	Start, End time.Duration
	Ranks      []RankPass // ranks that did something, in rank order
}

// Empty reports whether no rank did anything; End equals Start then.
func (p *Pass) Empty() bool { return len(p.Ranks) == 0 }

// New returns an idle engine.
func New(o Options) (*Engine, error) {
	if o.DPSize < 0 {
		return nil, fmt.Errorf("dp-size %d: must be at least 1", o.DPSize)
	}
	if int(o.Backend) >= len(Backends) {
		return nil, fmt.Errorf("engine: backend %d unknown", o.Backend)
	}
	if o.Timing == nil {
		return nil, fmt.Errorf("engine: no timing model")
	}
	if o.LoRALoad < 0 {
		return nil, fmt.Errorf("lora-load-ms %v: must not be negative", o.LoRALoad)
	}
	if o.Encoder.MsPerToken < 0 || o.Encoder.CacheTokens < 0 {
		return nil, fmt.Errorf("engine: encoder %+v: must be >= 0", o.Encoder)
	}
	e := &Engine{backend: o.Backend, model: o.Timing, load: o.LoRALoad, encOpts: o.Encoder, plain: timing.PlainPricer(o.Timing)}
	dp := max(o.DPSize, 1)
	spec := o.Backend.Spec()
	for i := range dp {
		s, err := spec.New(o, i, dp, RankSeed(o.Seed, i))
		if err != nil {
			return nil, err
		}
		e.ranks = append(e.ranks, s)
	}
	return e, nil
}

// EventsAtPassEnd reports when the engine's KV events become visible to the outside: at the end of the
// pass for SGLang (it publishes after the forward pass), at its start for vLLM (the reference's default;
// real vLLM publishes after the pass too, so drivers may choose the end instead).
func (e *Engine) EventsAtPassEnd() bool { return e.backend.Spec().EventsAtPassEnd }

// DPSize is the number of data-parallel ranks.
func (e *Engine) DPSize() int { return len(e.ranks) }

// Enqueue hands a request to its rank's scheduler. A *sched.RejectError means it can never be served.
func (e *Engine) Enqueue(r *sched.Request) error {
	if r.Rank < 0 || r.Rank >= len(e.ranks) {
		return &sched.RejectError{ID: r.ID, Reason: fmt.Sprintf("dp rank %d out of range [0,%d)", r.Rank, len(e.ranks))}
	}
	if err := e.ranks[r.Rank].Enqueue(r); err != nil {
		return err
	}
	if len(r.Images) > 0 {
		if e.enc == nil {
			e.enc = make([]*encoder, len(e.ranks))
		}
		if e.enc[r.Rank] == nil {
			e.enc[r.Rank] = newEncoder(e.encOpts)
		}
		e.enc[r.Rank].add(r)
	}
	return nil
}

// Cancel drops a request wherever it is (queued, running, held for its transfer or reserved while its KV
// arrives) and releases its KV. It reports whether the request was known.
func (e *Engine) Cancel(id uint64) bool {
	for i, s := range e.ranks {
		if s.Cancel(id) {
			if e.enc != nil && e.enc[i] != nil {
				delete(e.enc[i].reqs, id)
			}
			return true
		}
	}
	return false
}

// Release frees the KV a prefill worker kept for request id (of rank) after its transfer.
func (e *Engine) Release(rank int, id uint64) bool { return e.ranks[rank].Release(id) }

// Reserve makes room on a decode worker's rank for a request whose prompt KV is about to arrive, and
// returns how many prompt tokens that rank lacks; ok is false when it cannot hold the prompt now.
func (e *Engine) Reserve(r *sched.Request) (missing int, ok bool, err error) {
	if r.Rank < 0 || r.Rank >= len(e.ranks) {
		return 0, false, &sched.RejectError{ID: r.ID, Reason: fmt.Sprintf("dp rank %d out of range [0,%d)", r.Rank, len(e.ranks))}
	}
	return e.ranks[r.Rank].Reserve(r)
}

// Activate hands a reserved request whose KV has arrived to its rank's scheduler.
func (e *Engine) Activate(rank int, id uint64) bool { return e.ranks[rank].Activate(id) }

// Unreserve drops a reservation.
func (e *Engine) Unreserve(rank int, id uint64) bool { return e.ranks[rank].Unreserve(id) }

// Idle reports whether no rank has a request.
func (e *Engine) Idle() bool {
	for _, s := range e.ranks {
		if !s.Idle() {
			return false
		}
	}
	return true
}

// Metrics reports each rank's state, in rank order.
func (e *Engine) Metrics() []sched.Metrics {
	return e.AppendMetrics(make([]sched.Metrics, 0, len(e.ranks)))
}

// AppendMetrics appends Metrics to dst: a live worker reads them after every pass into one buffer.
func (e *Engine) AppendMetrics(dst []sched.Metrics) []sched.Metrics {
	for _, s := range e.ranks {
		dst = append(dst, s.Metrics())
	}
	return dst
}

// Waiting is the number of requests waiting on every rank: Metrics' sum, at the cost of a few lengths.
func (e *Engine) Waiting() int {
	n := 0
	for _, s := range e.ranks {
		n += s.Waiting()
	}
	return n
}

// CheckInvariants verifies every rank's block accounting and request bookkeeping.
func (e *Engine) CheckInvariants() error {
	for i, s := range e.ranks {
		if err := s.CheckInvariants(); err != nil {
			return fmt.Errorf("rank %d: %w", i, err)
		}
		if e.enc == nil || e.enc[i] == nil {
			continue
		}
		if err := e.enc[i].check(); err != nil {
			return fmt.Errorf("rank %d: %w", i, err)
		}
	}
	return nil
}

// EventPool returns rank's block pool when the rank has one that records KV events (vLLM's and
// TensorRT-LLM's schedulers), else nil (SGLang's radix cache, or events off).
func (e *Engine) EventPool(rank int) *kvcache.Pool {
	if s, ok := e.ranks[rank].(*vllm.Scheduler); ok && s.Pool().Events() {
		return s.Pool()
	}
	return nil
}

// EventView returns rank's radix cache as the consumer of its KV events sees it (radix.View) when the
// rank is SGLang's and records KV events, else nil. Call it before the rank's first pass.
func (e *Engine) EventView(rank int) *radix.View {
	if s, ok := e.ranks[rank].(*sglang.Scheduler); ok && s.Cache().Events() {
		return s.Cache().View()
	}
	return nil
}

// AppendCached appends to dst the hashes of the blocks rank's prefix cache holds (vLLM's pool or SGLang's
// radix tree), each once, and returns it: what a consumer of the rank's KV events should hold.
func (e *Engine) AppendCached(rank int, dst []uint64) []uint64 {
	return e.backend.Spec().AppendCached(e.ranks[rank], dst)
}

// Step plans and applies one forward pass starting at now. Every rank with requests steps; the pass ends
// when the slowest rank's work is done. Each rank's batch is priced knowing its group (timing.Group):
// every rank plans its share first, then each is priced.
func (e *Engine) Step(now time.Duration) *Pass {
	p := &e.pass
	p.Start, p.End = now, now
	p.Ranks = p.Ranks[:0]
	g := timing.Group{Ranks: len(e.ranks)}
	for i, s := range e.ranks {
		if s.Idle() {
			continue
		}
		if c, ok := s.(clocked); ok {
			c.SetNow(now)
		}
		sp := s.Step()
		if sp.Empty() {
			continue
		}
		if len(e.ranks) > 1 { // one rank's group is its batch (timing.Group)
			g.Add(&sp.Batch)
		}
		p.Ranks = append(p.Ranks, RankPass{Pass: sp, Rank: i})
	}
	var longest time.Duration
	for j := range p.Ranks {
		rp := &p.Ranks[j]
		rp.Batch.Group = g
		c := e.cost(&rp.Batch)
		// Loading adapters comes before the pass's compute, prefill or not: counted with the prefill.
		c.Prefill += time.Duration(rp.LoRALoads) * e.load
		if e.enc != nil && e.enc[rp.Rank] != nil {
			c.Prefill += e.enc[rp.Rank].pass(rp.Pass)
		}
		rp.Cost = c
		longest = max(longest, c.Total(), rp.Until-now)
	}
	p.End = now + longest
	return p
}

// cost prices a rank's batch; a plain decode pass (each request computes and samples its next token, none
// a prompt token: a pass that ends no coast only because a block fills or a request finishes) by the
// model's plain pricer, which gives the same bits (timing.PlainModel) for less work.
func (e *Engine) cost(b *timing.Batch) timing.Cost {
	if e.plain == nil || len(b.Seqs) == 0 {
		return e.model.Cost(b)
	}
	p := &e.stepPlain
	*p = timing.PlainPass{Requests: len(b.Seqs), Group: b.Group}
	for _, s := range b.Seqs {
		if s.New != 1 || s.Prefill || !s.Samples {
			return e.model.Cost(b)
		}
		p.Cached += s.Cached
	}
	return e.plain(p)
}

// Run is what Coast did: decode passes, back to back.
type Run struct {
	// Blocks, set by the caller before Coast, lets the coast cross KV block boundaries: a vLLM rank's
	// decode passes may allocate and commit blocks, and leave requests waiting that they cannot admit
	// (vllm.Scheduler.DecodePass); the caller then delivers their KV events from Events, and the engine's
	// state (Metrics) changes within the run. Without it, every pass is plain.
	Blocks bool

	Ends []time.Duration // each pass's end; the first started at Coast's now, each next one at the previous end
	// Samples holds, pass after pass, one token per running request: the same requests in the same order
	// in every pass, len(Samples)/len(Ends) of them.
	Samples []sched.Sample
	// Events holds the KV events of the passes, in order, and Emitted whose they are: each entry's are
	// Events from the previous entry's End (0 for the first) to its own. They are the pool's, valid until
	// the next Step.
	Events  []kvcache.Event
	Emitted []Emitted
}

// Emitted names the KV events of one rank in one pass of a Run.
type Emitted struct {
	Pass int // index in Ends: the events were emitted as the pass started
	Rank int
	End  int // index in Events past the last of them
}

// Coast runs decode passes back to back from now, as long as the next pass is one and ends before until,
// and records them in run. A plain decode pass is one in which every running request computes its next
// token and nothing else happens: nothing waits, and no block is allocated or completed (no KV event) and
// no request finishes; with data parallelism, every rank with requests is in that state, and the pass
// ends with the slowest. With run.Blocks, a vLLM rank's pass may also allocate and commit blocks as Step
// would (but preempts no one) beside waiting requests it cannot admit, and run.Events has its KV events.
// Coast is Step repeated without the per-pass work such passes do not need; a driver uses it when nobody
// observes the engine before until. An engine whose next pass is not one returns an empty run.
func (e *Engine) Coast(now, until time.Duration, run *Run) {
	run.Ends, run.Samples, run.Events, run.Emitted = run.Ends[:0], run.Samples[:0], run.Events[:0], run.Emitted[:0]
	e.coasting, e.coastIDs, e.decoders = e.coasting[:0], e.coastIDs[:0], e.decoders[:0]
	for i, s := range e.ranks {
		if s.Idle() {
			continue // stays idle: nothing arrives while coasting
		}
		e.coasting = append(e.coasting, s)
		e.coastIDs = append(e.coastIDs, i)
		d, _ := s.(decoder)
		if !run.Blocks {
			d = nil
		}
		e.decoders = append(e.decoders, d)
	}
	if len(e.coasting) == 0 {
		return
	}
	if len(e.batches) < len(e.coasting) {
		e.batches = make([]timing.Batch, len(e.ranks))
		if e.plain != nil {
			e.plains = make([]timing.PlainPass, len(e.ranks))
		}
	}
	if e.plain != nil {
		e.coastPlain(now, until, run)
		return
	}
	for {
		g := timing.Group{Ranks: len(e.ranks)}
		for i, c := range e.coasting {
			if !e.decodes(i) {
				return
			}
			c.PlainBatch(&e.batches[i])
			if len(e.ranks) > 1 {
				g.Add(&e.batches[i])
			}
		}
		var longest time.Duration
		for i := range e.coasting {
			b := &e.batches[i]
			b.Group = g
			longest = max(longest, e.model.Cost(b).Total())
		}
		var ok bool
		if now, ok = e.coastStep(now+longest, until, run); !ok {
			return
		}
	}
}

// decodes reports whether coasting rank i's next pass is one Coast may make.
func (e *Engine) decodes(i int) bool {
	if d := e.decoders[i]; d != nil {
		return d.DecodePass()
	}
	return e.coasting[i].PlainDecode()
}

// coastPlain is Coast with a model that prices plain passes from their counts (timing.PlainModel): a
// coasting rank's batch is read once, and from pass to pass its requests' contexts grow by one token
// each, which is all that changes.
func (e *Engine) coastPlain(now, until time.Duration, run *Run) {
	g := timing.Group{Ranks: len(e.ranks)}
	for i, c := range e.coasting {
		if !e.decodes(i) {
			return
		}
		b := &e.batches[i]
		c.PlainBatch(b)
		p := &e.plains[i]
		*p = timing.PlainPass{Requests: len(b.Seqs)}
		for _, s := range b.Seqs {
			p.Cached += s.Cached
		}
		if len(e.ranks) > 1 {
			g.Tokens += p.Requests
			g.MaxTokens = max(g.MaxTokens, p.Requests)
		}
	}
	plains := e.plains[:len(e.coasting)]
	for i := range plains {
		plains[i].Group = g
	}
	for pass := 0; ; pass++ {
		if pass > 0 {
			for i := range e.coasting {
				if !e.decodes(i) {
					return
				}
				plains[i].Cached += plains[i].Requests
			}
		}
		var longest time.Duration
		for i := range plains {
			longest = max(longest, e.plain(&plains[i]).Total())
		}
		var ok bool
		if now, ok = e.coastStep(now+longest, until, run); !ok {
			return
		}
	}
}

// coastStep ends a coasting pass at end unless that is at or past until (the caller's next event): every
// coasting rank steps and the run records the pass. It reports whether the pass was made.
func (e *Engine) coastStep(end, until time.Duration, run *Run) (time.Duration, bool) {
	if end >= until {
		return end, false
	}
	for i, c := range e.coasting {
		run.Samples = c.PlainStep(run.Samples)
		if d := e.decoders[i]; d != nil {
			n := len(run.Events)
			if run.Events = d.TakeEvents(run.Events); len(run.Events) > n {
				run.Emitted = append(run.Emitted, Emitted{Pass: len(run.Ends), Rank: e.coastIDs[i], End: len(run.Events)})
			}
		}
	}
	run.Ends = append(run.Ends, end)
	return end, true
}

// RankSeed derives the seed of one stream (a rank, a worker) from a base seed, so streams differ and a new
// rank or worker shifts nobody else's draws.
func RankSeed(base uint64, i int) uint64 {
	x := base + uint64(i+1)*0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
