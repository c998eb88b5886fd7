package recommend

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/sim"
	"github.com/mocker-sim/mocker/timing/registry"
)

// Space is the set of deployments a search tries: every combination of its lists (a shape) at every
// worker count in [MinWorkers, MaxWorkers]. Settings it does not list come from the base configuration.
type Space struct {
	Backends []string
	TP       []int // aggregated workers' tensor parallelism
	EP       []int // expert parallelism, for MoE models (each must divide the TP it goes with)
	// Modes are "agg" and "disagg". A disaggregated shape takes each prefill:decode Ratio and each pair
	// of PrefillTP and DecodeTP (empty: TP); its worker count is a multiple of the ratio's sum.
	Modes                  []string
	Ratios                 []Ratio
	PrefillTP, DecodeTP    []int
	MinWorkers, MaxWorkers int // workers of a deployment, both pools together
	MaxNumSeqs             []int
	MaxNumBatchedTokens    []int
	Routers                []string
}

// Ratio is a disaggregated deployment's prefill workers to decode workers.
type Ratio struct{ Prefill, Decode int }

// ParseRatio parses P:D, as in 1:2.
func ParseRatio(s string) (Ratio, error) {
	p, d, ok := strings.Cut(s, ":")
	var r Ratio
	var err1, err2 error
	r.Prefill, err1 = strconv.Atoi(p)
	r.Decode, err2 = strconv.Atoi(d)
	if !ok || err1 != nil || err2 != nil || r.Prefill < 1 || r.Decode < 1 || r.Prefill > 64 || r.Decode > 64 {
		return Ratio{}, fmt.Errorf("ratio %q: want PREFILL:DECODE workers, each 1 to 64, as in 1:2", s)
	}
	return r, nil
}

func (r Ratio) String() string { return fmt.Sprintf("%d:%d", r.Prefill, r.Decode) }

// Shape is a deployment but for its size: everything a search fixes while it varies the worker count.
type Shape struct {
	Backend string `json:"backend"`
	Disagg  bool   `json:"disagg"`
	TP      int    `json:"tp,omitempty"` // aggregated
	EP      int    `json:"ep"`
	// Disaggregated: the workers come in groups of Ratio.Prefill prefill and Ratio.Decode decode workers.
	Ratio     string `json:"ratio,omitempty"`
	PrefillTP int    `json:"prefill_tp,omitempty"`
	DecodeTP  int    `json:"decode_tp,omitempty"`

	MaxNumSeqs          int    `json:"max_num_seqs"` // 0: auto, the engine's own default
	MaxNumBatchedTokens int    `json:"max_num_batched_tokens"`
	Router              string `json:"router"`
	// Disaggregated: what each pool ran of EP, MaxNumSeqs and MaxNumBatchedTokens, which a pool's own
	// setting (--decode-max-num-seqs 8) changes from the shape's.
	Pools Pools `json:"pools,omitzero"`
	// Where a pool runs max-num-seqs auto, what it means on the shape's deployment: the running
	// requests a rank allows (aggregated, or the prefill pool) and a decode rank allows (disaggregated).
	AutoMaxNumSeqs       int `json:"auto_max_num_seqs,omitempty"`
	AutoDecodeMaxNumSeqs int `json:"auto_decode_max_num_seqs,omitempty"`

	ratio Ratio
}

// Pools are a disaggregated shape's prefill and decode pools.
type Pools struct {
	Prefill Pool `json:"prefill"`
	Decode  Pool `json:"decode"`
}

// Pool is what one pool's engines ran of the settings a shape names.
type Pool struct {
	EP                  int `json:"ep"`
	MaxNumSeqs          int `json:"max_num_seqs"` // 0: auto
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
}

// String names the shape in a table row; a setting the pools ran differently reads prefill/decode.
func (s Shape) String() string {
	var b strings.Builder
	b.WriteString(s.Backend)
	if s.Disagg {
		fmt.Fprintf(&b, " disagg %s tp%d/%d", s.Ratio, s.PrefillTP, s.DecodeTP)
	} else {
		fmt.Fprintf(&b, " agg tp%d", s.TP)
	}
	p, d := s.pools()
	if p.EP > 1 || d.EP > 1 {
		b.WriteString(" ep" + pair(strconv.Itoa(p.EP), strconv.Itoa(d.EP)))
	}
	dAuto := s.AutoDecodeMaxNumSeqs
	if !s.Disagg {
		dAuto = s.AutoMaxNumSeqs // one pool
	}
	seqs := pair(seqsName(p.MaxNumSeqs, s.AutoMaxNumSeqs), seqsName(d.MaxNumSeqs, dAuto))
	if p.MaxNumSeqs == 0 && d.MaxNumSeqs == 0 {
		seqs = strings.Replace(seqs, "/auto=", "/", 1) // both the engine's default: auto=3470/4096
	}
	fmt.Fprintf(&b, " seqs %s mbt %s %s", seqs, pair(strconv.Itoa(p.MaxNumBatchedTokens), strconv.Itoa(d.MaxNumBatchedTokens)), s.Router)
	return b.String()
}

// pools are what the prefill and the decode pool ran: the shape's settings for both, unless a
// disaggregated shape's Pools say otherwise (an aggregated shape's, both its workers').
func (s Shape) pools() (prefill, decode Pool) {
	if s.Pools != (Pools{}) {
		return s.Pools.Prefill, s.Pools.Decode
	}
	p := Pool{EP: s.EP, MaxNumSeqs: s.MaxNumSeqs, MaxNumBatchedTokens: s.MaxNumBatchedTokens}
	return p, p
}

// pair is "p/d", or p alone where both pools ran it.
func pair(p, d string) string {
	if p == d {
		return p
	}
	return p + "/" + d
}

// seqsName names a max-num-seqs: the number, or "auto" (the engine's default, config: --max-num-seqs
// auto) with what it came to.
func seqsName(n, auto int) string {
	switch {
	case n > 0:
		return strconv.Itoa(n)
	case auto > 0:
		return "auto=" + strconv.Itoa(auto)
	}
	return "auto"
}

// scales are the deployment sizes the shape takes in [minW, maxW] workers: the worker count itself, or
// for a disaggregated shape the number of ratio groups.
func (s Shape) scales(minW, maxW int) (lo, hi int) {
	if !s.Disagg {
		return minW, maxW
	}
	g := s.ratio.Prefill + s.ratio.Decode
	return max(1, (minW+g-1)/g), maxW / g
}

// tpPair is a disaggregated shape's prefill and decode TP.
type tpPair struct{ p, d int }

// tpPairs are the disaggregated shapes' TPs: each of PrefillTP with each of DecodeTP (either empty: TP).
func (sp *Space) tpPairs() []tpPair {
	ptp, dtp := sp.PrefillTP, sp.DecodeTP
	if len(ptp) == 0 {
		ptp = sp.TP
	}
	if len(dtp) == 0 {
		dtp = sp.TP
	}
	var pairs []tpPair
	for _, p := range ptp {
		for _, d := range dtp {
			pairs = append(pairs, tpPair{p, d})
		}
	}
	return pairs
}

// layouts are s laid out in mode: aggregated at each of the space's TPs, or disaggregated at each of
// ratios with each pair of TPs (tpPairs).
func (sp *Space) layouts(s Shape, mode string, ratios []Ratio) []Shape {
	var list []Shape
	if mode == "agg" {
		for _, tp := range sp.TP {
			s.TP = tp
			list = append(list, s)
		}
		return list
	}
	s.Disagg = true
	for _, r := range ratios {
		for _, pr := range sp.tpPairs() {
			s.ratio, s.Ratio, s.PrefillTP, s.DecodeTP = r, r.String(), pr.p, pr.d
			list = append(list, s)
		}
	}
	return list
}

// Deployable is nil when base is valid on some deployment the space makes of it, on one of its
// backends at a TP of its lists, else the first one's error: a setting no shape can take is refused once,
// before the search, by name, and one the TP decides (--decode-ep 8 with --decode-tp-list 8) is judged at
// the TPs the shapes run. A setting only some shapes read applies to those and is refused only where none
// does: a backend's own (--sglang-schedule-policy, config.OnBackend); a timing model's own (--profile,
// read where profile prices a pool's passes: the trtllm shapes of --backends vllm,trtllm, the aggregated
// ones beside pools on their own --timing); a pool's own (--prefill-max-num-seqs), which only
// disaggregated shapes read; and the EPs above 1 of the space, which only the op-level model reads.
func (sp *Space) Deployable(base *config.Config) error {
	if err := base.UnreadByBackends(sp.Backends...); err != nil {
		return err
	}
	if err := sp.poolsRead(base); err != nil {
		return err
	}
	all := sp.probes(base)
	// A setting is read only by a shape that can run: trtllm's disaggregated layout, which the engine
	// refuses, reads no --profile for the vllm shapes beside it.
	var deployed []config.Config
	var invalid error     // the first probe's that cannot run
	var poolInvalid error // the first disaggregated probe's, where none runs
	pooledRuns := false   // some disaggregated probe runs, which reads the pools' own settings
	var models []string   // the timing models that price the probes' pools, in order of first use
	for _, s := range all {
		c := s.deploy(base, 1)
		for _, n := range c.TimingNames() {
			if !slices.Contains(models, n) {
				models = append(models, n)
			}
		}
		cfg := c.WithoutUnreadTiming()
		if err := cfg.Validate(); err != nil {
			invalid = cmp.Or(invalid, err)
			if s.Disagg {
				poolInvalid = cmp.Or(poolInvalid, err)
			}
			continue
		}
		deployed = append(deployed, c)
		pooledRuns = pooledRuns || s.Disagg
	}
	if len(deployed) == 0 {
		return invalid // nil for no probes: an empty list of the space is for shapes to name
	}
	if err := config.TimingReadOnSome(deployed); err != nil {
		return err
	}
	if pooled := len(base.Prefill.Keys())+len(base.Decode.Keys()) > 0; pooled && !pooledRuns && poolInvalid != nil {
		return poolInvalid
	}
	return sp.epsRead(models)
}

// poolsRead refuses a pool's own setting (--prefill-KEY, or the file's prefill: section) where the
// space has no disaggregated shape, the only ones that read it.
func (sp *Space) poolsRead(base *config.Config) error {
	if slices.Contains(sp.Modes, "disagg") {
		return nil
	}
	for _, r := range config.Roles {
		if keys := base.Role(r).Keys(); len(keys) > 0 {
			key := r + "-" + keys[0]
			return fmt.Errorf("--%s %s%s: sets the %s workers of disaggregated shapes, and --modes is %s (add disagg)",
				key, base.Role(r).Get(keys[0]), base.Where(key), r, strings.Join(sp.Modes, ","))
		}
	}
	return nil
}

// epsRead refuses the space's EPs where some is above 1 and none of the timing models that price its
// shapes' pools (models) is the op-level one, the one that reads the experts' sharding, as config refuses
// --ep there (EP 1 alone, no expert parallelism, changes nothing and is taken).
func (sp *Space) epsRead(models []string) error {
	opLevel := registry.Models[0].Name
	if !slices.ContainsFunc(sp.EP, func(ep int) bool { return ep != 1 }) || slices.Contains(models, opLevel) {
		return nil
	}
	eps := make([]string, len(sp.EP))
	for i, ep := range sp.EP {
		eps[i] = strconv.Itoa(ep)
	}
	return fmt.Errorf("--ep-list %s: applies to --timing %s, and the passes are priced by --timing %s", strings.Join(eps, ","), opLevel, strings.Join(models, " and "))
}

// probes are the layouts of base's settings on each of the space's backends in each of its modes, at
// ratio 1:1: whether a setting is read or taken depends on the backend, the mode and the TPs, which
// they span, and not on the ratio or the scale.
func (sp *Space) probes(base *config.Config) []Shape {
	var all []Shape
	for _, b := range sp.Backends {
		s := Shape{Backend: b, EP: base.EP, MaxNumSeqs: base.MaxNumSeqs, MaxNumBatchedTokens: base.MaxNumBatchedTokens, Router: base.Router}
		for _, mode := range sp.Modes {
			all = append(all, sp.layouts(s, mode, []Ratio{{1, 1}})...)
		}
	}
	return all
}

// shapes lists the space's shapes in a fixed order; a combination the base configuration refuses
// (EP not dividing TP, TensorRT-LLM disaggregated, ...) is left out with the reason.
func (sp *Space) shapes(base *config.Config) (shapes []Shape, refused []string, err error) {
	if sp.MinWorkers < 1 || sp.MaxWorkers < sp.MinWorkers {
		return nil, nil, fmt.Errorf("workers %d to %d: want 1 <= min <= max", sp.MinWorkers, sp.MaxWorkers)
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"backends", len(sp.Backends)}, {"tp", len(sp.TP)}, {"ep", len(sp.EP)}, {"modes", len(sp.Modes)},
		{"max-num-seqs", len(sp.MaxNumSeqs)}, {"max-num-batched-tokens", len(sp.MaxNumBatchedTokens)}, {"routers", len(sp.Routers)}} {
		if l.n == 0 {
			return nil, nil, fmt.Errorf("search space: %s: empty list", l.name)
		}
	}
	for _, mode := range sp.Modes {
		if mode != "agg" && mode != "disagg" {
			return nil, nil, fmt.Errorf("mode %q: want agg or disagg", mode)
		}
		if mode == "disagg" && len(sp.Ratios) == 0 {
			return nil, nil, fmt.Errorf("search space: disagg needs at least one prefill:decode ratio")
		}
	}
	for _, backend := range sp.Backends {
		for _, mode := range sp.Modes {
			for _, ep := range sp.EP {
				for _, seqs := range sp.MaxNumSeqs {
					for _, mbt := range sp.MaxNumBatchedTokens {
						for _, rt := range sp.Routers {
							s := Shape{Backend: backend, EP: ep, MaxNumSeqs: seqs, MaxNumBatchedTokens: mbt, Router: rt}
							for _, s := range sp.layouts(s, mode, sp.Ratios) {
								lo, hi := s.scales(sp.MinWorkers, sp.MaxWorkers)
								cfg := s.config(base, lo)
								s.setPools(&cfg)
								switch {
								case lo > hi:
									refused = append(refused, fmt.Sprintf("%s: no multiple of %s fits in %d to %d workers", s, s.Ratio, sp.MinWorkers, sp.MaxWorkers))
								default:
									err := cfg.Validate()
									if err == nil {
										err = cfg.EPRead()
									}
									if err != nil {
										refused = append(refused, fmt.Sprintf("%s: %v", s, err))
										continue
									}
									o, err := cfg.SimOptions()
									if err != nil {
										refused = append(refused, fmt.Sprintf("%s: %v", s, err))
										continue
									}
									s.resolveAuto(o)
									shapes = append(shapes, s)
								}
							}
						}
					}
				}
			}
		}
	}
	return shapes, refused, nil
}

// setPools records what each pool of a disaggregated shape's deployment c runs, so that the report
// names it, a refused shape's included.
func (s *Shape) setPools(c *config.Config) {
	if !s.Disagg {
		return
	}
	pool := func(role string) Pool {
		rc := c.ForRole(role)
		return Pool{EP: rc.EP, MaxNumSeqs: rc.MaxNumSeqs, MaxNumBatchedTokens: rc.MaxNumBatchedTokens}
	}
	s.Pools = Pools{Prefill: pool("prefill"), Decode: pool("decode")}
}

// resolveAuto records what --max-num-seqs auto came to where a pool runs it, from the deployment's
// options o (each pool's, when disaggregated), so that the report names it.
func (s *Shape) resolveAuto(o sim.Options) {
	p, d := s.pools()
	if !s.Disagg {
		if p.MaxNumSeqs == 0 {
			s.AutoMaxNumSeqs = o.Engine.VLLM.MaxNumSeqs
		}
		return
	}
	if p.MaxNumSeqs == 0 {
		s.AutoMaxNumSeqs = o.PrefillEngine.VLLM.MaxNumSeqs
	}
	if d.MaxNumSeqs == 0 {
		s.AutoDecodeMaxNumSeqs = o.DecodeEngine.VLLM.MaxNumSeqs
	}
}

// config is the base configuration deployed as shape s at the given scale (deploy), less the timing
// models' own settings its pools do not read (--profile on vLLM priced by the op-level model): other
// shapes of the space read them, or Deployable refused them.
func (s Shape) config(base *config.Config, scale int) config.Config {
	c := s.deploy(base, scale)
	return c.WithoutUnreadTiming()
}

// deploy is the base configuration deployed as shape s at the given scale.
func (s Shape) deploy(base *config.Config, scale int) config.Config {
	c := base.OnBackend(s.Backend)
	c.EP, c.MaxNumSeqs, c.MaxNumBatchedTokens, c.Router = s.EP, s.MaxNumSeqs, s.MaxNumBatchedTokens, s.Router
	if !s.Disagg {
		c = c.Deployed(scale, 0, 0)
		c.TP = s.TP
		return c
	}
	c = c.Deployed(0, s.ratio.Prefill*scale, s.ratio.Decode*scale)
	// The shared TP is the prefill pool's, so settings derived from it (KV bytes) stay consistent.
	c.TP = s.PrefillTP
	pt, dt := s.PrefillTP, s.DecodeTP
	c.Prefill.TP, c.Decode.TP = &pt, &dt
	return c
}

// gpus is the GPUs the shape takes at a scale: workers × TP × data-parallel ranks, per pool.
func (s Shape) gpus(c *config.Config, scale int) int {
	if !s.Disagg {
		return scale * s.TP * c.DPSize
	}
	p, d := c.ForRole("prefill"), c.ForRole("decode")
	return scale * (s.ratio.Prefill*s.PrefillTP*p.DPSize + s.ratio.Decode*s.DecodeTP*d.DPSize)
}
