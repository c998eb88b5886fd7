package live

import "time"

// HTTPLimits bound what one client can hold of the HTTP server: a connection that trickles its request,
// or idles, is cut; connections past MaxConns wait in the listen backlog. Zero fields take the defaults.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's line and headers; 0: 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (not the response: a stream may run
	// for hours); 0: 60 s.
	ReadTimeout time.Duration
	// IdleTimeout bounds a keep-alive connection's wait for its next request; 0: 120 s.
	IdleTimeout time.Duration
	// WriteTimeout bounds each write of a response (one batch of a stream's chunks), so a client that
	// stops reading is dropped while one that reads slowly is not; 0: 60 s.
	WriteTimeout time.Duration
	// MaxConns bounds the open connections; 0: 4096.
	MaxConns int
}

func (l HTTPLimits) withDefaults() HTTPLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, 10*time.Second)
	def(&l.ReadTimeout, time.Minute)
	def(&l.IdleTimeout, 2*time.Minute)
	def(&l.WriteTimeout, time.Minute)
	if l.MaxConns <= 0 {
		l.MaxConns = 4096
	}
	return l
}
