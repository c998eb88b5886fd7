package live

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mocker-sim/mocker/kvcache"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/live/natsevents/planetest"
)

func fleetConn(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// startFleetWorker runs o as a fleet worker on its own connection, which it returns.
func startFleetWorker(t *testing.T, url string, o Options, id uint64) (*FleetWorker, *nats.Conn) {
	t.Helper()
	nc := fleetConn(t, url)
	o.Workers, o.Sinks = 1, []Sink{NewFleetSink(nc, o.ModelName, id)}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	fw, err := ServeFleet(nc, s, id)
	if err != nil {
		t.Fatal(err)
	}
	return fw, nc
}

// startFrontend runs a fleet frontend without workers of its own.
func startFrontend(t *testing.T, url string, o Options, ttl time.Duration) (*Server, openai.Client) {
	t.Helper()
	o.Workers, o.Fleet = 0, &FleetOptions{Conn: fleetConn(t, url), TTL: ttl}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	hs := serveAPI(t, s.APIServer())
	return s, openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

func embeddedNATS(t *testing.T, port int) string {
	t.Helper()
	ns, url, err := natsevents.StartEmbedded(port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return url
}

// fleetWait waits up to 60 s for cond.
func fleetWait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func completion(c openai.Client, prompt string, maxTokens int64) (*openai.Completion, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return c.Completions.New(ctx, openai.CompletionNewParams{Model: testModel,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(maxTokens)})
}

// TestFleetTwoFrontends: two frontends share one worker; the second finds the prefix the first one's
// request cached, as a one-process server does, and both routers index the worker's blocks.
func TestFleetTwoFrontends(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	url := embeddedNATS(t, 0)
	startFleetWorker(t, url, o, 7)
	a, ca := startFrontend(t, url, o, time.Minute)
	b, cb := startFrontend(t, url, o, time.Minute)
	fleetWait(t, "both frontends to find the worker", func() bool { return len(a.FleetWorkers()) == 1 && len(b.FleetWorkers()) == 1 })

	_, _, local := start(t, o)
	for i, c := range []openai.Client{ca, cb} {
		got, err := completion(c, longPrompt, 7)
		if err != nil {
			t.Fatal(err)
		}
		want, err := completion(local, longPrompt, 7)
		if err != nil {
			t.Fatal(err)
		}
		g, w := got.Usage, want.Usage
		if g.PromptTokens != w.PromptTokens || g.CompletionTokens != w.CompletionTokens ||
			g.PromptTokensDetails.CachedTokens != w.PromptTokensDetails.CachedTokens || got.Choices[0].Text != want.Choices[0].Text {
			t.Errorf("request %d: usage %d/%d/%d text %q; one process: %d/%d/%d %q", i, g.PromptTokens, g.CompletionTokens,
				g.PromptTokensDetails.CachedTokens, got.Choices[0].Text, w.PromptTokens, w.CompletionTokens, w.PromptTokensDetails.CachedTokens, want.Choices[0].Text)
		}
	}
	blocks := len(o.Tokenizer.Encode(longPrompt)) / o.Router.BlockSize
	fleetWait(t, "both indexes to hold the prompt's blocks", func() bool {
		return a.FleetWorkers()[7].Blocks >= blocks && b.FleetWorkers()[7].Blocks >= blocks
	})
}

// TestFleetDrain: a draining worker leaves every router at once and finishes its running request.
func TestFleetDrain(t *testing.T) {
	o := testOptions(5, 20, 1) // 20 ms a token
	url := embeddedNATS(t, 0)
	fw, _ := startFleetWorker(t, url, o, 1)
	s, c := startFrontend(t, url, o, time.Minute)
	fleetWait(t, "the worker", func() bool { return len(s.FleetWorkers()) == 1 })
	done := make(chan error, 1)
	go func() {
		res, err := completion(c, longPrompt, 50)
		if err == nil && res.Usage.CompletionTokens != 50 {
			err = errors.New("completion_tokens " + strconv.FormatInt(res.Usage.CompletionTokens, 10) + ", want 50")
		}
		done <- err
	}()
	fleetWait(t, "the request to run", func() bool { return s.FleetWorkers()[1].Running == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	drained := make(chan error, 1)
	go func() { drained <- fw.Drain(ctx) }()
	fleetWait(t, "the worker to leave routing", func() bool { return len(s.FleetWorkers()) == 0 })
	if err := <-done; err != nil {
		t.Errorf("the drained worker's request: %v", err)
	}
	if err := <-drained; err != nil {
		t.Errorf("Drain: %v", err)
	}
	// It stays gone, though its last ping answers may still be in the air; a new worker takes over.
	startFleetWorker(t, url, o, 2)
	if _, err := completion(c, "after the drain, "+longPrompt, 3); err != nil {
		t.Fatal(err)
	}
	if m := s.FleetWorkers(); len(m) != 1 || m[2].Blocks == 0 {
		t.Errorf("workers after the drain: %v, want only worker 2, with blocks", m)
	}
}

// TestFleetDrainCutOff: a drain that runs out of time (--shutdown-timeout) cuts its requests off and
// tells their frontends: the running one fails with a 503 at once and the one still waiting in the
// engine moves to another worker. The frontend stopped sweeping the worker when it left, so both waited
// for answers that never came, until the client gave up. (A request of 10,000 tokens of 20 ms would
// take 200 s; the client waits 50 s at most.)
func TestFleetDrainCutOff(t *testing.T) {
	o := testOptions(5, 20, 1)
	o.Engine.VLLM.MaxNumSeqs = 1 // the second request waits in the engine, not started
	url := embeddedNATS(t, 0)
	fw, _ := startFleetWorker(t, url, o, 1)
	s, c := startFrontend(t, url, o, time.Minute)
	fleetWait(t, "worker 1", func() bool { return len(s.FleetWorkers()) == 1 })
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
			defer cancel()
			_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: testModel, MaxTokens: openai.Int([]int64{10000, 3}[i]),
				Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(strconv.Itoa(i) + " " + longPrompt)}})
			errs <- err
		}()
		// The first runs; the second waits in the worker's engine (one sequence at a time).
		fleetWait(t, "the request on worker 1", func() bool {
			st := s.FleetWorkers()[1]
			return st.Running == 1 && st.Waiting == i && s.router.Queued() == 0
		})
	}
	startFleetWorker(t, url, o, 2)
	fleetWait(t, "worker 2", func() bool { return len(s.FleetWorkers()) == 2 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the shutdown timeout has run out
	if err := fw.Drain(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Drain: %v, want the context's error", err)
	}
	oneLostOneRerouted(t, errs, "worker running the request was lost (worker 0000000000000001 shut down before it finished")
}

// oneLostOneRerouted reads two requests' errors and wants one failed with a 503 whose message holds
// lost (the one running on the worker) and one completed (the one waiting there, routed again).
func oneLostOneRerouted(t *testing.T, errs <-chan error, lost string) {
	t.Helper()
	var failed, completed int
	for range 2 {
		err := <-errs
		var apiErr *openai.Error
		switch {
		case err == nil:
			completed++
		case errors.As(err, &apiErr) && apiErr.StatusCode == 503 && strings.Contains(apiErr.Message, lost):
			failed++
		default:
			t.Errorf("request: %v", err)
		}
	}
	if failed != 1 || completed != 1 {
		t.Errorf("%d failed, %d completed; want the running one failed, the waiting one rerouted", failed, completed)
	}
}

// lateRequest is a request the worker's service hands over after its drain began (micro.Service stops
// its subscription asynchronously): only what handle reads of it.
type lateRequest struct {
	micro.Request
	reply string
	data  []byte
}

func (r lateRequest) Reply() string { return r.reply }
func (r lateRequest) Data() []byte  { return r.data }

// TestFleetCutOffLate: a request that comes in after the drain cut the others off is cut off too,
// where it ran on with its frontend no longer watching the worker.
func TestFleetCutOffLate(t *testing.T) {
	url := embeddedNATS(t, 0)
	fw, nc := startFleetWorker(t, url, testOptions(5, 20, 1), 1)
	got, err := nc.SubscribeSync("INBOX.late")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	fw.cutOff()
	data, _ := json.Marshal(fleetRequest{Prompt: []uint32{1, 2, 3, 4}, MaxTokens: 10000})
	fw.handle(lateRequest{reply: "INBOX.late", data: data})
	m, err := got.NextMsg(30 * time.Second) // a bound for a hang, not a timing
	if err != nil {
		t.Fatal(err)
	}
	var c fleetChunk
	if err := json.Unmarshal(m.Data, &c); err != nil || !c.Done || c.Kind != "shutdown" {
		t.Errorf("the late request got %s (%v), want the shutdown chunk", m.Data, err)
	}
	if n := fw.srv.Workers()[0].InFlight(); n != 0 {
		t.Errorf("%d requests left on the worker", n)
	}
}

// TestFleetLostWorker: a worker cut off from NATS is dropped after the TTL with its blocks; its
// running request fails with a 503, the one waiting in its engine moves to another worker and
// completes, and the lost worker rejoins when it reconnects.
func TestFleetLostWorker(t *testing.T) {
	o := testOptions(5, 20, 1)
	o.Engine.VLLM.MaxNumSeqs = 1 // the second request waits in the engine, not started
	url := embeddedNATS(t, 0)
	_, nc1 := startFleetWorker(t, url, o, 1)
	s, c := startFrontend(t, url, o, time.Second)
	fleetWait(t, "worker 1", func() bool { return len(s.FleetWorkers()) == 1 })
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			res, err := completion(c, strconv.Itoa(i)+" "+longPrompt, 100)
			if err == nil && res.Usage.CompletionTokens != 100 {
				err = errors.New("short")
			}
			errs <- err
		}()
		fleetWait(t, "the request on worker 1", func() bool { return s.FleetWorkers()[1].Running == 1 && s.router.Queued() == 0 })
	}
	// Both requests are on worker 1: one running, one waiting.
	startFleetWorker(t, url, o, 2)
	fleetWait(t, "worker 2", func() bool { return len(s.FleetWorkers()) == 2 })
	if s.FleetWorkers()[1].Blocks == 0 {
		t.Fatal("worker 1 indexed no block")
	}
	nc1.Close() // cut off
	oneLostOneRerouted(t, errs, "worker running the request was lost")
	m := s.FleetWorkers()
	if _, ok := m[1]; ok || s.IndexedBlocks() != m[2].Blocks {
		t.Errorf("after the loss: workers %v, %d blocks indexed; want worker 2's alone", m, s.IndexedBlocks())
	}
}

// TestFleetNATSRestart: a NATS server restart is survived: worker and frontend reconnect, the worker
// (dropped meanwhile) rejoins, and requests are served.
func TestFleetNATSRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ns, url, err := natsevents.StartEmbedded(port)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(5, 1, math.Inf(1))
	startFleetWorker(t, url, o, 1)
	s, c := startFrontend(t, url, o, time.Second)
	fleetWait(t, "the worker", func() bool { return len(s.FleetWorkers()) == 1 })
	if _, err := completion(c, longPrompt, 3); err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	// Unheard of past the TTL, the worker is dropped; reconnected, it rejoins.
	fleetWait(t, "the worker dropped", func() bool { return len(s.FleetWorkers()) == 0 })
	embeddedNATS(t, port)
	fleetWait(t, "a request served after the restart", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: testModel,
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(3)})
		return err == nil
	})
}

// TestFleetCancel: a client that goes away frees its request on the remote worker.
func TestFleetCancel(t *testing.T) {
	o := testOptions(5, 20, 1)
	url := embeddedNATS(t, 0)
	fw, _ := startFleetWorker(t, url, o, 1)
	s, c := startFrontend(t, url, o, time.Minute)
	fleetWait(t, "the worker", func() bool { return len(s.FleetWorkers()) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: testModel,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(10000)}) // 200 s: it cannot end by itself within the wait
	if !st.Next() {
		t.Fatalf("no first chunk: %v", st.Err())
	}
	if n := fw.srv.workers[0].InFlight(); n != 1 {
		t.Fatalf("the worker holds %d requests, want 1", n)
	}
	cancel()
	st.Close()
	fleetWait(t, "the worker to drop the request", func() bool {
		return fw.srv.workers[0].InFlight() == 0 && s.FleetWorkers()[1].Running == 0
	})
}

// TestFleetNATSCluster: a worker and a frontend on different nodes of a three-node NATS cluster.
// Every node takes its route port from the kernel, and the second and third learn the others from the
// first: a port chosen free beforehand can be taken by another process before its node binds it, and the
// node then never becomes ready.
func TestFleetNATSCluster(t *testing.T) {
	var urls []string
	var nodes []*server.Server
	for i := range 3 {
		o := &server.Options{ServerName: "n" + strconv.Itoa(i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			NoLog: true, NoSigs: true, Cluster: server.ClusterOpts{Name: "mocker", Host: "127.0.0.1", Port: server.RANDOM_PORT}}
		if i > 0 {
			o.Routes = []*url.URL{{Scheme: "nats", Host: nodes[0].ClusterAddr().String()}}
		}
		ns, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		if !ns.ReadyForConnections(30 * time.Second) {
			t.Fatalf("node %d is not ready", i)
		}
		nodes, urls = append(nodes, ns), append(urls, ns.ClientURL())
	}
	fleetWait(t, "the cluster to form", func() bool {
		for _, ns := range nodes {
			if clusterPeers(t, ns) < 2 {
				return false
			}
		}
		return true
	})
	o := testOptions(5, 1, math.Inf(1))
	startFleetWorker(t, urls[1], o, 1)
	s, c := startFrontend(t, urls[2], o, time.Second)
	fleetWait(t, "the worker across the cluster", func() bool { return len(s.FleetWorkers()) == 1 })
	res, err := completion(c, longPrompt, 5)
	if err != nil {
		t.Fatal(err)
	}
	if res.Usage.CompletionTokens != 5 {
		t.Errorf("completion_tokens %d, want 5", res.Usage.CompletionTokens)
	}
	fleetWait(t, "the worker's blocks indexed across the cluster", func() bool { return s.FleetWorkers()[1].Blocks > 0 })
}

// clusterPeers counts the nodes ns has a route to: NumRoutes counts each peer's pooled connections.
func clusterPeers(t *testing.T, ns *server.Server) int {
	t.Helper()
	rz, err := ns.Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	peers := map[string]bool{}
	for _, r := range rz.Routes {
		peers[r.RemoteName] = true
	}
	return len(peers)
}

// TestFleetScale measures one frontend routing over 100 workers at speedup inf, at 200 requests/s
// for 10 s (MOCKER_FLEET_SCALE=1; it takes ~15 s): the rate served, the p99 of a request's time
// (routing and transport: the passes take none) and the heap per worker. Every request must succeed.
func TestFleetScale(t *testing.T) {
	if os.Getenv("MOCKER_FLEET_SCALE") == "" {
		t.Skip("set MOCKER_FLEET_SCALE=1 to measure a frontend over 100 workers")
	}
	const workers, rate, dur = 100, 200, 10 * time.Second
	o := testOptions(5, 1, math.Inf(1))
	url := embeddedNATS(t, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range workers {
		startFleetWorker(t, url, o, uint64(i+1))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	s, c := startFrontend(t, url, o, 6*time.Second)
	fleetWait(t, "100 workers", func() bool { return len(s.FleetWorkers()) == workers })
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	tick := time.NewTicker(time.Second / rate)
	for i := 0; time.Since(start) < dur; i++ {
		<-tick.C
		wg.Go(func() {
			t0 := time.Now()
			_, err := completion(c, strconv.Itoa(i%500)+" "+longPrompt, 8)
			d := time.Since(t0)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		})
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	t.Logf("%d requests in %v: %.0f/s; latency p50 %v p99 %v; heap per worker %.0f KiB",
		len(lat), elapsed.Round(time.Millisecond), float64(len(lat))/elapsed.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100],
		float64(after.HeapAlloc-before.HeapAlloc)/workers/1024)
}

// TestFleetJoinPingsTheJoiner: a worker's join makes the frontend ping that worker alone, so N workers
// joining one after another cost N ping answers, not N²/2; the frontend's standing round pings all of
// them once. A join naming no service id (a worker from before) or a hostile one pings them all.
func TestFleetJoinPingsTheJoiner(t *testing.T) {
	const workers = 20
	o := testOptions(5, 1, math.Inf(1))
	url := embeddedNATS(t, 0)
	watch := fleetConn(t, url)
	var mu sync.Mutex
	var all, one int
	var sentinel bool
	if _, err := watch.Subscribe("$SRV.PING.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.Subject == pingSubject:
			all++
		case m.Subject == "$SRV.PING.sentinel":
			sentinel = true
		default:
			one++
		}
	}); err != nil {
		t.Fatal(err)
	}
	watch.Flush()
	fc := fleetConn(t, url)
	fo := o
	fo.Workers, fo.Fleet = 0, &FleetOptions{Conn: fc, TTL: time.Hour} // one standing round only
	s, err := New(fo)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	for i := range workers {
		startFleetWorker(t, url, o, uint64(i+1))
	}
	fleetWait(t, "the workers", func() bool { return len(s.FleetWorkers()) == workers })
	// The frontend published every ping before the sentinel, on the same connection: once the watcher
	// has the sentinel, it has them all.
	fc.Publish("$SRV.PING.sentinel", nil)
	fleetWait(t, "the sentinel", func() bool { mu.Lock(); defer mu.Unlock(); return sentinel })
	mu.Lock()
	if all != 1 || one != workers {
		t.Errorf("%d workers joining: %d pings of every worker and %d of one, want 1 and %d", workers, all, one, workers)
	}
	mu.Unlock()
	for _, id := range []string{"", "a.b", "*", ">", "x y", strings.Repeat("a", 65)} {
		if got := joinPing([]byte(id)); got != pingSubject {
			t.Errorf("a join naming %q pings %q, want every worker (%q)", id, got, pingSubject)
		}
	}
	if got, want := joinPing([]byte("Kq3x_9-Z")), pingSubject+".Kq3x_9-Z"; got != want {
		t.Errorf("joinPing = %q, want %q", got, want)
	}
}

// TestFleetWorkerRefuses: a request a worker can never serve, sent straight over NATS, gets an error
// chunk naming the problem.
func TestFleetWorkerRefuses(t *testing.T) {
	o := testOptions(5, 1, math.Inf(1))
	url := embeddedNATS(t, 0)
	startFleetWorker(t, url, o, 1)
	nc := fleetConn(t, url)
	for _, tc := range []struct{ body, want string }{
		{`{"prompt":[1,2,3],"max_tokens":9223372036854775807}`, `{"cached":0,"done":true,"error":"bad fleet request: 3 prompt tokens and max_tokens 9223372036854775807 exceed the 16384 tokens a KV pool holds","kind":"reject"}`},
		{`{"prompt":[],"max_tokens":4}`, `{"cached":0,"done":true,"error":"bad fleet request: want a prompt and max_tokens ≥ 1","kind":"reject"}`},
		{`[`, `{"cached":0,"done":true,"error":"bad fleet request: unexpected end of JSON input","kind":"reject"}`},
	} {
		m, err := nc.Request(generateSubject(1), []byte(tc.body), 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Data) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.body, m.Data, tc.want)
		}
	}
}

// chunkFrontend is a frontend with no workers, for chunks handed to it directly (fleetChunk).
func chunkFrontend(tb testing.TB) *Server {
	ns, url, err := natsevents.StartEmbedded(0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	o := testOptions(5, 1, math.Inf(1))
	o.Workers, o.Fleet = 0, &FleetOptions{Conn: nc, TTL: time.Hour}
	s, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// remoteOnSlot5 makes request 1 the frontend's, sent to a worker on router slot 5 (reply subject
// INBOX.1.5), started or not; its stream is what the client reads.
func remoteOnSlot5(s *Server, started bool) *Stream {
	w := &remote{id: 9, slot: 5, dp: 1, reqs: map[uint64]*remoteReq{}}
	st := newStream(1, 4, time.Now(), nil)
	rr := &remoteReq{req: s.newRequest([]uint32{1, 2, 3, 4}, 8, ""), st: st, w: w, started: started}
	rr.req.ID = 1
	s.mu.Lock()
	s.fleet.reqs[1], w.reqs[1] = rr, rr
	s.mu.Unlock()
	return st
}

// FuzzFleetChunk: whatever a worker (or anyone on NATS) sends to a frontend's reply subject, the
// frontend does not panic, hands the stream no more tokens than the chunk carries, and a done chunk
// ends the stream and forgets the request.
func FuzzFleetChunk(f *testing.F) {
	f.Add([]byte(`{"tokens":[1,2,3],"ends":[1,3],"cached":16}`))
	f.Add([]byte(`{"tokens":[1,2],"ends":[2],"done":true}`))
	f.Add([]byte(`{"tokens":[1,2],"ends":[5,-1,2,1]}`))
	f.Add([]byte(`{"done":true,"error":"x","kind":"reject"}`))
	f.Add([]byte(`{"done":true,"error":"draining","kind":"closed"}`))
	f.Add([]byte(`{"done":true,"kind":"busy"}`))
	f.Add([]byte(`{"done":true,"kind":"shutdown"}`))
	f.Add([]byte(`null`))
	s := chunkFrontend(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		st := remoteOnSlot5(s, false)
		s.fleetChunk(&nats.Msg{Subject: s.fleet.inbox + ".1.5", Data: data})
		var c fleetChunk
		valid := json.Unmarshal(data, &c) == nil
		toks, _, done, _ := st.Next(nil, nil)
		if len(toks) > len(c.Tokens) {
			t.Fatalf("%d tokens from a chunk of %d", len(toks), len(c.Tokens))
		}
		s.mu.Lock()
		_, kept := s.fleet.reqs[1]
		delete(s.fleet.reqs, 1)
		s.mu.Unlock()
		s.cancel(1) // a rerouted request waits in the router's queue (no workers)
		if valid && c.Done && (kept || !done && !rerouted(c.Kind)) {
			t.Fatalf("a done chunk left the request kept %v, its stream done %v", kept, done)
		}
	})
}

// TestFleetChunkEnds: how a worker's done chunk ends the client's stream, by its kind; a kind this
// frontend does not know (a newer worker's) fails the stream, where it was taken as a success and a
// cut-off answer returned as whole.
func TestFleetChunkEnds(t *testing.T) {
	s := chunkFrontend(t)
	for _, tc := range []struct{ chunk, err string }{
		{`{"tokens":[7],"ends":[1],"done":true}`, ""},
		{`{"done":true,"error":"boom"}`, "worker: boom"},
		{`{"done":true,"kind":"busy"}`, errBusy.Error()},
		{`{"done":true,"kind":"paused","error":"later"}`, `worker: request ended as "paused": later`},
	} {
		st := remoteOnSlot5(s, true)
		s.fleetChunk(&nats.Msg{Subject: s.fleet.inbox + ".1.5", Data: []byte(tc.chunk)})
		var got error
		ended := false
		for range 3 { // a token, then the end: a bounded number of reads
			_, _, done, err := st.Next(nil, nil)
			if got, ended = err, done || err != nil; ended {
				break
			}
		}
		if !ended || tc.err == "" && got != nil || tc.err != "" && (got == nil || got.Error() != tc.err) {
			t.Errorf("%s: the stream ended %v with %v, want %q", tc.chunk, ended, got, tc.err)
		}
	}
}

// TestFleetClosedConn: a frontend on a closed connection fails to start, with the cause, and does not
// hang closing what it began.
func TestFleetClosedConn(t *testing.T) {
	nc := fleetConn(t, embeddedNATS(t, 0))
	nc.Close()
	o := testOptions(5, 1, math.Inf(1))
	o.Workers, o.Fleet = 0, &FleetOptions{Conn: nc}
	done := make(chan error, 1)
	go func() {
		s, err := New(o)
		if err == nil {
			err = s.Start()
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "live: fleet: nats: connection closed" {
			t.Errorf("Start = %v, want live: fleet: nats: connection closed", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Start hung")
	}
}

// TestPlaneSinkWorkerID: a fleet worker's event-plane RouterEvents and ActiveLoads carry its fleet id.
func TestPlaneSinkWorkerID(t *testing.T) {
	nc := fleetConn(t, embeddedNATS(t, 0))
	scope := natsevents.Scope{Namespace: "dynamo", Component: "backend", Endpoint: "generate"}
	ps := NewNATSPlaneSink(nc, PlaneOptions{Scope: scope, Workers: 1, DPSize: 1, Seed: 77, WorkerID: 77})
	kv, err := nc.SubscribeSync(natsevents.Scope{Namespace: "dynamo", Component: "backend"}.Subject(natsevents.KVEventsTopic))
	if err != nil {
		t.Fatal(err)
	}
	load, err := nc.SubscribeSync(scope.Subject(natsevents.LoadTopic))
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	ps.Events(0, 0, []kvcache.Event{{Kind: kvcache.Removed, Hashes: []uint64{5}}})
	ps.publishLoad(0, 0, 3)
	m, err := kv.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	env, err := planetest.Envelope(m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if re, err := planetest.RouterEvent(env.Payload); err != nil || re.Worker != 77 {
		t.Errorf("RouterEvent %+v, %v: want worker_id 77", re, err)
	}
	if m, err = load.NextMsg(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if env, err = planetest.Envelope(m.Data); err != nil {
		t.Fatal(err)
	}
	if l, err := planetest.ActiveLoad(env.Payload); err != nil || l.Worker != 77 {
		t.Errorf("ActiveLoad %+v, %v: want worker_id 77", l, err)
	}
}

// TestFleetFrontendClose: a frontend that closes fails its requests and frees them on the workers.
func TestFleetFrontendClose(t *testing.T) {
	o := testOptions(5, 20, 1)
	url := embeddedNATS(t, 0)
	fw, _ := startFleetWorker(t, url, o, 1)
	s, c := startFrontend(t, url, o, time.Minute)
	fleetWait(t, "the worker", func() bool { return len(s.FleetWorkers()) == 1 })
	st := c.Completions.NewStreaming(context.Background(), openai.CompletionNewParams{Model: testModel,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(10000)})
	defer st.Close()
	if !st.Next() {
		t.Fatalf("no first chunk: %v", st.Err())
	}
	s.Close()
	fleetWait(t, "the worker to drop the request", func() bool { return fw.srv.workers[0].InFlight() == 0 })
}
