package sweep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/recommend"
	"github.com/mocker-sim/mocker/report"
)

// serve starts an embedded JetStream server and n workers (none if 0) in this process; it returns a
// connection.
func serve(t *testing.T, n int) *nats.Conn {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("embedded NATS server not ready")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	conns := []*nats.Conn{}
	for range n + 1 {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
	}
	go func() {
		defer close(done)
		if n > 0 {
			Serve(ctx, conns[1], n, discard{})
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		for _, nc := range conns {
			nc.Close()
		}
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	return conns[0]
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// trace writes a small Mooncake trace.
func trace(t *testing.T, rows int) string {
	t.Helper()
	var b strings.Builder
	for i := range rows {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 300, "output_length": 8, "hash_ids": [%d]}`+"\n", i*20, i%3)
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func base(t *testing.T, tracePath string) *config.Config {
	c := config.Default()
	c.Model, c.System, c.Timing, c.PrefillMs, c.DecodeMs = "", "", "fixed", 20, 5
	c.Trace = tracePath
	return &c
}

// TestSameAsLocal: a search through the queue gives the local report, byte for byte.
func TestSameAsLocal(t *testing.T) {
	nc := serve(t, 2)
	b := base(t, trace(t, 200))
	sp := &recommend.Space{Backends: []string{"vllm"}, TP: []int{1, 2}, EP: []int{1}, Modes: []string{"agg"}, MinWorkers: 1, MaxWorkers: 4,
		MaxNumSeqs: []int{256}, MaxNumBatchedTokens: []int{512}, Routers: []string{"round-robin"}}
	targets := []recommend.Target{{Metric: report.TTFT, Percentile: 90, Ms: 40}}
	local, err := recommend.Search(b, sp, recommend.Options{Targets: targets})
	if err != nil {
		t.Fatal(err)
	}
	co, err := NewCoordinator(context.Background(), nc, b, targets, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	remote, err := recommend.Search(b, sp, recommend.Options{Targets: targets, Runner: co.Run, Threads: 8})
	if err != nil {
		t.Fatal(err)
	}
	var lj, rj strings.Builder
	local.WriteJSON(&lj)
	remote.WriteJSON(&rj)
	if lj.String() != rj.String() || local.Simulated == 0 {
		t.Errorf("reports differ (or nothing ran):\nlocal  %s\nremote %s", lj.String(), rj.String())
	}
}

// TestTemplatePaths: the files a job reads are named absolute for workers elsewhere, a pool's own
// profile too, without changing the coordinator's configuration.
func TestTemplatePaths(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, f := range []string{"p.json", "d.json"} {
		os.WriteFile(f, []byte("{}"), 0o644)
	}
	dir, _ := os.Getwd()
	b := config.Default()
	b.Profile = "p.json"
	pool := "d.json"
	b.Decode.Profile = &pool
	m, err := template(&b, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got config.Config
	if err := yaml.Unmarshal([]byte(m.Config), &got); err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "p.json"); got.Profile != want {
		t.Errorf("profile %q, want %q", got.Profile, want)
	}
	if want := filepath.Join(dir, "d.json"); got.Decode.Profile == nil || *got.Decode.Profile != want {
		t.Errorf("decode profile %v, want %q", got.Decode.Profile, want)
	}
	if b.Profile != "p.json" || *b.Decode.Profile != "d.json" {
		t.Errorf("base changed: profile %q, decode profile %q", b.Profile, *b.Decode.Profile)
	}
}

// TestTraceChanged: a worker refuses a trace that is not the coordinator's, and the search says why.
func TestTraceChanged(t *testing.T) {
	nc := serve(t, 1)
	path := trace(t, 50)
	b := base(t, path)
	targets := []recommend.Target{{Metric: report.TTFT, Percentile: 90, Ms: 40}}
	co, err := NewCoordinator(context.Background(), nc, b, targets, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer co.Close()
	if err := os.WriteFile(path, []byte(`{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = co.Run(recommend.Job{Shape: recommend.Shape{Backend: "vllm", TP: 1, EP: 1, MaxNumSeqs: 256, MaxNumBatchedTokens: 512, Router: "round-robin"}, Scale: 1, Rate: 1})
	if err == nil || !strings.Contains(err.Error(), "sweep worker: trace "+path+": SHA-256 ") || !strings.Contains(err.Error(), "at the coordinator") {
		t.Errorf("error %v, want the worker's refusal of the changed trace", err)
	}
}

// TestCloseTakesJobsBack: a search interrupted while its jobs wait (here with no worker at all) takes
// them off the queue when its coordinator closes.
func TestCloseTakesJobsBack(t *testing.T) {
	nc := serve(t, 0)
	b := base(t, trace(t, 50))
	ctx, cancel := context.WithCancel(context.Background())
	co, err := NewCoordinator(ctx, nc, b, []recommend.Target{{Metric: report.TTFT, Percentile: 90, Ms: 40}}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := co.Run(recommend.Job{Shape: recommend.Shape{Backend: "vllm", TP: 1, EP: 1, MaxNumSeqs: 256, MaxNumBatchedTokens: 512, Router: "round-robin"}, Scale: 1, Rate: 1})
		errc <- err
	}()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(apiTimeout))
	if err != nil {
		t.Fatal(err)
	}
	waiting := func() uint64 {
		st, err := js.Stream(context.Background(), JobStream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	for deadline := time.Now().Add(30 * time.Second); waiting() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job never reached the queue")
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Run after cancel: %v, want context.Canceled", err)
	}
	co.Close()
	if n := waiting(); n != 0 {
		t.Errorf("%d jobs left on the queue after Close, want 0", n)
	}
}
