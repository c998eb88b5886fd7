package kvcache

import "fmt"

// CheckInvariants verifies the pool's accounting by walking every block: free + active + inactive =
// capacity, the LRU list holds exactly the unreferenced cached blocks, every cached block is reachable
// from its hash, and each lower tier's LRU list and index agree within its capacity. It is O(capacity); tests call it after every pass.
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
			found := false
			prev := none
			for c := p.byHash.get(p.blocks, b.hash); c != none && !found; prev, c = c, p.blocks[c].same {
				if p.blocks[c].samePrev != prev {
					return fmt.Errorf("kvcache: block %d's previous copy is %d, want %d", c, p.blocks[c].samePrev, prev)
				}
				found = c == BlockID(id)
			}
			if !found {
				return fmt.Errorf("kvcache: cached block %d not reachable from hash %#x", id, b.hash)
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
	if p.tiers != nil {
		return p.tiers.check()
	}
	return nil
}
