package radix

import (
	"slices"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/tokens"
)

// storedEvent is the Stored event of pages newly in the tree, without its parent: the pages copied, or,
// for a bare cache, counted.
func (c *Cache) storedEvent(pages []tokens.Block) kvcache.Event {
	if c.bare {
		return kvcache.Event{Kind: kvcache.Stored, Count: len(pages)}
	}
	return kvcache.Event{Kind: kvcache.Stored, Blocks: slices.Clone(pages)}
}

func (c *Cache) emit(ev kvcache.Event) {
	ev.ID = c.nextID
	c.nextID++
	c.evs = append(c.evs, ev)
}

// TakeEvents appends the events recorded since the last call to dst, in emission order, and returns it.
// The events' slices belong to the caller.
func (c *Cache) TakeEvents(dst []kvcache.Event) []kvcache.Event {
	dst = append(dst, c.evs...)
	clear(c.evs)
	c.evs = c.evs[:0]
	return dst
}
