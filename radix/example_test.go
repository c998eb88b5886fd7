package radix_test

import (
	"fmt"

	"github.com/mocker-sim/mocker/radix"
	"github.com/mocker-sim/mocker/tokens"
)

// A request's life in the cache, as an SGLang scheduler drives it: match and lock the cached prefix,
// allocate the rest, cache the computed pages, and release at completion, leaving its pages cached.
func Example() {
	c, _ := radix.New(radix.Options{PageSize: 4, NumPages: 8})
	run := func(prompt []uint32) {
		seq := tokens.NewSequence(c.PageSize())
		seq.Append(prompt...)
		blocks := seq.Blocks() // full pages only

		// Admission.
		table, node := c.Match(blocks, nil)
		c.Lock(node)
		locked := len(table)
		need := (seq.Len()+c.PageSize()-1)/c.PageSize() - locked
		if short := need - c.FreePages(); short > 0 {
			c.Evict(short)
		}
		table, _ = c.Alloc(need, table)
		fmt.Printf("prompt of %d tokens: %d pages cached, %d allocated\n", seq.Len(), locked, need)

		// The prompt is computed (in one chunk here) and the request finishes: cache its full pages,
		// free its duplicates of pages cached meanwhile and its partial page, and unlock.
		present := c.Insert(blocks, table[:len(blocks)])
		c.Free(table[locked:present])
		c.Free(table[len(blocks):])
		c.Unlock(node)
		fmt.Printf("finished: %d free, %d cached (%d evictable)\n", c.FreePages(), c.CachedPages(), c.EvictablePages())
	}
	run([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	run([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22, 23, 24})
	// Output:
	// prompt of 10 tokens: 0 pages cached, 3 allocated
	// finished: 6 free, 2 cached (2 evictable)
	// prompt of 13 tokens: 2 pages cached, 2 allocated
	// finished: 5 free, 3 cached (3 evictable)
}
