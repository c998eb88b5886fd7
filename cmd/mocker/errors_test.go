package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/live/natsevents"
)

// unreachableNATS is a URL no NATS server answers: nothing listens on port 1.
const unreachableNATS = "nats://127.0.0.1:1"

// TestNATSUnreachableNamed: a NATS server that does not answer is an error naming the URL and --nats.
// serve fails at once; a fleet's frontend and workers, which may start before their server, wait
// natsWait for it first and say so.
func TestNATSUnreachableNamed(t *testing.T) {
	cfg := serveConfig()
	cfg.Port, cfg.NATS = 0, unreachableNATS
	var stderr bytes.Buffer
	err := serve(context.Background(), &cfg, &stderr, nil)
	if want := "--nats " + unreachableNATS + ": no NATS server answers there (nats: no servers available for connection); --nats embedded runs one in this process, --nats none publishes no KV events"; err == nil || err.Error() != want {
		t.Errorf("serve: %v, want %s", err, want)
	}

	// A search's work queue: the coordinator and its workers.
	for _, args := range [][]string{{"recommend", "--ttft-p90-ms", "500"}, {"sweep-worker"}} {
		_, _, err := mocker(t, append(args, "--nats", unreachableNATS)...)
		if want := "--nats " + unreachableNATS + ": no NATS server answers there (nats: no servers available for connection); the work queue needs a NATS server with JetStream: nats-server -js"; err == nil || err.Error() != want {
			t.Errorf("%v: %v, want %s", args, err, want)
		}
	}

	// A fleet's commands need a server's URL: without one there is nothing to wait for.
	for _, args := range [][]string{{"worker"}, {"worker", "--nats", "embedded"}, {"frontend"}} {
		want := fmt.Sprintf("%s: --nats %q: want the URL of the fleet's NATS server", args[0], strings.TrimPrefix(strings.Join(args[1:], " "), "--nats "))
		if _, _, err := mocker(t, args...); err == nil || err.Error() != want {
			t.Errorf("%v: %v, want %s", args, err, want)
		}
	}

	// Stopped while waiting (SIGINT, SIGTERM): a normal stop, without an error, as a started server's;
	// natsWait is still 10 s.
	for _, worker := range []bool{false, true} {
		cfg := serveConfig()
		cfg.Workers, cfg.Port, cfg.NATS = 0, 0, unreachableNATS
		if worker {
			cfg.Workers = 1
		}
		ctx, stop := context.WithCancelCause(context.Background())
		stop(errors.New("interrupt signal received")) // as signal.NotifyContext's cause
		var stderr bytes.Buffer
		if err := serveAs(ctx, &cfg, &stderr, nil, worker); err != nil {
			t.Errorf("worker %v, stopped while waiting: %v (stderr %q)", worker, err, &stderr)
		}
	}

	defer func(w time.Duration) { natsWait = w }(natsWait)
	natsWait = 20 * time.Millisecond
	for _, args := range [][]string{
		{"frontend", "--port", "0"},
		{"serve", "--workers", "0", "--port", "0"},
		{"worker"},
	} {
		_, stderr, err := mocker(t, append(args, "--nats", unreachableNATS)...)
		if want := "--nats " + unreachableNATS + ": no NATS server answered there in 20ms"; err == nil || err.Error() != want {
			t.Errorf("%v: %v, want %s", args, err, want)
		}
		who := "mocker frontend"
		if args[0] == "worker" {
			who = "mocker worker"
		}
		if want := who + ": waiting up to 20ms for the NATS server at " + unreachableNATS + " (--nats)\n"; stderr != want {
			t.Errorf("%v: stderr %q, want %q", args, stderr, want)
		}
	}
}

// TestNATSWaitsForTheServer: a fleet's connection waits for a server that comes up after it started.
func TestNATSWaitsForTheServer(t *testing.T) {
	port := freePort(t)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	pr, pw := io.Pipe()
	defer pr.Close()
	type conn struct {
		connected bool
		err       error
	}
	done := make(chan conn, 1)
	go func() {
		nc, err := waitNATS(context.Background(), url, "mocker worker", pw)
		if err != nil {
			done <- conn{false, err}
			return
		}
		defer nc.Close()
		done <- conn{nc.IsConnected(), nil}
	}()
	// The wait has begun once it is announced; only then does the server start.
	announced := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(pr).ReadString('\n')
		announced <- line
	}()
	select {
	case line := <-announced:
		if !strings.HasPrefix(line, "mocker worker: waiting up to 10s for the NATS server at "+url) {
			t.Fatalf("announced %q", line)
		}
	case c := <-done:
		t.Fatalf("no wait announced before a server was up: %+v", c)
	}
	ns, _, err := natsevents.StartEmbedded(port)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	if c := <-done; !c.connected {
		t.Errorf("connected %v, error %v", c.connected, c.err)
	}
}

// TestFrontendSaysWhatItIs: serve --workers 0 runs no engine: it says it is a frontend routing to the
// workers it finds on NATS, and how to start them, rather than "0 workers" and KV events it never publishes.
func TestFrontendSaysWhatItIs(t *testing.T) {
	cfg := serveConfig()
	cfg.Workers = 0
	var stderr bytes.Buffer
	info, stop := runServe(t, cfg, &stderr)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("mocker frontend: model llama-3.1-8b on http://%s, routing (router kv) to the mocker workers it finds on NATS %s: start them with mocker worker --nats %s\n"+
		"mocker frontend: shutting down, draining requests in flight\n", info.Addr, info.NATSURL, info.NATSURL)
	if got := stderr.String(); got != want {
		t.Errorf("stderr\n%s\nwant\n%s", got, want)
	}
}

// TestWorkerSaysWhatItIs: a fleet worker's first line names its fleet id, model, NATS server, backend
// and speedup; not a --router, which plays no part in it (the frontends route).
func TestWorkerSaysWhatItIs(t *testing.T) {
	ns, url, err := natsevents.StartEmbedded(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown()
	cfg := serveConfig()
	cfg.NATS, cfg.Backend = url, "sglang"
	var stderr bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *serving, 1)
	done := make(chan error, 1)
	go func() { done <- serveAs(ctx, &cfg, &stderr, ready, true) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("worker: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(stderr.String(), "\n")
	var id uint64
	if _, err := fmt.Sscanf(line, "mocker worker: %x,", &id); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	if want := fmt.Sprintf("mocker worker: %016x, model llama-3.1-8b on NATS %s (sglang, speedup 1000)", id, url); line != want {
		t.Errorf("first line\n%s\nwant\n%s", line, want)
	}
}

// TestPortInUseNamed: a port another process listens on is an error naming the flag that chose it,
// saying the port is in use and to choose another.
func TestPortInUseNamed(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	// --worker-ports port-1 needs worker 0's port free.
	if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port-1)); err != nil {
		t.Skipf("port %d, below the busy one, is taken too: %v", port-1, err)
	} else {
		l.Close()
	}
	for _, tc := range []struct {
		set  func(*config.Config)
		want string // the error, or its end after "..."
	}{
		{func(c *config.Config) { c.Port = port },
			fmt.Sprintf("--port %d: 127.0.0.1:%[1]d is already in use (another server listens there): choose another --port (0: any free port)", port)},
		{func(c *config.Config) { c.WorkerPorts, c.Workers = port-1, 2 },
			fmt.Sprintf("--worker-ports %d: worker 1's port, 127.0.0.1:%d, is already in use: choose another --worker-ports", port-1, port)},
		{func(c *config.Config) { c.NATS, c.NATSPort = "embedded", port },
			fmt.Sprintf("--nats-port %d: 127.0.0.1:%[1]d is already in use (another NATS server? --nats nats://127.0.0.1:%[1]d uses it): choose another --nats-port (0: any free port), or --nats none", port)},
		{func(c *config.Config) { c.ZMQKVEventsPort = port }, "...bind: address already in use; choose another --zmq-kv-events-port"},
		// With replay sockets too, the flag whose port is taken, not both.
		{func(c *config.Config) { c.ZMQKVEventsPort, c.ZMQReplayPort = port, port-1 }, "...bind: address already in use; choose another --zmq-kv-events-port"},
		{func(c *config.Config) { c.ZMQKVEventsPort, c.ZMQReplayPort = port-1, port }, "...bind: address already in use; choose another --zmq-replay-port"},
		{func(c *config.Config) { c.KVEventsEndpoint, c.ZMQReplayPort = fmt.Sprintf("tcp://*:%d", port-1), port }, "...bind: address already in use; choose another --zmq-replay-port"},
		{func(c *config.Config) { c.KVEventsEndpoint = fmt.Sprintf("tcp://*:%d", port) }, "...bind: address already in use; choose another --kv-events-endpoint PORT"},
		{func(c *config.Config) { c.DynamoZMQEndpoint = fmt.Sprintf("tcp://127.0.0.1:%d", port) }, "...bind: address already in use; choose another --dynamo-zmq-endpoint PORT (0: free ports)"},
		{func(c *config.Config) { c.PrefillWorkers, c.DecodeWorkers, c.BootstrapPort = 1, 1, port },
			"...bind: address already in use; choose another --bootstrap-port (0: free ports)"},
	} {
		cfg := serveConfig()
		cfg.Port, cfg.NATS = 0, "none"
		tc.set(&cfg)
		err := serveFails(&cfg)
		if want, ok := strings.CutPrefix(tc.want, "..."); ok {
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("%v, want ...%s", err, want)
			}
		} else if err == nil || err.Error() != want {
			t.Errorf("%v, want %s", err, want)
		}
	}
}

// serveFails runs serve with cfg and returns its error; a server that starts instead is stopped and
// reported as a nil error.
func serveFails(cfg *config.Config) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan *serving, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, io.Discard, ready) }()
	select {
	case err := <-done:
		return err
	case <-ready:
		cancel()
		<-done
		return nil
	}
}

// TestUnknownFlagSuggests: a mistyped flag names the flag it most likely meant, on every command; a
// live command still says why it has no flag for a setting of predict's.
func TestUnknownFlagSuggests(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"predict --num-request 5", "unknown flag: --num-request (did you mean --num-requests?)"},
		{"predict --max-model-length 5", "unknown flag: --max-model-length (did you mean --max-model-len?)"},
		{"serve --prt 8000", "unknown flag: --prt (did you mean --port?)"},
		{"recommend --tp-lst 1", "unknown flag: --tp-lst (did you mean --tp-list?)"},
		{"predict --xyzzy", "unknown flag: --xyzzy"},
		// Nothing rather than a guess: too short, or as near to several flags.
		{"predict --h", "unknown flag: --h"},
		{"recommend --itl 50", "unknown flag: --itl (did you mean --itl-p90-ms?)"},
		{"serve --work 2", "unknown flag: --work"}, // --workers or --worker-ports
		{"predict --work 2", "unknown flag: --work (did you mean --workers?)"},
		{"predict --prefill", "unknown flag: --prefill"},
		{"predict --decode", "unknown flag: --decode"},
		{"predict --model-len 5", "unknown flag: --model-len"},
		// Never a hidden flag: a developer's, or one the command ignores.
		{"predict --cpuprofil x", "unknown flag: --cpuprofil"},
		{"estimate --worker 2", "unknown flag: --worker"},
		{"estimate --chunked-prefill-size 4096", "unknown flag: --chunked-prefill-size"},
		// Other engines' names for mocker's settings: never a near name that means something else.
		{"predict --tp-size 2", "unknown flag: --tp-size (did you mean --tp?)"},
		{"predict --tensor-parallel-size 2", "unknown flag: --tensor-parallel-size (did you mean --tp?)"},
		{"predict --ep-size 2", "unknown flag: --ep-size (did you mean --ep?)"},
		{"predict --dp 8", "unknown flag: --dp (did you mean --dp-size?)"},
		{"predict --enable-dp-attention", "unknown flag: --enable-dp-attention (did you mean --dp-attention?)"},
		{"predict --context-length 4096", "unknown flag: --context-length (did you mean --max-model-len?)"},
		{"predict --max-running-requests 64", "unknown flag: --max-running-requests (did you mean --max-num-seqs?)"},
		{"predict --mem-fraction-static 0.8", "unknown flag: --mem-fraction-static (did you mean --gpu-memory-utilization?)"},
		{"predict --num-prompts 100", "unknown flag: --num-prompts (did you mean --num-requests?)"},
		{"predict --random-input-len 100", "unknown flag: --random-input-len (did you mean --input-tokens?)"},
		{"predict --output-len 100", "unknown flag: --output-len (did you mean --output-tokens?)"},
		{"serve --served-model-name m", "unknown flag: --served-model-name (did you mean --model-name?)"},
		{"serve --num-prompts 5", "unknown flag: --num-prompts"},                     // a live command runs no workload
		{"predict -tp 2", "unknown shorthand flag: 't' in -tp (did you mean --tp?)"}, // vLLM's
		{"predict -dp=2", "unknown shorthand flag: 'd' in -dp=2 (did you mean --dp-size?)"},
		{"serve --num-requests 5", "unknown flag: --num-requests: mocker serve cannot honour it: it is no setting of mocker serve (mocker predict's workload and reports have no place in a live deployment, which answers the requests its clients send)"},
	} {
		_, _, err := mocker(t, strings.Fields(tc.args)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.args, err, tc.want)
		}
	}
}

// TestImpossibleTPNamed: a TP the model's attention heads (or linear-attention heads, or MLP) do not
// split over is refused by every command that deploys the model, naming the setting and the TPs that do
// split them, whatever the timing model; a pool's own TP is named as its flag.
func TestImpossibleTPNamed(t *testing.T) {
	heads := "llama-3.1-8b's 32 attention heads do not split over 3 GPUs (TP must divide 32: 1, 2, 4, 8, 16, 32)"
	for _, tc := range []struct{ args, want string }{
		{"predict --tp 3 --num-requests 10", "tp 3: " + heads},
		{"predict --tp 3 --timing fixed --num-requests 10", "tp 3: " + heads},
		{"predict --prefill-workers 1 --decode-workers 1 --prefill-tp 3", "prefill-tp 3: " + heads},
		{"predict --prefill-workers 1 --decode-workers 1 --tp 3 --prefill-tp 2", "decode workers: tp 3: " + heads},
		{"estimate --tp 3 --prefill-tokens 100", "tp 3: " + heads},
		{"serve --tp 3 --port 0 --nats none", "tp 3: " + heads},
		{"predict --model minimax-m2.5 --tp 12", "tp 12: minimax-m2.5's 8 key/value heads do not split over 12 GPUs, nor replicate over them evenly (TP must divide 48 and divide or be a multiple of 8: 1, 2, 4, 8, 16, 24, 48)"},
		// Gated DeltaNet's heads split too, as vLLM and SGLang divide them, whatever the timing model.
		{"predict --model qwen3.5-397b-a17b --tp 32 --timing fixed", "tp 32: qwen3.5-397b-a17b's 16/64 linear-attention key/value heads do not split over 32 GPUs (TP must divide 32 and 16: 1, 2, 4, 8, 16)"},
	} {
		_, _, err := mocker(t, strings.Fields(tc.args)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.args, err, tc.want)
		}
	}
}

// TestInputFilesNamed: an input file that cannot be read is named by its flag and path, as an output
// file is ("--FLAG PATH: why"), on every command that reads it; from a --config file, by its line too. A
// file that is read keeps its reader's errors, which name the file, the line and the field.
func TestInputFilesNamed(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	trace, bad, conf := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "bad.jsonl"), filepath.Join(dir, "c.yaml")
	os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 100, "output_length": 5}`+"\n"), 0o644)
	os.WriteFile(bad, []byte(`{"timestamp": 0, "input_length": "x"}`+"\n"), 0o644)
	os.WriteFile(conf, []byte("seed: 1\ntrace: "+missing+"\n"), 0o644)
	enoent := ": no such file or directory"
	for _, tc := range []struct{ args, want string }{
		{"predict --trace " + missing, "--trace " + missing + enoent},
		{"predict --trace " + dir, "--trace " + dir + ": is a directory"},
		{"predict --trace " + bad, "trace " + bad + " line 1: input_length: want a number, got string"},
		{"predict --config " + missing, "--config " + missing + enoent},
		{"predict --config " + dir, "--config " + dir + ": is a directory"},
		{"predict --config " + conf, "config " + conf + " line 2: --trace " + missing + enoent},
		{"predict --model-config " + missing, "--model-config " + missing + enoent},
		{"predict --model-config " + dir, "--model-config " + dir + ": config.json" + enoent},
		{"predict --trace " + trace + " --tokenizer " + missing, "--tokenizer " + missing + enoent},
		{"predict --planner-config " + missing, "--planner-config " + missing + enoent},
		{"predict --timing profile --profile " + missing, "--profile " + missing + ": not a built-in profile (h200-llama-3.1-8b-bf16, h200-qwen3-32b-bf16) nor a file" + enoent},
		// A pool's own file is named by the pool's setting; a shared one by the shared setting.
		{"predict --prefill-workers 1 --decode-workers 1 --prefill-timing profile --prefill-profile " + missing,
			"prefill workers: --prefill-profile " + missing + ": not a built-in profile (h200-llama-3.1-8b-bf16, h200-qwen3-32b-bf16) nor a file" + enoent},
		{"predict --prefill-workers 1 --decode-workers 1 --timing profile --profile " + missing,
			"prefill workers: --profile " + missing + ": not a built-in profile (h200-llama-3.1-8b-bf16, h200-qwen3-32b-bf16) nor a file" + enoent},
		{"predict --perf-db " + missing, "--perf-db " + missing + enoent},
		{"predict --perf-db " + trace, "--perf-db " + trace + ": h200_sxm: not a directory"},
		{"estimate --prefill-tokens 10 --perf-db " + missing, "--perf-db " + missing + enoent},
		{"serve --port 0 --nats none --tokenizer " + missing, "--tokenizer " + missing + enoent},
	} {
		_, _, err := mocker(t, strings.Fields(tc.args)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.args, err, tc.want)
		}
	}
}

// TestPerfDBVariableNamed: $MOCKER_PERF_DB naming no directory is worded as --perf-db is, by the
// variable, wherever the op-level model would read it; where no pool's passes are priced by that model
// it is not read, and --perf-db given wins over it.
func TestPerfDBVariableNamed(t *testing.T) {
	dir := t.TempDir()
	missing, file := filepath.Join(dir, "missing"), filepath.Join(dir, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, tc := range []struct{ env, args, want string }{
		{missing, "predict --num-requests 5", "$MOCKER_PERF_DB " + missing + ": no such file or directory"},
		{file, "predict --num-requests 5", "$MOCKER_PERF_DB " + file + ": h200_sxm: not a directory"},
		{missing, "estimate --prefill-tokens 10", "$MOCKER_PERF_DB " + missing + ": no such file or directory"},
		{missing, "predict --num-requests 5 --prefill-workers 1 --decode-workers 1 --timing fixed --decode-timing default",
			"decode workers: $MOCKER_PERF_DB " + missing + ": no such file or directory"},
		{missing, "predict --num-requests 5 --perf-db " + file, "--perf-db " + file + ": h200_sxm: not a directory"},
		{missing, "predict --num-requests 5 --timing fixed", ""},
		{missing, "predict --num-requests 5 --backend trtllm", ""}, // priced by the profile
	} {
		t.Setenv("MOCKER_PERF_DB", tc.env)
		_, _, err := mocker(t, strings.Fields(tc.args)...)
		if tc.want == "" && err != nil || tc.want != "" && fmt.Sprint(err) != tc.want {
			t.Errorf("$MOCKER_PERF_DB=%s %s: %v, want %q", tc.env, tc.args, err, tc.want)
		}
	}
}
