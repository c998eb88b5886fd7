package planner

import (
	"fmt"
	"math/bits"
	"time"
)

// nsPerHour is one hour in nanoseconds, the unit GPU-nanoseconds are carried into.
const nsPerHour = uint64(time.Hour)

// Usage integrates GPU-hours: ∫ workers × GPUs per worker dt, per pool, over a step function given by
// its changes. The integral is exact: whole GPU-hours and the remaining GPU-nanoseconds are kept as
// integers, so a long run accumulates no rounding.
//
// Record the workers that hold GPUs, whether starting, ready or draining: a loading worker's GPUs are
// paid for too.
type Usage struct {
	gpus  map[Pool]int // per worker
	pools map[Pool]*poolUsage
}

type poolUsage struct {
	since   time.Duration // time of the last change
	workers int           // count since then
	hours   uint64        // whole GPU-hours before since
	rem     uint64        // GPU-nanoseconds before since, < one hour
}

// NewUsage returns a Usage that prices a worker of each configured pool at c.GPUs(pool).
func NewUsage(c *Config) *Usage {
	u := &Usage{gpus: map[Pool]int{}, pools: map[Pool]*poolUsage{}}
	for _, p := range allPools {
		u.gpus[p] = c.GPUs(p)
	}
	return u
}

// Record says pool has workers workers from now on. Records must come in time order (per pool); a pool
// counts zero workers before its first record. It panics on a record that goes back in time or a
// negative count or an unknown pool, which are bugs in the caller.
func (u *Usage) Record(now time.Duration, pool Pool, workers int) {
	if workers < 0 {
		panic(fmt.Sprintf("planner: Usage.Record(%v, %s, %d): negative workers", now, pool, workers))
	}
	if _, ok := u.gpus[pool]; !ok {
		panic(fmt.Sprintf("planner: Usage.Record(%v, %q, %d): unknown pool", now, pool, workers))
	}
	pu, ok := u.pools[pool]
	if !ok {
		u.pools[pool] = &poolUsage{since: now, workers: workers}
		return
	}
	if now < pu.since {
		panic(fmt.Sprintf("planner: Usage.Record(%v, %s, %d): before the previous record at %v", now, pool, workers, pu.since))
	}
	pu.hours, pu.rem = pu.through(now, u.gpus[pool])
	pu.since, pu.workers = now, workers
}

// through returns the pool's integral up to t, as whole GPU-hours and remaining GPU-nanoseconds.
func (pu *poolUsage) through(t time.Duration, gpus int) (hours, rem uint64) {
	// workers × gpus × dt in 128 bits, divided into hours; the quotient fits 64 bits unless the run
	// exceeds ~1.8e19 GPU-hours.
	hi, lo := bits.Mul64(uint64(pu.workers)*uint64(gpus), uint64(t-pu.since))
	q, r := bits.Div64(hi, lo, nsPerHour)
	rem = pu.rem + r
	return pu.hours + q + rem/nsPerHour, rem % nsPerHour
}

// GPUHours returns the GPU-hours of every pool from its first record to end, each pool's last count
// holding until end. end must not precede a pool's last record (Usage keeps no history); it panics if
// it does.
func (u *Usage) GPUHours(end time.Duration) float64 {
	var total float64
	for _, p := range allPools {
		total += u.PoolGPUHours(p, end)
	}
	return total
}

// PoolGPUHours returns one pool's GPU-hours up to end, as GPUHours does.
func (u *Usage) PoolGPUHours(pool Pool, end time.Duration) float64 {
	pu, ok := u.pools[pool]
	if !ok {
		return 0
	}
	if end < pu.since {
		panic(fmt.Sprintf("planner: Usage GPU-hours to %v, before %s's last record at %v", end, pool, pu.since))
	}
	h, r := pu.through(end, u.gpus[pool])
	return float64(h) + float64(r)/float64(nsPerHour)
}
