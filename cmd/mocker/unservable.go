package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mocker-sim/mocker/config"
)

// The live commands (serve, worker, frontend) share predict's configuration, whose file may set what
// they cannot honour on the wall clock. refuseUnservable turns each such setting into an error rather
// than letting it pass unread.

// unservable says why a live command cannot honour a setting of predict's.
var unservable = map[string]string{
	"planner-config":          "a live deployment does not autoscale (no planner starts or stops workers on the wall clock): use mocker predict --planner-config, or start and stop mocker worker processes",
	"scaling-jsonl":           "a live deployment does not autoscale, so it has no scaling decisions to write",
	"fail-worker":             "workers fail at simulated times in mocker predict; here use --failure-rate, or stop a mocker worker process",
	"on-worker-failure":       "workers fail at simulated times in mocker predict; here use --failure-rate, or stop a mocker worker process",
	"frontend-latency-ms":     "the HTTP frontend's latency is real here, not modelled",
	"frontend-us-per-request": "the HTTP frontend's cost is real here, not modelled",
	"frontend-us-per-chunk":   "the HTTP frontend's cost is real here, not modelled",
}

// refuseUnservable returns an error naming the first setting given to live command cmd, on the command
// line or in its --config file, that cmd would ignore: one of predict's, one that only a deployment of
// another shape reads, or one that is no setting of cmd at all.
func refuseUnservable(cmd string, fs *pflag.FlagSet, c *config.Config) error {
	given := c.GivenKeys()
	for _, k := range slices.Sorted(maps.Keys(given)) {
		why := unservable[k]
		if why == "" {
			why = ignoredBy(cmd, c, k)
		}
		if why == "" && fs.Lookup(k) == nil {
			why = "it is no setting of mocker " + cmd + " (mocker predict's workload and reports have no place in a live deployment, which answers the requests its clients send)"
		}
		if why == "" {
			continue
		}
		name := "--" + k
		if where := given[k]; where != "" {
			name = k + " (" + where + ")"
		}
		return fmt.Errorf("%s: mocker %s cannot honour it: %s", name, cmd, why)
	}
	return nil
}

// ignoredBy says why cmd, with the rest of c, would not read setting k; "" if it would.
func ignoredBy(cmd string, c *config.Config, k string) string {
	frontend := cmd == "frontend" || cmd == "serve" && c.Workers == 0
	zmq := c.ZMQKVEventsPort > 0 || c.KVEventsEndpoint != ""
	plane := c.NATS != "none" && c.KVEventsFormat != "json" || c.DynamoZMQEndpoint != "" || c.DynamoZMQBroker != ""
	switch {
	case frontend && (k == "router-events-at-pass-end" || k == "check-invariants"):
		return "a fleet frontend runs no engine: give it to the mocker worker processes"
	case frontend && (strings.HasPrefix(k, "zmq-") || strings.HasPrefix(k, "kv-events-") || strings.HasPrefix(k, "dynamo-") ||
		k == "kv-hash-seed"):
		return "a fleet frontend runs no engine, so it publishes no KV events: the mocker worker processes do"
	case k == "router-event-delay-ms" && cmd == "worker":
		return "a fleet worker's requests come routed by the frontend: give it to mocker frontend"
	case k == "fleet-ttl" && !frontend:
		return "only a fleet frontend (mocker frontend, or mocker serve --workers 0) waits for workers' heartbeats"
	case k == "kv-events-format" && c.NATS == "none":
		return "it is the format of the KV events on NATS, and --nats is none"
	case (k == "dynamo-namespace" || k == "dynamo-component" || k == "dynamo-endpoint") && !plane:
		return "it scopes Dynamo's event plane, which is off (--nats none or --kv-events-format json, and no --dynamo-zmq-endpoint or --dynamo-zmq-broker)"
	case k == "nats-port" && c.NATS != "embedded":
		return "it is the port of the embedded NATS server, and --nats is " + c.NATS
	case (k == "zmq-replay-port" || k == "kv-events-map-format" || k == "kv-hash-seed" || k == "kv-events-topic") && !zmq:
		return "it shapes vLLM-format KV events on ZMQ, which are off (no --zmq-kv-events-port or --kv-events-endpoint)"
	case (strings.HasPrefix(k, "bootstrap-") || strings.HasPrefix(k, "kv-transfer-") || k == "kv-bytes-per-token") && c.PrefillWorkers == 0:
		return "it applies to disaggregated serving (--prefill-workers and --decode-workers)"
	}
	return ""
}

// unknownFlag adds to an unknown flag's error why a live command has no flag for a setting of
// predict's, as refuseUnservable does for one in its --config file, or else the flag a typo most likely
// meant; a long name given one dash (vLLM's -tp) gets its flag. Other flag errors pass unchanged.
func unknownFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return oneDash(cmd, err)
	}
	if cmd.Name() == "serve" || cmd.Name() == "worker" || cmd.Name() == "frontend" {
		why := unservable[name]
		if why == "" && newPredictCmd().Flags().Lookup(name) != nil {
			why = "it is no setting of mocker " + cmd.Name() + " (mocker predict's workload and reports have no place in a live deployment, which answers the requests its clients send)"
		}
		if why != "" {
			return fmt.Errorf("%w: mocker %s cannot honour it: %s", err, cmd.Name(), why)
		}
	}
	known := shownFlags(cmd)
	if s := config.Suggest(name, known); s != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, s)
	}
	return err
}

// oneDash adds to pflag's error for an unknown shorthand, "unknown shorthand flag: 't' in -tp", the
// long flag that -tp names (vLLM's -tp and -dp are its --tensor-parallel-size and --data-parallel-size).
func oneDash(cmd *cobra.Command, err error) error {
	rest, ok := strings.CutPrefix(err.Error(), "unknown shorthand flag: ")
	_, name, found := strings.Cut(rest, "' in -")
	name, _, _ = strings.Cut(name, "=")
	if !ok || !found || len(name) < 2 {
		return err
	}
	known := shownFlags(cmd)
	s := name
	if !slices.Contains(known, name) {
		s = config.Suggest(name, known)
	}
	if s != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, s)
	}
	return err
}

// shownFlags are the names of cmd's flags that its help shows: a hidden one is a developer's
// (--cpuprofile) or one cmd ignores (estimate's --workers), no flag to point a user to.
func shownFlags(cmd *cobra.Command) []string {
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return names
}
