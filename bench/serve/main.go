// Command serve measures `mocker serve` under load: it starts the server as a subprocess at
// --speedup-ratio inf (passes take no time, so what is measured is the server itself), drives it with
// concurrent clients sending short completions, streamed and not, and prints requests per second,
// p50/p99 latency, the server's CPU time per request and its peak memory.
//
//	go run ./bench/serve [-clients 64] [-requests 20000] [-max-tokens 16] [-phases whole,streaming] [-bin FILE] [-- extra serve flags]
//
// -bin measures a built binary instead of building ./cmd/mocker, so that two revisions can be run
// interleaved; `-- --cpuprofile FILE` profiles the server (written when it stops).
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

func main() {
	clients := flag.Int("clients", 64, "concurrent clients")
	requests := flag.Int("requests", 20000, "requests per phase")
	maxTokens := flag.Int("max-tokens", 16, "tokens each request generates")
	bin := flag.String("bin", "", "the mocker binary to measure (default: build ./cmd/mocker)")
	phases := flag.String("phases", "whole,streaming", "the phases to run, in order")
	flag.Parse()
	var streams []bool
	for _, ph := range strings.Split(*phases, ",") {
		switch ph {
		case "whole":
			streams = append(streams, false)
		case "streaming":
			streams = append(streams, true)
		default:
			fmt.Fprintf(os.Stderr, "bench/serve: -phases: unknown phase %q (whole or streaming)\n", ph)
			os.Exit(2)
		}
	}
	if err := run(*bin, *clients, *requests, *maxTokens, streams, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "bench/serve:", err)
		os.Exit(1)
	}
}

func run(bin string, clients, requests, maxTokens int, streams []bool, extra []string) error {
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
	args := append([]string{"serve", "--port", "0", "--nats", "none", "--speedup-ratio", "inf", "--timing", "polynomial"}, extra...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	addr, err := waitAddr(stderr)
	if err != nil {
		return err
	}
	go io.Copy(io.Discard, stderr)
	fmt.Printf("mocker %s\n%d clients, %d requests per phase, prompts of ~27 tokens, %d output tokens\n\n",
		strings.Join(args, " "), clients, requests, maxTokens)
	fmt.Printf("%-10s %10s %10s %10s %14s %12s\n", "phase", "req/s", "p50 ms", "p99 ms", "server CPU/req", "server cores")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
	for _, stream := range streams {
		cpu0, err := cpuTime(cmd.Process.Pid)
		if err != nil {
			return err
		}
		start := time.Now()
		lat, err := load(hc, addr, clients, requests, maxTokens, stream)
		if err != nil {
			return err
		}
		wall := time.Since(start)
		cpu1, _ := cpuTime(cmd.Process.Pid)
		slices.Sort(lat)
		name := "whole"
		if stream {
			name = "streaming"
		}
		cpu := cpu1 - cpu0
		fmt.Printf("%-10s %10.0f %10.2f %10.2f %11.1f µs %12.2f\n", name, float64(len(lat))/wall.Seconds(),
			ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), float64(cpu.Microseconds())/float64(len(lat)), cpu.Seconds()/wall.Seconds())
	}
	peak, err := peakRSS(cmd.Process.Pid)
	if err != nil {
		return err
	}
	fmt.Printf("\nserver peak RSS %.1f MiB\n", float64(peak)/(1<<20))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// waitAddr reads the server's stderr until it says where it listens.
func waitAddr(r io.Reader) (string, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "http://"); i >= 0 {
			addr, _, _ := strings.Cut(line[i+len("http://"):], " ")
			return addr, nil
		}
	}
	return "", errors.New("the server exited before listening")
}

// load sends requests completions from clients goroutines and returns their latencies.
func load(hc *http.Client, addr string, clients, requests, maxTokens int, stream bool) ([]time.Duration, error) {
	var next atomic.Int64
	lat := make([]time.Duration, requests)
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	url := "http://" + addr + "/v1/completions"
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= requests {
					return
				}
				body.Reset()
				fmt.Fprintf(&body, `{"model":"llama-3.1-8b","prompt":"Request %d asks the simulated model a short question about the weather in a city it has never seen, politely.","max_tokens":%d,"stream":%v}`, i, maxTokens, stream)
				t0 := time.Now()
				err := post(hc, url, body.Bytes(), stream)
				lat[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return lat, firstErr
}

func post(hc *http.Client, url string, body []byte, stream bool) error {
	req, err := http.NewRequestWithContext(context.Background(), "POST", url, bytes.NewReader(body))
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
		return fmt.Errorf("status %d: %s", res.StatusCode, data)
	}
	if stream && !bytes.HasSuffix(data, []byte("data: [DONE]\n\n")) {
		return errors.New("a stream did not end with [DONE]")
	}
	return nil
}

// cpuTime is a process's user + system CPU time, from /proc.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU time: %w (Linux only)", err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticks = 100 // USER_HZ
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// peakRSS is a process's high-water resident memory, from /proc.
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}
