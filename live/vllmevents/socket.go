package vllmevents

import "net"

// A Socket is a bare PUB socket with this package's guards (bounded incoming messages and
// connections, a queue per subscriber cut at the high-water mark), for other wire formats on ZMQ:
// Dynamo's event plane sends its own multipart messages on it.
type Socket struct{ s *pubSocket }

// ListenSocket binds a PUB socket to a "tcp://host:port" ("*" for any host; port 0 picks a free
// one, see Addr) or "ipc://path" endpoint.
func ListenSocket(endpoint string) (*Socket, error) {
	s, err := listenPub(endpoint)
	if err != nil {
		return nil, err
	}
	return &Socket{s}, nil
}

// DialSocket connects a PUB socket to a peer that binds at endpoint (a SUB, or a broker's XSUB),
// redialling whenever the connection fails, until Close.
func DialSocket(endpoint string) (*Socket, error) {
	s, err := dialPub(endpoint)
	if err != nil {
		return nil, err
	}
	return &Socket{s}, nil
}

// Send queues one multipart message for every subscriber whose subscriptions match its first frame.
// The frames must not change afterwards.
func (s *Socket) Send(frames [][]byte) { s.s.send(frames) }

// Addr returns the address the socket listens on; nil when it connects.
func (s *Socket) Addr() net.Addr {
	if s.s.ln == nil {
		return nil
	}
	return s.s.ln.Addr()
}

// Close closes the socket and its connections and waits for its goroutines.
func (s *Socket) Close() error { return s.s.close() }

// Subscribed returns how many connected peers subscribe to some topic: a publisher's messages reach
// only those (a test waits for them before it publishes).
func (s *Socket) Subscribed() int {
	s.s.mu.Lock()
	defer s.s.mu.Unlock()
	n := 0
	for sub := range s.s.subs {
		sub.mu.Lock()
		if len(sub.topics) > 0 {
			n++
		}
		sub.mu.Unlock()
	}
	return n
}
