package sim

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// runHasher is a passHasher that is also shown coasted passes, as runs.
type runHasher struct{ passHasher }

func (p *runHasher) Coasted(c *ObservedRun) {
	fmt.Fprintf(p.h, "coasted %s %d %d %v %d %+v\n", c.Pool, c.Worker, c.Start, c.Ends, c.Tokens, c.Metrics)
}

// threadsRun is what TestThreadsChangeNothing compares of one run.
type threadsRun struct {
	report   []byte
	observed []byte // the observer's digest, if there was one
	calls    []byte // Progress and Finished calls, in order
	err      error
	end      time.Duration
	passes   int64
	ahead    int64
	coasted  int64
	laned    int64
}

// TestThreadsChangeNothing runs TestProperties' random cases with one thread and with four: the reports,
// per-request records, run ends and pass counts are byte-identical, and so are, for a third of the cases
// each, what an observer is shown pass by pass (each batch's Group too) or with coasted runs, and the
// order of the Progress and Finished callbacks (which stop some runs early). A quarter run with invariant
// checks (no coasting). A run leaves no goroutine behind, stopped early or not. It fails if no case ran a
// window on lanes. The one-thread run's routers index KV events, the four threads' read prefix caches in
// place (pools or radix views) where they may (runner.mirror). MOCKER_THREADS_CASES sets the number of cases (300).
func TestThreadsChangeNothing(t *testing.T) {
	n := uint64(300)
	if s := os.Getenv("MOCKER_THREADS_CASES"); s != "" {
		var err error
		if n, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("MOCKER_THREADS_CASES=%q: %v", s, err)
		}
	}
	if testing.Short() {
		n = min(n, 60)
	}
	var laned, cases int64
	for seed := uint64(1); seed <= n; seed++ {
		c := newPropCase(seed)
		c.o.noMirror = true // one thread indexing KV events, four reading prefix caches in place (pools or radix views)
		one := threadsCase(t, c, 1)
		c.o.noMirror = false
		four := threadsCase(t, c, 4)
		if one.laned != 0 {
			t.Fatalf("seed %d: %d stretches on lanes with one thread", seed, one.laned)
		}
		if four.laned > 0 {
			cases++
		}
		laned += four.laned
		one.laned = four.laned
		if fmt.Sprint(one.err) != fmt.Sprint(four.err) || !bytes.Equal(one.report, four.report) || !bytes.Equal(one.observed, four.observed) ||
			!bytes.Equal(one.calls, four.calls) || one.end != four.end || one.passes != four.passes || one.ahead != four.ahead || one.coasted != four.coasted {
			t.Fatalf("seed %d: one thread and four differ: error %v / %v, end %v / %v, passes %d / %d, ahead %d / %d, coasted %d / %d\nreports:\n%.3000s\n---\n%.3000s\n%s",
				seed, one.err, four.err, one.end, four.end, one.passes, four.passes, one.ahead, four.ahead, one.coasted, four.coasted,
				one.report, four.report, c.describe())
		}
	}
	t.Logf("%d of %d cases ran %d stretches on lanes", cases, n, laned)
	if laned == 0 {
		t.Fatal("no case ran workers on lanes: the test covers nothing")
	}
}

func threadsCase(t *testing.T, c *propCase, threads int) threadsRun {
	o := c.o
	o.Threads = threads
	o.limit, o.maxPasses = c.limit(c.source(t))
	o.CheckInvariants = c.seed%4 == 0
	var ph *passHasher
	switch c.seed % 3 {
	case 1:
		ph = &passHasher{h: sha256.New(), group: true}
		o.Observer = ph
	case 2:
		rh := &runHasher{passHasher{h: sha256.New(), group: true}}
		ph, o.Observer = &rh.passHasher, rh
	}
	var calls bytes.Buffer
	stopAt := -1
	if c.seed%5 == 0 {
		stopAt = int(c.seed/5) % max(c.requests, 1) // some runs stop early, at different completions
	}
	o.Progress = func(ended int) { fmt.Fprintf(&calls, "ended %d\n", ended) }
	finished := 0
	o.Finished = func(ttft, e2e time.Duration, first bool) bool {
		fmt.Fprintf(&calls, "finished %v %v %v\n", ttft, e2e, first)
		finished++
		return finished != stopAt
	}
	goroutines := runtime.NumGoroutine()
	res, err := Run(c.source(t), o)
	// A helper that has signalled its WaitGroup may still be on its way out: give it time to go. One of
	// the previous run's may have been counted before this run and gone since, so fewer is no leak.
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(30 * time.Second); n > goroutines && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(time.Millisecond)
	}
	if n > goroutines {
		t.Fatalf("seed %d, %d threads: %d goroutines before the run, %d after (err %v)", c.seed, threads, goroutines, n, err)
	}
	out := threadsRun{err: err, calls: calls.Bytes()}
	if ph != nil {
		out.observed = ph.h.Sum(nil)
	}
	if err != nil {
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("seed %d, %d threads: %v\n%s", c.seed, threads, err, c.describe())
		}
		return out
	}
	out.report = reportBytes(t, res)
	out.end, out.passes, out.ahead, out.coasted, out.laned = res.End, res.Passes, res.ahead, res.coasted, res.laned
	return out
}
