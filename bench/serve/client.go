package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// A client sends completions to the server and checks each answer: status 200, and a stream's body
// ending with `data: [DONE]`. It is safe for concurrent use and holds at most its -clients connections.
type client interface {
	post(body []byte, stream bool) error
	close()
}

// checkClient refuses a -client that names no client.
func checkClient(kind string) error {
	if kind != "lean" && kind != "nethttp" {
		return fmt.Errorf("-client %q: want lean or nethttp", kind)
	}
	return nil
}

// newClient makes the client that -client names, with at most conns connections to addr.
func newClient(kind, addr string, conns int) client {
	if kind == "nethttp" {
		return &netClient{
			hc: &http.Client{Timeout: answerTimeout,
				Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}},
			url: "http://" + addr + completionsPath,
		}
	}
	return newLeanClient(addr, conns)
}

const completionsPath = "/v1/completions"

// answerTimeout bounds one request's exchange, on either client.
const answerTimeout = time.Minute

var streamEnd = []byte("data: [DONE]\n\n")

// checkAnswer says what is wrong with an answer, if anything.
func checkAnswer(status int, body []byte, stream bool) error {
	if status != 200 {
		return fmt.Errorf("status %d: %s", status, body)
	}
	if stream && !bytes.HasSuffix(body, streamEnd) {
		return errors.New("a stream did not end with [DONE]")
	}
	return nil
}

// netClient is Go's net/http client, the load generator of the figures before 2026-12-03; it costs
// the machine about 60 µs of CPU a request, more than the server it measures.
type netClient struct {
	hc  *http.Client
	url string
}

func (c *netClient) post(body []byte, stream bool) error {
	req, err := http.NewRequest("POST", c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	return checkAnswer(res.StatusCode, data, stream)
}

func (c *netClient) close() { c.hc.CloseIdleConnections() }

// leanClient is a load generator in the manner of wrk: keep-alive connections, each request one write
// from a reused buffer, and of each answer only what frames it read (the status, Content-Length or the
// chunks), so that the clients take little of the cores they share with the server.
type leanClient struct {
	addr string
	idle chan *leanConn // at most conns; a nil one is dialled when taken
}

func newLeanClient(addr string, conns int) *leanClient {
	c := &leanClient{addr: addr, idle: make(chan *leanConn, conns)}
	for range conns {
		c.idle <- nil
	}
	return c
}

// leanConn is one connection and its buffers, used by one request at a time.
type leanConn struct {
	nc   net.Conn
	r    *bufio.Reader
	req  []byte // the request's bytes
	body []byte // the answer's body, unchunked
}

func (c *leanClient) post(body []byte, stream bool) error {
	lc := <-c.idle
	if lc == nil {
		lc = &leanConn{}
	}
	err := lc.roundTrip(c.addr, completionsPath, body, stream)
	c.idle <- lc
	return err
}

func (c *leanClient) close() {
	for range cap(c.idle) {
		if lc := <-c.idle; lc != nil && lc.nc != nil {
			lc.nc.Close()
		}
	}
}

// roundTrip posts body to path on the connection, dialling it first if it has none, and reads the
// answer. On any error, or an answer that closes the connection, the connection is dropped and the
// next request dials a new one.
func (lc *leanConn) roundTrip(addr, path string, body []byte, stream bool) error {
	if lc.nc == nil {
		nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err
		}
		lc.nc, lc.r = nc, bufio.NewReaderSize(nc, 16<<10)
	}
	lc.req = append(lc.req[:0], "POST "...)
	lc.req = append(lc.req, path...)
	lc.req = append(lc.req, " HTTP/1.1\r\nHost: "...)
	lc.req = append(lc.req, addr...)
	lc.req = append(lc.req, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	lc.req = strconv.AppendInt(lc.req, int64(len(body)), 10)
	lc.req = append(lc.req, "\r\n\r\n"...)
	lc.req = append(lc.req, body...)
	// A server that stops answering fails the run rather than hanging it.
	if err := lc.nc.SetDeadline(time.Now().Add(answerTimeout)); err != nil {
		return err
	}
	status, keep, err := lc.exchange()
	if err != nil || !keep {
		lc.nc.Close()
		lc.nc = nil
	}
	if err != nil {
		return err
	}
	return checkAnswer(status, lc.body, stream)
}

// exchange writes lc.req and reads the answer's body into lc.body; it returns the status and whether
// the connection can carry the next request.
func (lc *leanConn) exchange() (status int, keep bool, err error) {
	if _, err := lc.nc.Write(lc.req); err != nil {
		return 0, false, err
	}
	line, err := lc.line()
	if err != nil {
		return 0, false, err
	}
	// "HTTP/1.1 200 OK"
	proto, rest, _ := bytes.Cut(line, []byte(" "))
	code, _, _ := bytes.Cut(rest, []byte(" "))
	status, err = strconv.Atoi(string(code))
	if err != nil || !bytes.HasPrefix(proto, []byte("HTTP/1.")) {
		return 0, false, fmt.Errorf("bad status line %q", line)
	}
	keep = string(proto) == "HTTP/1.1"
	length, chunked := -1, false
	for {
		line, err := lc.line()
		if err != nil {
			return 0, false, err
		}
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, false, fmt.Errorf("bad Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			keep = keep && !bytes.EqualFold(value, []byte("close"))
		}
	}
	lc.body = lc.body[:0]
	switch {
	case chunked:
		return status, keep, lc.readChunks()
	case length >= 0:
		return status, keep, lc.read(length)
	}
	// Neither: the body runs to the connection's close.
	b, err := io.ReadAll(lc.r)
	lc.body = append(lc.body, b...)
	return status, false, err
}

// line reads one header line, without its CRLF.
func (lc *leanConn) line() ([]byte, error) {
	line, err := lc.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	return bytes.TrimRight(line, "\r\n"), nil
}

// read appends n bytes of the body.
func (lc *leanConn) read(n int) error {
	at := len(lc.body)
	lc.body = slices.Grow(lc.body, n)[:at+n]
	_, err := io.ReadFull(lc.r, lc.body[at:])
	return err
}

// readChunks appends a chunked body, to its last chunk and the trailers' end.
func (lc *leanConn) readChunks() error {
	for {
		line, err := lc.line()
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseUint(string(bytes.TrimSpace(size)), 16, 31)
		if err != nil {
			return fmt.Errorf("bad chunk size %q", line)
		}
		if n == 0 {
			break
		}
		if err := lc.read(int(n)); err != nil {
			return err
		}
		crlf, err := lc.line()
		if err != nil {
			return fmt.Errorf("after a chunk of %d bytes: %w", n, err)
		}
		if len(crlf) != 0 {
			return fmt.Errorf("a chunk of %d bytes does not end with CRLF", n)
		}
	}
	for { // trailers
		line, err := lc.line()
		if err != nil || len(line) == 0 {
			return err
		}
	}
}
