package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/live"
	"github.com/mocker-sim/mocker/live/metrics"
	"github.com/mocker-sim/mocker/live/natsevents"
	"github.com/mocker-sim/mocker/live/outlen"
	"github.com/mocker-sim/mocker/live/vllmevents"
)

func newServeCmd() *cobra.Command {
	cfg := config.Default()
	cfg.Router = "kv" // a live fleet is routed by what its workers cache
	var configPath string
	var prof profiles
	var threads liveThreads
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run simulated workers behind an OpenAI-compatible API on the wall clock",
		Long: `serve runs simulated engines on the wall clock behind an OpenAI-compatible HTTP API
(/v1/completions, /v1/chat/completions, /v1/models, /health, /metrics): requests stream tokens at
the pace the timing model gives, workers publish KV events (Dynamo's event plane on NATS, and on ZMQ
on request; vLLM's format on ZMQ) and Prometheus metrics with the engine's names. Use it to test
routers, autoscalers and clients against a fleet of "GPUs" that costs nothing.

  mocker serve                                   one worker on 127.0.0.1:8000
  mocker serve --workers 4 --speedup-ratio 10    four workers behind the KV router, 10x faster
  mocker serve --prefill-workers 2 --decode-workers 2 --kv-transfer-bandwidth 50
  mocker serve --prefill-workers 2 --decode-workers 1 --prefill-max-num-batched-tokens 16384 \
      --decode-max-num-seqs 512                  each pool with its own engine flags (or prefill:/decode: in --config)
  mocker serve --workers 4 --worker-ports 8001 --kv-events-endpoint tcp://127.0.0.1:5557 \
      --kv-events-topic 'kv@{host}:{port}@{model}'  four pods on ports 8001-8004 for llm-d's picker and indexer
  mocker serve --workers 2 --nats nats://127.0.0.1:4222 --dynamo-namespace dynamo
                                                 KV events and load for Dynamo's router (DYN_EVENT_PLANE=nats)

SIGINT or SIGTERM stops accepting requests and waits up to --shutdown-timeout for those in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadSettings(cmd.Flags(), &cfg, configPath); err != nil {
				return err
			}
			if err := refuseUnservable("serve", cmd.Flags(), &cfg); err != nil {
				return err
			}
			if err := threads.apply(); err != nil {
				return err
			}
			stopProf, err := prof.start()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return errors.Join(serve(ctx, &cfg, cmd.ErrOrStderr(), nil), stopProf())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "YAML file of settings (keys as the flags)")
	fs.SortFlags = false
	bindServeFlags(fs, &cfg)
	bindEngineFlags(fs, &cfg)
	bindRouterEventFlags(fs, &cfg)
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random choice")
	threads.bind(fs)
	prof.bind(fs)
	return cmd
}

func bindServeFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.StringVar(&c.Host, "host", c.Host, "address to listen on")
	fs.IntVar(&c.Port, "port", c.Port, "HTTP port (0: any free port)")
	fs.StringVar(&c.ModelName, "model-name", c.ModelName, "served model id (empty: the --model name, or mocker with --model-config)")
	fs.StringSliceVar(&c.LoRAModules, "lora-modules", c.LoRAModules, "LoRA adapters served besides the base model, as vLLM's --lora-modules: NAME or NAME=PATH (the path is not read), comma-separated or repeated; a request names one in its model field")
	fs.StringVar(&c.Tokenizer, "tokenizer", c.Tokenizer, "a Hugging Face tokenizer.json (file or model directory) for prompt tokens (empty: a built-in deterministic tokenizer)")
	fs.IntVar(&c.DefaultMaxTokens, "default-max-tokens", c.DefaultMaxTokens, "tokens a request generates when it sets no max_tokens")
	fs.StringVar(&c.OutputLengthDist, "output-length-dist", c.OutputLengthDist, "where a choice without ignore_eos meets its end-of-sequence (finish_reason stop), drawn per request from --seed: fixed (always max_tokens), uniform (on [1, max_tokens]), lognormal:MEAN:SIGMA")
	fs.IntVar(&c.MaxWaiting, "max-waiting", c.MaxWaiting, "requests waiting to run at most; past it requests get 429 (0: unbounded)")
	fs.Float64Var(&c.MaxRequestBodyMB, "max-request-body-mb", c.MaxRequestBodyMB, "request body size limit in MiB (413 past it)")
	fs.StringVar(&c.APIKey, "api-key", c.APIKey, "require this key as 'Authorization: Bearer KEY' on /v1 routes")
	fs.StringVar(&c.NATS, "nats", c.NATS, "KV events over NATS: embedded (a server in this process), none, or the URL of a NATS server")
	fs.IntVar(&c.NATSPort, "nats-port", c.NATSPort, "client port of the embedded NATS server (0: any free port)")
	fs.IntVar(&c.ZMQKVEventsPort, "zmq-kv-events-port", c.ZMQKVEventsPort, "publish vLLM-format KV events on ZMQ PUB sockets from this port: worker w, rank r on port + w×dp-size + r (0: off)")
	fs.IntVar(&c.ZMQReplayPort, "zmq-replay-port", c.ZMQReplayPort, "serve replays of buffered vLLM-format KV events on ZMQ ROUTER sockets from this port, numbered as the PUB ports (0: off)")
	fs.BoolVar(&c.KVEventsMapFormat, "kv-events-map-format", c.KVEventsMapFormat, "encode vLLM-format KV events as msgpack maps instead of arrays")
	fs.StringVar(&c.KVHashSeed, "kv-hash-seed", c.KVHashSeed, "vLLM's PYTHONHASHSEED for the block hashes of vLLM-format KV events")
	fs.StringVar(&c.KVEventsEndpoint, "kv-events-endpoint", c.KVEventsEndpoint, `vLLM's kv-events endpoint for vLLM-format KV events, by vLLM's rule: tcp://*:PORT binds (worker w, rank r on PORT + w×dp-size + r), tcp://HOST:PORT connects every worker to a subscriber that binds (llm-d's centralized indexer; rank r to PORT + r)`)
	fs.StringVar(&c.KVEventsTopic, "kv-events-topic", c.KVEventsTopic, "topic of vLLM-format KV events (vLLM's default: empty); {host} and {port} are the worker's HTTP address, {model} the served model, {worker} its index: kv@{host}:{port}@{model} is llm-d's kv@<pod>@<model> with --worker-ports")
	fs.StringVar(&c.KVEventsFormat, "kv-events-format", c.KVEventsFormat, "KV events on NATS: dynamo (msgpack envelopes of RouterEvents and load metrics on Dynamo's event-plane subjects, what current Dynamo routers read) or json (bare RouterEvent JSON on namespace.mocker.component.<model>.kv_events, the pre-event-plane form)")
	fs.StringVar(&c.DynamoNamespace, "dynamo-namespace", c.DynamoNamespace, "Dynamo namespace of the workers' event-plane subjects (Dynamo's DYN_NAMESPACE)")
	fs.StringVar(&c.DynamoComponent, "dynamo-component", c.DynamoComponent, "Dynamo component of the workers' event-plane subjects (the component of a Dynamo worker's --endpoint)")
	fs.StringVar(&c.DynamoEndpoint, "dynamo-endpoint", c.DynamoEndpoint, "Dynamo endpoint the load metrics (kv_metrics) are scoped to")
	fs.StringVar(&c.DynamoZMQEndpoint, "dynamo-zmq-endpoint", c.DynamoZMQEndpoint, "also publish the Dynamo event plane on ZMQ in direct mode: each publisher binds its own PUB socket, publisher j on tcp://HOST:PORT+j (PORT 0: free ports, printed)")
	fs.StringVar(&c.DynamoZMQBroker, "dynamo-zmq-broker", c.DynamoZMQBroker, "also publish the Dynamo event plane on ZMQ through a Dynamo ZMQ broker: connect to its XSUB at tcp://HOST:PORT (DYN_ZMQ_BROKER_URL's xsub=)")
	fs.IntVar(&c.WorkerPorts, "worker-ports", c.WorkerPorts, "also serve worker i alone (its /v1 routes, its /metrics) on HTTP port BASE + i, so an endpoint picker can address each worker as a pod (0: off)")
	fs.IntVar(&c.BootstrapPort, "bootstrap-port", c.BootstrapPort, "disaggregated serving: prefill worker i's bootstrap rendezvous listens on port + i (0: any free port)")
	fs.StringVar(&c.BootstrapHost, "bootstrap-host", c.BootstrapHost, "disaggregated serving: address the bootstrap rendezvous listens on (the decode workers are in this process)")
	fs.IntVar(&c.BootstrapMaxConns, "bootstrap-max-conns", c.BootstrapMaxConns, "disaggregated serving: open connections per bootstrap rendezvous server at most")
	fs.BoolVar(&c.CheckInvariants, "check-invariants", c.CheckInvariants, "verify every engine's KV block accounting after every pass (slow); a violation makes the exit status non-zero")
	fs.Float64Var(&c.FleetTTLS, "fleet-ttl", c.FleetTTLS, "seconds a fleet frontend waits for a worker's heartbeat (its answer to a ping, sent every third of this) before it drops the worker")
	fs.Float64Var(&c.ShutdownTimeoutS, "shutdown-timeout", c.ShutdownTimeoutS, "seconds to wait for requests in flight on SIGINT or SIGTERM")
	fs.Float64Var(&c.ReadHeaderTimeoutS, "read-header-timeout", c.ReadHeaderTimeoutS, "seconds a connection may take to send a request's headers (0: 10)")
	fs.Float64Var(&c.ReadTimeoutS, "read-timeout", c.ReadTimeoutS, "seconds a connection may take to send a whole request, body included (0: 60)")
	fs.Float64Var(&c.IdleTimeoutS, "idle-timeout", c.IdleTimeoutS, "seconds a keep-alive connection may idle between requests (0: 120)")
	fs.Float64Var(&c.WriteTimeoutS, "write-timeout", c.WriteTimeoutS, "seconds each write of a response may block on a client that does not read (a stream has no overall limit) (0: 60)")
	fs.IntVar(&c.MaxConnections, "max-connections", c.MaxConnections, "open HTTP connections at most; past it new ones wait to be accepted (0: 4096)")
	fs.Float64Var(&c.FailureRate, "failure-rate", c.FailureRate, "share of requests answered with an injected OpenAI-style error, drawn from --seed (0: none)")
	fs.StringSliceVar(&c.FailureTypes, "failure-types", c.FailureTypes, "injected errors to choose from: "+strings.Join(live.FailureTypes(), ", ")+" (empty: all)")
}

// bindRouterEventFlags registers when the live routers see the workers' KV events.
func bindRouterEventFlags(fs *pflag.FlagSet, c *config.Config) {
	fs.Float64Var(&c.RouterEventDelayMs, "router-event-delay-ms", c.RouterEventDelayMs, "delay the KV events this process's router sees by this many wall-clock milliseconds, to study stale routing (subscribers get them at once)")
	fs.BoolVar(&c.RouterEventsAtPassEnd, "router-events-at-pass-end", c.RouterEventsAtPassEnd, "vLLM and TensorRT-LLM workers publish their KV events, to the router and every subscriber, when a pass ends rather than when it starts (SGLang's always do)")
}

// serving is what serve started; ready, when set, receives it once the server accepts requests.
type serving struct {
	Addr        string     // HTTP address
	WorkerAddrs []string   // worker i's own HTTP address (--worker-ports)
	NATSURL     string     // "" without NATS
	Subject     string     // the NATS subject of KV events
	PlaneAddrs  []net.Addr // the event plane's ZMQ sockets in direct mode, by publisher
	Bootstrap   []string
	Server      *live.Server
}

// serve runs the server until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, cfg *config.Config, stderr io.Writer, ready chan<- *serving) error {
	return serveAs(ctx, cfg, stderr, ready, false)
}

// serveAs is serve, or with worker `mocker worker`: one engine serving fleet frontends over NATS,
// without an HTTP API.
func serveAs(ctx context.Context, cfg *config.Config, stderr io.Writer, ready chan<- *serving, worker bool) error {
	// --workers 0 is a fleet frontend: the settings are checked as those of one worker, whose engine
	// flags the remote workers share.
	frontend := cfg.Workers == 0 && !worker
	if frontend {
		if cfg.NATS == "none" || cfg.PrefillWorkers > 0 || cfg.WorkerPorts > 0 {
			return errors.New("workers 0: a fleet frontend needs --nats (embedded or a URL), aggregated workers and no --worker-ports")
		}
		cfg.Workers = 1
		defer func() { cfg.Workers = 0 }()
	}
	who := "mocker serve" // what this process is, on stderr
	if frontend {
		who = "mocker frontend"
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	engines := cfg.Workers // a worker's fleet workers
	if worker {
		switch {
		case cfg.NATS == "" || cfg.NATS == "none" || cfg.NATS == "embedded":
			return fmt.Errorf("worker: --nats %q: want the URL of the fleet's NATS server", cfg.NATS)
		case cfg.ZMQKVEventsPort > 0 || cfg.KVEventsEndpoint != "" || cfg.DynamoZMQEndpoint != "" || cfg.DynamoZMQBroker != "" || cfg.WorkerPorts > 0:
			return errors.New("worker: publishes KV events on NATS only (no ZMQ or --worker-ports)")
		case cfg.PrefillWorkers > 0:
			return errors.New("worker: a fleet worker is aggregated (no --prefill-workers)")
		}
		// --workers N runs N fleet workers of one engine each: everything below builds one.
		cfg.Workers = 1
		defer func() { cfg.Workers = engines }()
	}
	o, mx, err := liveOptions(cfg)
	if err != nil {
		return err
	}
	name, eo, ro := o.ModelName, o.Engine, o.Router
	var loraNames []string // the ZMQ face numbers them as --lora-modules lists them
	for _, m := range o.LoRAModules {
		loraNames = append(loraNames, m.Name)
	}

	info := &serving{}
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	if worker {
		return runWorker(ctx, cfg, engines, o, name, stderr, ready)
	}
	if frontend {
		o.Workers = 0
	}
	// Listen first: the workers' topics name their addresses. Serve owns the listeners once it runs.
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("--port %d: %s is already in use (another server listens there): choose another --port (0: any free port)", cfg.Port, addr)
	} else if err != nil {
		return fmt.Errorf("--host %s --port %d: %w", cfg.Host, cfg.Port, err)
	}
	lns := []net.Listener{ln}
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	var workerLns []net.Listener
	for i := range cfg.Workers {
		if cfg.WorkerPorts == 0 {
			break
		}
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.WorkerPorts+i))
		l, err := net.Listen("tcp", addr)
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("--worker-ports %d: worker %d's port, %s, is already in use: choose another --worker-ports", cfg.WorkerPorts, i, addr)
		} else if err != nil {
			return fmt.Errorf("--worker-ports %d: worker %d: %w", cfg.WorkerPorts, i, err)
		}
		lns = append(lns, l)
		workerLns = append(workerLns, l)
		info.WorkerAddrs = append(info.WorkerAddrs, l.Addr().String())
	}
	plane := live.PlaneOptions{Scope: natsevents.Scope{Namespace: cfg.DynamoNamespace, Component: cfg.DynamoComponent,
		Endpoint: cfg.DynamoEndpoint}, Workers: o.Workers, DPSize: eo.DPSize, Seed: cfg.Seed}
	if cfg.NATS != "none" {
		url := cfg.NATS
		if url == "embedded" {
			ns, u, err := natsevents.StartEmbedded(cfg.NATSPort)
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("--nats-port %d: 127.0.0.1:%d is already in use (another NATS server? --nats nats://127.0.0.1:%[1]d uses it): choose another --nats-port (0: any free port), or --nats none", cfg.NATSPort, cfg.NATSPort)
			} else if err != nil {
				return fmt.Errorf("--nats embedded: %w", err)
			}
			cleanup = append(cleanup, func() { ns.Shutdown(); ns.WaitForShutdown() })
			url = u
		}
		var nc *nats.Conn
		if frontend {
			nc, err = waitNATS(ctx, url, who, stderr)
		} else {
			nc, err = dialNATS(url, who, "; --nats embedded runs one in this process, --nats none publishes no KV events")
		}
		if errors.Is(err, errStoppedWaiting) {
			return nil
		} else if err != nil {
			return err
		}
		cleanup = append(cleanup, func() {
			if nc.IsConnected() { // else Flush would wait for the server
				nc.Flush()
			}
			nc.Close()
		})
		info.NATSURL = url
		if frontend {
			o.Fleet = &live.FleetOptions{Conn: nc, TTL: seconds(cfg.FleetTTLS)}
		}
		if cfg.KVEventsFormat == "json" {
			info.Subject = natsevents.Subject(name)
			o.Sinks = append(o.Sinks, live.NewNATSSink(nc, info.Subject, o.Workers))
		} else {
			ps := live.NewNATSPlaneSink(nc, plane)
			info.Subject = natsevents.Scope{Namespace: plane.Scope.Namespace, Component: plane.Scope.Component}.Subject(natsevents.KVEventsTopic)
			o.Sinks, o.Recorder = append(o.Sinks, ps), ps.Recorders(o.Recorder)
		}
	}
	if ep := cmp.Or(cfg.DynamoZMQEndpoint, cfg.DynamoZMQBroker); ep != "" {
		ps, err := live.NewZMQPlaneSink(ep, cfg.DynamoZMQBroker != "", plane)
		if err != nil {
			return inUse(fmt.Errorf("dynamo event plane on ZMQ: %w", err), "--dynamo-zmq-endpoint PORT (0: free ports)")
		}
		cleanup = append(cleanup, func() { ps.Close() })
		o.Sinks, o.Recorder = append(o.Sinks, ps), ps.Recorders(o.Recorder)
		info.PlaneAddrs = ps.Addrs()
	}
	if cfg.ZMQKVEventsPort > 0 || cfg.KVEventsEndpoint != "" {
		topics := make([]string, o.Workers)
		for w := range topics {
			addr := ln.Addr().(*net.TCPAddr)
			if w < len(workerLns) {
				addr = workerLns[w].Addr().(*net.TCPAddr)
			}
			if topics[w], err = live.ExpandTopic(cfg.KVEventsTopic, addr.IP.String(), addr.Port, name, w); err != nil {
				return fmt.Errorf("kv-events-topic: %w", err)
			}
		}
		zs, err := live.NewZMQSink(live.ZMQOptions{
			Host: cfg.Host, Port: cfg.ZMQKVEventsPort, ReplayPort: cfg.ZMQReplayPort, Endpoint: cfg.KVEventsEndpoint,
			Workers: o.Workers, DPSize: eo.DPSize, BlockSize: ro.BlockSize, HashSeed: cfg.KVHashSeed,
			MapFormat: cfg.KVEventsMapFormat, Topics: topics, LoRAs: loraNames,
		})
		if err != nil {
			return inUse(err, zmqPortFlag(cfg, o.Workers*eo.DPSize, err))
		}
		cleanup = append(cleanup, func() { zs.Close() })
		o.Sinks = append(o.Sinks, zs)
	}

	srv, err := live.New(o)
	if err != nil {
		return inUse(err, "--bootstrap-port (0: free ports)")
	}
	defer srv.Close()
	if err := srv.Start(); err != nil {
		return inUse(err, "--bootstrap-port (0: free ports)")
	}
	hs := srv.APIServer()
	info.Addr, info.Bootstrap, info.Server = ln.Addr().String(), srv.BootstrapAddrs(), srv
	if frontend { // its workers are other processes: it publishes no KV events of its own
		fmt.Fprintf(stderr, "%s: model %s on http://%s, routing (router %s) to the mocker workers it finds on NATS %s: start them with mocker worker --nats %s\n",
			who, name, info.Addr, cfg.Router, info.NATSURL, info.NATSURL)
	} else {
		fmt.Fprintf(stderr, "%s: model %s on http://%s (%s)\n", who, name, info.Addr, describeServe(cfg, o.Workers))
		if info.NATSURL != "" {
			fmt.Fprintf(stderr, "%s: KV events on NATS %s, subject %s (%s)\n", who, info.NATSURL, info.Subject, cfg.KVEventsFormat)
		}
	}
	switch {
	case cfg.DynamoZMQBroker != "":
		fmt.Fprintf(stderr, "%s: Dynamo event plane on ZMQ, connecting to the broker's XSUB %s\n", who, cfg.DynamoZMQBroker)
	case len(info.PlaneAddrs) > 0:
		fmt.Fprintf(stderr, "%s: Dynamo event plane on ZMQ, worker w rank r publishing kv-events on socket 2×(w×dp-size+r) and kv_metrics on the next: %v\n", who, info.PlaneAddrs)
	}
	switch {
	case cfg.KVEventsEndpoint != "" && vllmevents.Binds(cfg.KVEventsEndpoint):
		fmt.Fprintf(stderr, "%s: vLLM KV events on ZMQ %s (bound)\n", who, cfg.KVEventsEndpoint)
	case cfg.KVEventsEndpoint != "":
		fmt.Fprintf(stderr, "%s: vLLM KV events on ZMQ, connecting to %s\n", who, cfg.KVEventsEndpoint)
	case cfg.ZMQKVEventsPort > 0:
		fmt.Fprintf(stderr, "%s: vLLM KV events on ZMQ tcp://%s:%d+\n", who, cfg.Host, cfg.ZMQKVEventsPort)
	}
	for i, a := range info.WorkerAddrs {
		fmt.Fprintf(stderr, "%s: worker %d alone on http://%s\n", who, i, a)
	}
	// Each listener's Serve returns once; the first error stops the server.
	errc := make(chan error, len(lns))
	go func() { errc <- hs.Serve(ln) }()
	var workerHS []*live.APIServer
	for i, l := range workerLns {
		whs := srv.WorkerAPIServer(i, mx.WorkerHandler(i))
		workerHS = append(workerHS, whs)
		go func() { errc <- whs.Serve(l) }()
	}
	lns = nil // the servers close them
	if ready != nil {
		ready <- info
	}
	select {
	case err := <-errc:
		hs.Close()
		for _, whs := range workerHS {
			whs.Close()
		}
		srv.Close()
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(stderr, "%s: shutting down, draining requests in flight\n", who)
	sctx, cancel := context.WithTimeout(context.Background(), seconds(cfg.ShutdownTimeoutS))
	defer cancel()
	for _, whs := range workerHS {
		whs.Shutdown(sctx) // its requests drain; the workers stop with the server below
	}
	err = shutdownError(srv.Shutdown(sctx, hs), cfg.ShutdownTimeoutS)
	for range 1 + len(workerHS) {
		if err := <-errc; err != nil {
			return err
		}
	}
	if err == nil && cfg.CheckInvariants {
		// The first accounting violation any worker found after a pass, or one it has now.
		if err := srv.CheckInvariants(); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}
	return err
}

// shutdownError names --shutdown-timeout where it ran out with requests still in flight: the bare
// "context deadline exceeded" named nothing.
func shutdownError(err error, timeoutS float64) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("shutdown: --shutdown-timeout %gs ran out with requests still in flight, which were cut off", timeoutS)
	}
	return err
}

// liveOptions maps the configuration onto a live server's options, and the metrics its workers record
// into; the sinks and a frontend's fleet, which need connections, are added by the caller.
func liveOptions(cfg *config.Config) (live.Options, *metrics.Metrics, error) {
	// A catalog model brings what vLLM reads from its checkpoint: max_model_len and the tokenizer's BOS
	// (PromptTokenizer).
	contextLen, err := cfg.ContextLen()
	if err != nil {
		return live.Options{}, nil, err
	}
	pools, err := cfg.Pools()
	if err != nil {
		return live.Options{}, nil, err
	}
	eo, ro := pools.Engine, pools.Router          // disaggregated, the prefill workers'
	eo.VLLM.Events, eo.SGLang.Events = true, true // routers and subscribers read them
	// The routers' queue threshold is in units of the pool's --max-num-batched-tokens, which every
	// backend's options carry in VLLM (EngineOptions).
	ro.BlockSize, ro.MaxBatchedTokens = eo.BlockSize(), eo.VLLM.MaxBatchedTokens

	name := cfg.ModelName
	if name == "" {
		name = "mocker"
		if cfg.ModelConfig == "" && cfg.Model != "" {
			name = cfg.Model
		}
	}
	tk, err := cfg.PromptTokenizer()
	if err != nil {
		return live.Options{}, nil, err
	}
	lengths, err := outlen.Parse(cfg.OutputLengthDist) // validated
	if err != nil {
		return live.Options{}, nil, err
	}
	maxLen := contextLen
	if maxLen == 0 {
		maxLen = 1 << 17 // the token-count histograms' last bucket
	}
	loras, err := cfg.Adapters() // validated
	if err != nil {
		return live.Options{}, nil, err
	}
	maxLoRAs := 0
	if len(loras) > 0 {
		maxLoRAs = cfg.MaxLoRAs
	}
	mx := metrics.New(metrics.Options{Backend: eo.Backend.Spec().Metrics, Model: name, MaxModelLen: maxLen, MaxLoRAs: maxLoRAs,
		BlockSize: eo.BlockSize(), NumBlocks: eo.KVBlocks(), PrefixCaching: cfg.EnablePrefixCaching, CacheDtype: cfg.KVCacheDtype,
		GPUMemoryUtilization: cfg.GPUMemoryUtilization, DPSize: eo.DPSize, SpecTokens: cfg.SpecNumTokens,
		CPUBlocks: eo.Tiers().CPUBlocks})

	o := live.Options{
		Engine:           eo,
		Workers:          cfg.Workers,
		Router:           ro,
		ModelName:        name,
		LoRAModules:      loras,
		MaxModelLen:      contextLen,
		DefaultMaxTokens: cfg.DefaultMaxTokens,
		OutputLength:     lengths,
		MaxWaiting:       cfg.MaxWaiting,
		MaxBodyBytes:     int64(cfg.MaxRequestBodyMB * (1 << 20)),
		APIKey:           cfg.APIKey,
		HTTP: live.HTTPLimits{
			ReadHeaderTimeout: seconds(cfg.ReadHeaderTimeoutS),
			ReadTimeout:       seconds(cfg.ReadTimeoutS),
			IdleTimeout:       seconds(cfg.IdleTimeoutS),
			WriteTimeout:      seconds(cfg.WriteTimeoutS),
			MaxConns:          cfg.MaxConnections,
		},
		FailureRate:      cfg.FailureRate,
		FailureTypes:     cfg.FailureTypes,
		FailureSeed:      cfg.Seed,
		Tokenizer:        tk,
		ImageTokens:      cfg.ImageTokens,
		Metrics:          mx.Handler(),
		Recorder:         func(w, r int) live.Recorder { return mx.Rank(w, r) },
		RouterEventDelay: time.Duration(cfg.RouterEventDelayMs * float64(time.Millisecond)),
		EventsAtPassEnd:  cfg.RouterEventsAtPassEnd,
		CheckInvariants:  cfg.CheckInvariants,
	}
	if cfg.PrefillWorkers > 0 {
		o.Workers = cfg.PrefillWorkers
		de := pools.DecodeEngine
		dr := pools.DecodeRouter
		dr.BlockSize, dr.MaxBatchedTokens = ro.BlockSize, de.VLLM.MaxBatchedTokens
		o.Disagg = &live.Disagg{
			DecodeWorkers:     cfg.DecodeWorkers,
			Engine:            &de,
			Router:            dr,
			Transfer:          pools.Transfer,
			BootstrapHost:     cfg.BootstrapHost,
			BootstrapPort:     cfg.BootstrapPort,
			BootstrapMaxConns: cfg.BootstrapMaxConns,
		}
	}
	return o, mx, nil
}

// seconds converts a validated number of seconds.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func describeServe(cfg *config.Config, workers int) string {
	if cfg.PrefillWorkers > 0 {
		s := fmt.Sprintf("%s, %d prefill + %d decode workers, router %s", cfg.Backend, cfg.PrefillWorkers, cfg.DecodeWorkers, cfg.Router)
		for _, role := range config.Roles { // each pool's own settings, as --prefill-KEY V
			r := cfg.Role(role)
			for _, k := range r.Keys() {
				s += fmt.Sprintf(", --%s-%s %s", role, k, r.Get(k))
			}
		}
		return s
	}
	noun := "workers"
	if workers == 1 {
		noun = "worker"
	}
	return fmt.Sprintf("%s, %d %s, router %s, speedup %g", cfg.Backend, workers, noun, cfg.Router, cfg.SpeedupRatio)
}

// zmqPortFlag names the flag that chose the port a ZMQ sink of n sockets found in use (err): the PUB
// sockets' (--zmq-kv-events-port, or --kv-events-endpoint's PORT) or the replay sockets'
// (--zmq-replay-port), each numbered from its flag's port by worker and rank; both when the port
// cannot tell.
func zmqPortFlag(cfg *config.Config, n int, err error) string {
	pub, from := "--zmq-kv-events-port", cfg.ZMQKVEventsPort
	if cfg.KVEventsEndpoint != "" {
		pub = "--kv-events-endpoint PORT"
		ep := cfg.KVEventsEndpoint
		from, _ = strconv.Atoi(ep[strings.LastIndexByte(ep, ':')+1:]) // 0: no port to tell by
	}
	if cfg.ZMQReplayPort == 0 {
		return pub
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		return pub + " or --zmq-replay-port"
	}
	addr, _ := op.Addr.(*net.TCPAddr)
	inPub := addr != nil && from > 0 && addr.Port >= from && addr.Port < from+n
	inReplay := addr != nil && addr.Port >= cfg.ZMQReplayPort && addr.Port < cfg.ZMQReplayPort+n
	switch {
	case inReplay && !inPub:
		return "--zmq-replay-port"
	case inPub && !inReplay:
		return pub
	}
	return pub + " or --zmq-replay-port"
}

// inUse adds to a listener's error, when its port was taken, what to choose instead: flags.
func inUse(err error, flags string) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w; choose another %s", err, flags)
	}
	return err
}
