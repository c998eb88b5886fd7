package live

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/router"
)

// lifecycleShapes are the server shapes whose goroutines Start starts and Close must stop: aggregated
// workers (with a router event delay, so events wait on a timer), disaggregated ones whose KV transfers
// take a minute (so Close finds them in flight), and a fleet frontend (its pinger and subscriptions).
func lifecycleShapes(t *testing.T) map[string]Options {
	agg := testOptions(5, 1, 1)
	agg.Workers = 2
	agg.RouterEventDelay = time.Hour
	dis := disaggBackend(0, 1, 1, 1024, 5, 1)
	dis.Disagg.Transfer = disagg.Transfer{GBps: 1e-9, BytesPerToken: 1}
	fl := testOptions(5, 1, 1)
	fl.Workers, fl.Fleet = 0, &FleetOptions{Conn: fleetConn(t, embeddedNATS(t, 0))}
	return map[string]Options{"aggregated": agg, "disaggregated": dis, "fleet": fl}
}

// noLeaks fails t if goroutines beyond ignore are still running after 30 s: goleak's own retries give a
// goroutine that has signalled it is done well under a second to exit, too little on a busy machine.
func noLeaks(t *testing.T, ignore goleak.Option) {
	t.Helper()
	err := goleak.Find(ignore)
	for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); err = goleak.Find(ignore) {
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Error(err)
	}
}

// New starts nothing (no goroutine, no listener); Close without Start returns at once.
func TestNewStartsNothing(t *testing.T) {
	for name, o := range lifecycleShapes(t) {
		t.Run(name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := goleak.Find(ignore); err != nil {
				t.Errorf("New started goroutines: %v", err)
			}
			if a := s.BootstrapAddrs(); len(a) != 0 {
				t.Errorf("New listens on %v, want no bootstrap listener before Start", a)
			}
			s.Close()
			if err := s.Start(); err == nil {
				t.Error("Start after Close succeeded, want an error")
			}
			noLeaks(t, ignore)
		})
	}
}

// Close stops every goroutine Start started, with requests running, KV transfers in flight and KV
// events waiting for the router.
func TestCloseStopsEverything(t *testing.T) {
	for name, o := range lifecycleShapes(t) {
		t.Run(name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			s, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err == nil {
				t.Error("a second Start succeeded, want an error")
			}
			var streams []*Stream
			for i := range 4 {
				if o.Fleet != nil {
					break // no workers to run them
				}
				st, ae := s.admit(context.Background(), ids(100*i, 40), 1000)
				if ae != nil {
					t.Fatal(ae)
				}
				streams = append(streams, st)
			}
			if o.Disagg != nil {
				poll(t, "every request's KV transfer in flight", func() bool {
					s.mu.Lock()
					defer s.mu.Unlock()
					n := 0
					for _, h := range s.handoffs {
						if h.state == transferring {
							n++
						}
					}
					return n == len(streams)
				})
			}
			s.Close()
			want := errClosed
			if o.Disagg != nil {
				want = errTransfer // its transfer was cut short
			}
			for i, st := range streams {
				if _, _, _, err := st.Next(nil, nil); err != want {
					t.Errorf("request %d after Close: %v, want %v", i, err, want)
				}
			}
			noLeaks(t, ignore)
		})
	}
}

// indexed is the number of blocks the router has indexed for worker 0's rank 0.
func (s *Server) indexed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.router.Indexed(router.Target{})
}

// eventCounter counts the KV events a sink sees.
type eventCounter struct{ n atomic.Int64 }

func (c *eventCounter) Prompt(uint64, []uint32, string)      {}
func (c *eventCounter) Events(_, _ int, evs []kvcache.Event) { c.n.Add(int64(len(evs))) }
func (c *eventCounter) Tokens(int, uint64, []uint32)         {}
func (c *eventCounter) Ended(int, uint64)                    {}

// The router sees a vLLM worker's KV events when its pass starts, RouterEventDelay later, or, with
// EventsAtPassEnd, when the pass ends (so do the sinks): a prompt of 64 tokens (4 blocks of 16) and its
// one token take a pass of 50 ms (fixed timing: 40 ms of prefill, 10 of decode).
func TestRouterEventTiming(t *testing.T) {
	for _, tc := range []struct {
		name          string
		delay         time.Duration
		atEnd         bool
		seen          time.Duration // when the router has the prompt's blocks
		sinkAt0, sink int64         // events the sink has at once, and at the end
	}{
		{"at pass start", 0, false, 0, 1, 1},
		{"delayed", 100 * time.Millisecond, false, 100 * time.Millisecond, 1, 1},
		{"at pass end", 0, true, 50 * time.Millisecond, 0, 1},
		{"at pass end, delayed", 100 * time.Millisecond, true, 150 * time.Millisecond, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := testOptions(40, 10, 1)
				o.RouterEventDelay, o.EventsAtPassEnd = tc.delay, tc.atEnd
				sink := &eventCounter{}
				o.Sinks = []Sink{sink}
				s, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Start(); err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				t0 := time.Now()
				if _, ae := s.admit(context.Background(), ids(0, 64), 1); ae != nil {
					t.Fatal(ae)
				}
				synctest.Wait()
				if n := sink.n.Load(); n != tc.sinkAt0 {
					t.Errorf("the sink has %d events when the pass starts, want %d", n, tc.sinkAt0)
				}
				if tc.seen > 0 {
					time.Sleep(tc.seen - time.Millisecond)
					synctest.Wait()
					if n := s.indexed(); n != 0 {
						t.Errorf("the router has %d blocks at %v, want 0 before %v", n, time.Since(t0), tc.seen)
					}
					time.Sleep(time.Millisecond)
					synctest.Wait()
				}
				if n := s.indexed(); n != 4 {
					t.Errorf("the router has %d blocks at %v, want 4", n, time.Since(t0))
				}
				if n := sink.n.Load(); n != tc.sink {
					t.Errorf("the sink has %d events, want %d", n, tc.sink)
				}
			})
		})
	}
}
