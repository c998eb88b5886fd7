package planner

import (
	"math"
	"testing"
	"time"
)

func TestUsageGPUHours(t *testing.T) {
	c := DefaultConfig()
	c.GPUsPerWorker = 1
	c.Pools = Pools{Prefill: &PoolConfig{Min: 1, Max: 4, GPUsPerWorker: 4}, Decode: &PoolConfig{Min: 1, Max: 4}}
	u := NewUsage(&c)
	// prefill (4 GPUs a worker): 1 worker for 0–30 min, 3 for 30–90 min, 2 for 90–120 min:
	//   (0.5·1 + 1·3 + 0.5·2) worker-hours × 4 = 4.5 × 4 = 18 GPU-hours.
	// decode (1 GPU a worker): 2 workers from 0 to 60 min, then 0: 2 GPU-hours.
	u.Record(0, Prefill, 1)
	u.Record(0, Decode, 2)
	u.Record(30*time.Minute, Prefill, 3)
	// Up to 45 min: prefill 0.5·1 + 0.25·3 = 1.25 worker-hours × 4 = 5; decode 0.75 × 2 = 1.5.
	if got := u.GPUHours(45 * time.Minute); got != 5+1.5 {
		t.Errorf("GPU-hours at 45 min = %v, want 6.5", got)
	}
	u.Record(60*time.Minute, Decode, 0)
	u.Record(90*time.Minute, Prefill, 2)
	u.Record(90*time.Minute, Prefill, 2) // a repeated count changes nothing
	end := 2 * time.Hour
	if got := u.PoolGPUHours(Prefill, end); got != 18 {
		t.Errorf("prefill GPU-hours = %v, want 18", got)
	}
	if got := u.PoolGPUHours(Decode, end); got != 2 {
		t.Errorf("decode GPU-hours = %v, want 2", got)
	}
	if got := u.GPUHours(end); got != 20 {
		t.Errorf("GPU-hours = %v, want 20", got)
	}
	if got := u.PoolGPUHours(Agg, end); got != 0 {
		t.Errorf("agg GPU-hours = %v, want 0 (never recorded)", got)
	}
}

// The integer integral agrees with a float sum over a ragged series, and does not drift over many
// small steps as a float accumulator would.
func TestUsageMatchesIntegral(t *testing.T) {
	c := DefaultConfig()
	c.GPUsPerWorker = 8
	c.Pools = Pools{Agg: &PoolConfig{Min: 1, Max: 100}}
	u := NewUsage(&c)
	var want float64 // GPU-seconds
	now, workers := time.Duration(0), 0
	for i := range 10000 {
		u.Record(now, Agg, workers)
		dt := time.Duration(i%7+1)*time.Second + time.Duration(i%13)*time.Millisecond + 1
		want += float64(workers*8) * dt.Seconds()
		now += dt
		workers = (workers*31 + 7) % 17
	}
	got := u.GPUHours(now)
	if math.Abs(got-want/3600) > 1e-9*want/3600 {
		t.Errorf("GPU-hours = %.12g, want %.12g", got, want/3600)
	}
	// One worker, one GPU, one nanosecond is representable.
	c.GPUsPerWorker = 1
	u = NewUsage(&c)
	u.Record(time.Hour, Agg, 1)
	if got := u.GPUHours(time.Hour + 1); got != 1/float64(time.Hour) {
		t.Errorf("1 GPU-ns = %g GPU-hours, want %g", got, 1/float64(time.Hour))
	}
}

func TestUsageRejectsBadRecords(t *testing.T) {
	c := DefaultConfig()
	c.Pools = Pools{Agg: &PoolConfig{Min: 1, Max: 4}}
	for name, f := range map[string]func(u *Usage){
		"back in time":   func(u *Usage) { u.Record(time.Minute, Agg, 1); u.Record(time.Second, Agg, 2) },
		"negative count": func(u *Usage) { u.Record(0, Agg, -1) },
		"unknown pool":   func(u *Usage) { u.Record(0, Pool("gpu"), 1) },
		"query the past": func(u *Usage) { u.Record(time.Minute, Agg, 1); u.GPUHours(time.Second) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Record did not panic", name)
				}
			}()
			f(NewUsage(&c))
		}()
	}
}
