// Command fleet measures a fleet over NATS: one frontend (mocker serve --workers 0 with its embedded
// NATS) routing over -procs `mocker worker` processes of -per engines each, all at --speedup-ratio inf
// (passes take no time, so what is measured is routing and transport). It offers -rate requests per
// second for -duration and prints the requests served per second, the latency of a whole request
// (router, NATS both ways, HTTP) and the workers' memory: the sum of their processes' RSS over the
// number of workers.
//
//	go run ./bench/fleet [-procs 4] [-per 25] [-rate 200] [-duration 10s] [-max-tokens 8] [-bin FILE]
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

func main() {
	procs := flag.Int("procs", 4, "worker processes")
	per := flag.Int("per", 25, "fleet workers (engines) per process")
	rate := flag.Float64("rate", 200, "requests offered per second")
	duration := flag.Duration("duration", 10*time.Second, "how long the load is offered")
	maxTokens := flag.Int("max-tokens", 8, "tokens each request generates")
	bin := flag.String("bin", "", "the mocker binary to measure (default: build ./cmd/mocker)")
	flag.Parse()
	if *procs < 1 || *per < 1 || *rate <= 0 || *duration <= 0 || *maxTokens < 1 {
		fmt.Fprintln(os.Stderr, "bench/fleet: -procs, -per, -rate, -duration and -max-tokens must be positive")
		os.Exit(2)
	}
	if err := run(*bin, *procs, *per, *rate, *duration, *maxTokens); err != nil {
		fmt.Fprintln(os.Stderr, "bench/fleet:", err)
		os.Exit(1)
	}
}

func run(bin string, procs, per int, rate float64, duration time.Duration, maxTokens int) error {
	if bin == "" {
		dir, err := os.MkdirTemp("", "mocker-bench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin = filepath.Join(dir, "mocker")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/mocker").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	// The bench chooses the frontend's ports itself, rather than reading them from its startup line,
	// whose wording is for people.
	httpPort, err := freePort()
	if err != nil {
		return err
	}
	natsPort, err := freePort()
	if err != nil {
		return err
	}
	addr, natsURL := fmt.Sprintf("127.0.0.1:%d", httpPort), fmt.Sprintf("nats://127.0.0.1:%d", natsPort)
	front := exec.Command(bin, "serve", "--workers", "0", "--nats", "embedded", "--nats-port", strconv.Itoa(natsPort),
		"--port", strconv.Itoa(httpPort), "--speedup-ratio", "inf")
	lines, err := start(front)
	if err != nil {
		return err
	}
	defer stop(front, os.Interrupt)
	if err := waitHealthy(addr, lines); err != nil {
		return err
	}
	go drain(lines)

	workers := make([]*exec.Cmd, procs)
	for i := range workers {
		workers[i] = exec.Command(bin, "worker", "--nats", natsURL, "--workers", strconv.Itoa(per), "--speedup-ratio", "inf")
		wl, err := start(workers[i])
		if err != nil {
			return err
		}
		defer stop(workers[i], syscall.SIGTERM)
		go drain(wl)
	}
	if err := waitRegistered(natsURL, procs*per); err != nil {
		return err
	}
	// The frontend pings every --fleet-ttl/3 (2 s by default): after one TTL it knows every worker.
	time.Sleep(6 * time.Second)

	// Which workers the requests reach, from their subjects (a plain subscriber sees a service's requests too).
	nc, err := nats.Connect(natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()
	var mu sync.Mutex
	reached := map[string]bool{}
	if _, err := nc.Subscribe("mocker.fleet.*.generate", func(m *nats.Msg) {
		mu.Lock()
		reached[m.Subject] = true
		mu.Unlock()
	}); err != nil {
		return err
	}

	fmt.Printf("one frontend, %d workers in %d processes, speedup inf; %.0f requests/s offered for %v, %d tokens each\n\n",
		procs*per, procs, rate, duration, maxTokens)
	lat, failed, wall := load(addr, rate, duration, maxTokens)
	slices.Sort(lat)
	nc.Flush()
	mu.Lock()
	fmt.Printf("served %d (%.1f/s), failed %d; the requests reached %d workers\n", len(lat), float64(len(lat))/wall.Seconds(), failed, len(reached))
	mu.Unlock()
	if len(lat) > 0 {
		fmt.Printf("whole request (routing, NATS both ways, HTTP): p50 %.2f ms, p99 %.2f ms\n",
			ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]))
	}
	var rss, hwm int64
	for _, w := range workers {
		r, h, err := memory(w.Process.Pid)
		if err != nil {
			return err
		}
		rss, hwm = rss+r, hwm+h
	}
	n := float64(procs * per)
	fmt.Printf("memory per worker: RSS %.0f KiB (peak %.0f KiB), the worker processes' sum over %d\n",
		float64(rss)/1024/n, float64(hwm)/1024/n, procs*per)
	fr, fh, err := memory(front.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("frontend RSS %.1f MiB (peak %.1f MiB)\n", float64(fr)/(1<<20), float64(fh)/(1<<20))
	if failed > 0 {
		return fmt.Errorf("%d requests failed", failed)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// start runs cmd and returns its stderr lines.
func start(cmd *exec.Cmd) (<-chan string, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines, nil
}

func drain(lines <-chan string) {
	for range lines {
	}
}

// stop signals cmd and waits for it, killing it after 30 s.
func stop(cmd *exec.Cmd, sig os.Signal) {
	cmd.Process.Signal(sig)
	t := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	cmd.Wait()
	t.Stop()
}

// freePort is a TCP port free on 127.0.0.1 now, for a server the bench starts.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitHealthy polls the frontend at addr until it answers /health, for up to 30 s; the frontend's
// stderr lines, until then, say why if it exits first.
func waitHealthy(addr string, lines <-chan string) error {
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var said []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		select {
		case line, ok := <-lines:
			if !ok {
				return fmt.Errorf("the frontend exited before listening: %s", strings.Join(said, "; "))
			}
			said = append(said, line)
		case <-tick.C:
			if res, err := hc.Get("http://" + addr + "/health"); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
	}
	return fmt.Errorf("the frontend did not answer http://%s/health in 30 s", addr)
}

// waitRegistered pings the mocker-worker NATS service until n workers answer, for up to 60 s.
func waitRegistered(url string, n int) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	got := 0
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		inbox := nc.NewRespInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			return err
		}
		if err := nc.PublishRequest("$SRV.PING.mocker-worker", inbox, nil); err != nil {
			return err
		}
		got = 0
		for {
			if _, err := sub.NextMsg(time.Second); err != nil {
				break
			}
			got++
		}
		sub.Unsubscribe()
		if got >= n {
			return nil
		}
	}
	return fmt.Errorf("%d of %d workers registered after 60 s", got, n)
}

// load offers rate requests per second for duration and returns the latencies of those served, the
// number failed and the time from the first request to the last answer.
func load(addr string, rate float64, duration time.Duration, maxTokens int) ([]time.Duration, int, time.Duration) {
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	url := "http://" + addr + "/v1/completions"
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed int
		first  error
		wg     sync.WaitGroup
	)
	n := int(rate * duration.Seconds())
	t0 := time.Now()
	for i := range n {
		time.Sleep(time.Until(t0.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		wg.Go(func() {
			body := fmt.Sprintf(`{"model":"llama-3.1-8b","prompt":"Request %d asks the simulated model a short question about the weather in a city it has never seen, politely.","max_tokens":%d}`, i, maxTokens)
			s := time.Now()
			err := post(hc, url, body)
			d := time.Since(s)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				if first == nil {
					first = err
				}
				return
			}
			lat = append(lat, d)
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	if first != nil {
		fmt.Fprintln(os.Stderr, "bench/fleet: first failure:", first)
	}
	return lat, failed, wall
}

func post(hc *http.Client, url, body string) error {
	req, err := http.NewRequestWithContext(context.Background(), "POST", url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != 200 {
		return fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(data))
	}
	return nil
}

// memory is a process's resident memory now and at its peak, from /proc.
func memory(pid int) (rss, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("memory: %w (Linux only)", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ":")
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "VmRSS":
			rss = kb << 10
		case "VmHWM":
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		return 0, 0, errors.New("memory: no VmRSS or VmHWM in /proc status")
	}
	return rss, peak, nil
}
