package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/live"
	"github.com/mocker-sim/mocker/live/natsevents"
)

// natsOptions keep a fleet's connections up across NATS restarts: reconnect forever, and buffer what
// is published meanwhile (nats.go's default); a server not up yet is retried too.
func natsOptions(name string) []nats.Option {
	return []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond), nats.RetryOnFailedConnect(true)}
}

func newWorkerCmd() *cobra.Command {
	cfg := config.Default()
	cfg.NATS = ""
	var configPath string
	var threads liveThreads
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run one simulated engine that serves fleet frontends over NATS",
		Long: `worker runs one simulated engine (with its --dp-size ranks) on the wall clock and registers it
as the NATS service mocker-worker: frontends (mocker frontend, or mocker serve --workers 0) discover
it by pinging, send it requests and read its KV events (Dynamo RouterEvent JSON on
namespace.mocker.component.MODEL.kv_events); by default it also publishes KV events and load on Dynamo's
event plane, as mocker serve does, with its fleet id as worker_id. Engine flags are serve's;
--model-name and the block size must match the frontend's.

  mocker worker --nats nats://127.0.0.1:4222 --speedup-ratio 10

--workers N runs N such engines in the one process, each registered as a worker of its own (one
NATS connection for all): a cheap way to a large fleet.

SIGINT or SIGTERM unregisters the worker and waits up to --shutdown-timeout for its requests.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadSettings(cmd.Flags(), &cfg, configPath); err != nil {
				return err
			}
			if err := refuseUnservable("worker", cmd.Flags(), &cfg); err != nil {
				return err
			}
			if err := threads.apply(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serveAs(ctx, &cfg, cmd.ErrOrStderr(), nil, true)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&configPath, "config", "", "YAML file of settings (keys as the flags)")
	fs.SortFlags = false
	fs.StringVar(&cfg.NATS, "nats", cfg.NATS, "URL of the fleet's NATS server (required)")
	fs.StringVar(&cfg.ModelName, "model-name", cfg.ModelName, "served model id (empty: the --model name, or mocker with --model-config)")
	fs.StringSliceVar(&cfg.LoRAModules, "lora-modules", cfg.LoRAModules, "LoRA adapters this worker serves besides the base model, as vLLM's --lora-modules: NAME or NAME=PATH (the path is not read), comma-separated or repeated; the frontend's must name the same")
	fs.IntVar(&cfg.DefaultMaxTokens, "default-max-tokens", cfg.DefaultMaxTokens, "tokens a request generates when it sets no max_tokens")
	fs.Float64Var(&cfg.ShutdownTimeoutS, "shutdown-timeout", cfg.ShutdownTimeoutS, "seconds to wait for requests in flight on SIGINT or SIGTERM")
	fs.StringVar(&cfg.KVEventsFormat, "kv-events-format", cfg.KVEventsFormat, "dynamo: also publish KV events and load on Dynamo's event plane (worker_id the fleet id); json: the fleet's RouterEvent JSON only")
	fs.StringVar(&cfg.DynamoNamespace, "dynamo-namespace", cfg.DynamoNamespace, "Dynamo namespace of the event-plane subjects")
	fs.StringVar(&cfg.DynamoComponent, "dynamo-component", cfg.DynamoComponent, "Dynamo component the KV events are scoped to")
	fs.StringVar(&cfg.DynamoEndpoint, "dynamo-endpoint", cfg.DynamoEndpoint, "Dynamo endpoint the load metrics are scoped to")
	fs.BoolVar(&cfg.CheckInvariants, "check-invariants", cfg.CheckInvariants, "verify the engine's KV block accounting after every pass (slow)")
	bindEngineFlags(fs, &cfg)
	bindRouterEventFlags(fs, &cfg)
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of every random choice")
	threads.bind(fs)
	return cmd
}

func newFrontendCmd() *cobra.Command {
	cfg := config.Default()
	cfg.Router = "kv"
	cfg.Workers = 0
	cfg.NATS = ""
	var configPath string
	var threads liveThreads
	cmd := &cobra.Command{
		Use:   "frontend",
		Short: "Serve the OpenAI API and the KV router over mocker workers found on NATS",
		Long: `frontend answers the OpenAI-compatible HTTP API of mocker serve and routes every request over the
workers (mocker worker) it discovers on NATS, fed by their KV events. Workers join and leave at any
time; a worker that misses its heartbeats for --fleet-ttl seconds is dropped with its blocks, its
requests not yet started go to another worker and those in flight fail with a 503. Several frontends
may share the workers. Engine flags must match the workers' (block size, KV pool, max-model-len).

  mocker frontend --nats nats://127.0.0.1:4222 --port 8000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := loadSettings(cmd.Flags(), &cfg, configPath); err != nil {
				return err
			}
			if err := refuseUnservable("frontend", cmd.Flags(), &cfg); err != nil {
				return err
			}
			if cfg.NATS == "" || cfg.NATS == "none" || cfg.NATS == "embedded" {
				return fmt.Errorf("frontend: --nats %q: want the URL of the fleet's NATS server", cfg.NATS)
			}
			if cfg.Workers != 0 {
				return errors.New("frontend: its workers are mocker worker processes (use mocker serve for in-process ones)")
			}
			if err := threads.apply(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serve(ctx, &cfg, cmd.ErrOrStderr(), nil)
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
	return cmd
}

// runWorker serves n fleet workers of o's one engine each until ctx ends, then drains them.
func runWorker(ctx context.Context, cfg *config.Config, n int, o live.Options, name string, stderr io.Writer, ready chan<- *serving) error {
	nc, err := waitNATS(ctx, cfg.NATS, "mocker worker", stderr)
	if errors.Is(err, errStoppedWaiting) {
		return nil
	} else if err != nil {
		return err
	}
	defer nc.Close()
	fws := make([]*live.FleetWorker, n)
	for i := range fws {
		var b [8]byte
		rand.Read(b[:])
		id := binary.LittleEndian.Uint64(b[:]) // a fresh id each start: a restarted worker's cache is empty
		o := o
		o.Sinks = []live.Sink{live.NewFleetSink(nc, name, id)}
		if cfg.KVEventsFormat != "json" { // also KV events and load on Dynamo's event plane, as serve publishes
			ps := live.NewNATSPlaneSink(nc, live.PlaneOptions{Scope: natsevents.Scope{Namespace: cfg.DynamoNamespace,
				Component: cfg.DynamoComponent, Endpoint: cfg.DynamoEndpoint}, Workers: 1, DPSize: o.Engine.DPSize, Seed: id, WorkerID: id})
			o.Sinks, o.Recorder = append(o.Sinks, ps), ps.Recorders(o.Recorder)
		}
		srv, err := live.New(o)
		if err != nil {
			return err
		}
		defer srv.Close()
		if err := srv.Start(); err != nil {
			return err
		}
		if fws[i], err = live.ServeFleet(nc, srv, id); err != nil {
			return err
		}
		// The frontends route: a worker's own --router plays no part.
		fmt.Fprintf(stderr, "mocker worker: %016x, model %s on NATS %s (%s, speedup %g)\n", id, name, cfg.NATS, cfg.Backend, cfg.SpeedupRatio)
		if ready != nil && i == 0 {
			ready <- &serving{NATSURL: cfg.NATS, Server: srv}
		}
	}
	<-ctx.Done()
	fmt.Fprintln(stderr, "mocker worker: draining requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), seconds(cfg.ShutdownTimeoutS))
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, fw := range fws {
		wg.Go(func() { errs[i] = fw.Drain(sctx) })
	}
	wg.Wait()
	nc.Flush()
	return shutdownError(errors.Join(errs...), cfg.ShutdownTimeoutS)
}
