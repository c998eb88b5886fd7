package router_test

import (
	"fmt"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/router"
	"github.com/mocker-sim/mocker/tokens"
)

// A request's life in the KV router: the worker holding its prefix wins, its load counts until it ends.
func Example() {
	o := router.DefaultOptions()
	o.BlockSize = 4
	r, err := router.New(o)
	if err != nil {
		panic(err)
	}
	a, b := router.Target{Worker: 0}, router.Target{Worker: 1}
	r.AddTarget(a)
	r.AddTarget(b)

	system := tokens.NewSequence(4)
	system.Append(1, 2, 3, 4, 5, 6, 7, 8)
	// Worker 1 computed the system prompt earlier and announced it.
	r.Apply(b, kvcache.Event{Kind: kvcache.Stored, Blocks: system.Blocks()})

	prompt := tokens.NewSequence(4)
	prompt.Append(1, 2, 3, 4, 5, 6, 7, 8, 42, 43)
	d, queued := r.Route(router.Request{ID: 1, Blocks: prompt.Blocks(), PromptTokens: prompt.Len()})
	fmt.Println(d.Target, d.Overlap, queued, r.Load(b))

	r.PrefillDone(1) // first token out
	r.Finished(1)    // last token out
	fmt.Println(r.Load(b))
	// Output:
	// 1/0 2 false {1 2 3}
	// {0 0 0}
}
