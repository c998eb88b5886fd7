package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/workload"
)

// batchShape is the pass `mocker estimate` prices: one prefill chunk and a set of equal decodes.
type batchShape struct {
	prefillTokens, prefillCached int
	decodeRequests, decodeCtx    int
}

func newEstimateCmd() *cobra.Command {
	cfg := config.Default()
	var configPath string
	var shape batchShape
	var breakdown bool
	cmd := &cobra.Command{
		Use:   "estimate",
		Short: "Print the modelled time of one forward pass",
		Long: `estimate prices one forward pass with the timing model the flags select, and prints
{"pass_ms": ..., "prefill_ms": ..., "decode_ms": ...}. The pass holds one prompt chunk of
--prefill-tokens new tokens over --prefill-cached cached ones (whose first token it samples), and
--decode-requests decodes at context --decode-context. With --breakdown it adds "ops": the pass's time
by operation ([{"op": ..., "ms": ...}], summing to pass_ms) where the timing model itemizes it.
With --dp-size N --dp-attention the batch is one rank's and stands for every rank's: the MoE layers
are priced at N × its tokens.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadSettings(cmd.Flags(), &cfg, configPath); err != nil {
				return err
			}
			return estimate(&cfg, shape, breakdown, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "YAML file of settings (keys as the flags)")
	fs.IntVar(&shape.prefillTokens, "prefill-tokens", 0, "new prompt tokens computed in the pass")
	fs.IntVar(&shape.prefillCached, "prefill-cached", 0, "tokens of that prompt already cached")
	fs.IntVar(&shape.decodeRequests, "decode-requests", 0, "requests decoding one token each")
	fs.IntVar(&shape.decodeCtx, "decode-context", 0, "context length of each decoding request")
	fs.BoolVar(&breakdown, "breakdown", false, "also print the pass's time by operation (GEMMs, attention, all-reduce, MoE, ...)")
	bindFlags(fs, &cfg)
	hideWorkloadFlags(fs)
	return cmd
}

// hideWorkloadFlags hides the flags that do not bear on one pass's time; they stay accepted so that one
// --config file serves predict and estimate.
func hideWorkloadFlags(fs *pflag.FlagSet) {
	keep := map[string]bool{}
	for _, name := range []string{"config", "prefill-tokens", "prefill-cached", "decode-requests", "decode-context", "breakdown",
		"backend", "block-size", "num-gpu-blocks", "page-size", "model", "model-config", "system", "tp", "ep", "dp-size", "dp-attention", "quantization",
		"kv-cache-dtype", "moe-quantization", "gpu-memory-utilization", "timing", "profile", "perf-db", "backend-version",
		"prefill-ms", "decode-ms", "speedup-ratio", "decode-speedup-ratio", "host-overhead-us"} {
		keep[name] = true
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !keep[f.Name] {
			f.Hidden = true
		}
	})
}

// maxEstimateSeqs bounds --decode-requests: a thousand times an engine rank's largest default batch
// (1,024 running requests), a batch of 24 MiB; 10^8 sequences took minutes to allocate.
const maxEstimateSeqs = 1 << 20

func estimate(cfg *config.Config, shape batchShape, breakdown bool, w io.Writer) error {
	switch {
	case shape.prefillTokens < 0 || shape.prefillCached < 0 || shape.decodeRequests < 0 || shape.decodeCtx < 0:
		return fmt.Errorf("estimate: --prefill-tokens, --prefill-cached, --decode-requests and --decode-context must not be negative")
	case shape.decodeRequests > 0 && shape.decodeCtx < 1:
		return fmt.Errorf("estimate: --decode-context must be at least 1 with --decode-requests")
	case shape.prefillTokens == 0 && shape.decodeRequests == 0:
		// A pass that computes nothing is no pass: its zeros would read as a price.
		return fmt.Errorf("estimate: an empty pass: give --prefill-tokens (a prompt chunk) or --decode-requests and --decode-context (decodes), or both")
	case shape.prefillTokens > workload.MaxTokens-shape.prefillCached:
		// Bounded before the batch is made: past this a pass's nanoseconds overflowed into a negative pass_ms.
		return fmt.Errorf("estimate: --prefill-tokens %d + --prefill-cached %d: a sequence of more than %d tokens", shape.prefillTokens, shape.prefillCached, workload.MaxTokens)
	case shape.decodeCtx > workload.MaxTokens:
		return fmt.Errorf("estimate: --decode-context %d: a sequence of more than %d tokens", shape.decodeCtx, workload.MaxTokens)
	case shape.decodeRequests > maxEstimateSeqs:
		return fmt.Errorf("estimate: --decode-requests %d: more than %d sequences in one pass", shape.decodeRequests, maxEstimateSeqs)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// One pass at the shared settings: a disaggregated file's pools (--prefill-*, --decode-*) are, like
	// its workload, accepted and not priced, so the timing reported is the shared one too.
	shared := *cfg
	shared.PrefillWorkers, shared.DecodeWorkers = 0, 0
	cfg = &shared
	d, err := cfg.Deployment()
	if err != nil {
		return err
	}
	m, err := cfg.TimingModel(d)
	if err != nil {
		return err
	}
	info, err := cfg.TimingInfo()
	if err != nil {
		return err
	}
	b := shape.batch(d.KVBlocks * d.BlockSize)
	c := m.Cost(&b)
	out := struct {
		PassMs        float64       `json:"pass_ms"`
		PrefillMs     float64       `json:"prefill_ms"`
		DecodeMs      float64       `json:"decode_ms"`
		TimingModel   string        `json:"timing_model"`
		TimingSource  string        `json:"timing_source,omitempty"`
		TimingVersion string        `json:"timing_version,omitempty"`
		Ops           []timing.Part `json:"ops,omitempty"`
	}{PassMs: msOf(c.Total()), PrefillMs: msOf(c.Prefill), DecodeMs: msOf(c.Decode),
		TimingModel: info.Model, TimingSource: info.Source, TimingVersion: info.Version}
	if breakdown {
		out.Ops = roundParts(timing.Parts(m, &b), c.Total())
	}
	enc := json.NewEncoder(w)
	return enc.Encode(out)
}

// msOf is d in milliseconds, to the nanosecond: the decimal the JSON prints has at most 6 places.
func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

// roundParts rounds each part to the nanosecond, as the pass's times are, so that the printed parts
// still sum exactly to the printed total (pass_ms): each part is rounded down, and the nanoseconds
// left over go one each to the parts with the largest remainders (taken back from those with the
// smallest, should the parts sum above the total).
func roundParts(parts []timing.Part, total time.Duration) []timing.Part {
	if len(parts) == 0 {
		return parts
	}
	ns := make([]int64, len(parts))
	frac := make([]float64, len(parts))
	order := make([]int, len(parts)) // largest remainder first; ties in the parts' order
	left := int64(total)
	for i, p := range parts {
		x := p.Ms * 1e6
		ns[i] = int64(math.Floor(x))
		frac[i] = x - math.Floor(x)
		order[i] = i
		left -= ns[i]
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(frac[b], frac[a]) })
	n := len(order)
	for k := 0; left > 0; k, left = k+1, left-1 {
		ns[order[k%n]]++
	}
	for k := 0; left < 0; k, left = k+1, left+1 {
		ns[order[n-1-k%n]]--
	}
	out := make([]timing.Part, len(parts))
	for i, p := range parts {
		out[i] = timing.Part{Op: p.Op, Ms: msOf(time.Duration(ns[i]))}
	}
	return out
}

// batch is the timing.Batch of the shape on a pool of totalKV tokens; the KV in use is the shape's own.
func (s batchShape) batch(totalKV int) timing.Batch {
	var b timing.Batch
	if s.prefillTokens > 0 {
		b.Seqs = append(b.Seqs, timing.Seq{New: s.prefillTokens, Cached: s.prefillCached, Prefill: true, Samples: true})
	}
	for range s.decodeRequests {
		b.Seqs = append(b.Seqs, timing.Seq{New: 1, Cached: s.decodeCtx - 1, Samples: true})
	}
	b.ActiveKVTokens = s.prefillTokens + s.prefillCached + s.decodeRequests*s.decodeCtx
	b.TotalKVTokens = totalKV
	return b
}
