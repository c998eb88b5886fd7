package workload

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Length is a normal distribution of token counts: draws are rounded and
// clamped to >= 1 for input, >= 0 for output. Stddev 0 means constant.
type Length struct{ Mean, Stddev float64 }

// SyntheticOptions describes a generated workload.
type SyntheticOptions struct {
	NumRequests       int     // number of sessions (= requests when TurnsPerSession is 1)
	Input, Output     Length  // prompt and output lengths, drawn per request
	RequestRate       float64 // sessions per second; +Inf = all at t=0; ignored by "burst"
	Arrival           string  // "poisson" (default), "constant", "gamma", "burst" (all at t=0)
	Burstiness        float64 // gamma shape k (mean gap stays 1/rate, CV = 1/sqrt(k)); 1 = poisson, default 1
	SharedPrefixRatio float64 // [0,1]: fraction of the mean input length that is a prefix shared within a group
	NumPrefixGroups   int     // >= 1 when SharedPrefixRatio > 0; each session joins a group chosen uniformly at random

	TurnsPerSession int           // >= 1 (0 means 1)
	InterTurnDelay  time.Duration // mean wait after a turn completes before the next (turns > 1)
	InterTurnDist   string        // "constant" (default) or "exponential"

	// Clients > 0 makes the workload the clients of a closed-loop benchmark (vllm bench serve
	// --max-concurrency, genai-perf --concurrency): the NumRequests requests are dealt round-robin to
	// Clients sessions (client k sends requests k, k+Clients, k+2·Clients, ...), each client sends its
	// requests back to back (turns without History, Delay 0 but for Desync, every prompt drawn and
	// grouped on its own), and client k starts at k × Ramp / Clients. Arrival and RequestRate do not
	// apply; TurnsPerSession must be 1. Replayed following arrival times, this is a closed loop of
	// Clients requests in flight whose clients start staggered (Ramp) or drift apart (Desync) instead
	// of moving in lock step from time 0.
	Clients int
	Ramp    time.Duration // with Clients: client k starts at k × Ramp / Clients; 0 = all at time 0
	// Desync, with Clients: after its first request completes, client k waits k × Desync / Clients once
	// before its second, so clients that start together spread out from their second round on, as the
	// clients of a real benchmark drift apart (a deterministic replay otherwise keeps them in lock step
	// for good); 0 = no wait.
	Desync time.Duration

	// DatasetEntries > 0 makes the requests repeat a pool of that many prompts, as genai-perf and AIPerf
	// do (--num-dataset-entries, 100 by default there): each entry's lengths, prefix group and tokens are
	// drawn once and every request takes one entry's, in DatasetSampling order (SampleShuffle, the
	// default, SampleSequential or SampleRandom). 0: every request's prompt is its own.
	DatasetEntries  int
	DatasetSampling string

	// LoRAAdapters > 0 has every session served by one of that many LoRA adapters, named lora-0,
	// lora-1, ..., drawn by LoRADist: "uniform" (the default) or "zipf" (adapter k with weight 1/(k+1),
	// a few hot adapters and a long tail). A session's turns share its adapter; a closed-loop client's
	// requests draw theirs one by one.
	LoRAAdapters int
	LoRADist     string

	// ImagesPerRequest > 0 gives every prompt that many images of ImageTokens tokens each, placed after
	// its shared prefix and added to its drawn length (multimodal requests; see Request.Images).
	// ImagePool > 0 draws each image uniformly from that many distinct images, so images repeat and
	// the encoder cache and prefix cache can reuse them; 0: every image is new.
	ImagesPerRequest int
	ImageTokens      int
	ImagePool        int

	Seed uint64
}

// NewSynthetic validates the options and returns a lazy Source that
// generates sessions on demand, in O(1) memory in NumRequests.
//
// Arrivals: "constant" puts session i at i × round(1s/rate), the first at 0;
// "poisson" and "gamma" put the first session after one gap, as a process
// observed from time 0 would; "burst" (or an infinite rate) puts all at 0.
//
// A session's first turn starts with min(P, InputLen) tokens of its group's
// prefix, P = round(SharedPrefixRatio × Input.Mean); later turns have
// History set, fresh lengths (all of their new tokens unique) and a Delay
// of InterTurnDelay, constant or drawn from an exponential with that mean.
// Every turn's At is its session's arrival.
func NewSynthetic(o SyntheticOptions) (Source, error) {
	if err := o.normalize(); err != nil {
		return nil, fmt.Errorf("synthetic: %w", err)
	}
	g := &synthetic{
		o:        o,
		arrivals: newStream(o.Seed, streamArrivals),
		inputs:   newStream(o.Seed, streamInput),
		outputs:  newStream(o.Seed, streamOutput),
		groups:   newStream(o.Seed, streamGroups),
		delays:   newStream(o.Seed, streamDelays),
		salt:     streamSeed(o.Seed, streamUniqueTokens),
		prefix:   streamSeed(o.Seed, streamPrefixTokens),
	}
	if o.ImagesPerRequest > 0 {
		g.imagePick, g.imageSeed = newStream(o.Seed, streamImagePick), streamSeed(o.Seed, streamImageKeys)
	}
	if o.SharedPrefixRatio > 0 {
		g.prefixLen = int(math.Round(o.SharedPrefixRatio * o.Input.Mean))
	}
	if o.DatasetEntries > 0 {
		g.pool = newDataset(g, o.DatasetEntries, o.DatasetSampling, o.Seed)
	}
	if o.LoRAAdapters > 0 {
		g.loras = newLoRAs(o.LoRAAdapters, o.LoRADist, streamSeed(o.Seed, streamLoRA))
	}
	return g, nil
}

// normalize fills defaults and reports the first invalid option, named as
// the command line names it.
func (o *SyntheticOptions) normalize() error {
	if o.NumRequests < 1 {
		return fmt.Errorf("num-requests: must be >= 1, got %d", o.NumRequests)
	}
	if err := o.Input.check("input-tokens", 1); err != nil {
		return err
	}
	if err := o.Output.check("output-tokens", 0); err != nil {
		return err
	}
	if o.Arrival == "" {
		o.Arrival = "poisson"
	}
	switch o.Arrival {
	case "poisson", "constant", "gamma":
		if !(o.RequestRate > 0) {
			return fmt.Errorf("request-rate: must be > 0 (or +Inf) for %s arrivals, got %v", o.Arrival, o.RequestRate)
		}
	case "burst":
	default:
		return fmt.Errorf("arrival: unknown process %q (want poisson, constant, gamma or burst)", o.Arrival)
	}
	switch {
	case o.Burstiness == 0:
		o.Burstiness = 1
	case o.Arrival == "gamma" && !(o.Burstiness > 0 && o.Burstiness < math.Inf(1)):
		return fmt.Errorf("burstiness: must be > 0 and finite, got %v", o.Burstiness)
	case o.Arrival != "gamma" && o.Burstiness != 1:
		return fmt.Errorf("burstiness: only applies to gamma arrivals (arrival is %s)", o.Arrival)
	}
	if !(o.SharedPrefixRatio >= 0 && o.SharedPrefixRatio <= 1) {
		return fmt.Errorf("shared-prefix-ratio: must be in [0, 1], got %v", o.SharedPrefixRatio)
	}
	switch {
	case o.NumPrefixGroups < 0:
		return fmt.Errorf("num-prefix-groups: must be >= 1, got %d", o.NumPrefixGroups)
	case o.SharedPrefixRatio > 0 && o.NumPrefixGroups < 1:
		return fmt.Errorf("num-prefix-groups: must be >= 1 when shared-prefix-ratio > 0, got %d", o.NumPrefixGroups)
	}
	if o.TurnsPerSession == 0 {
		o.TurnsPerSession = 1
	}
	switch {
	case o.TurnsPerSession < 0:
		return fmt.Errorf("turns-per-session: must be >= 1, got %d", o.TurnsPerSession)
	case o.TurnsPerSession > maxTurns:
		return fmt.Errorf("turns-per-session: must be <= %d, got %d", maxTurns, o.TurnsPerSession)
	case o.NumRequests > math.MaxInt32/o.TurnsPerSession:
		return fmt.Errorf("num-requests: %d sessions of %d turns are too many requests", o.NumRequests, o.TurnsPerSession)
	case float64(o.TurnsPerSession)*(o.Input.Mean+o.Output.Mean) > MaxTokens:
		// Each turn's prompt carries the conversation so far.
		return fmt.Errorf("turns-per-session: %d turns of %v + %v tokens make a last prompt of about %.0f tokens, more than %d",
			o.TurnsPerSession, o.Input.Mean, o.Output.Mean, float64(o.TurnsPerSession)*(o.Input.Mean+o.Output.Mean), MaxTokens)
	}
	switch {
	case o.Clients < 0:
		return fmt.Errorf("concurrency: must be >= 0, got %d clients", o.Clients)
	case o.Ramp < 0:
		return fmt.Errorf("concurrency-ramp: must be >= 0, got %v", o.Ramp)
	case o.Ramp > 0 && o.Clients == 0:
		return fmt.Errorf("concurrency-ramp: %v needs closed-loop clients (concurrency > 0)", o.Ramp)
	case o.Desync < 0:
		return fmt.Errorf("concurrency-desync: must be >= 0, got %v", o.Desync)
	case o.Desync > 0 && o.Clients == 0:
		return fmt.Errorf("concurrency-desync: %v needs closed-loop clients (concurrency > 0)", o.Desync)
	case o.Clients > 0 && o.TurnsPerSession > 1:
		return fmt.Errorf("turns-per-session: %d turns do not combine with closed-loop clients (each client's requests are independent)", o.TurnsPerSession)
	case o.Clients > 0 && (o.NumRequests+o.Clients-1)/o.Clients > maxClientRequests:
		return fmt.Errorf("num-requests: %d over %d clients are more than %d per client (a client's requests are made at once)",
			o.NumRequests, o.Clients, maxClientRequests)
	}
	if err := o.checkDataset(); err != nil {
		return err
	}
	switch {
	case o.LoRAAdapters < 0 || o.LoRAAdapters > maxLoRAs:
		return fmt.Errorf("lora-adapters: must be in [0, %d], got %d", maxLoRAs, o.LoRAAdapters)
	case o.LoRADist != "" && o.LoRAAdapters == 0:
		return fmt.Errorf("lora-dist: %q needs lora-adapters > 0", o.LoRADist)
	case o.LoRADist == "":
		o.LoRADist = "uniform"
	case o.LoRADist != "uniform" && o.LoRADist != "zipf":
		return fmt.Errorf("lora-dist: unknown distribution %q (want uniform or zipf)", o.LoRADist)
	}
	if err := o.checkImages(); err != nil {
		return err
	}
	if o.InterTurnDelay < 0 {
		return fmt.Errorf("inter-turn-delay: must be >= 0, got %v", o.InterTurnDelay)
	}
	switch o.InterTurnDist {
	case "":
		o.InterTurnDist = "constant"
	case "constant", "exponential":
	default:
		return fmt.Errorf("inter-turn-dist: unknown distribution %q (want constant or exponential)", o.InterTurnDist)
	}
	return nil
}

func (l Length) check(name string, least float64) error {
	switch {
	case math.IsNaN(l.Mean) || math.IsInf(l.Mean, 0):
		return fmt.Errorf("%s: mean must be finite, got %v", name, l.Mean)
	case l.Mean < least:
		return fmt.Errorf("%s: mean must be >= %v, got %v", name, least, l.Mean)
	case l.Mean > MaxTokens:
		return fmt.Errorf("%s: mean must be <= %d, got %v", name, MaxTokens, l.Mean)
	case !(l.Stddev >= 0) || math.IsInf(l.Stddev, 0):
		return fmt.Errorf("%s: stddev must be >= 0 and finite, got %v", name, l.Stddev)
	}
	return nil
}

// draw returns a length: normal, rounded, clamped to [least, MaxTokens].
func (l Length) draw(r *rand.Rand, least int) int {
	v := l.Mean
	if l.Stddev > 0 {
		v += l.Stddev * r.NormFloat64()
	}
	return int(math.Round(min(max(v, float64(least)), MaxTokens)))
}

// synthetic is the Source of NewSynthetic.
type synthetic struct {
	o     SyntheticOptions
	next  int     // index of the next session
	clock float64 // seconds: arrival of the last session (poisson, gamma)

	arrivals, inputs, outputs, groups, delays *rand.Rand

	salt      uint64 // of request-unique tokens
	prefix    uint64 // seed of the groups' prefix tokens
	prefixLen int    // P, 0 without shared prefixes

	pool  *dataset // nil: every prompt is the request's own
	loras *loras   // nil: the base model serves every request

	imagePick *rand.Rand // nil without images
	imageSeed uint64
}

// maxTurns bounds a session: its turns' draws are taken at once (16 bytes each; Session.Turn makes a
// turn when asked), and agentic sessions have hundreds.
const maxTurns = 1 << 16

// maxClientRequests bounds the requests of one closed-loop client, which are made at once too.
const maxClientRequests = 1 << 20

var errArrivalOverflow = errors.New("synthetic: arrival time overflows time.Duration (request-rate too low?)")

func (g *synthetic) Requests() int { return g.o.NumRequests * g.o.TurnsPerSession }

func (g *synthetic) Next() (*Session, error) {
	if g.o.Clients > 0 {
		return g.nextClient()
	}
	if g.next >= g.o.NumRequests {
		return nil, io.EOF
	}
	i := g.next
	g.next++
	at, err := g.arrival(i)
	if err != nil {
		return nil, err
	}
	if g.pool != nil {
		r := Request{Key: uint64(i), At: at}
		g.pool.apply(&r)
		r.LoRA = g.loras.pick(r.Key)
		g.syntheticImages(&r)
		return &Session{Turns: []Request{r}}, nil
	}
	prefix, _ := g.group(0)
	n := g.o.TurnsPerSession
	// The first turn is made whole; the later ones keep their draws (Session.Turn makes them), drawn in
	// the same order as the first's: input, output, then the delay.
	lora := g.loras.pick(uint64(i * n)) // the conversation's adapter
	s := &Session{Turns: []Request{{Key: uint64(i * n), At: at, LoRA: lora, salt: g.salt}}}
	r := &s.Turns[0]
	r.InputLen = g.o.Input.draw(g.inputs, 1)
	r.OutputLen = g.o.Output.draw(g.outputs, 0)
	r.prefixLen = int32(min(g.prefixLen, r.InputLen))
	r.prefix = prefix
	g.syntheticImages(r)
	if n > 1 {
		s.later = make([]laterTurn, n-1)
	}
	for j := range s.later {
		l := &s.later[j]
		l.inputLen = int32(g.o.Input.draw(g.inputs, 1))
		l.outputLen = int32(g.o.Output.draw(g.outputs, 0))
		l.delay = g.o.InterTurnDelay
		if g.o.InterTurnDist == "exponential" {
			l.delay = time.Duration(math.Round(g.delays.ExpFloat64() * float64(g.o.InterTurnDelay)))
		}
	}
	return s, nil
}

// nextClient returns the next closed-loop client (SyntheticOptions.Clients): client k sends requests
// k, k+Clients, ... back to back from k × Ramp / Clients.
func (g *synthetic) nextClient() (*Session, error) {
	c, total := g.o.Clients, g.o.NumRequests
	k := g.next
	if k >= c || k >= total {
		return nil, io.EOF
	}
	g.next++
	at := share(g.o.Ramp, k, c)
	turns := make([]Request, (total-k+c-1)/c)
	for j := range turns {
		r := &turns[j]
		r.Key = uint64(k + j*c)
		r.Turn = j
		r.At = at
		if j == 1 {
			r.Delay = share(g.o.Desync, k, c)
		}
		r.LoRA = g.loras.pick(r.Key)
		if g.pool != nil {
			g.pool.apply(r)
			g.syntheticImages(r)
			continue
		}
		r.InputLen = g.o.Input.draw(g.inputs, 1)
		r.OutputLen = g.o.Output.draw(g.outputs, 0)
		r.salt = g.salt
		var n int
		r.prefix, n = g.group(r.InputLen)
		r.prefixLen = int32(n)
		g.syntheticImages(r)
	}
	return &Session{Turns: turns}, nil
}

// maxLoRAs bounds the synthetic adapters (their names are made at once).
const maxLoRAs = 1 << 16

// loras draws the adapter of a request from its Key alone, so that the draw depends on nothing else
// that is drawn.
type loras struct {
	names []string
	cdf   []float64 // zipf: cumulative weights; nil: uniform
	seed  uint64
}

func newLoRAs(n int, dist string, seed uint64) *loras {
	l := &loras{names: make([]string, n), seed: seed}
	for k := range l.names {
		l.names[k] = "lora-" + strconv.Itoa(k)
	}
	if dist == "zipf" {
		l.cdf = make([]float64, n)
		sum := 0.0
		for k := range l.cdf {
			sum += 1 / float64(k+1)
			l.cdf[k] = sum
		}
	}
	return l
}

// pick returns the adapter of the request with key, "" without adapters.
func (l *loras) pick(key uint64) string {
	if l == nil {
		return ""
	}
	u := float64(mix64(l.seed^(key+1)*golden)>>11) / (1 << 53) // uniform in [0, 1)
	if l.cdf == nil {
		return l.names[min(int(u*float64(len(l.names))), len(l.names)-1)]
	}
	k, _ := slices.BinarySearch(l.cdf, u*l.cdf[len(l.cdf)-1])
	return l.names[min(k, len(l.names)-1)]
}

// group draws a prompt's shared-prefix group: the group's prefix seed and the prefix length of a
// prompt of inputLen tokens (0 and 0 without shared prefixes).
func (g *synthetic) group(inputLen int) (prefix uint64, prefixLen int) {
	if g.o.SharedPrefixRatio == 0 {
		return 0, 0
	}
	group := g.groups.IntN(g.o.NumPrefixGroups)
	return mix64(g.prefix + uint64(group+1)*golden), min(g.prefixLen, inputLen)
}

// share is k × d / n without overflow: whole steps of d/n, then the remainder's share.
func share(d time.Duration, k, n int) time.Duration {
	return d/time.Duration(n)*time.Duration(k) + d%time.Duration(n)*time.Duration(k)/time.Duration(n)
}

// arrival returns the arrival of session i; sessions are asked in order.
func (g *synthetic) arrival(i int) (time.Duration, error) {
	rate := g.o.RequestRate
	if g.o.Arrival == "burst" || math.IsInf(rate, 1) {
		return 0, nil
	}
	var sec float64
	switch g.o.Arrival {
	case "constant":
		// A whole number of nanoseconds apart, so that every gap is equal.
		gap := math.Round(1e9 / rate)
		if gap*float64(i) >= math.MaxInt64 {
			return 0, errArrivalOverflow
		}
		return time.Duration(i) * time.Duration(gap), nil
	case "poisson":
		g.clock += g.arrivals.ExpFloat64() / rate
		sec = g.clock
	case "gamma":
		k := g.o.Burstiness
		g.clock += gammaVariate(g.arrivals, k) / (rate * k)
		sec = g.clock
	}
	ns := math.Round(sec * 1e9)
	if ns >= math.MaxInt64 {
		return 0, errArrivalOverflow
	}
	return time.Duration(ns), nil
}
