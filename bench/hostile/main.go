// Command hostile attacks every listener of `mocker serve` while legitimate clients keep sending
// completions, and reports how the server held up: requests served correctly during the attack, the
// failures, the server's peak RSS and open file descriptors, and whether it survived. It builds the
// binary, runs it disaggregated (so the bootstrap rendezvous listens) with vLLM ZMQ KV events and replay
// on, all on 127.0.0.1, and stops after -duration. It exits 1 if the server died.
//
//	go run ./bench/hostile [-duration 30s] [-clients 8]
//
// The attacks, each on its own goroutines:
//   - zmtp: a ZMTP greeting, then a frame header declaring 2^62 bytes, on the PUB and the replay port;
//   - bootstrap-guess: the next request ids (read from responses) sent as room ids, 8 and 16 bytes;
//   - bootstrap-flood: connect, send 8 bytes, close, as fast as possible, with idle connections held;
//   - http-slow-body: requests whose body arrives one byte a second;
//   - http-idle: connections that never send a byte;
//   - http-max-tokens: max_tokens 9223372036854775807;
//   - http-huge-body: 20 MiB bodies, past the default 16 MiB limit.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Held connections per attack; the bench process needs as many descriptors.
const (
	idleHTTP      = 500
	slowBodies    = 100
	idleBootstrap = 300
)

func main() {
	duration := flag.Duration("duration", 30*time.Second, "how long the attack lasts (at most 60s)")
	clients := flag.Int("clients", 8, "concurrent legitimate clients")
	flag.Parse()
	if *duration <= 0 || *duration > time.Minute {
		fmt.Fprintln(os.Stderr, "bench/hostile: -duration must be in (0, 60s]")
		os.Exit(2)
	}
	died, err := run(*duration, *clients)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/hostile:", err)
		os.Exit(1)
	}
	if died {
		os.Exit(1)
	}
}

// counters counts outcomes by name.
type counters struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counters) add(name string) {
	c.mu.Lock()
	c.m[name]++
	c.mu.Unlock()
}

func (c *counters) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.m)) {
		fmt.Fprintf(&b, "  %-48s %d\n", k, c.m[k])
	}
	return b.String()
}

func run(duration time.Duration, clients int) (died bool, err error) {
	dir, err := os.MkdirTemp("", "mocker-hostile")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "mocker")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/mocker").CombinedOutput(); err != nil {
		return false, fmt.Errorf("go build: %v\n%s", err, out)
	}
	ports, err := freePorts(3)
	if err != nil {
		return false, err
	}
	boot, zmq, replay := ports[0], ports[1], ports[2]
	cmd := exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", "0", "--nats", "none",
		"--speedup-ratio", "100", "--prefill-workers", "1", "--decode-workers", "1",
		"--bootstrap-port", strconv.Itoa(boot), "--zmq-kv-events-port", strconv.Itoa(zmq),
		"--zmq-replay-port", strconv.Itoa(replay))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return false, err
	}
	if err := cmd.Start(); err != nil {
		return false, err
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // a chatty server must not block on its stderr
			}
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	}()
	addr, err := waitAddr(lines)
	if err != nil {
		return false, err
	}
	pid := cmd.Process.Pid
	fmt.Printf("mocker serve (pid %d): http %s, bootstrap %d, zmq pub %d, replay %d; %v attack, %d clients\n",
		pid, addr, boot, zmq, replay, duration, clients)
	rss0, fds0 := rss(pid), fdCount(pid)

	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var (
		legit, attacks counters
		lastID         atomic.Uint64
		wg             sync.WaitGroup
	)
	legit.m, attacks.m = map[string]int{}, map[string]int{}
	url := "http://" + addr + "/v1/completions"
	for i := range clients {
		wg.Go(func() { legitimate(ctx, url, i, &legit, &lastID) })
	}
	bootAddr := "127.0.0.1:" + strconv.Itoa(boot)
	for _, a := range []func(){
		func() { zmtpAttack(ctx, "127.0.0.1:"+strconv.Itoa(zmq), "zmtp pub", &attacks) },
		func() { zmtpAttack(ctx, "127.0.0.1:"+strconv.Itoa(replay), "zmtp replay", &attacks) },
		func() { bootstrapGuess(ctx, bootAddr, &lastID, &attacks) },
		func() { bootstrapFlood(ctx, bootAddr, &attacks) },
		func() { hold(ctx, bootAddr, idleBootstrap, nil, "bootstrap idle", &attacks) },
		func() { hold(ctx, addr, idleHTTP, nil, "http idle", &attacks) },
		func() { slowBody(ctx, addr, &attacks) },
		func() { maxTokens(ctx, url, &attacks) },
		func() { hugeBody(ctx, url, &attacks) },
	} {
		wg.Go(a)
	}

	var peakFDs int
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
watch:
	for {
		select {
		case err := <-exited:
			died = true
			fmt.Printf("SERVER DIED during the attack: %v\n", err)
			for l := range lines {
				fmt.Println("  server:", l)
			}
			stop()
			break watch
		case <-tick.C:
			peakFDs = max(peakFDs, fdCount(pid))
		case <-ctx.Done():
			break watch
		}
	}
	wg.Wait()
	fmt.Printf("\nlegitimate requests during the attack:\n%s", &legit)
	fmt.Printf("attacks:\n%s", &attacks)
	if died {
		return true, nil
	}
	// Once the attackers have gone, a request must be served and the descriptors come back.
	after := "ok"
	if err := complete(url, 3, 30*time.Second); err != nil {
		after = err.Error()
	}
	time.Sleep(time.Second)
	fmt.Printf("server: RSS %.1f MiB at start, peak %.1f MiB (VmHWM); open fds %d at start, peak %d, %d after\n",
		float64(rss0)/(1<<20), float64(peakRSS(pid))/(1<<20), fds0, peakFDs, fdCount(pid))
	fmt.Printf("request after the attack: %s\n", after)
	select {
	case err := <-exited:
		fmt.Printf("SERVER DIED: %v\n", err)
		return true, nil
	default:
		fmt.Println("server alive")
	}
	return false, nil
}

// legitimate sends completions until ctx ends and counts how they went.
func legitimate(ctx context.Context, url string, client int, c *counters, lastID *atomic.Uint64) {
	hc := &http.Client{Timeout: 60 * time.Second}
	for i := 0; ctx.Err() == nil; i++ {
		body := fmt.Sprintf(`{"model":"llama-3.1-8b","prompt":"Client %d asks question %d about the weather in a city it has never seen.","max_tokens":8,"ignore_eos":true}`, client, i)
		res, err := hc.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			c.add("failed: " + errClass(err))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var r struct {
			ID    string
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		json.Unmarshal(data, &r)
		switch {
		case res.StatusCode == 200 && r.Usage.CompletionTokens == 8:
			c.add("served correctly")
			if n, err := strconv.ParseUint(strings.TrimPrefix(r.ID, "cmpl-"), 10, 64); err == nil {
				lastID.Store(n)
			}
		default:
			c.add(fmt.Sprintf("failed: HTTP %d", res.StatusCode))
		}
	}
}

func complete(url string, maxTokens int, timeout time.Duration) error {
	hc := &http.Client{Timeout: timeout}
	res, err := hc.Post(url, "application/json", strings.NewReader(fmt.Sprintf(
		`{"model":"llama-3.1-8b","prompt":"one last question","max_tokens":%d}`, maxTokens)))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		return fmt.Errorf("HTTP %d: %s", res.StatusCode, bytes.TrimSpace(data))
	}
	return nil
}

// zmtpAttack sends a ZMTP greeting and a frame header declaring 2^62 bytes, again and again.
func zmtpAttack(ctx context.Context, addr, name string, c *counters) {
	greeting := make([]byte, 64)
	greeting[0], greeting[9], greeting[10] = 0xff, 0x7f, 3
	copy(greeting[12:], "NULL")
	msg := append(greeting, 0x02, 0x40, 0, 0, 0, 0, 0, 0, 0)
	for ctx.Err() == nil {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			c.add(name + ": dial failed")
			time.Sleep(10 * time.Millisecond)
			continue
		}
		nc.Write(msg)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, nc)
		nc.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			c.add(name + ": connection kept open")
		} else {
			c.add(name + ": sent, connection dropped")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// bootstrapGuess connects with the next request ids as room ids and counts acknowledgements taken.
func bootstrapGuess(ctx context.Context, addr string, lastID *atomic.Uint64, c *counters) {
	for ctx.Err() == nil {
		next := lastID.Load() + 1
		var wg sync.WaitGroup
		for id := next; id < next+8; id++ {
			for _, room := range [][]byte{binary.LittleEndian.AppendUint64(nil, id),
				binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, id), 0)} {
				wg.Go(func() {
					nc, err := net.DialTimeout("tcp", addr, time.Second)
					if err != nil {
						c.add("bootstrap guess: dial failed")
						return
					}
					defer nc.Close()
					nc.Write(room)
					nc.SetReadDeadline(time.Now().Add(2 * time.Second))
					b, _ := io.ReadAll(nc)
					if len(b) > 0 {
						c.add("bootstrap guess: ACK TAKEN")
					} else {
						c.add("bootstrap guess: no ack")
					}
				})
			}
		}
		wg.Wait()
	}
}

// bootstrapFlood connects, sends 8 bytes and hangs up, from 4 goroutines, as fast as it can.
func bootstrapFlood(ctx context.Context, addr string, c *counters) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				nc, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					c.add("bootstrap flood: dial failed")
					continue
				}
				nc.Write(make([]byte, 8))
				nc.Close()
				c.add("bootstrap flood: connections")
			}
		})
	}
	wg.Wait()
}

// hold keeps n connections to addr open, each having sent first, until ctx ends, reopening those the
// server closes.
func hold(ctx context.Context, addr string, n int, first []byte, name string, c *counters) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				nc, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					c.add(name + ": dial failed")
					time.Sleep(100 * time.Millisecond)
					continue
				}
				c.add(name + ": connections opened")
				nc.Write(first)
				stop := context.AfterFunc(ctx, func() { nc.Close() })
				io.Copy(io.Discard, nc) // until the server or ctx closes it
				stop()
				nc.Close()
			}
		})
	}
	wg.Wait()
}

// slowBody sends requests whose 1000-byte body arrives one byte a second.
func slowBody(ctx context.Context, addr string, c *counters) {
	var wg sync.WaitGroup
	for range slowBodies {
		wg.Go(func() {
			for ctx.Err() == nil {
				nc, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					c.add("http slow body: dial failed")
					time.Sleep(100 * time.Millisecond)
					continue
				}
				c.add("http slow body: connections opened")
				stop := context.AfterFunc(ctx, func() { nc.Close() })
				fmt.Fprintf(nc, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
				for ctx.Err() == nil {
					if _, err := nc.Write([]byte{' '}); err != nil {
						c.add("http slow body: cut by the server")
						break
					}
					time.Sleep(time.Second)
				}
				stop()
				nc.Close()
			}
		})
	}
	wg.Wait()
}

// maxTokens sends max_tokens 2^63-1 from 2 goroutines.
func maxTokens(ctx context.Context, url string, c *counters) {
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(
					`{"model":"llama-3.1-8b","prompt":"hi","max_tokens":9223372036854775807}`))
				req.Header.Set("Content-Type", "application/json")
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				res, err := http.DefaultClient.Do(req.WithContext(tctx))
				if err != nil {
					if ctx.Err() == nil { // not the end of the attack cutting it short
						c.add("http max_tokens 2^63-1: " + errClass(err))
					}
				} else {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
					c.add(fmt.Sprintf("http max_tokens 2^63-1: HTTP %d", res.StatusCode))
				}
				cancel()
			}
		})
	}
	wg.Wait()
}

// hugeBody sends 20 MiB bodies, one at a time.
func hugeBody(ctx context.Context, url string, c *counters) {
	body := bytes.Repeat([]byte("a"), 20<<20)
	copy(body, `{"model":"llama-3.1-8b","prompt":"`)
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil { // not the end of the attack cutting it short
				c.add("http huge body: " + errClass(err))
			}
			continue
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		c.add(fmt.Sprintf("http huge body: HTTP %d", res.StatusCode))
	}
}

// errClass names an error briefly.
func errClass(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled at the end"
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused"
	case strings.Contains(err.Error(), "reset"):
		return "connection reset"
	case strings.Contains(err.Error(), "EOF"):
		return "EOF"
	}
	return "error"
}

// waitAddr reads the server's stderr until it says where it listens.
func waitAddr(lines <-chan string) (string, error) {
	for line := range lines {
		if i := strings.Index(line, "http://"); i >= 0 {
			addr, _, _ := strings.Cut(line[i+len("http://"):], " ")
			return addr, nil
		}
	}
	return "", errors.New("the server exited before listening")
}

// freePorts returns n distinct loopback ports free a moment ago.
func freePorts(n int) ([]int, error) {
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func fdCount(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// rss and peakRSS read VmRSS and VmHWM from /proc (Linux only; 0 elsewhere).
func rss(pid int) int64     { return status(pid, "VmRSS:") }
func peakRSS(pid int) int64 { return status(pid, "VmHWM:") }

func status(pid int, key string) int64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
