package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/sched"
	"github.com/mocker-sim/mocker/sched/vllm"
	"github.com/mocker-sim/mocker/timing"
)

// TestScripts runs the scripts in testdata/, which drive an engine pass by pass and print what each pass
// did (etcd raft's interaction tests are the model). Run with -rewrite to regenerate the expected output,
// then read the diff. Commands:
//
//	engine block-size=4 blocks=6 budget=8 seqs=3 [chunked=false] [caching=false] [preemption=fifo] [dp=2]
//	       [prefill-ms=10 decode-ms=5 | polynomial]
//	enqueue id=1 len=8 max=2 [base=100] [rank=0]   prompt tokens base, base+1, ...; or tokens=(1,1,2)
//	step [n=1]                                      n passes, each printed
//	cancel id=1
//	metrics
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &script{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return s.run(t, td)
		})
	})
}

type script struct {
	e   *Engine
	bs  int
	now time.Duration
	n   int
}

func intArg(t *testing.T, td *datadriven.TestData, key string, def int) int {
	if !td.HasArg(key) {
		return def
	}
	var v int
	td.ScanArgs(t, key, &v)
	return v
}

func (s *script) run(t *testing.T, td *datadriven.TestData) string {
	switch td.Cmd {
	case "engine":
		o := vllm.Options{
			BlockSize:        intArg(t, td, "block-size", 4),
			NumBlocks:        intArg(t, td, "blocks", 6),
			MaxBatchedTokens: intArg(t, td, "budget", 8),
			MaxNumSeqs:       intArg(t, td, "seqs", 3),
			ChunkedPrefill:   intArg(t, td, "chunked", 1) == 1,
			PrefixCaching:    intArg(t, td, "caching", 1) == 1,
			Events:           true,
		}
		if td.HasArg("preemption") {
			var m string
			td.ScanArgs(t, "preemption", &m)
			o.Preemption, _ = vllm.ParsePreemption(m)
		}
		var m timing.Model = timing.Fixed{PrefillMs: float64(intArg(t, td, "prefill-ms", 10)), DecodeMs: float64(intArg(t, td, "decode-ms", 5))}
		if td.HasArg("polynomial") {
			m = timing.Polynomial{}
		}
		e, err := New(Options{DPSize: intArg(t, td, "dp", 1), VLLM: o, Timing: m})
		if err != nil {
			return err.Error()
		}
		*s = script{e: e, bs: o.BlockSize}
		return "ok"
	case "enqueue":
		r := &sched.Request{ID: uint64(intArg(t, td, "id", 0)), MaxTokens: intArg(t, td, "max", 1), Rank: intArg(t, td, "rank", 0)}
		if arg, ok := td.Arg("tokens"); ok {
			for _, v := range arg.Vals {
				n, err := strconv.ParseUint(v, 10, 32)
				if err != nil {
					td.Fatalf(t, "tokens: %v", err)
				}
				r.Prompt = append(r.Prompt, uint32(n))
			}
		} else {
			base := intArg(t, td, "base", int(r.ID)*1000)
			for i := range intArg(t, td, "len", 4) {
				r.Prompt = append(r.Prompt, uint32(base+i))
			}
		}
		if err := s.e.Enqueue(r); err != nil {
			var rej *sched.RejectError
			if errors.As(err, &rej) {
				return "rejected: " + rej.Reason
			}
			return err.Error()
		}
		return "ok"
	case "step":
		var b strings.Builder
		for range intArg(t, td, "n", 1) {
			p := s.e.Step(s.now)
			if err := s.e.CheckInvariants(); err != nil {
				td.Fatalf(t, "%v", err)
			}
			s.n++
			s.printPass(&b, p)
			s.now = p.End
		}
		return b.String()
	case "cancel":
		return fmt.Sprint(s.e.Cancel(uint64(intArg(t, td, "id", 0))))
	case "metrics":
		var b strings.Builder
		for i, m := range s.e.Metrics() {
			fmt.Fprintf(&b, "rank %d: %s\n", i, metrics(m))
		}
		return b.String()
	}
	td.Fatalf(t, "unknown command %q", td.Cmd)
	return ""
}

func metrics(m sched.Metrics) string {
	return fmt.Sprintf("running %d waiting %d | blocks active %d inactive %d free %d | preemptions %d | prefix hits %d/%d",
		m.Running, m.Waiting, m.ActiveBlocks, m.InactiveBlocks, m.TotalBlocks-m.ActiveBlocks-m.InactiveBlocks,
		m.Preemptions, m.PrefixHits, m.PrefixQueries)
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) }

func short(h uint64) string { return fmt.Sprintf("%08x", h>>32) }

func (s *script) printPass(b *strings.Builder, p *Pass) {
	if p.Empty() {
		fmt.Fprintf(b, "pass %d: nothing to do\n", s.n)
		return
	}
	fmt.Fprintf(b, "pass %d: %sms -> %sms\n", s.n, ms(p.Start), ms(p.End))
	for _, rp := range p.Ranks {
		ind := "  "
		if len(s.e.ranks) > 1 {
			fmt.Fprintf(b, "  rank %d:\n", rp.Rank)
			ind = "    "
		}
		fmt.Fprintf(b, "%scost: prefill %sms decode %sms\n", ind, ms(rp.Cost.Prefill), ms(rp.Cost.Decode))
		for _, a := range rp.Admitted {
			resumed := ""
			if a.Resumed {
				resumed = " resumed"
			}
			fmt.Fprintf(b, "%sadmit %d: cached %d%s\n", ind, a.ID, a.Cached, resumed)
		}
		for _, id := range rp.Preempted {
			fmt.Fprintf(b, "%spreempt %d\n", ind, id)
		}
		var seqs []string
		for _, q := range rp.Batch.Seqs {
			kind := "decode"
			if q.Prefill {
				kind = "prefill"
			}
			x := fmt.Sprintf("%s %d+%d", kind, q.Cached, q.New)
			if q.Samples {
				x += " samples"
			}
			seqs = append(seqs, x)
		}
		fmt.Fprintf(b, "%sbatch: %s (kv %d/%d)\n", ind, strings.Join(seqs, ", "), rp.Batch.ActiveKVTokens, rp.Batch.TotalKVTokens)
		for _, ev := range rp.Events {
			switch ev.Kind {
			case kvcache.Stored:
				parent := "-"
				if ev.HasParent {
					parent = short(ev.Parent)
				}
				var hs []string
				for _, blk := range ev.Blocks {
					hs = append(hs, short(blk.Hash))
				}
				fmt.Fprintf(b, "%sevent %d: stored parent=%s blocks=[%s]\n", ind, ev.ID, parent, strings.Join(hs, " "))
			case kvcache.Removed:
				var hs []string
				for _, h := range ev.Hashes {
					hs = append(hs, short(h))
				}
				fmt.Fprintf(b, "%sevent %d: removed [%s]\n", ind, ev.ID, strings.Join(hs, " "))
			}
		}
		for _, o := range rp.Outputs {
			done := ""
			if o.Done {
				done = " done"
			}
			fmt.Fprintf(b, "%sout %d: %d token(s)%s\n", ind, o.ID, len(o.Tokens), done)
		}
		fmt.Fprintf(b, "%s%s\n", ind, metrics(s.e.ranks[rp.Rank].Metrics()))
	}
}
