package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched/sglang"
)

// hourMs is a pass or transfer long enough to hold a request in its stage for the whole test.
const hourMs = 3.6e6

var backends = []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM}

// disaggBackend is a disaggregated server of backend b at speedup 1: prefill and decode workers of
// `blocks` KV blocks of 16 tokens, a 512-token chunk, prefill passes of prefillMs, decode passes of
// decodeMs, every engine's accounting checked after every pass.
func disaggBackend(b engine.Backend, prefill, decode, blocks int, prefillMs, decodeMs float64) Options {
	o := testOptions(prefillMs, decodeMs, 1)
	o.Workers = prefill
	o.CheckInvariants = true
	o.Engine.Backend = b
	o.Engine.VLLM.NumBlocks, o.Engine.VLLM.MaxBatchedTokens = blocks, 512
	o.Engine.SGLang = sglang.Options{PageSize: 16, NumPages: blocks, MaxRunning: 64, MaxPrefillTokens: 2048,
		ChunkedPrefillSize: 512, ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true}
	dr := o.Router
	dr.OverlapScoreWeight, dr.TrackPrefillTokens = 0, false
	o.Disagg = &Disagg{DecodeWorkers: decode, Router: dr, BootstrapHost: "127.0.0.1",
		Transfer: disagg.Transfer{GBps: 1, BytesPerToken: 1000, Mode: disagg.FullPrompt}} // 1 µs per token
	return o
}

// ids is n distinct token ids from base.
func ids(base, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(base + i)
	}
	return p
}

// poll waits (up to a generous deadline, the machine may be busy) until cond holds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// stageEnv drives a disaggregated server with one prefill and one decode worker request by request.
type stageEnv struct {
	t    *testing.T
	s    *Server
	url  string
	p, d *Worker
}

func newStageEnv(t *testing.T, o Options) *stageEnv {
	s, hs, _ := start(t, o)
	return &stageEnv{t: t, s: s, url: hs.URL, p: s.workers[0], d: s.decode.workers[0]}
}

func (e *stageEnv) submit(prompt []uint32, maxTokens int) *Stream {
	e.t.Helper()
	st, ae := e.s.admit(context.Background(), prompt, maxTokens)
	if ae != nil {
		e.t.Fatal(ae)
	}
	return st
}

func (e *stageEnv) stage(id uint64) (handoffState, bool) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	h := e.s.handoffs[id]
	if h == nil {
		return 0, false
	}
	return h.state, true
}

// cancel cancels st's request as a client that goes away does, and checks that its stream failed.
func (e *stageEnv) cancel(st *Stream) {
	e.t.Helper()
	e.s.cancel(st.ID)
	if _, _, done, err := st.Next(nil, nil); !done || err != errCancelled {
		e.t.Fatalf("request %d after its cancel: done %v, err %v", st.ID, done, err)
	}
	if _, ok := e.stage(st.ID); ok {
		e.t.Fatalf("request %d is still in a handoff after its cancel", st.ID)
	}
}

// holds checks the blocks each side holds (active) and the requests waiting on each.
func (e *stageEnv) holds(prefill, decode int) {
	e.t.Helper()
	pm, dm := e.p.State()[0], e.d.State()[0]
	if pm.ActiveBlocks != prefill || dm.ActiveBlocks != decode {
		e.t.Fatalf("prefill worker %+v, decode worker %+v; want %d and %d active blocks", pm, dm, prefill, decode)
	}
	if err := e.s.CheckInvariants(); err != nil {
		e.t.Fatal(err)
	}
}

// TestDisaggCancelAtEveryStage cancels disaggregated requests held at each stage on each backend: waiting
// for the prefill worker, part prefilled, in the pass that completes the prompt (the request is already
// held for its transfer when the pass is planned), reserving room on a full decode worker, transferring,
// activated on the decode worker but not yet admitted, and decoding. Each cancel frees exactly the
// request's blocks on both sides; every engine's accounting holds after every pass.
func TestDisaggCancelAtEveryStage(t *testing.T) {
	for _, b := range backends {
		t.Run(b.String()+"/prefill", func(t *testing.T) {
			// Prefill passes take an hour: the first one holds A, which it completes; B waits behind it.
			e := newStageEnv(t, disaggBackend(b, 1, 1, 200, hourMs, 1))
			a := e.submit(ids(0, 100), 10)
			poll(t, "A's prefill pass to start", func() bool { return e.p.State()[0].ActiveBlocks == 7 })
			bst := e.submit(ids(1000, 100), 10)
			poll(t, "B to wait", func() bool { return e.p.State()[0].Waiting == 1 })
			e.cancel(bst)
			e.holds(7, 0)
			e.cancel(a)
			e.holds(0, 0)
		})
		t.Run(b.String()+"/chunk", func(t *testing.T) {
			// A 2000-token prompt is cut into 512-token chunks: cancel it inside its first.
			e := newStageEnv(t, disaggBackend(b, 1, 1, 200, hourMs, 1))
			a := e.submit(ids(0, 2000), 10)
			poll(t, "A's first chunk", func() bool { return e.p.State()[0].ActiveBlocks == 32 })
			e.cancel(a)
			e.holds(0, 0)
		})
		t.Run(b.String()+"/transfer", func(t *testing.T) {
			o := disaggBackend(b, 1, 1, 200, 1, 1)
			o.Disagg.Transfer.BytesPerToken = 1 << 40 // 18 minutes per token
			e := newStageEnv(t, o)
			a := e.submit(ids(0, 100), 10)
			poll(t, "A's transfer", func() bool { s, _ := e.stage(a.ID); return s == transferring })
			e.holds(7, 7)
			e.cancel(a)
			e.holds(0, 0)
		})
		t.Run(b.String()+"/decode", func(t *testing.T) {
			// Decode passes take an hour: A, nearly filling the decode pool, decodes its first token
			// throughout; B is activated behind it and waits for the next pass; C finds no room.
			e := newStageEnv(t, disaggBackend(b, 1, 1, 200, 1, hourMs))
			a := e.submit(ids(0, 2900), 10)
			poll(t, "A to decode", func() bool { return e.d.State()[0].ActiveBlocks == 182 && e.d.InFlight() == 1 })
			bst := e.submit(ids(5000, 100), 10)
			poll(t, "B to be activated", func() bool { return e.d.InFlight() == 2 })
			e.holds(0, 189)
			e.cancel(bst)
			e.holds(0, 182)
			c := e.submit(ids(10000, 300), 10)
			poll(t, "C to wait for room", func() bool { s, _ := e.stage(c.ID); return s == reserving })
			e.holds(19, 182)
			e.cancel(c)
			e.holds(0, 182)
			e.cancel(a)
			e.holds(0, 0)
		})
	}
}

// gapSink cancels a request when its prefill worker publishes the end of its prefill (with its first
// token): after the worker has let go of it, before the server starts its handoff.
type gapSink struct {
	s    *Server
	seen chan uint64
	once sync.Once
}

func (g *gapSink) Prompt(uint64, []uint32, string)  {}
func (g *gapSink) Events(int, int, []kvcache.Event) {}
func (g *gapSink) Ended(int, uint64)                {}
func (g *gapSink) Tokens(_ int, id uint64, _ []uint32) {
	g.once.Do(func() {
		g.s.cancel(id)
		g.seen <- id
	})
}

// TestDisaggCancelAsPrefillEnds: a request cancelled between the end of its prefill and the start of its
// handoff is dropped there: its prefill KV is freed and it never reaches a decode worker.
func TestDisaggCancelAsPrefillEnds(t *testing.T) {
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			o := disaggBackend(b, 1, 1, 200, 1, hourMs)
			g := &gapSink{seen: make(chan uint64, 1)}
			o.Sinks = []Sink{g}
			e := newStageEnv(t, o)
			g.s = e.s
			a := e.submit(ids(0, 100), 10)
			if id := <-g.seen; id != a.ID {
				t.Fatalf("the sink cancelled request %d, want %d", id, a.ID)
			}
			poll(t, "A's handoff to end", func() bool { _, ok := e.stage(a.ID); return !ok })
			if _, _, done, err := a.Next(nil, nil); !done || err != errCancelled {
				t.Fatalf("A after its cancel: done %v, err %v", done, err)
			}
			e.holds(0, 0)
			if m := e.d.State()[0]; m.PrefixQueries != 0 {
				t.Fatalf("decode worker %+v: the cancelled request reached it", m)
			}
		})
	}
}

// TestDisaggAbandonedBursts: bursts of 2,000-token streams that clients abandon at every point of their
// way (waiting, prefilling, held, reserving, transferring, queued on or decoding at a decode worker),
// against two prefill and two decode workers with small pools, leave every worker with no active block
// and no request, the server with no handoff, and every engine's accounting intact after every pass.
func TestDisaggAbandonedBursts(t *testing.T) {
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			// A prompt takes four 5 ms passes to prefill and 20 ms to transfer; a pool holds three.
			o := disaggBackend(b, 2, 2, 400, 5, 5)
			o.Engine.VLLM.MaxNumSeqs, o.Engine.SGLang.MaxRunning = 2, 2
			// A prefill worker takes one prompt at a time; the others queue in the router.
			o.Router.QueueThreshold, o.Router.MaxBatchedTokens = 1, 512
			o.Disagg.Transfer.BytesPerToken = 10_000
			s, hs, _ := start(t, o)
			for burst := range 3 {
				var wg sync.WaitGroup
				for i := range 16 {
					wg.Go(func() {
						// Leave after 0 to 300 ms: the burst's prefills take about 160 ms per prefill worker.
						ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i*20)*time.Millisecond)
						defer cancel()
						base := (burst*16 + i) * 2000
						body := fmt.Sprintf(`{"model": %q, "prompt": [%s], "max_tokens": 1000, "stream": true}`, testModel, idList(base, 2000))
						req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/completions", strings.NewReader(body))
						if res, err := http.DefaultClient.Do(req); err == nil {
							io.Copy(io.Discard, res.Body)
							res.Body.Close()
						} else if !errors.Is(err, context.DeadlineExceeded) {
							t.Error(err)
						}
					})
				}
				wg.Wait()
			}
			var left string
			deadline := time.Now().Add(30 * time.Second)
			for left = remains(s); left != "" && time.Now().Before(deadline); left = remains(s) {
				time.Sleep(time.Millisecond)
			}
			if left != "" {
				t.Errorf("30 s after the last client left: %s", left)
			}
			if err := s.CheckInvariants(); err != nil {
				t.Error(err)
			}
		})
	}
}

// remains describes what a disaggregated server still holds: requests and active blocks on its workers,
// handoffs, queued requests; "" when nothing.
func remains(s *Server) string {
	var b strings.Builder
	for i, w := range s.allWorkers() {
		m := w.State()[0]
		if n := w.InFlight(); n > 0 || m.ActiveBlocks != 0 || m.Running != 0 || m.Waiting != 0 {
			fmt.Fprintf(&b, "%s: %d requests, %d running, %d waiting, %d active blocks; ", s.workerName(i), n, m.Running, m.Waiting, m.ActiveBlocks)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.handoffs) > 0 || len(s.pending) > 0 {
		fmt.Fprintf(&b, "%d handoffs, %d queued", len(s.handoffs), len(s.pending))
	}
	return b.String()
}

// idList is the JSON list of n token ids from base.
func idList(base, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, base+i)
	}
	return b.String()
}

// TestDisaggMaxWaiting: with the decode worker full, requests queue on the decode side (activated and
// waiting to be admitted, or waiting for room to reserve) until MaxWaiting of them wait; the next ones
// get 429 with Retry-After.
func TestDisaggMaxWaiting(t *testing.T) {
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) {
			// Decode passes take an hour: A decodes its first token throughout, in 182 of 200 blocks.
			o := disaggBackend(b, 1, 1, 200, 1, hourMs)
			o.MaxWaiting = 3
			e := newStageEnv(t, o)
			e.submit(ids(0, 2900), 10)
			poll(t, "A to decode", func() bool { return e.d.InFlight() == 1 })
			decodeWaiting := func() int {
				e.s.mu.Lock()
				defer e.s.mu.Unlock()
				return e.d.State()[0].Waiting + len(e.s.decode.pending[0])
			}
			refused := 0
			for i := 1; i <= 10 && refused == 0; i++ {
				st, ae := e.s.admit(context.Background(), ids(i*1000, 100), 10)
				if ae != nil {
					if ae.status != http.StatusTooManyRequests {
						t.Fatalf("request %d: %d %s, want 429", i, ae.status, ae.message)
					}
					refused = i
					break
				}
				poll(t, "the request to reach the decode side", func() bool {
					s, _ := e.stage(st.ID)
					return s == reserving || s == decoding
				})
			}
			if n := decodeWaiting(); refused == 0 || n != o.MaxWaiting {
				t.Fatalf("%d waiting on the decode side, first refusal at request %d; want %d waiting, then 429", n, refused, o.MaxWaiting)
			}
			res, err := http.Post(e.url+"/v1/completions", "application/json", strings.NewReader(`{"model": "test-model", "prompt": "hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
				t.Errorf("status %d, Retry-After %q; want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
			}
			if n := decodeWaiting(); n != o.MaxWaiting {
				t.Errorf("%d waiting on the decode side after the refusals, want %d", n, o.MaxWaiting)
			}
		})
	}
}
