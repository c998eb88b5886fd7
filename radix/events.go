package radix

import "github.com/mocker-sim/mocker/kvcache"

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
