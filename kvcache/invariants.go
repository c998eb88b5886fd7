package kvcache

import "fmt"

// CheckInvariants verifies the pool's accounting by walking every block: free + active + inactive =
// capacity, the LRU list holds exactly the unreferenced cached blocks, every cached block is linked among
// its hash's copies and every first copy into a run that the index finds, and each lower tier's LRU list
// and index agree within its capacity. It is O(capacity); tests call it after every pass.
func (p *Pool) CheckInvariants() error {
	if f, a, i := p.Free(), p.Active(), p.Inactive(); f < 0 || a < 0 || i < 0 || f+a+i != p.capacity {
		return fmt.Errorf("kvcache: free %d + active %d + inactive %d != capacity %d", f, a, i, p.capacity)
	}
	var nPrivate, nCached, nUnref int
	for id := range p.blocks {
		b := &p.blocks[id]
		switch b.state {
		case private:
			nPrivate++
			if b.refs != 1 {
				return fmt.Errorf("kvcache: private block %d has %d refs", id, b.refs)
			}
		case cached:
			nCached++
			if b.refs < 0 {
				return fmt.Errorf("kvcache: block %d has %d refs", id, b.refs)
			}
			if b.refs == 0 {
				nUnref++
			}
			if err := p.checkCopy(BlockID(id)); err != nil {
				return err
			}
		}
	}
	if nPrivate+nCached != p.used {
		return fmt.Errorf("kvcache: %d private + %d cached blocks, accounted %d used", nPrivate, nCached, p.used)
	}
	if len(p.blocks)-p.used != len(p.freeList) {
		return fmt.Errorf("kvcache: %d touched blocks, %d used, but %d on the free list", len(p.blocks), p.used, len(p.freeList))
	}
	n := 0
	for i, id := range p.lru[p.lruHead:] {
		if id == none {
			continue
		}
		if b := &p.blocks[id]; b.state != cached || b.refs != 0 || int(b.pos) != p.lruHead+i {
			return fmt.Errorf("kvcache: LRU block %d in state %d with %d refs at %d, recorded at %d", id, b.state, b.refs, p.lruHead+i, b.pos)
		}
		n++
	}
	if n != p.inactive || nUnref != p.inactive {
		return fmt.Errorf("kvcache: LRU list has %d blocks, %d unreferenced cached, inactive count %d", n, nUnref, p.inactive)
	}
	if err := p.checkRuns(); err != nil {
		return err
	}
	if p.tiers != nil {
		return p.tiers.check()
	}
	return nil
}

// checkCopy verifies a cached block's links: its copies' chain runs both ways through copies of its hash
// (Match hands out any of them as that hash), a later copy is in no run, and a first copy's run
// neighbours link back to it and are first copies, or it starts a run and the index names it.
func (p *Pool) checkCopy(id BlockID) error {
	b := &p.blocks[id]
	if c := b.same; c != none && (!p.blocks[c].later || p.blocks[c].prev != id || p.blocks[c].hash != b.hash) {
		return fmt.Errorf("kvcache: block %d (hash %#x)'s next copy %d (later %v, hash %#x) has previous copy %d", id, b.hash, c, p.blocks[c].later, p.blocks[c].hash, p.blocks[c].prev)
	}
	if b.later {
		if q := &p.blocks[b.prev]; q.state != cached || q.same != id || q.hash != b.hash {
			return fmt.Errorf("kvcache: block %d (hash %#x)'s previous copy %d (state %d, hash %#x) has next copy %d", id, b.hash, b.prev, q.state, q.hash, q.same)
		}
		if b.next != none {
			return fmt.Errorf("kvcache: later copy %d is in a run, before %d", id, b.next)
		}
		return nil
	}
	if b.prev == none {
		if got := p.byHash.get(p.blocks, b.hash); got != id {
			return fmt.Errorf("kvcache: block %d starts a run, but the index names %d for hash %#x", id, got, b.hash)
		}
	} else if q := &p.blocks[b.prev]; q.state != cached || q.later || q.next != id {
		return fmt.Errorf("kvcache: block %d follows %d (state %d, later copy %v), which is followed by %d", id, b.prev, q.state, q.later, q.next)
	}
	if b.next != none && p.blocks[b.next].prev != id {
		return fmt.Errorf("kvcache: block %d is followed by %d, which follows %d", id, b.next, p.blocks[b.next].prev)
	}
	return nil
}

// checkRuns verifies that the runs from the index's blocks hold every first copy, once, and that the
// index holds nothing else.
func (p *Pool) checkRuns() error {
	firsts, starts := 0, 0
	for id := range p.blocks {
		if b := &p.blocks[id]; b.state == cached && !b.later {
			firsts++
			if b.prev == none {
				starts++
			}
		}
	}
	if firsts != p.distinct {
		return fmt.Errorf("kvcache: %d first copies, %d distinct hashes counted", firsts, p.distinct)
	}
	if starts != p.byHash.len() {
		return fmt.Errorf("kvcache: %d runs, %d index entries", starts, p.byHash.len())
	}
	inRuns := 0
	for _, s := range p.byHash.slots {
		for id := s.id; id != none && inRuns <= firsts; id = p.blocks[id].next {
			inRuns++
		}
	}
	if inRuns != firsts {
		return fmt.Errorf("kvcache: the runs hold %d blocks (more: a cycle), %d first copies", inRuns, firsts)
	}
	return nil
}
