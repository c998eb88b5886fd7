package book

import (
	"iter"
	"slices"
	"time"

	"github.com/mocker-sim/mocker/sched"
)

// Loads are the requests whose prompt prefix is being copied back to the GPU from a lower KV tier (vLLM's
// WAITING_FOR_REMOTE_KVS, SGLang's HiCache load-back), in the order they started, with when their copies
// arrive; and the engine's clock, which only prices those transfers. What a load holds (blocks, radix
// pages) stays with its scheduler.
type Loads[P comparable] struct {
	loading []load[P]
	landed  []P // Landed's result
	now     time.Duration
}

type load[P comparable] struct {
	r     P
	ready time.Duration
}

// SetNow sets the time of the next pass.
func (l *Loads[P]) SetNow(now time.Duration) { l.now = now }

// Start adds r, whose copies arrive at ready.
func (l *Loads[P]) Start(r P, ready time.Duration) { l.loading = append(l.loading, load[P]{r, ready}) }

// Len is how many requests are loading.
func (l *Loads[P]) Len() int { return len(l.loading) }

// All yields the loading requests in the order they started.
func (l *Loads[P]) All() iter.Seq[P] {
	return func(yield func(P) bool) {
		for _, x := range l.loading {
			if !yield(x.r) {
				return
			}
		}
	}
}

// Landed removes the requests whose copies have arrived by now and returns them in the order they
// started, valid until the next call.
func (l *Loads[P]) Landed() []P {
	clear(l.landed)
	l.landed = l.landed[:0]
	k := 0
	for _, x := range l.loading {
		if x.ready > l.now {
			l.loading[k] = x
			k++
			continue
		}
		l.landed = append(l.landed, x.r)
	}
	clear(l.loading[k:])
	l.loading = l.loading[:k]
	return l.landed
}

// Await makes a pass that runs nothing while loads are in flight last until the first ends.
func (l *Loads[P]) Await(p *sched.Pass) {
	if len(p.Batch.Seqs) > 0 || len(l.loading) == 0 {
		return
	}
	p.Until = l.loading[0].ready
	for _, x := range l.loading[1:] {
		p.Until = min(p.Until, x.ready)
	}
}

// Remove forgets r's load, if any (it was cancelled).
func (l *Loads[P]) Remove(r P) {
	if i := slices.IndexFunc(l.loading, func(x load[P]) bool { return x.r == r }); i >= 0 {
		l.loading = slices.Delete(l.loading, i, i+1)
	}
}
