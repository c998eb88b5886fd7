package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/config"
)

// Every setting a live command cannot honour is refused, by name and with the reason, whether given on
// the command line or in its --config file; none is read and dropped. The context is cancelled before
// the command runs, so a command that did not refuse serves nothing and returns nil.
func TestLiveRefusesSettings(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	planner := file("planner.yaml", "planner-config: x.yaml\n")
	const nats = "nats://127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--planner-config", "x.yaml"}, "unknown flag: --planner-config: mocker serve cannot honour it: " + unservable["planner-config"]},
		{[]string{"worker", "--nats", nats, "--num-requests", "5"}, "unknown flag: --num-requests: mocker worker cannot honour it: it is no setting of mocker worker (mocker predict's workload and reports have no place in a live deployment, which answers the requests its clients send)"},
		{[]string{"serve", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"serve", "--config", planner}, "planner-config (config " + planner + " line 1): mocker serve cannot honour it: " + unservable["planner-config"]},
		{[]string{"serve", "--config", file("fail.yaml", "nats: none\nfail-worker: [0@1s]\n")}, "fail-worker (config " + dir + "/fail.yaml line 2): mocker serve cannot honour it: " + unservable["fail-worker"]},
		{[]string{"serve", "--config", file("lat.yaml", "frontend-latency-ms: 5\n")}, "frontend-latency-ms (config " + dir + "/lat.yaml line 1): mocker serve cannot honour it: " + unservable["frontend-latency-ms"]},
		{[]string{"serve", "--config", file("scaling.yaml", "scaling-jsonl: s.jsonl\n")}, "scaling-jsonl (config " + dir + "/scaling.yaml line 1): mocker serve cannot honour it: " + unservable["scaling-jsonl"]},
		{[]string{"serve", "--config", file("workload.yaml", "num-requests: 10\n")}, "num-requests (config " + dir + "/workload.yaml line 1): mocker serve cannot honour it: it is no setting of mocker serve (mocker predict's workload and reports have no place in a live deployment, which answers the requests its clients send)"},
		{[]string{"serve", "--nats", "none", "--nats-port", "4333"}, "--nats-port: mocker serve cannot honour it: it is the port of the embedded NATS server, and --nats is none"},
		{[]string{"serve", "--nats", "none", "--bootstrap-port", "9000"}, "--bootstrap-port: mocker serve cannot honour it: it applies to disaggregated serving (--prefill-workers and --decode-workers)"},
		{[]string{"serve", "--nats", "none", "--kv-transfer-bandwidth", "50"}, "--kv-transfer-bandwidth: mocker serve cannot honour it: it applies to disaggregated serving (--prefill-workers and --decode-workers)"},
		{[]string{"serve", "--nats", "none", "--kv-hash-seed", "1"}, "--kv-hash-seed: mocker serve cannot honour it: it shapes vLLM-format KV events on ZMQ, which are off (no --zmq-kv-events-port or --kv-events-endpoint)"},
		{[]string{"serve", "--nats", "none", "--kv-events-format", "json"}, "--kv-events-format: mocker serve cannot honour it: it is the format of the KV events on NATS, and --nats is none"},
		{[]string{"serve", "--nats", "none", "--dynamo-namespace", "dynamo"}, "--dynamo-namespace: mocker serve cannot honour it: it scopes Dynamo's event plane, which is off (--nats none or --kv-events-format json, and no --dynamo-zmq-endpoint or --dynamo-zmq-broker)"},
		{[]string{"worker", "--nats", nats, "--kv-events-format", "json", "--dynamo-endpoint", "generate"}, "--dynamo-endpoint: mocker worker cannot honour it: it scopes Dynamo's event plane, which is off (--nats none or --kv-events-format json, and no --dynamo-zmq-endpoint or --dynamo-zmq-broker)"},
		{[]string{"serve", "--nats", "none", "--fleet-ttl", "3"}, "--fleet-ttl: mocker serve cannot honour it: only a fleet frontend (mocker frontend, or mocker serve --workers 0) waits for workers' heartbeats"},
		{[]string{"serve", "--workers", "0", "--nats", nats, "--check-invariants"}, "--check-invariants: mocker serve cannot honour it: a fleet frontend runs no engine: give it to the mocker worker processes"},
		{[]string{"worker", "--nats", nats, "--config", file("port.yaml", "port: 8001\n")}, "port (config " + dir + "/port.yaml line 1): mocker worker cannot honour it: it is no setting of mocker worker (mocker predict's workload and reports have no place in a live deployment, which answers the requests its clients send)"},
		{[]string{"worker", "--nats", nats, "--router-event-delay-ms", "5"}, "--router-event-delay-ms: mocker worker cannot honour it: a fleet worker's requests come routed by the frontend: give it to mocker frontend"},
		{[]string{"worker", "--nats", nats, "--config", planner}, "planner-config (config " + planner + " line 1): mocker worker cannot honour it: " + unservable["planner-config"]},
		{[]string{"frontend", "--nats", nats, "--router-events-at-pass-end"}, "--router-events-at-pass-end: mocker frontend cannot honour it: a fleet frontend runs no engine: give it to the mocker worker processes"},
		{[]string{"frontend", "--nats", nats, "--zmq-kv-events-port", "5557"}, "--zmq-kv-events-port: mocker frontend cannot honour it: a fleet frontend runs no engine, so it publishes no KV events: the mocker worker processes do"},
		{[]string{"frontend", "--nats", nats, "--config", file("fail2.yaml", "on-worker-failure: fail\n")}, "on-worker-failure (config " + dir + "/fail2.yaml line 1): mocker frontend cannot honour it: " + unservable["on-worker-failure"]},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		cmd := newRootCmd()
		cmd.SetOut(new(nopWriter))
		cmd.SetErr(new(nopWriter))
		cmd.SetArgs(append(tc.args, "--port", "0"))
		if tc.args[0] == "worker" {
			cmd.SetArgs(tc.args)
		}
		if err := cmd.ExecuteContext(ctx); err == nil || err.Error() != tc.want {
			t.Errorf("mocker %q = %v\nwant %s", tc.args, err, tc.want)
		}
	}
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// What serve honours reaches the live server's options: the routers' event delay and when the workers
// publish their KV events.
func TestLiveOptionsRouterEvents(t *testing.T) {
	cfg := config.Default()
	cfg.RouterEventDelayMs, cfg.RouterEventsAtPassEnd = 12.5, true
	o, _, err := liveOptions(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.RouterEventDelay != 12500*time.Microsecond || !o.EventsAtPassEnd {
		t.Errorf("RouterEventDelay %v, EventsAtPassEnd %v; want 12.5ms, true", o.RouterEventDelay, o.EventsAtPassEnd)
	}
}

// TestLiveOptionsContextLen: serve bounds a request as predict does (Config.ContextLen): by
// --max-model-len, else the model's max_position_embeddings (Llama-3.1-8B, the default: 131,072), in the
// frontend's check and the engines' alike, and leaves the configuration as it found it.
func TestLiveOptionsContextLen(t *testing.T) {
	for _, tc := range []struct{ given, want int }{{0, 131072}, {4096, 4096}} {
		cfg := config.Default()
		cfg.MaxModelLen = tc.given
		o, _, err := liveOptions(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		if o.MaxModelLen != tc.want || o.Engine.VLLM.MaxModelLen != tc.want || o.Engine.SGLang.MaxModelLen != tc.want {
			t.Errorf("--max-model-len %d: frontend %d, vLLM %d, SGLang %d; want %d", tc.given, o.MaxModelLen,
				o.Engine.VLLM.MaxModelLen, o.Engine.SGLang.MaxModelLen, tc.want)
		}
		if cfg.MaxModelLen != tc.given {
			t.Errorf("--max-model-len %d: the configuration says %d after", tc.given, cfg.MaxModelLen)
		}
	}
}

// TestLiveOptionsImagesAndLoRAs: serve's --image-tokens and --lora-modules reach the live server (a
// merge once dropped --image-tokens silently).
func TestLiveOptionsImagesAndLoRAs(t *testing.T) {
	cfg := config.Default()
	cfg.ImageTokens, cfg.LoRAModules = 100, []string{"sql-lora=/p"}
	o, _, err := liveOptions(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.ImageTokens != 100 || len(o.LoRAModules) != 1 || o.LoRAModules[0].Name != "sql-lora" {
		t.Errorf("ImageTokens %d, LoRAModules %+v; want 100, [sql-lora]", o.ImageTokens, o.LoRAModules)
	}
}

// liveOptions builds the pools alone, not a simulation's options: a planner file or failures that only a
// simulation reads are not read (serve refuses them before), and the decode pool's engine, router and the
// KV transfer come from the configuration as a simulation's do.
func TestLiveOptionsBuildNoSimulation(t *testing.T) {
	cfg := config.Default()
	cfg.PlannerConfig = filepath.Join(t.TempDir(), "missing.yaml")
	cfg.FailWorker, cfg.OnWorkerFailure = []string{"nonsense"}, "nonsense"
	cfg.PrefillWorkers, cfg.DecodeWorkers = 2, 3
	cfg.KVTransferBandwidth, cfg.KVBytesPerToken = 25, 1000
	o, _, err := liveOptions(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := o.Disagg
	if o.Workers != 2 || d == nil || d.DecodeWorkers != 3 {
		t.Fatalf("workers %d, disagg %+v; want 2 prefill and 3 decode workers", o.Workers, d)
	}
	if d.Transfer.GBps != 25 || d.Transfer.BytesPerToken != 1000 {
		t.Errorf("transfer %+v, want 25 GB/s of 1000 bytes a token", d.Transfer)
	}
	if d.Router.OverlapScoreWeight != 0 || o.Router.OverlapScoreWeight != cfg.OverlapScoreWeight || cfg.OverlapScoreWeight == 0 {
		t.Errorf("overlap weights: decode router %v, prefill router %v; want 0, %v", d.Router.OverlapScoreWeight, o.Router.OverlapScoreWeight, cfg.OverlapScoreWeight)
	}
	if d.Engine.VLLM.Events || !o.Engine.VLLM.Events {
		t.Errorf("KV events: decode engine %v, prefill engine %v; want false, true", d.Engine.VLLM.Events, o.Engine.VLLM.Events)
	}
}
