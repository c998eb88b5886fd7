package live

import (
	"sync"
	"time"
)

// watchSweep is how often a watchList looks for exchanges that have waited watchDelay: an exchange is
// watched after watchDelay to watchDelay + watchSweep.
const watchSweep = watchDelay / 2

// watchList holds an APIServer's waiting exchanges until they have waited watchDelay, then starts their
// watches: one timer for all of them, armed only while some wait, instead of one a request (most
// requests at a high speedup are answered long before, and a timer's arming and stopping cost a request
// more than its place in the list).
type watchList struct {
	mu    sync.Mutex
	xs    []*fastExchange // waiting; each knows its place (slot)
	sweep uint64          // sweeps so far
	timer *time.Timer     // the next sweep; armed while xs is not empty
}

// add lists x, unless it is listed.
func (l *watchList) add(x *fastExchange) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if x.slot != 0 {
		return
	}
	l.xs = append(l.xs, x)
	x.slot, x.since = len(l.xs), l.sweep
	if len(l.xs) > 1 {
		return
	}
	if l.timer == nil {
		l.timer = time.AfterFunc(watchSweep, l.sweepNow)
	} else {
		l.timer.Reset(watchSweep)
	}
}

// remove takes x off the list, if it is on it.
func (l *watchList) remove(x *fastExchange) {
	l.mu.Lock()
	l.unlist(x)
	l.mu.Unlock()
}

// unlist takes x off the list, if it is on it; l.mu is held.
func (l *watchList) unlist(x *fastExchange) {
	if x.slot == 0 {
		return
	}
	i, last := x.slot-1, len(l.xs)-1
	l.xs[i] = l.xs[last]
	l.xs[i].slot = i + 1
	l.xs[last] = nil
	l.xs = l.xs[:last]
	x.slot = 0
}

// sweepNow starts the watches of the exchanges listed before the sweep watchDelay/watchSweep sweeps
// ago (they have waited at least watchDelay), each on a goroutine of its own, and arms the next sweep while any are left.
func (l *watchList) sweepNow() {
	l.mu.Lock()
	l.sweep++
	var due []*fastExchange
	for i := 0; i < len(l.xs); {
		if x := l.xs[i]; l.sweep-x.since > uint64(watchDelay/watchSweep) {
			due = append(due, x)
			l.unlist(x) // moves the last into i
			continue
		}
		i++
	}
	if len(l.xs) > 0 {
		l.timer.Reset(watchSweep)
	}
	l.mu.Unlock()
	for _, x := range due {
		go x.watch()
	}
}
