package live

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mocker-sim/mocker/live/metrics"
	"github.com/mocker-sim/mocker/sched"
)

// stateCounter counts the gauge publications of every rank it records.
type stateCounter struct{ n *atomic.Int64 }

func (c stateCounter) SetState(sched.Metrics) { c.n.Add(1) }
func (stateCounter) Prompt(int, int)          {}
func (stateCounter) Generated(int)            {}
func (stateCounter) Iteration(int)            {}
func (stateCounter) QueueTime(time.Duration)  {}
func (stateCounter) FirstToken(time.Duration) {}
func (stateCounter) InterToken(time.Duration) {}
func (stateCounter) Finished(metrics.Request) {}

// A thousand idle workers cost nothing: after a request has come and gone, ten idle seconds wake no
// worker (no pass planned, no gauge republished): they wait on channels, not on tickers or polls.
func TestIdleWorkersSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(40, 10, 1)
		o.Workers = 1000
		o.Engine.VLLM.NumBlocks = 16
		var states atomic.Int64
		o.Recorder = func(int, int) Recorder { return stateCounter{&states} }
		s := startPipe(t, o)
		res, err := s.http.Post(s.url+"/v1/completions", "application/json",
			bytes.NewReader([]byte(`{"model":"`+testModel+`","prompt":"a short prompt","max_tokens":4}`)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		synctest.Wait()
		before := states.Load()
		if before < 1000 {
			t.Fatalf("%d gauge publications at start, want one per worker at least", before)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := states.Load() - before; n != 0 {
			t.Errorf("idle workers published their gauges %d times in 10 s, want 0", n)
		}
	})
}

// With MaxWaiting, every request reads how many requests wait in each worker's engine: it reads counts
// the workers keep, exact, without taking a hundred workers' locks or allocating.
func TestWaitingIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(40, 10, 1)
		o.Workers = 100
		o.MaxWaiting = 1000
		o.Engine.VLLM.NumBlocks = 16
		o.Engine.VLLM.MaxNumSeqs = 1
		s, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for range 3 {
			req := s.newRequest([]uint32{1, 2, 3}, 4, "")
			if err := s.workers[7].Submit(req, newStream(req.ID, 3, time.Now(), nil)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // worker 7 runs one request's prompt and sleeps until the pass ends
		want := 0
		for _, w := range s.workers {
			for _, m := range w.State() {
				want += m.Waiting
			}
		}
		s.mu.Lock()
		got := s.waiting()
		s.mu.Unlock()
		if got != 2 || want != 2 {
			t.Fatalf("waiting() = %d, the engines say %d; want 2", got, want)
		}
		allocs := testing.AllocsPerRun(100, func() {
			s.mu.Lock()
			s.waiting()
			s.mu.Unlock()
		})
		if allocs != 0 {
			t.Errorf("waiting() allocates %v times over 100 workers, want 0", allocs)
		}
		time.Sleep(time.Second) // all three run to their end
		synctest.Wait()
		s.mu.Lock()
		got = s.waiting()
		s.mu.Unlock()
		if got != 0 {
			t.Errorf("waiting() = %d once every request has run, want 0", got)
		}
	})
}

// A thousand idle workers are small: each holds an engine with mocker's default KV pool (55,522 blocks),
// its Prometheus series and one goroutine, and together they cost under 128 KiB of heap and stack a
// worker (about 60 KiB: a pool's index sized for its capacity made it 2 MiB), since a pool grows with
// what it holds.
func TestIdleWorkersAreSmall(t *testing.T) {
	const workers, blocks = 1000, 55522
	o := testOptions(40, 10, 1)
	o.Workers = workers
	o.Engine.VLLM.NumBlocks = blocks
	mx := metrics.New(metrics.Options{Model: testModel, MaxModelLen: 1 << 17, BlockSize: 16, NumBlocks: blocks})
	o.Recorder = func(w, r int) Recorder { return mx.Rank(w, r) }
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var s *Server
	n := startedGoroutines(t, func() error {
		var err error
		if s, err = New(o); err != nil {
			return err
		}
		return s.Start()
	})
	defer s.Close()
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc+after.StackInuse) - int64(before.HeapAlloc+before.StackInuse)
	if per := grown / workers; per > 128<<10 {
		t.Errorf("%d idle workers hold %d bytes of heap and stack each, want at most 128 KiB", workers, per)
	}
	if n != workers {
		t.Errorf("%d idle workers run %d goroutines, want one each", workers, n)
	}
}

// startLabel numbers startedGoroutines' calls, so that each labels its goroutines apart.
var startLabel atomic.Int64

// startedGoroutines runs start and counts the goroutines it started (and those they started) that still
// run: they carry a profiler label that no other goroutine has. A change in runtime.NumGoroutine would
// also count goroutines ending meanwhile, such as a previous server's workers, which Close waits for
// but which the runtime counts until the scheduler reaps them.
func startedGoroutines(t *testing.T, start func() error) int {
	t.Helper()
	value := strconv.FormatInt(startLabel.Add(1), 10)
	var err error
	pprof.Do(context.Background(), pprof.Labels("started", value), func(context.Context) { err = start() })
	if err != nil {
		t.Fatal(err)
	}
	var profile bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&profile, 1); err != nil {
		t.Fatal(err)
	}
	// The profile groups goroutines by stack and labels: "<count> @ <pcs>", then "# labels: {...}".
	label := fmt.Sprintf("%q:%q", "started", value)
	n, count := 0, 0
	for line := range strings.Lines(profile.String()) {
		if c, _, ok := strings.Cut(line, " @ "); ok {
			if count, err = strconv.Atoi(c); err != nil {
				t.Fatalf("goroutine profile line %q: %v", line, err)
			}
			continue
		}
		if strings.HasPrefix(line, "# labels: ") && strings.Contains(line, label) {
			n += count
		}
	}
	return n
}
