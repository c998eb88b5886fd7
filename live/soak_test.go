package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/mocker-sim/mocker/disagg"
	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/live/metrics"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/sched/sglang"
)

// TestSoak runs a server at speedup inf (each backend in turn, three workers of two data-parallel
// ranks, a small KV pool, a waiting bound, metrics and a NATS sink) under many clients sending mixed
// streamed and whole, completion and chat requests, a quarter of them abandoned part-way. It checks
// that heap, RSS and goroutines stay flat under the load (the end against the start, after GC, with
// wide margins), that every request not abandoned gets all its tokens or a 429, and that once the load
// stops the goroutines return to their idle count, every worker holds no request and no active KV
// block, its engine's invariants hold and its gauges read zero.
//
// It runs 12 s by default (skipped with -short); MOCKER_SOAK=4m runs it for four minutes.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped with -short")
	}
	total := 12 * time.Second
	if v := os.Getenv("MOCKER_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("MOCKER_SOAK=%q: want a duration such as 4m", v)
		}
		total = d
	}
	backends := []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM}
	for _, b := range backends {
		t.Run(b.String(), func(t *testing.T) { soak(t, soakOptions(b), total/6) })
	}
	// Disaggregated: abandoned requests leave at every stage (routing, prefill, rendezvous, transfer,
	// decode), which is where blocks leaked.
	for _, b := range backends {
		t.Run("disagg-"+b.String(), func(t *testing.T) { soak(t, soakDisaggOptions(b), total/6) })
	}
}

// soakDisaggOptions is soakOptions as two prefill and two decode workers whose transfers take a
// microsecond a token, every engine checking its accounting after every pass.
func soakDisaggOptions(b engine.Backend) Options {
	o := soakOptions(b)
	o.Workers, o.CheckInvariants = 2, true
	dr := o.Router
	dr.OverlapScoreWeight, dr.TrackPrefillTokens = 0, false
	o.Disagg = &Disagg{DecodeWorkers: 2, Router: dr, BootstrapHost: "127.0.0.1",
		Transfer: disagg.Transfer{GBps: 100, BytesPerToken: 1e5, Mode: disagg.FullPrompt}}
	return o
}

func soakOptions(b engine.Backend) Options {
	o := testOptions(5, 1, math.Inf(1))
	o.Workers, o.MaxWaiting = 3, 24
	o.Engine.Backend, o.Engine.DPSize = b, 2
	o.Engine.VLLM.NumBlocks, o.Engine.VLLM.MaxNumSeqs = 256, 16 // 4,096 tokens a rank: preemptions
	o.Engine.SGLang = sglang.Options{PageSize: 16, NumPages: 256, MaxRunning: 16, MaxPrefillTokens: 2048,
		ChunkedPrefillSize: 2048, ClipMaxNewTokens: 4096, Conservativeness: 1, PrefixCaching: true, Events: true}
	return o
}

// soakLoad counts what the clients saw.
type soakLoad struct {
	served, cancelled, refused atomic.Int64
	errors                     atomic.Int64
}

type soakSample struct {
	heap, rss  uint64
	goroutines int
}

func soak(t *testing.T, o Options, d time.Duration) {
	ns, url, err := natsevents.StartEmbedded(0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	mx := metrics.New(metrics.Options{Model: testModel, MaxModelLen: 1 << 14})
	o.Metrics, o.Recorder = mx.Handler(), func(w, r int) Recorder { return mx.Rank(w, r) }
	o.Sinks = []Sink{NewNATSSink(nc, natsevents.Subject(testModel), o.Workers)}
	s, hs, _ := start(t, o)
	const clients = 32
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer hc.CloseIdleConnections()

	baseline := sample()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var load soakLoad
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() { soakClient(ctx, t, hc, hs.URL, c, &load) })
	}
	// The load runs until every sample is taken: on a busy machine (or under -race) a sample, which
	// collects the garbage first, can take longer than the tick, and the count must not depend on it.
	var samples []soakSample
	every := max(d/40, 100*time.Millisecond)
	tick := time.NewTicker(every)
	for n := int(d / every); len(samples) < n; {
		<-tick.C
		samples = append(samples, sample())
	}
	tick.Stop()
	stop()
	wg.Wait()
	hc.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()

	// Flat: the last quarter of the samples against the first (the first sample is the warm-up's).
	if len(samples) < 8 {
		t.Fatalf("%d samples in %v", len(samples), d)
	}
	q := len(samples) / 4
	first, last := peak(samples[1:1+q]), peak(samples[len(samples)-q:])
	const mib = 1 << 20
	if last.heap > 2*first.heap+16*mib {
		t.Errorf("heap grew from %d MiB to %d MiB under the load", first.heap/mib, last.heap/mib)
	}
	if last.rss > first.rss+first.rss/2+32*mib {
		t.Errorf("RSS grew from %d MiB to %d MiB under the load", first.rss/mib, last.rss/mib)
	}
	if last.goroutines > 2*first.goroutines+16 {
		t.Errorf("goroutines grew from %d to %d under the load", first.goroutines, last.goroutines)
	}

	// Drained: every worker idle, its blocks free, its invariants true, its gauges zero.
	waitFor(t, "the goroutines to return to their idle count", func() bool { return runtime.NumGoroutine() <= baseline.goroutines })
	end := sample()
	for i, w := range s.allWorkers() {
		if n := w.InFlight(); n != 0 {
			t.Errorf("worker %d holds %d requests", i, n)
		}
		for r, m := range w.State() {
			if m.ActiveBlocks != 0 || m.Running != 0 || m.Waiting != 0 {
				t.Errorf("worker %d rank %d: %+v, want no request and no active block", i, r, m)
			}
		}
		if err := w.checkInvariants(); err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	s.mu.Lock()
	if n := len(s.pending); n != 0 {
		t.Errorf("%d requests left in the router's queue", n)
	}
	if n := len(s.handoffs); n != 0 {
		t.Errorf("%d disaggregated handoffs left", n)
	}
	s.mu.Unlock()
	if err := s.CheckInvariants(); err != nil {
		t.Error(err)
	}
	if running, kv := sumGauges(t, hs.URL); running != 0 || kv != 0 {
		t.Errorf("after the load: num_requests_running %v, kv_cache_usage_perc %v summed; want 0 and 0", running, kv)
	}
	if load.served.Load() == 0 || load.cancelled.Load() == 0 {
		t.Errorf("%d served, %d cancelled: the load did not exercise both", load.served.Load(), load.cancelled.Load())
	}
	t.Logf("%v: %d requests served, %d cancelled, %d refused (429); heap %d → %d MiB, RSS %d → %d MiB "+
		"(peak of the first and last quarter; peak of the process %d MiB); goroutines %d idle, %d → %d under load, %d after",
		d, load.served.Load(), load.cancelled.Load(), load.refused.Load(), first.heap/mib, last.heap/mib,
		first.rss/mib, last.rss/mib, peakRSS()/mib, baseline.goroutines, first.goroutines, last.goroutines, end.goroutines)
}

// soakClient sends requests until ctx ends: streamed or whole, completion or chat, of a prompt from
// one of a few shared prefixes, a quarter of them abandoned (streams after a few chunks, whole
// requests after a moment).
func soakClient(ctx context.Context, t *testing.T, hc *http.Client, url string, client int, load *soakLoad) {
	rng := rand.New(rand.NewPCG(1, uint64(client)))
	for i := 0; ctx.Err() == nil; i++ {
		stream, chat := rng.IntN(2) == 0, rng.IntN(2) == 0
		maxTokens := 1 + rng.IntN(200)
		prompt := strings.Repeat(fmt.Sprintf("prefix %d ", rng.IntN(8)), 20+rng.IntN(200)) +
			fmt.Sprintf("request %d of client %d", i, client)
		abandon := -1 // chunks read before leaving; -1: read everything
		if rng.IntN(4) == 0 {
			abandon = rng.IntN(6)
		}
		params := map[string]any{"model": testModel, "stream": stream, "max_tokens": maxTokens}
		if stream {
			params["stream_options"] = map[string]bool{"include_usage": true}
		}
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
			params["messages"] = []map[string]string{{"role": "user", "content": prompt}}
		} else {
			params["prompt"] = prompt
		}
		body, _ := json.Marshal(params)
		rctx, cancel := context.WithCancel(ctx)
		if abandon >= 0 && !stream {
			time.AfterFunc(time.Duration(rng.IntN(2000))*time.Microsecond, cancel)
		}
		req, _ := http.NewRequestWithContext(rctx, "POST", url+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		got, err := soakRequest(hc, req, stream, abandon, cancel)
		left := rctx.Err() != nil // abandoned, or the load is over
		cancel()
		switch {
		case left:
			load.cancelled.Add(1)
		case errors.Is(err, errRefused):
			load.refused.Add(1)
		case err != nil:
			if load.errors.Add(1) <= 5 {
				t.Errorf("request %d (stream %v, chat %v, max_tokens %d): %v", i, stream, chat, maxTokens, err)
			}
		case got != maxTokens:
			if load.errors.Add(1) <= 5 {
				t.Errorf("request %d (stream %v, chat %v): %d completion tokens, want %d", i, stream, chat, got, maxTokens)
			}
		default:
			load.served.Add(1)
		}
	}
}

var (
	errAbandoned = errors.New("abandoned")
	errRefused   = errors.New("429")
)

// soakRequest sends req and returns the completion tokens its usage reports; a stream is left (its
// context cancelled) after abandon chunks when abandon >= 0.
func soakRequest(hc *http.Client, req *http.Request, stream bool, abandon int, cancel func()) (int, error) {
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "" {
		io.Copy(io.Discard, res.Body)
		return 0, errRefused
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		return 0, fmt.Errorf("status %d: %s", res.StatusCode, b)
	}
	var v struct {
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if !stream {
		err := json.NewDecoder(res.Body).Decode(&v)
		if err != nil || v.Usage == nil {
			return 0, fmt.Errorf("response without usage (%v)", err)
		}
		return v.Usage.CompletionTokens, nil
	}
	sc := bufio.NewScanner(res.Body)
	chunks, usage, done := 0, -1, false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		if chunks++; chunks == abandon+1 {
			cancel()
			return 0, errAbandoned
		}
		v.Usage = nil
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return 0, fmt.Errorf("chunk %q: %v", line, err)
		}
		if v.Usage != nil {
			usage = v.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !done || usage < 0 {
		return 0, fmt.Errorf("stream ended without usage and [DONE] after %d chunks", chunks)
	}
	return usage, nil
}

// sample measures the process after a collection.
func sample() soakSample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return soakSample{heap: ms.HeapAlloc, rss: procStatus("VmRSS:"), goroutines: runtime.NumGoroutine()}
}

func peak(ss []soakSample) soakSample {
	var p soakSample
	for _, s := range ss {
		p.heap, p.rss, p.goroutines = max(p.heap, s.heap), max(p.rss, s.rss), max(p.goroutines, s.goroutines)
	}
	return p
}

func peakRSS() uint64 { return procStatus("VmHWM:") }

// procStatus reads a size from /proc/self/status in bytes; 0 where there is none (not Linux).
func procStatus(key string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sumGauges scrapes url's /metrics for the running requests and KV usage summed over every series.
func sumGauges(t *testing.T, url string) (running, kv float64) {
	t.Helper()
	fams := scrape(t, http.DefaultClient, url)
	sum := func(name string) float64 {
		var v float64
		for _, m := range fams[name].GetMetric() {
			v += m.GetGauge().GetValue()
		}
		return v
	}
	return sum("vllm:num_requests_running"), sum("vllm:kv_cache_usage_perc")
}
