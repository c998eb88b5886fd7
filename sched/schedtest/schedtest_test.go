package schedtest_test

import (
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/schedtest"
	"github.com/mocker-sim/mocker/sched/vllm"
)

// broken wraps vLLM's scheduler with one deliberate defect.
type broken struct {
	*vllm.Scheduler
	defect string
	seen   map[uint64]bool // ids a defective Cancel or Release answered for
}

// pretend answers true the first time it is asked about id, as if it had done the job.
func (b *broken) pretend(id uint64) bool {
	if b.seen[id] {
		return false
	}
	b.seen[id] = true
	return true
}

func (b *broken) Step() *sched.Pass {
	p := b.Scheduler.Step()
	if b.defect == "drops a token" {
		for i := range p.Outputs {
			if o := &p.Outputs[i]; o.Done && len(o.Tokens) > 0 && o.ID%3 == 0 {
				o.Tokens = o.Tokens[:len(o.Tokens)-1]
			}
		}
	}
	return p
}

func (b *broken) Cancel(id uint64) bool {
	if b.defect == "ignores cancel" {
		return b.pretend(id)
	}
	return b.Scheduler.Cancel(id)
}

func (b *broken) Metrics() sched.Metrics {
	m := b.Scheduler.Metrics()
	if b.defect == "hides waiting requests" {
		m.Waiting = 0
	}
	return m
}

func (b *broken) PlainStep(dst []sched.Sample) []sched.Sample {
	dst = b.Scheduler.PlainStep(dst)
	if b.defect == "samples another token" && len(dst) > 0 {
		dst[len(dst)-1].Token++
	}
	return dst
}

func (b *broken) Release(id uint64) bool {
	if b.defect == "keeps released KV" {
		return b.pretend(id)
	}
	return b.Scheduler.Release(id)
}

// TestBrokenSchedulersFail: each deliberate defect fails the check that covers it, and the sound
// scheduler under the same wrapper passes every check.
func TestBrokenSchedulersFail(t *testing.T) {
	factory := func(defect string) schedtest.Factory {
		return func(s schedtest.Shape) (schedtest.Scheduler, error) {
			v, err := vllm.New(vllm.Options{BlockSize: s.BlockSize, NumBlocks: s.NumBlocks, MaxNumSeqs: s.MaxNumSeqs,
				MaxBatchedTokens: s.MaxBatchedTokens, ChunkedPrefill: true, PrefixCaching: true, Role: s.Role})
			return &broken{Scheduler: v, defect: defect, seen: map[uint64]bool{}}, err
		}
	}
	for _, tc := range []struct {
		defect string
		check  func(schedtest.Factory, uint64) error
		want   string
	}{
		{"drops a token", schedtest.Serve, "tokens emitted (done true)"},
		{"ignores cancel", schedtest.Cancel, "not running"},
		{"hides waiting requests", schedtest.Serve, "metrics"},
		{"samples another token", schedtest.PlainDecode, "PlainStep sample"},
		{"keeps released KV", schedtest.Prefill, "released or cancelled twice"}, // Cancel still finds it
	} {
		var err error
		for seed := uint64(0); seed < 12 && err == nil; seed++ {
			err = tc.check(factory(tc.defect), seed)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a scheduler that %s: got %v, want an error with %q", tc.defect, err, tc.want)
		}
	}
	schedtest.Run(t, factory(""))
}
