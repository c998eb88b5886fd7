package natsevents

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// MaxPayload bounds one message published to the embedded server.
const MaxPayload = 1 << 20

// StartEmbedded runs a NATS server inside this process, listening on 127.0.0.1:port (0 picks a free
// port), with no logging, no signal handlers and no JetStream: `mocker serve` needs only core pub/sub
// between its own workers and router, and other processes may still connect to the returned client
// URL. Stop it with Shutdown, then WaitForShutdown.
func StartEmbedded(port int) (*server.Server, string, error) {
	if port < 0 || port > 65535 {
		return nil, "", fmt.Errorf("natsevents: port %d out of range", port)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		// A server that cannot listen only says so in the log we silence, after the readiness wait;
		// trying the address first reports a port in use at once.
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			return nil, "", fmt.Errorf("natsevents: %w", err)
		}
		l.Close()
	}
	// MaxPayload is nats-server's default, stated because a client's declared payload size is checked
	// against it before the payload is read: events are far smaller, and no peer makes us allocate more.
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		MaxPayload: MaxPayload})
	if err != nil {
		return nil, "", fmt.Errorf("natsevents: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, "", fmt.Errorf("natsevents: embedded NATS server not listening on 127.0.0.1:%d after 5s", port)
	}
	return ns, ns.ClientURL(), nil
}
