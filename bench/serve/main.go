// Command serve measures `mocker serve` under load: it starts the server as a subprocess at
// --speedup-ratio inf (passes take no time, so what is measured is the server itself), drives it with
// concurrent keep-alive clients sending short completions, streamed and not, and prints requests per
// second, p50/p99 latency, the server's CPU time per request and its peak memory.
//
//	go run ./bench/serve [-clients 64] [-requests 20000] [-warmup 4000] [-rate R] [-prompt-tokens 100] [-max-tokens 16] [-phases whole,streaming]
//		[-client lean|nethttp] [-bin FILE] [-base FILE] [-runs N] [-- extra serve flags]
//
// The clients share the machine with the server, so the lean client (the default: raw keep-alive
// connections, each request written from a reused buffer, only the answer's framing parsed) leaves the server most of it;
// -client nethttp drives it with Go's net/http client instead, as the figures before 2026-12-03 were.
// The clients' own CPU time per request is printed too.
//
// Before the phases, each server answers -warmup requests, not measured, split between the phases'
// kinds and sent closed loop: the connections open, the heap and the KV cache's indexes grow and their
// pages are touched, which would otherwise put the first phase's slowest requests (its p99) in the
// server's first tenth of a second. Each phase's prompts are numbered after the last phase's, and the
// warm-up's after them all, so that no measured prompt finds its blocks cached by an earlier one.
// At --speedup-ratio 1 the passes take their time, so the warm-up takes
// seconds (-warmup 0 skips it).
//
// -rate R sends the requests open-loop instead, R a second whatever the answers (on at most -clients
// connections; R from 0.001 to 1e6, a phase's requests started within a day), for a server's cost under
// a light load: with `-- --workers 1000 --speedup-ratio 1
// --timing default` the passes take the time they would on the GPU.
//
// -bin measures a built binary instead of building ./cmd/mocker; -base FILE measures that binary too,
// interleaved with -bin run by run (-runs of each, a fresh server each run), and ends with the medians of
// both, so that two revisions are compared under the same load of a shared machine.
// `-- --cpuprofile FILE` profiles the server (written when it stops).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mocker-sim/mocker/tokenize"
)

// maxPrompts is how many prompts six digits number.
const maxPrompts = 1_000_000

// maxPhase bounds how long -rate's open loop takes to start a phase's requests.
const maxPhase = 24 * time.Hour

// checkLoad refuses, naming the flag, a load the benchmark cannot run: at a rate too low, the open
// loop would wait longer than any run is meant to (or, below ~1e-9, past what a time.Duration holds).
func checkLoad(requests, phases, warmup, clients, runs int, rate float64) error {
	switch {
	case requests < 1:
		return fmt.Errorf("-requests %d: want at least 1", requests)
	case warmup < 0:
		return fmt.Errorf("-warmup %d: want at least 0", warmup)
	case phases*requests+warmup > maxPrompts:
		return fmt.Errorf("-requests %d in %d phases and -warmup %d: want %d prompts at most (they are numbered in six digits)", requests, phases, warmup, maxPrompts)
	case clients < 1:
		return fmt.Errorf("-clients %d: want at least 1", clients)
	case runs < 1:
		return fmt.Errorf("-runs %d: want at least 1", runs)
	case rate != 0 && !(rate >= 0.001 && rate <= 1e6):
		return fmt.Errorf("-rate %v: want 0 (closed loop) or 0.001 to 1e6 requests a second", rate)
	case rate > 0 && float64(requests-1)/rate > maxPhase.Seconds():
		return fmt.Errorf("-rate %v: %d requests would take %.0f s to start; at most %v", rate, requests, float64(requests-1)/rate, maxPhase)
	}
	return nil
}

func main() {
	clients := flag.Int("clients", 64, "concurrent clients")
	requests := flag.Int("requests", 20000, "requests per phase")
	warmup := flag.Int("warmup", 4000, "requests each server answers before the phases, not measured")
	rate := flag.Float64("rate", 0, "requests started per second, open loop (0: each client sends its next request when the last is answered)")
	promptTokens := flag.Int("prompt-tokens", 100, "prompt tokens per request, BOS included (at least 28)")
	maxTokens := flag.Int("max-tokens", 16, "tokens each request generates")
	bin := flag.String("bin", "", "the mocker binary to measure (default: build ./cmd/mocker)")
	base := flag.String("base", "", "a second binary, measured interleaved with -bin")
	runs := flag.Int("runs", 1, "runs of each binary")
	phases := flag.String("phases", "whole,streaming", "the phases to run, in order")
	kind := flag.String("client", "lean", "the load generator: lean (raw keep-alive connections) or nethttp (Go's net/http client)")
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
	if err := checkClient(*kind); err != nil {
		fmt.Fprintln(os.Stderr, "bench/serve:", err)
		os.Exit(2)
	}
	if err := checkLoad(*requests, len(streams), *warmup, *clients, *runs, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "bench/serve:", err)
		os.Exit(2)
	}
	filler, err := padding(*promptTokens)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/serve: -prompt-tokens:", err)
		os.Exit(2)
	}
	l := load{clients: *clients, requests: *requests, warmup: *warmup, rate: *rate, maxTokens: *maxTokens, filler: filler, client: *kind}
	if err := run(*bin, *base, *runs, l, streams, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "bench/serve:", err)
		os.Exit(1)
	}
}

// The prompt of request i is promptHead with i in six digits (its token count does not depend on i),
// then filler words up to the prompt's length.
const (
	promptHead   = "Request %06d asks the simulated model a short question about the weather in a city it has never seen, politely."
	fillerWord   = " Please"
	headTokens   = 27 // promptHead's tokens under the built-in tokenizer
	bosTokens    = 1  // Llama-3.1's BOS, which serve adds for the catalog model
	maxPromptLen = 100_000
)

// padding is the filler that makes prompts n tokens long, checked against the built-in tokenizer.
func padding(n int) (string, error) {
	words := n - headTokens - bosTokens
	if words < 0 || n > maxPromptLen {
		return "", fmt.Errorf("%d: want %d to %d", n, headTokens+bosTokens, maxPromptLen)
	}
	filler := strings.Repeat(fillerWord, words)
	if got := len(tokenize.Builtin().Encode(fmt.Sprintf(promptHead, 0)+filler)) + bosTokens; got != n {
		return "", fmt.Errorf("%d: the prompt has %d tokens (the built-in tokenizer changed?)", n, got)
	}
	return filler, nil
}

// load is the clients' work in each phase.
type load struct {
	clients, requests, maxTokens int
	warmup                       int     // requests answered before the phases, not measured
	rate                         float64 // requests a second, open loop; 0: closed loop
	filler                       string
	client                       string // lean or nethttp
}

// result is one phase of one run.
type result struct {
	rps, p50, p99, cpuPerReq, cores, clientPerReq float64
}

func run(bin, base string, runs int, l load, streams []bool, extra []string) error {
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
	bins := []string{bin}
	if base != "" {
		bins = []string{base, bin}
	}
	args := append([]string{"serve", "--port", "0", "--nats", "none", "--speedup-ratio", "inf", "--timing", "polynomial"}, extra...)
	pace := fmt.Sprintf("%d clients", l.clients)
	if l.rate > 0 {
		pace = fmt.Sprintf("%g requests/s on at most %d connections", l.rate, l.clients)
	}
	fmt.Printf("mocker %s\n%s (%s client), %d requests per phase after %d to warm up, prompts of %d tokens, %d output tokens\n\n",
		strings.Join(args, " "), pace, l.client, l.requests, l.warmup, headTokens+bosTokens+strings.Count(l.filler, fillerWord), l.maxTokens)
	fmt.Printf("%-5s %-10s %10s %10s %10s %14s %12s %14s %10s\n", "run", "phase", "req/s", "p50 ms", "p99 ms", "server CPU/req", "server cores", "client CPU/req", "peak MiB")
	all := make([][][]result, len(bins)) // by binary, phase, run
	for b := range bins {
		all[b] = make([][]result, len(streams))
	}
	for i := range runs {
		for b, exe := range bins {
			res, peak, err := runOnce(exe, args, l, streams)
			if err != nil {
				return fmt.Errorf("%s: %w", exe, err)
			}
			for k, r := range res {
				all[b][k] = append(all[b][k], r)
				fmt.Printf("%-5s %-10s %s %10.1f\n", label(bins, b, i), phaseName(streams[k]), r, float64(peak)/(1<<20))
			}
		}
	}
	if runs == 1 && len(bins) == 1 {
		return nil
	}
	fmt.Println("\nmedians")
	for b, exe := range bins {
		for k := range streams {
			fmt.Printf("%-5s %-10s %s   %s\n", label(bins, b, -1), phaseName(streams[k]), median(all[b][k]), exe)
		}
	}
	return nil
}

func label(bins []string, b, run int) string {
	name := "new"
	if len(bins) > 1 && b == 0 {
		name = "base"
	}
	if run < 0 {
		return name
	}
	return fmt.Sprintf("%s%d", name[:1], run+1)
}

func phaseName(stream bool) string {
	if stream {
		return "streaming"
	}
	return "whole"
}

func (r result) String() string {
	return fmt.Sprintf("%10.0f %10.2f %10.2f %11.1f µs %12.2f %11.1f µs", r.rps, r.p50, r.p99, r.cpuPerReq, r.cores, r.clientPerReq)
}

// median is each column's median over rs.
func median(rs []result) result {
	col := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return result{
		rps:          col(func(r result) float64 { return r.rps }),
		p50:          col(func(r result) float64 { return r.p50 }),
		p99:          col(func(r result) float64 { return r.p99 }),
		cpuPerReq:    col(func(r result) float64 { return r.cpuPerReq }),
		cores:        col(func(r result) float64 { return r.cores }),
		clientPerReq: col(func(r result) float64 { return r.clientPerReq }),
	}
}

// runOnce starts a server, runs the phases against it and stops it; it returns each phase's figures and
// the server's peak RSS.
func runOnce(bin string, args []string, l load, streams []bool) ([]result, int64, error) {
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	addr, err := waitAddr(stderr)
	if err != nil {
		return nil, 0, err
	}
	go io.Copy(io.Discard, stderr)
	c := newClient(l.client, addr, l.clients)
	defer c.close()
	server := strconv.Itoa(cmd.Process.Pid)
	if err := l.warmUp(c, streams); err != nil {
		return nil, 0, fmt.Errorf("warming up: %w", err)
	}
	var out []result
	for k, stream := range streams {
		cpu0, err := cpuTime(server)
		if err != nil {
			return nil, 0, err
		}
		own0, err := cpuTime("self")
		if err != nil {
			return nil, 0, err
		}
		start := time.Now()
		lat, err := l.run(c, stream, k*l.requests)
		if err != nil {
			return nil, 0, err
		}
		wall := time.Since(start)
		cpu1, err := cpuTime(server)
		if err != nil {
			return nil, 0, err
		}
		own1, err := cpuTime("self")
		if err != nil {
			return nil, 0, err
		}
		slices.Sort(lat)
		cpu, own := cpu1-cpu0, own1-own0
		out = append(out, result{rps: float64(len(lat)) / wall.Seconds(), p50: ms(lat[len(lat)/2]), p99: ms(lat[len(lat)*99/100]),
			cpuPerReq: float64(cpu.Microseconds()) / float64(len(lat)), cores: cpu.Seconds() / wall.Seconds(),
			clientPerReq: float64(own.Microseconds()) / float64(len(lat))})
	}
	peak, err := peakRSS(cmd.Process.Pid)
	return out, peak, err
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

// warmUp sends the load's warm-up, split between the phases' kinds in their order, closed loop, its
// prompts numbered after every phase's.
func (l load) warmUp(c client, streams []bool) error {
	for k, stream := range streams {
		from, to := l.warmup*k/len(streams), l.warmup*(k+1)/len(streams)
		if _, err := l.closedLoop(c, stream, len(streams)*l.requests+from, to-from); err != nil {
			return err
		}
	}
	return nil
}

// run sends a phase's completions, their prompts numbered from first, from the clients' goroutines or one
// goroutine each at the load's rate, and returns their latencies.
func (l load) run(c client, stream bool, first int) ([]time.Duration, error) {
	if l.rate == 0 {
		return l.closedLoop(c, stream, first, l.requests)
	}
	s := l.sender(c, stream, first, l.requests)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range l.requests {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / l.rate * float64(time.Second)))))
		wg.Go(func() { s.send(i, nil) })
	}
	wg.Wait()
	return s.lat, s.err
}

// closedLoop sends the n completions numbered from first from the load's clients, each sending its
// next when the last is answered, and returns their latencies.
func (l load) closedLoop(c client, stream bool, first, n int) ([]time.Duration, error) {
	s := l.sender(c, stream, first, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range l.clients {
		wg.Go(func() {
			var body []byte
			for ok := true; ok; {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				body, ok = s.send(i, body)
			}
		})
	}
	wg.Wait()
	return s.lat, s.err
}

// sender sends a run of completions, the i-th with prompt first+i, and keeps their latencies and the
// first error.
type sender struct {
	l      load
	c      client
	stream bool
	first  int
	lat    []time.Duration
	mu     sync.Mutex
	err    error
}

func (l load) sender(c client, stream bool, first, n int) *sender {
	return &sender{l: l, c: c, stream: stream, first: first, lat: make([]time.Duration, n)}
}

// send sends completion i with body as its buffer, and says whether it was answered.
func (s *sender) send(i int, body []byte) ([]byte, bool) {
	body = fmt.Appendf(body[:0], `{"model":"llama-3.1-8b","prompt":"`+promptHead+`%s","max_tokens":%d,"stream":%v}`, s.first+i, s.l.filler, s.l.maxTokens, s.stream)
	t0 := time.Now()
	err := s.c.post(body, s.stream)
	s.lat[i] = time.Since(t0)
	if err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}
	return body, err == nil
}

// cpuTime is a process's user + system CPU time, from /proc/PROC/stat (PROC a pid, or self).
func cpuTime(proc string) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + proc + "/stat")
	if err != nil {
		return 0, fmt.Errorf("CPU time: %w (Linux only)", err)
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
