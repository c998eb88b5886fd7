package workload

import (
	"io"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func newSynthetic(t testing.TB, o SyntheticOptions) Source {
	t.Helper()
	src, err := NewSynthetic(o)
	if err != nil {
		t.Fatalf("NewSynthetic(%+v): %v", o, err)
	}
	return src
}

// gaps returns the arrival gaps of the sessions, the first from 0.
func gaps(sessions []*Session) []float64 {
	var out []float64
	prev := time.Duration(0)
	for _, s := range sessions {
		out = append(out, (s.Turns[0].At - prev).Seconds())
		prev = s.Turns[0].At
	}
	return out
}

func meanStd(xs []float64) (mean, std float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(xs)))
}

var chat = SyntheticOptions{
	NumRequests:       50,
	Input:             Length{Mean: 200, Stddev: 50},
	Output:            Length{Mean: 100, Stddev: 30},
	RequestRate:       10,
	SharedPrefixRatio: 0.5,
	NumPrefixGroups:   4,
	TurnsPerSession:   3,
	InterTurnDelay:    2 * time.Second,
	InterTurnDist:     "exponential",
	Seed:              7,
}

// tokensOf returns every session's requests with their tokens.
func tokensOf(t *testing.T, o SyntheticOptions) ([]Request, [][]uint32) {
	reqs := requests(collect(t, newSynthetic(t, o)))
	toks := make([][]uint32, len(reqs))
	for i := range reqs {
		toks[i] = reqs[i].AppendTokens(nil)
	}
	return reqs, toks
}

func TestSyntheticDeterminism(t *testing.T) {
	r1, t1 := tokensOf(t, chat)
	r2, t2 := tokensOf(t, chat)
	if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(t1, t2) {
		t.Error("same seed gave different sessions or tokens")
	}
	other := chat
	other.Seed = 8
	r3, t3 := tokensOf(t, other)
	if reflect.DeepEqual(r1, r3) {
		t.Error("different seeds gave the same sessions")
	}
	for i := range t1 {
		if slices.Equal(t1[i], t3[i]) {
			t.Errorf("request %d: different seeds gave the same tokens", i)
		}
	}
}

// Each concern draws from its own stream: changing one leaves the others.
func TestSyntheticStreamsIndependent(t *testing.T) {
	base, _ := tokensOf(t, chat)
	changes := []func(o *SyntheticOptions){
		func(o *SyntheticOptions) { o.Output.Stddev = 0 },
		func(o *SyntheticOptions) { o.SharedPrefixRatio = 0 },
		func(o *SyntheticOptions) { o.InterTurnDist = "constant" },
		func(o *SyntheticOptions) { o.Arrival = "constant" },
	}
	for i, change := range changes {
		o := chat
		change(&o)
		got, _ := tokensOf(t, o)
		for j := range base {
			a, b := base[j], got[j]
			if a.InputLen != b.InputLen {
				t.Errorf("change %d: request %d input %d, was %d", i, j, b.InputLen, a.InputLen)
			}
			if o.Arrival == chat.Arrival && a.At != b.At {
				t.Errorf("change %d: request %d arrives at %v, was %v", i, j, b.At, a.At)
			}
			if o.Output == chat.Output && a.OutputLen != b.OutputLen {
				t.Errorf("change %d: request %d output %d, was %d", i, j, b.OutputLen, a.OutputLen)
			}
		}
	}
}

func TestSyntheticConstantArrivals(t *testing.T) {
	tests := []struct {
		rate float64
		gap  time.Duration
	}{
		{4, 250 * time.Millisecond},
		{3, 333333333 * time.Nanosecond},
		{0.5, 2 * time.Second},
	}
	for _, tt := range tests {
		o := SyntheticOptions{NumRequests: 100, Input: Length{Mean: 10}, Output: Length{Mean: 1}, RequestRate: tt.rate, Arrival: "constant"}
		for i, s := range collect(t, newSynthetic(t, o)) {
			if want := time.Duration(i) * tt.gap; s.Turns[0].At != want {
				t.Fatalf("rate %v: session %d at %v, want %v", tt.rate, i, s.Turns[0].At, want)
			}
		}
	}
}

func TestSyntheticPoissonArrivals(t *testing.T) {
	const rate, n = 20.0, 20000
	o := SyntheticOptions{NumRequests: n, Input: Length{Mean: 10}, Output: Length{Mean: 1}, RequestRate: rate, Seed: 1}
	g := gaps(collect(t, newSynthetic(t, o)))
	mean, std := meanStd(g)
	t.Logf("poisson: mean gap %.5fs, CV %.3f", mean, std/mean)
	if math.Abs(mean*rate-1) > 0.03 || math.Abs(std/mean-1) > 0.05 {
		t.Errorf("poisson gaps: mean %.5fs (want %.5f), CV %.3f (want 1)", mean, 1/rate, std/mean)
	}
	if g[0] <= 0 {
		t.Errorf("first poisson arrival at %v, want after the first gap", g[0])
	}
	if slices.ContainsFunc(g, func(x float64) bool { return x < 0 }) {
		t.Error("arrivals are not in order")
	}
}

func TestSyntheticGammaArrivals(t *testing.T) {
	const rate, n = 5.0, 20000
	for _, k := range []float64{0.25, 1, 4} {
		o := SyntheticOptions{NumRequests: n, Input: Length{Mean: 10}, Output: Length{Mean: 1},
			RequestRate: rate, Arrival: "gamma", Burstiness: k, Seed: 2}
		mean, std := meanStd(gaps(collect(t, newSynthetic(t, o))))
		t.Logf("gamma k=%v: mean gap %.5fs, CV %.3f", k, mean, std/mean)
		if cv := std / mean; math.Abs(mean*rate-1) > 0.03 || math.Abs(cv*math.Sqrt(k)-1) > 0.05 {
			t.Errorf("gamma k=%v: mean gap %.5fs (want %.5f), CV %.3f (want %.3f)", k, mean, 1/rate, cv, 1/math.Sqrt(k))
		}
	}
}

func TestSyntheticBurst(t *testing.T) {
	for _, o := range []SyntheticOptions{
		{NumRequests: 100, Input: Length{Mean: 10}, Output: Length{Mean: 1}, Arrival: "burst"},
		{NumRequests: 100, Input: Length{Mean: 10}, Output: Length{Mean: 1}, RequestRate: math.Inf(1)},
		{NumRequests: 100, Input: Length{Mean: 10}, Output: Length{Mean: 1}, RequestRate: math.Inf(1), Arrival: "gamma", Burstiness: 0.5},
	} {
		for _, s := range collect(t, newSynthetic(t, o)) {
			if s.Turns[0].At != 0 {
				t.Fatalf("%+v: session at %v, want 0", o, s.Turns[0].At)
			}
		}
	}
}

func TestSyntheticLengths(t *testing.T) {
	o := SyntheticOptions{NumRequests: 20000, Input: Length{Mean: 1000, Stddev: 100}, Output: Length{Mean: 3, Stddev: 10},
		Arrival: "burst", Seed: 3}
	var in, out []float64
	for _, r := range requests(collect(t, newSynthetic(t, o))) {
		if r.OutputLen < 0 {
			t.Fatalf("output length %d < 0", r.OutputLen)
		}
		in = append(in, float64(r.InputLen))
		out = append(out, float64(r.OutputLen))
	}
	if mean, std := meanStd(in); math.Abs(mean-1000) > 3 || math.Abs(std-100) > 3 {
		t.Errorf("input lengths: mean %.1f std %.1f, want 1000 and 100", mean, std)
	}
	if slices.Min(out) != 0 {
		t.Error("output lengths never clamp to 0")
	}

	o = SyntheticOptions{NumRequests: 1000, Input: Length{Mean: 1, Stddev: 10}, Output: Length{Mean: 5.5}, Arrival: "burst"}
	for _, r := range requests(collect(t, newSynthetic(t, o))) {
		if r.InputLen < 1 || r.OutputLen != 6 {
			t.Fatalf("input %d (want >= 1), output %d (want round(5.5) = 6)", r.InputLen, r.OutputLen)
		}
	}
}

func TestSyntheticSharedPrefix(t *testing.T) {
	// P = round(0.25 × 400) = 100; some prompts are shorter than P.
	o := SyntheticOptions{NumRequests: 200, Input: Length{Mean: 400, Stddev: 200}, Output: Length{Mean: 1},
		Arrival: "burst", SharedPrefixRatio: 0.25, NumPrefixGroups: 3, Seed: 4}
	reqs, toks := tokensOf(t, o)
	prefixes := map[uint64][]uint32{} // group → its first 100 tokens, as seen so far
	short := 0
	for i, r := range reqs {
		tok := toks[i]
		if len(tok) != r.InputLen {
			t.Fatalf("request %d: %d tokens, InputLen %d", i, len(tok), r.InputLen)
		}
		p := min(100, r.InputLen)
		if int(r.prefixLen) != p {
			t.Fatalf("request %d: prefix %d tokens, want %d", i, r.prefixLen, p)
		}
		if p < 100 {
			short++
		}
		for j, x := range tok {
			if (j < p) == (x&uniqueBit != 0) {
				t.Fatalf("request %d token %d = %#x: prefix tokens must have the top bit clear, unique ones set", i, j, x)
			}
		}
		seen := prefixes[r.prefix]
		n := min(len(seen), p)
		if !slices.Equal(seen[:n], tok[:n]) {
			t.Errorf("request %d: prefix differs from its group's", i)
		}
		if p > len(seen) {
			prefixes[r.prefix] = tok[:p]
		}
	}
	if len(prefixes) != 3 || short == 0 {
		t.Fatalf("%d groups, %d prompts shorter than the prefix; want 3 groups and some", len(prefixes), short)
	}
	var groups [][]uint32
	for _, p := range prefixes {
		groups = append(groups, p)
	}
	for i := range groups {
		for j := range i {
			if slices.Equal(groups[i][:10], groups[j][:10]) {
				t.Error("two groups share prefix tokens")
			}
		}
	}
	// The unique remainders of two requests have nothing in common.
	a, b := toks[0][reqs[0].prefixLen:], toks[1][reqs[1].prefixLen:]
	if slices.ContainsFunc(a, func(x uint32) bool { return slices.Contains(b, x) }) {
		t.Error("request-unique tokens repeat across requests")
	}
}

// TestSyntheticLaterTurnsCompact: a conversation keeps of its later turns only their draws until
// Session.Turn makes them, so that the sessions an overloaded replay holds waiting to start cost their
// first turn each, not every turn: 1,000 sessions of 16 turns allocate under a quarter of 16,000
// Requests (making every turn took all of them: 4.9 MB), and each turn Turn and TurnAt make is the same
// every time.
func TestSyntheticLaterTurnsCompact(t *testing.T) {
	const sessions, turns = 1000, 16
	src := newSynthetic(t, SyntheticOptions{NumRequests: sessions, Input: Length{Mean: 100, Stddev: 30},
		Output: Length{Mean: 20, Stddev: 5}, RequestRate: 10, TurnsPerSession: turns, InterTurnDelay: time.Second,
		InterTurnDist: "exponential", Seed: 7})
	held := make([]*Session, 0, sessions)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range sessions {
		s, err := src.Next()
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, s)
	}
	runtime.ReadMemStats(&after)
	all := uint64(sessions*turns) * uint64(unsafe.Sizeof(Request{}))
	if got := after.TotalAlloc - before.TotalAlloc; got > all/4 {
		t.Errorf("%d sessions of %d turns allocated %d bytes; want under %d, a quarter of every turn made", sessions, turns, got, all/4)
	}
	for _, s := range held {
		if s.Len() != turns {
			t.Fatalf("session of %d turns, want %d", s.Len(), turns)
		}
		for i := range turns {
			var r Request
			if a, b, c := s.Turn(i), s.Turn(i), s.TurnAt(i, &r); !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, c) {
				t.Fatalf("turn %d made three times: %+v, %+v, then in place %+v", i, a, b, c)
			}
			if i == 0 && s.TurnAt(0, &r) != &s.Turns[0] {
				t.Fatal("TurnAt(0) is not the session's first turn")
			}
		}
	}
}

// TestSyntheticDrawOrder pins what seed 7 draws for the first two conversations of chat: every turn's
// input, output and delay. Inputs, outputs and delays have a stream each, so what moves them is when a
// turn's draws are taken: a later turn drawn when it is made rather than with its session would give
// the second session the first one's later draws, and change every replay's output.
func TestSyntheticDrawOrder(t *testing.T) {
	want := []struct {
		in, out int
		delay   time.Duration
	}{
		{229, 114, 0}, {204, 99, 499381508}, {243, 137, 1744087853},
		{266, 112, 0}, {230, 135, 707118999}, {132, 57, 461153663},
	}
	src := newSynthetic(t, chat)
	for k := range 2 {
		s, err := src.Next()
		if err != nil {
			t.Fatal(err)
		}
		for j := range s.Len() {
			r, w := s.Turn(j), want[3*k+j]
			if r.InputLen != w.in || r.OutputLen != w.out || r.Delay != w.delay {
				t.Errorf("session %d turn %d: in %d out %d delay %d, want %d %d %d", k, j, r.InputLen, r.OutputLen, r.Delay, w.in, w.out, w.delay)
			}
		}
	}
}

func TestSyntheticMultiTurn(t *testing.T) {
	o := SyntheticOptions{NumRequests: 4, Input: Length{Mean: 100}, Output: Length{Mean: 20}, RequestRate: 1,
		Arrival: "constant", TurnsPerSession: 3, InterTurnDelay: 1500 * time.Millisecond, SharedPrefixRatio: 0.5, NumPrefixGroups: 1}
	src := newSynthetic(t, o)
	if n := src.Requests(); n != 12 {
		t.Errorf("Requests() = %d, want 12", n)
	}
	sessions := collect(t, src)
	if len(sessions) != 4 {
		t.Fatalf("%d sessions, want 4", len(sessions))
	}
	for i, s := range sessions {
		if s.Len() != 3 {
			t.Fatalf("session %d has %d turns", i, s.Len())
		}
		for j, r := range turns(s) {
			want := Request{Key: uint64(3*i + j), Turn: j, At: time.Duration(i) * time.Second, InputLen: 100, OutputLen: 20}
			if j > 0 {
				want.History, want.Delay = true, 1500*time.Millisecond
			}
			if r.Key != want.Key || r.Turn != want.Turn || r.At != want.At || r.Delay != want.Delay || r.History != want.History ||
				r.InputLen != want.InputLen || r.OutputLen != want.OutputLen || r.Line != 0 || r.ID != "" {
				t.Errorf("session %d turn %d: %s history=%v in=%d out=%d, want %s history=%v in=100 out=20",
					i, j, turnSummary(r), r.History, r.InputLen, r.OutputLen, turnSummary(want), want.History)
			}
			if tok := r.AppendTokens(nil); (j == 0) != (tok[0]&uniqueBit == 0) {
				t.Errorf("session %d turn %d: starts with %#x; only first turns start with the shared prefix", i, j, tok[0])
			}
		}
	}
	if _, err := src.Next(); err != io.EOF {
		t.Errorf("Next after the end = %v, want io.EOF", err)
	}

	// Exponential inter-turn delays have the given mean.
	o = SyntheticOptions{NumRequests: 10000, Input: Length{Mean: 10}, Output: Length{Mean: 1}, Arrival: "burst",
		TurnsPerSession: 2, InterTurnDelay: time.Second, InterTurnDist: "exponential", Seed: 5}
	var delays []float64
	for _, s := range collect(t, newSynthetic(t, o)) {
		delays = append(delays, s.Turn(1).Delay.Seconds())
	}
	if mean, std := meanStd(delays); math.Abs(mean-1) > 0.03 || math.Abs(std-1) > 0.05 {
		t.Errorf("exponential delays: mean %.3fs std %.3fs, want 1s and 1s", mean, std)
	}
}

// Generation is lazy: a billion sessions cost nothing until pulled.
func TestSyntheticLazy(t *testing.T) {
	src := newSynthetic(t, SyntheticOptions{NumRequests: 1e9, Input: Length{Mean: 10}, Output: Length{Mean: 1}, RequestRate: 1})
	if n := src.Requests(); n != 1e9 {
		t.Errorf("Requests() = %d", n)
	}
	if _, err := src.Next(); err != nil {
		t.Fatal(err)
	}
}

func TestSyntheticValidation(t *testing.T) {
	valid := SyntheticOptions{NumRequests: 1, Input: Length{Mean: 10}, Output: Length{Mean: 1}, RequestRate: 1}
	tests := []struct {
		change func(o *SyntheticOptions)
		want   string
	}{
		{func(o *SyntheticOptions) { o.NumRequests = 0 }, "synthetic: num-requests: must be >= 1"},
		{func(o *SyntheticOptions) { o.Input.Mean = 0 }, "synthetic: input-tokens: mean must be >= 1"},
		{func(o *SyntheticOptions) { o.Input.Mean = math.NaN() }, "synthetic: input-tokens: mean must be finite"},
		{func(o *SyntheticOptions) { o.Input.Mean = 1e12 }, "synthetic: input-tokens: mean must be <= 16777216"},
		{func(o *SyntheticOptions) { o.Input.Stddev = -1 }, "synthetic: input-tokens: stddev must be >= 0"},
		{func(o *SyntheticOptions) { o.Output.Mean = -1 }, "synthetic: output-tokens: mean must be >= 0"},
		{func(o *SyntheticOptions) { o.Output.Stddev = math.Inf(1) }, "synthetic: output-tokens: stddev must be >= 0 and finite"},
		{func(o *SyntheticOptions) { o.RequestRate = 0 }, "synthetic: request-rate: must be > 0"},
		{func(o *SyntheticOptions) { o.RequestRate = math.NaN() }, "synthetic: request-rate: must be > 0"},
		{func(o *SyntheticOptions) { o.Arrival = "uniform" }, `synthetic: arrival: unknown process "uniform"`},
		{func(o *SyntheticOptions) { o.Arrival, o.Burstiness = "gamma", -1 }, "synthetic: burstiness: must be > 0"},
		{func(o *SyntheticOptions) { o.Burstiness = 2 }, "synthetic: burstiness: only applies to gamma arrivals"},
		{func(o *SyntheticOptions) { o.SharedPrefixRatio = 1.5 }, "synthetic: shared-prefix-ratio: must be in [0, 1]"},
		{func(o *SyntheticOptions) { o.SharedPrefixRatio = 0.5 }, "synthetic: num-prefix-groups: must be >= 1 when shared-prefix-ratio > 0"},
		{func(o *SyntheticOptions) { o.NumPrefixGroups = -1 }, "synthetic: num-prefix-groups: must be >= 1"},
		{func(o *SyntheticOptions) { o.TurnsPerSession = -2 }, "synthetic: turns-per-session: must be >= 1"},
		{func(o *SyntheticOptions) { o.InterTurnDelay = -time.Second }, "synthetic: inter-turn-delay: must be >= 0"},
		{func(o *SyntheticOptions) { o.NumRequests = 1 << 31 }, "synthetic: num-requests: 2147483648 sessions of 1 turns are too many requests"},
		{func(o *SyntheticOptions) { o.TurnsPerSession = 100_000_000 }, "synthetic: turns-per-session: must be <= 65536, got 100000000"},
		{func(o *SyntheticOptions) { o.Input.Mean, o.TurnsPerSession = 1024, 20_000 },
			"synthetic: turns-per-session: 20000 turns of 1024 + 1 tokens make a last prompt of about 20500000 tokens, more than 16777216"},
		{func(o *SyntheticOptions) { o.InterTurnDist = "normal" }, `synthetic: inter-turn-dist: unknown distribution "normal"`},
	}
	for _, tt := range tests {
		o := valid
		tt.change(&o)
		_, err := NewSynthetic(o)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("NewSynthetic(%+v) = %v, want an error starting %q", o, err, tt.want)
		}
	}
	// Rate is not needed for a burst.
	o := valid
	o.RequestRate, o.Arrival = 0, "burst"
	if _, err := NewSynthetic(o); err != nil {
		t.Errorf("burst without a rate: %v", err)
	}
}

func TestSyntheticClients(t *testing.T) {
	o := SyntheticOptions{
		NumRequests: 7,
		Input:       Length{Mean: 100},
		Output:      Length{Mean: 10},
		RequestRate: math.Inf(1),
		Clients:     3,
		Ramp:        300 * time.Millisecond,
		Seed:        1,
	}
	src := newSynthetic(t, o)
	if n := src.Requests(); n != 7 {
		t.Errorf("Requests() = %d, want 7", n)
	}
	sessions := collect(t, src)
	// Client k sends requests k, k+3, k+6, ... back to back from k × 100 ms.
	wantKeys := [][]uint64{{0, 3, 6}, {1, 4}, {2, 5}}
	wantAt := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond}
	if len(sessions) != 3 {
		t.Fatalf("%d sessions, want 3", len(sessions))
	}
	for k, s := range sessions {
		var keys []uint64
		for j, r := range s.Turns {
			keys = append(keys, r.Key)
			if r.Turn != j || r.At != wantAt[k] || r.Delay != 0 || r.History || r.InputLen != 100 || r.OutputLen != 10 {
				t.Errorf("client %d request %d = %+v, want turn %d at %v, no delay, no history, 100 in, 10 out", k, j, r, j, wantAt[k])
			}
		}
		if !slices.Equal(keys, wantKeys[k]) {
			t.Errorf("client %d keys %v, want %v", k, keys, wantKeys[k])
		}
	}

	// Desync: client k waits k × 300/3 ms once, before its second request.
	o.Ramp, o.Desync = 0, 300*time.Millisecond
	for k, s := range collect(t, newSynthetic(t, o)) {
		for j, r := range s.Turns {
			want := time.Duration(0)
			if j == 1 {
				want = time.Duration(k) * 100 * time.Millisecond
			}
			if r.At != 0 || r.Delay != want {
				t.Errorf("desync: client %d request %d at %v after %v, want at 0 after %v", k, j, r.At, r.Delay, want)
			}
		}
	}
	o.Desync = 0

	// More clients than requests: one session per request; the ramp is still per client.
	o.NumRequests, o.Ramp = 2, 7*time.Nanosecond
	sessions = collect(t, newSynthetic(t, o))
	if len(sessions) != 2 || sessions[1].Turns[0].At != 2 || len(sessions[0].Turns) != 1 {
		t.Errorf("2 requests over 3 clients: %d sessions, second at %v", len(sessions), sessions[1].Turns[0].At)
	}

	// Each request of a client is its own prompt: request-unique tokens, its own prefix group.
	o = SyntheticOptions{NumRequests: 4, Input: Length{Mean: 8}, Output: Length{Mean: 1}, RequestRate: math.Inf(1),
		Clients: 2, SharedPrefixRatio: 0.5, NumPrefixGroups: 1, Seed: 3}
	reqs, toks := tokensOf(t, o)
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for i := range toks {
		if !slices.Equal(toks[i][:4], toks[0][:4]) {
			t.Errorf("request %d prefix %v, want the group's %v", i, toks[i][:4], toks[0][:4])
		}
		for j := range i {
			if slices.Equal(toks[i][4:], toks[j][4:]) {
				t.Errorf("requests %d and %d share their unique tokens", i, j)
			}
		}
	}
}

func TestSyntheticClientsInvalid(t *testing.T) {
	base := SyntheticOptions{NumRequests: 4, Input: Length{Mean: 8}, RequestRate: math.Inf(1)}
	for _, c := range []struct {
		edit func(*SyntheticOptions)
		want string
	}{
		{func(o *SyntheticOptions) { o.Clients = -1 }, "concurrency: must be >= 0"},
		{func(o *SyntheticOptions) { o.Clients, o.Ramp = 2, -time.Second }, "concurrency-ramp: must be >= 0"},
		{func(o *SyntheticOptions) { o.Clients, o.NumRequests = 2, 1<<21+1 }, "num-requests: 2097153 over 2 clients are more than 1048576 per client"},
		{func(o *SyntheticOptions) { o.Ramp = time.Second }, "needs closed-loop clients"},
		{func(o *SyntheticOptions) { o.Clients, o.Desync = 2, -time.Second }, "concurrency-desync: must be >= 0"},
		{func(o *SyntheticOptions) { o.Desync = time.Second }, "concurrency-desync: 1s needs closed-loop clients"},
		{func(o *SyntheticOptions) { o.Clients, o.TurnsPerSession = 2, 2 }, "turns-per-session: 2 turns do not combine"},
	} {
		o := base
		c.edit(&o)
		if _, err := NewSynthetic(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSynthetic(%+v) = %v, want an error containing %q", o, err, c.want)
		}
	}
}
