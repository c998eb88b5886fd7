package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

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
		nc, err := connectNATS(context.Background(), url, "mocker worker", true, "", pw)
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
	cfg.Workers, cfg.Port, cfg.NATSPort = 0, 0, 0
	var stderr bytes.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *serving, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, &cfg, &stderr, ready) }()
	var info *serving
	select {
	case info = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("mocker frontend: model llama-3.1-8b on http://%s, routing (router kv) to the mocker workers it finds on NATS %s: start them with mocker worker --nats %s\n"+
		"mocker frontend: shutting down, draining requests in flight\n", info.Addr, info.NATSURL, info.NATSURL)
	if got := stderr.String(); got != want {
		t.Errorf("stderr\n%s\nwant\n%s", got, want)
	}
}
