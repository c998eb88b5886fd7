package report

import (
	"iter"
	"time"
)

// Lifetime is one request's times and counts as the collector holds them, for timelines. A retried
// request's are those of its last try, its arrival excepted.
type Lifetime struct {
	Arrival    time.Duration
	Admission  time.Duration // first admission; valid when Admitted
	FirstToken time.Duration // the first shown token's; valid when Shown > 0
	End        time.Duration // finish, rejection or failure; valid when one of them is set
	Worker     int           // the worker it was routed to, -1 before routing

	Admitted, Completed, Rejected, Failed bool

	InputTokens, CachedTokens, Tokens int
	Shown                             int // of Tokens, those after the reply's header (SetHeader)
	Retries                           int
	Reason                            string // why it was rejected or failed
}

// Lifetimes yields every request that arrived, in id order (with Forget, every request held).
func (c *Collector) Lifetimes() iter.Seq2[int, Lifetime] {
	return func(yield func(int, Lifetime) bool) {
		for i := range c.reqs {
			id, r := c.base+i, &c.reqs[i]
			if r.state&arrived == 0 {
				continue
			}
			l := Lifetime{Arrival: r.arrival, Admission: r.admission, FirstToken: r.firstToken, End: r.end,
				Worker: int(r.worker), Admitted: r.state&admitted != 0, Completed: r.completed(),
				Rejected: r.state&rejected != 0, Failed: r.state&failed != 0, InputTokens: int(r.inputTokens),
				CachedTokens: int(r.cachedTokens), Tokens: int(r.outputTokens), Shown: int(r.outputTokens - r.hidden), Retries: int(r.retries),
				Reason: c.reasons[id]}
			if !yield(id, l) {
				return
			}
		}
	}
}
