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

// errStoppedWaiting is connectNATS's answer when the command is stopped (SIGINT, SIGTERM) while it
// waits for the server: a normal stop, which its caller ends without an error, as a started server
// stopped the same way does.
var errStoppedWaiting = errors.New("stopped while waiting for the NATS server")

// connectNATS connects who (mocker serve, frontend, worker, recommend, sweep-worker) to the NATS server
// at url, given by --nats, with extra options. A fleet's frontend and workers (fleet) keep retrying
// (natsOptions): they wait up to natsWait for the first connection, saying so on stderr, or until ctx
// ends (errStoppedWaiting). Either way an
// error names the URL and the flag; hint, when set, says what else to do.
func connectNATS(ctx context.Context, url, who string, fleet bool, hint string, stderr io.Writer, extra ...nats.Option) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(who)}
	up := make(chan struct{}, 1) // the connected handler runs once
	if fleet {
		opts = append(natsOptions(who), nats.ConnectHandler(func(*nats.Conn) { up <- struct{}{} }))
	}
	nc, err := nats.Connect(url, append(opts, extra...)...)
	switch {
	case errors.Is(err, nats.ErrNoServers):
		return nil, fmt.Errorf("--nats %s: no NATS server answers there (%w)%s", url, err, hint)
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
		return nil, fmt.Errorf("--nats %s: no NATS server answered there in %v%s", url, natsWait, hint)
	case <-ctx.Done():
		nc.Close()
		return nil, errStoppedWaiting
	}
}
