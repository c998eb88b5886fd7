package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
)

// natsWait is how long a fleet's frontend or worker, which may start before its NATS server, waits for
// the server's first answer; a variable so that tests wait less.
var natsWait = 10 * time.Second

// errStoppedWaiting is waitNATS's answer when the command is stopped (SIGINT, SIGTERM) while it waits
// for the server: a normal stop, which its caller ends without an error, as a started server stopped
// the same way does.
var errStoppedWaiting = errors.New("stopped while waiting for the NATS server")

// dialNATS connects who (mocker serve, recommend, sweep-worker) to the NATS server at url, given by
// --nats, with extra options, or fails at once with an error naming the URL and the flag; hint, when
// set, says what else to do.
func dialNATS(url, who, hint string, extra ...nats.Option) (*nats.Conn, error) {
	nc, err := nats.Connect(url, append([]nats.Option{nats.Name(who)}, extra...)...)
	switch {
	case errors.Is(err, nats.ErrNoServers):
		return nil, fmt.Errorf("--nats %s: no NATS server answers there (%w)%s", url, err, hint)
	case err != nil:
		return nil, fmt.Errorf("--nats %s: %w", url, err)
	}
	return nc, nil
}

// waitNATS connects who, a fleet's frontend or worker, which may start before its server, to the NATS
// server at url, given by --nats: the connection keeps retrying (natsOptions), and waitNATS waits up to
// natsWait for its first answer, saying so on stderr, or until ctx ends (errStoppedWaiting).
func waitNATS(ctx context.Context, url, who string, stderr io.Writer) (*nats.Conn, error) {
	up := make(chan struct{}, 1) // the connected handler runs once
	nc, err := nats.Connect(url, append(natsOptions(who), nats.ConnectHandler(func(*nats.Conn) { up <- struct{}{} }))...)
	switch {
	case err != nil:
		return nil, fmt.Errorf("--nats %s: %w", url, err)
	case nc.IsConnected():
		return nc, nil
	}
	fmt.Fprintf(stderr, "%s: waiting up to %v for the NATS server at %s (--nats)\n", who, natsWait, url)
	t := time.NewTimer(natsWait)
	defer t.Stop()
	select {
	case <-up:
		return nc, nil
	case <-t.C:
		nc.Close()
		return nil, fmt.Errorf("--nats %s: no NATS server answered there in %v", url, natsWait)
	case <-ctx.Done():
		nc.Close()
		return nil, errStoppedWaiting
	}
}
