package kvcache

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/mocker-sim/mocker/tokens"
)

// Medium is where a cached block resides: the pool itself (GPU) or one of its lower tiers, as vLLM's KV
// events name it (BlockStored/BlockRemoved medium) and Dynamo's event plane (storage_tier).
type Medium uint8

const (
	GPU  Medium = iota // the pool's own blocks, in device memory
	CPU                // the first lower tier, in host memory
	Disk               // the second lower tier, below the CPU one
)

func (m Medium) String() string {
	switch m {
	case GPU:
		return "GPU"
	case CPU:
		return "CPU"
	case Disk:
		return "DISK"
	}
	return "unknown"
}

// TierOptions configure a pool's lower tiers (vLLM's native CPU offloading, LMCache, Dynamo's KVBM G2/G3).
// A block whose last GPU copy is evicted is written to the CPU tier; one evicted from the CPU tier is
// written to the disk tier, if any, else dropped. Each tier is LRU. A prefix found below the GPU is
// onboarded: copied back over the links, the disk's blocks through host memory.
type TierOptions struct {
	CPUBlocks  int // 0: no lower tier
	DiskBlocks int // needs a CPU tier
	// Link speeds in GB/s (1e9 bytes per second): GPU↔CPU (PCIe) and CPU↔disk.
	CPUBandwidth  float64
	DiskBandwidth float64
	BlockBytes    int64 // KV bytes of one block, as one GPU holds it
}

// Enabled reports whether the pool has a lower tier.
func (o TierOptions) Enabled() bool { return o.CPUBlocks > 0 || o.DiskBlocks > 0 }

// Validate reports the first invalid option, naming its flag.
func (o TierOptions) Validate() error {
	switch {
	case o.CPUBlocks < 0:
		return fmt.Errorf("num-cpu-blocks %d: must not be negative", o.CPUBlocks)
	case o.DiskBlocks < 0:
		return fmt.Errorf("num-disk-blocks %d: must not be negative", o.DiskBlocks)
	case o.DiskBlocks > 0 && o.CPUBlocks == 0:
		return fmt.Errorf("num-disk-blocks %d: needs a CPU tier (num-cpu-blocks > 0), which disk blocks pass through", o.DiskBlocks)
	case !o.Enabled():
		return nil
	case !(o.CPUBandwidth > 0) || math.IsInf(o.CPUBandwidth, 0):
		return fmt.Errorf("cpu-bandwidth-gbps %v: must be a positive number", o.CPUBandwidth)
	case o.DiskBlocks > 0 && (!(o.DiskBandwidth > 0) || math.IsInf(o.DiskBandwidth, 0)):
		return fmt.Errorf("disk-bandwidth-gbps %v: must be a positive number", o.DiskBandwidth)
	case o.BlockBytes < 1:
		return fmt.Errorf("kvcache: %d KV bytes per block with a lower tier: the model's KV size is needed to price its transfers", o.BlockBytes)
	}
	return nil
}

// TierStats count what the lower tiers did, and what they hold.
type TierStats struct {
	CPUHits, DiskHits int64         // blocks onboarded from each tier
	Offloaded         int64         // blocks written from the GPU to the CPU tier
	OnboardTime       time.Duration // Σ over onboardings of the wait from its start to its last block's arrival
	CPUUsed, DiskUsed int           // blocks each tier holds now
}

// tiers is a pool's CPU and disk tiers and the links between them.
type tiers struct {
	cpu, disk lru
	up, down  link // GPU↔CPU and CPU↔disk
	now       time.Duration
	stats     TierStats
	stored    []tokens.Block // the current event's blocks, reused
	spill     []uint64       // hashes evicted from the CPU tier by the current offload
	held      []bool         // write's scratch
}

// link is a shared transfer path: transfers queue behind each other in issue order, whichever way they go
// (write-backs included), so a write-back delays an onboarding only when the link is busy.
type link struct {
	perBlock time.Duration
	busy     time.Duration // when the last queued transfer ends
}

// reserve queues n blocks at now and returns when they have all crossed.
func (l *link) reserve(now time.Duration, n int) time.Duration {
	l.busy = max(l.busy, now) + time.Duration(n)*l.perBlock
	return l.busy
}

func perBlock(bytes int64, gbps float64) time.Duration {
	if gbps <= 0 {
		return 0
	}
	return time.Duration(math.Round(float64(bytes) / gbps)) // bytes / (GB/s) = ns
}

func newTiers(o TierOptions) *tiers {
	return &tiers{
		cpu:  newLRU(o.CPUBlocks),
		disk: newLRU(o.DiskBlocks),
		up:   link{perBlock: perBlock(o.BlockBytes, o.CPUBandwidth)},
		down: link{perBlock: perBlock(o.BlockBytes, o.DiskBandwidth)},
	}
}

// SetNow sets the time of the transfers the pool starts next (its lower tiers' clock).
func (p *Pool) SetNow(now time.Duration) {
	if p.tiers != nil {
		p.tiers.now = now
	}
}

// Tiered reports whether the pool has a lower tier.
func (p *Pool) Tiered() bool { return p.tiers != nil }

// TierStats reports what the lower tiers did so far (zero without them).
func (p *Pool) TierStats() TierStats {
	if p.tiers == nil {
		return TierStats{}
	}
	st := p.tiers.stats
	st.CPUUsed, st.DiskUsed = p.tiers.cpu.len(), p.tiers.disk.len()
	return st
}

// TierLen is the number of blocks medium holds (GPU: the cached ones, once per hash).
func (p *Pool) TierLen(m Medium) int {
	switch {
	case m == GPU:
		return p.distinct
	case p.tiers == nil:
		return 0
	case m == CPU:
		return p.tiers.cpu.len()
	}
	return p.tiers.disk.len()
}

// MatchLower counts the leading blocks of blocks (those following a request's GPU hits) that a lower
// tier holds.
func (p *Pool) MatchLower(blocks []tokens.Block) int {
	if p.tiers == nil {
		return 0
	}
	return p.tiers.match(blocks)
}

// Onboard starts copying blocks, which MatchLower found below the GPU, back to the GPU, and returns when
// the last arrives. The disk's blocks cross the disk link, then all cross the GPU link. Each block becomes
// its tier's most recently used.
func (p *Pool) Onboard(blocks []tokens.Block) time.Duration { return p.tiers.onboard(blocks) }

// offload writes the hashes whose last GPU copy was just evicted to the lower tiers.
func (p *Pool) offload(hashes []uint64) { p.tiers.offload(hashes, p.tierEvent) }

func (t *tiers) match(blocks []tokens.Block) int {
	for i, b := range blocks {
		if !t.cpu.has(b.Hash) && !t.disk.has(b.Hash) {
			return i
		}
	}
	return len(blocks)
}

func (t *tiers) onboard(blocks []tokens.Block) time.Duration {
	var cpu, disk int
	for _, b := range blocks {
		switch {
		case t.cpu.touch(b.Hash):
			cpu++
		case t.disk.touch(b.Hash):
			disk++
		default:
			panic(fmt.Sprintf("kvcache: onboard of block %#x held by no lower tier", b.Hash))
		}
	}
	staged := t.now
	if disk > 0 {
		staged = t.down.reserve(t.now, disk)
	}
	ready := max(t.up.reserve(t.now, cpu+disk), staged)
	t.stats.CPUHits += int64(cpu)
	t.stats.DiskHits += int64(disk)
	t.stats.OnboardTime += ready - t.now
	return ready
}

// tierEmit announces a lower tier's change: its Stored blocks or its Removed hashes, in buffers the
// tiers reuse.
type tierEmit func(m Medium, k EventKind, blocks []tokens.Block, hashes []uint64)

// offload writes hashes, whose last GPU copy was just evicted, to the CPU tier (a hash it holds already
// only becomes its most recent), spilling its LRU blocks to the disk tier, and announces each tier's
// changes.
func (t *tiers) offload(hashes []uint64, emit tierEmit) {
	t.stored, t.spill = t.write(&t.cpu, hashes, t.stored[:0], t.spill[:0])
	if len(t.stored) == 0 {
		return
	}
	t.up.reserve(t.now, len(t.stored))
	t.stats.Offloaded += int64(len(t.stored))
	emit(CPU, Stored, t.stored, nil)
	if len(t.spill) == 0 {
		return
	}
	// The CPU tier's evictions: gone from it, and written below if there is a disk.
	emit(CPU, Removed, nil, t.spill)
	if t.disk.capacity == 0 {
		return
	}
	var dropped []uint64
	t.stored, dropped = t.write(&t.disk, t.spill, t.stored[:0], nil)
	if len(t.stored) > 0 {
		t.down.reserve(t.now, len(t.stored))
		emit(Disk, Stored, t.stored, nil)
	}
	if len(dropped) > 0 {
		emit(Disk, Removed, nil, dropped)
	}
}

// write makes hashes l's most recent blocks and returns stored and evicted with the ones l did not hold
// and the ones it pushed out appended. The ones it holds are touched first, so that writing the others
// never evicts one of them only to write it again; a hash written and evicted by the same call is in
// both, and its Stored event precedes its Removed one.
func (t *tiers) write(l *lru, hashes []uint64, stored []tokens.Block, evicted []uint64) ([]tokens.Block, []uint64) {
	t.held = slices.Grow(t.held[:0], len(hashes))
	for _, h := range hashes {
		t.held = append(t.held, l.touch(h))
	}
	for i, h := range hashes {
		if t.held[i] {
			continue
		}
		if old, ok := l.push(h); ok {
			evicted = append(evicted, old)
		}
		stored = append(stored, tokens.Block{Hash: h})
	}
	return stored, evicted
}

// tierEvent records a lower tier's event, as vLLM's offloading connector announces it: blocks without a
// parent (they are written in eviction order, not as a chain).
func (p *Pool) tierEvent(m Medium, k EventKind, blocks []tokens.Block, hashes []uint64) {
	if !p.events {
		return
	}
	ev := Event{Kind: k, Medium: m}
	if len(blocks) > 0 {
		// The event outlives the buffers: keep them in the pass's hash memory.
		start := len(p.tierBlocks)
		p.tierBlocks = append(p.tierBlocks, blocks...)
		ev.Blocks = p.tierBlocks[start:len(p.tierBlocks):len(p.tierBlocks)]
	}
	if len(hashes) > 0 {
		start := len(p.hashes)
		p.hashes = append(p.hashes, hashes...)
		ev.Hashes = p.hashes[start:len(p.hashes):len(p.hashes)]
	}
	p.emit(ev)
}

// Tiers are lower tiers standing alone, below a cache other than Pool (SGLang's radix cache, whose
// HiCache host tier they model): the same LRU tiers, links and events, fed the hashes that cache evicts.
type Tiers struct {
	t      *tiers
	events bool
}

// NewTiers returns empty lower tiers, recording their KV events if events is set, or nil when o enables
// none.
func NewTiers(o TierOptions, events bool) (*Tiers, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if !o.Enabled() {
		return nil, nil
	}
	return &Tiers{t: newTiers(o), events: events}, nil
}

// SetNow sets the time of the transfers started next.
func (t *Tiers) SetNow(now time.Duration) { t.t.now = now }

// Match counts the leading blocks of blocks that a lower tier holds.
func (t *Tiers) Match(blocks []tokens.Block) int { return t.t.match(blocks) }

// Onboard is Pool.Onboard: it copies blocks, which Match found, back up and returns when the last arrives.
func (t *Tiers) Onboard(blocks []tokens.Block) time.Duration { return t.t.onboard(blocks) }

// Offload writes the hashes just evicted from the cache above to the tiers, as Pool does, and appends
// the tiers' events, if recorded (with slices of their own, without IDs), to dst.
func (t *Tiers) Offload(hashes []uint64, dst []Event) []Event {
	t.t.offload(hashes, func(m Medium, k EventKind, blocks []tokens.Block, hs []uint64) {
		if t.events {
			dst = append(dst, Event{Kind: k, Medium: m, Blocks: slices.Clone(blocks), Hashes: slices.Clone(hs)})
		}
	})
	return dst
}

// Stats reports what the tiers did so far, and what they hold.
func (t *Tiers) Stats() TierStats {
	st := t.t.stats
	st.CPUUsed, st.DiskUsed = t.t.cpu.len(), t.t.disk.len()
	return st
}

// Len is the number of blocks medium (CPU or Disk) holds.
func (t *Tiers) Len(m Medium) int {
	if m == CPU {
		return t.t.cpu.len()
	}
	return t.t.disk.len()
}

// CheckInvariants verifies each tier's LRU list and index within its capacity.
func (t *Tiers) CheckInvariants() error { return t.t.check() }

func (t *tiers) check() error {
	if err := t.cpu.check(CPU); err != nil {
		return err
	}
	if err := t.disk.check(Disk); err != nil {
		return err
	}
	if t.up.busy < 0 || t.down.busy < 0 {
		return fmt.Errorf("kvcache: links busy until %v and %v", t.up.busy, t.down.busy)
	}
	return nil
}

// lru is one lower tier: a set of hashes in least-recently-used order, of fixed capacity.
type lru struct {
	capacity   int
	slot       map[uint64]int32
	nodes      []lruNode
	free       []int32
	head, tail int32 // least and most recently used; -1 when empty
}

type lruNode struct {
	hash       uint64
	prev, next int32
}

func newLRU(capacity int) lru {
	return lru{capacity: capacity, slot: make(map[uint64]int32), head: -1, tail: -1}
}

func (l *lru) len() int { return len(l.slot) }

func (l *lru) has(h uint64) bool { _, ok := l.slot[h]; return ok }

// touch makes h the most recently used and reports whether l holds it.
func (l *lru) touch(h uint64) bool {
	i, ok := l.slot[h]
	if ok {
		l.unlink(i)
		l.append(i)
	}
	return ok
}

// push adds h, which l does not hold, as the most recently used, evicting the least recently used when
// l is full: that one is returned.
func (l *lru) push(h uint64) (evicted uint64, ok bool) {
	if l.capacity == 0 {
		return h, true
	}
	var i int32
	switch {
	case len(l.slot) == l.capacity:
		i = l.head
		evicted, ok = l.nodes[i].hash, true
		delete(l.slot, evicted)
		l.unlink(i)
	case len(l.free) > 0:
		i = l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
	default:
		i = int32(len(l.nodes))
		l.nodes = append(l.nodes, lruNode{})
	}
	l.nodes[i].hash = h
	l.slot[h] = i
	l.append(i)
	return evicted, ok
}

func (l *lru) unlink(i int32) {
	n := &l.nodes[i]
	if n.prev >= 0 {
		l.nodes[n.prev].next = n.next
	} else {
		l.head = n.next
	}
	if n.next >= 0 {
		l.nodes[n.next].prev = n.prev
	} else {
		l.tail = n.prev
	}
}

func (l *lru) append(i int32) {
	n := &l.nodes[i]
	n.prev, n.next = l.tail, -1
	if l.tail >= 0 {
		l.nodes[l.tail].next = i
	} else {
		l.head = i
	}
	l.tail = i
}

// check verifies that the list and the map hold the same hashes, within capacity.
func (l *lru) check(m Medium) error {
	if len(l.slot) > l.capacity {
		return fmt.Errorf("kvcache: %s tier holds %d blocks, capacity %d", m, len(l.slot), l.capacity)
	}
	n := 0
	prev := int32(-1)
	for i := l.head; i >= 0; prev, i = i, l.nodes[i].next {
		if n++; n > len(l.slot) {
			return fmt.Errorf("kvcache: %s tier's LRU list is longer than its %d blocks", m, len(l.slot))
		}
		if l.nodes[i].prev != prev {
			return fmt.Errorf("kvcache: %s tier's LRU node %d has prev %d, want %d", m, i, l.nodes[i].prev, prev)
		}
		if j, ok := l.slot[l.nodes[i].hash]; !ok || j != i {
			return fmt.Errorf("kvcache: %s tier's LRU node %d (hash %#x) is not indexed", m, i, l.nodes[i].hash)
		}
	}
	if n != len(l.slot) || prev != l.tail {
		return fmt.Errorf("kvcache: %s tier's LRU list has %d blocks, %d indexed", m, n, len(l.slot))
	}
	return nil
}
