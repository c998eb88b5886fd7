package recommend

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/tokens"
)

// prompt is a request's prompt as a TTFT lower bound sees it: its length, and the fewest of its tokens
// a worker must compute with the best prefix cache possible; and the output tokens a client sees.
type prompt struct{ tokens, minNew, shown int }

// prompts reads the workload's requests that show a client tokens (the ones with a TTFT: output longer
// than header, the model's reply header) and bounds what a prefix cache could spare each. A request's cached prefix can only be blocks some other request (or
// an earlier turn of its own conversation) computed: so its leading blocks found in no other request
// are computed by it, whatever the cache and the order of service. For a trace the blocks are its hash
// ids (one id, one run of identical tokens); otherwise they are the engine's blocks of blockSize
// tokens, hashed with their prefix as the engines hash them. A later turn of a conversation may find
// its whole history cached: it is bounded by one token.
func prompts(base *config.Config, blockSize, header int) ([]prompt, error) {
	c := *base
	if c.DesyncAuto() {
		c.ConcurrencyDesyncMs = 0 // it moves arrivals, not prompts: no need to resolve it here
	}
	src, err := c.Source()
	if err != nil {
		return nil, err
	}
	type req struct {
		tokens, turn, out int
		per               int // tokens per block
		blocks            []uint64
	}
	var reqs []req
	owner := map[uint64]int{} // block → the first request holding it, or -1 once two do
	seq := tokens.NewSequence(blockSize)
	for {
		s, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		for i := range s.Len() {
			t := s.Turn(i)
			r := req{tokens: max(t.InputLen, 0), turn: i, out: t.OutputLen, per: blockSize}
			if i == 0 {
				if ids := t.HashIDs(); ids != nil {
					r.per = base.TraceBlockSize
					for _, id := range ids {
						r.blocks = append(r.blocks, uint64(id))
					}
				} else {
					seq.Reset()
					if t.LoRA != "" {
						seq.SetSeed(tokens.LoRASeed(t.LoRA))
					}
					t.AppendSequence(seq)
					for _, b := range seq.Blocks() {
						r.blocks = append(r.blocks, b.Hash)
					}
				}
				for _, b := range uniq(r.blocks) { // a block repeated within a request is one holder
					if o, ok := owner[b]; !ok {
						owner[b] = len(reqs)
					} else if o != len(reqs) {
						owner[b] = -1
					}
				}
			}
			reqs = append(reqs, r)
		}
	}
	var out []prompt
	for _, r := range reqs {
		if r.out <= header {
			continue
		}
		p := prompt{tokens: r.tokens, minNew: 1, shown: r.out - header}
		if r.turn == 0 {
			shared := 0
			for _, b := range r.blocks {
				if owner[b] != -1 {
					break
				}
				shared++
			}
			p.minNew = max(1, r.tokens-shared*r.per)
		}
		out = append(out, p)
	}
	return out, nil
}

func uniq(xs []uint64) []uint64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return slices.Compact(s)
}

// Bound is a lower bound on a shape's figure at a target's percentile, and what it is.
type Bound struct {
	Ms   float64 `json:"ms"`
	What string  `json:"what"`
}

// ttftBound is the p-th percentile over the requests of their TTFT on an idle worker of cfg (the
// prefill pool's, disaggregated) with the best prefix cache possible: the frontend latency, then the
// prompt's uncached tokens computed alone, in the chunks the scheduler cuts on an idle worker.
//
// It bounds every request's TTFT in a run of cfg from below assuming the timing model charges a pass no
// less when it holds more (other requests, more of this one's tokens) and a prompt no less when it is
// cut into more chunks; so when a passing run completes every request, its percentile is at least this
// one (each request's TTFT is at least its bound, and both are percentiles of the same requests).
func ttftBound(cfg *config.Config, ps []prompt, p int) (Bound, error) {
	pc := cfg
	if cfg.PrefillWorkers > 0 {
		pc = cfg.ForRole("prefill")
	}
	eo, err := pc.EngineOptions()
	if err != nil {
		return Bound{}, err
	}
	d, err := pc.Deployment()
	if err != nil {
		return Bound{}, err
	}
	chunk := 0 // 0: the whole prompt in one pass
	switch {
	case pc.Backend == "sglang" && pc.SGLangChunkedPrefillSize > 0:
		chunk = pc.SGLangChunkedPrefillSize
	case pc.Backend != "sglang" && pc.EnableChunkedPrefill:
		chunk = pc.MaxNumBatchedTokens
	}
	total := d.KVBlocks * d.BlockSize
	type lb struct {
		d           time.Duration
		tokens, new int
	}
	lbs := make([]lb, len(ps))
	var b timing.Batch
	b.Seqs = make([]timing.Seq, 1)
	front := time.Duration(cfg.FrontendLatencyMs * float64(time.Millisecond))
	for i, q := range ps {
		done := q.tokens - q.minNew
		t := front
		for done < q.tokens {
			n := q.tokens - done
			if chunk > 0 {
				n = min(n, chunk)
			}
			b.Seqs[0] = timing.Seq{New: n, Cached: done, Prefill: true, Samples: done+n == q.tokens}
			kv := done + n
			b.ActiveKVTokens = min(total, (kv+d.BlockSize-1)/d.BlockSize*d.BlockSize)
			b.TotalKVTokens = total
			t += eo.Timing.Cost(&b).Total()
			done += n
		}
		lbs[i] = lb{t, q.tokens, q.minNew}
	}
	if len(lbs) == 0 {
		return Bound{}, nil
	}
	slices.SortStableFunc(lbs, func(a, b lb) int { return cmp.Compare(a.d, b.d) })
	at := lbs[((len(lbs)-1)*p+50)/100]
	ms := float64(at.d) / float64(time.Millisecond)
	return Bound{Ms: ms, What: fmt.Sprintf("prefill of the %d-token prompt (%d tokens uncached at best) alone takes %.0f ms on one idle worker at TP %d",
		at.tokens, at.new, ms, pc.TP)}, nil
}

// itlBound bounds every ITL sample of a run of cfg from below: a gap between two deliveries of a
// request ends with a pass that decodes it, which takes at least a decode step of that request alone
// (on the decode pool's worker, disaggregated), and that step takes the least at the shortest context
// any request decodes at: the shortest prompt of a request that shows two tokens or more, plus one. It assumes
// the timing model charges a pass no less when it holds more, and a decode step no less at a longer
// context.
func itlBound(cfg *config.Config, ps []prompt) (Bound, error) {
	dc := cfg
	if cfg.PrefillWorkers > 0 {
		dc = cfg.ForRole("decode")
	}
	eo, err := dc.EngineOptions()
	if err != nil {
		return Bound{}, err
	}
	d, err := dc.Deployment()
	if err != nil {
		return Bound{}, err
	}
	ctx := -1
	for _, q := range ps {
		if q.shown >= 2 && (ctx < 0 || q.tokens < ctx) {
			ctx = q.tokens
		}
	}
	if ctx < 0 {
		return Bound{}, nil // no request has an ITL
	}
	ctx++
	b := timing.Batch{Seqs: []timing.Seq{{New: 1, Cached: ctx - 1, Samples: true}}, TotalKVTokens: d.KVBlocks * d.BlockSize}
	b.ActiveKVTokens = min(b.TotalKVTokens, (ctx+d.BlockSize-1)/d.BlockSize*d.BlockSize)
	ms := float64(eo.Timing.Cost(&b).Total()) / float64(time.Millisecond)
	return Bound{Ms: ms, What: fmt.Sprintf("a decode step of one request alone, at the shortest context (%d tokens), takes %.1f ms on one idle worker at TP %d", ctx, ms, dc.TP)}, nil
}
