package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// buildMocker builds the binary once for the test's worker processes.
func buildMocker(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mocker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startWorker runs `mocker worker` and returns its process and fleet id (from its first line).
func startWorker(t *testing.T, bin, url string, args ...string) (*exec.Cmd, uint64) {
	t.Helper()
	return startWorkerCmd(t, exec.Command(bin, append([]string{"worker", "--nats", url}, args...)...))
}

// startWorkerCmd starts cmd, a `mocker worker` command line, and returns it and the worker's fleet id.
func startWorkerCmd(t *testing.T, cmd *exec.Cmd) (*exec.Cmd, uint64) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("worker: %v (%q)", err, line)
	}
	var id uint64
	if _, err := fmt.Sscanf(line, "mocker worker: %x,", &id); err != nil {
		t.Fatalf("worker's first line %q: %v", line, err)
	}
	go func() { // keep the pipe drained
		buf := make([]byte, 4096)
		for {
			if _, err := stderr.Read(buf); err != nil {
				return
			}
		}
	}()
	return cmd, id
}

// waitFor polls cond for up to 60 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// TestFleet: a frontend (serve --workers 0 with its embedded NATS) and three worker processes; a
// bounded load through the OpenAI API; kill -9 of a worker with requests in flight. Every request
// completes or fails with a 503 naming the lost worker, none hangs; the dead worker leaves routing
// with its blocks; a new worker process joins, serves, and drains on SIGTERM.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	bin := buildMocker(t)
	cfg := serveConfig()
	cfg.Workers, cfg.NATS, cfg.FleetTTLS = 0, "embedded", 1
	info, c := startServe(t, cfg)
	srv := info.Server
	// Slow enough (200 tokens take seconds) that the kill finds requests in flight.
	wargs := []string{"--speedup-ratio", "10"}
	cmds := make([]*exec.Cmd, 3)
	ids := make([]uint64, 3)
	for i := range cmds {
		cmds[i], ids[i] = startWorker(t, bin, info.NATSURL, wargs...)
	}
	waitFor(t, "three workers", func() bool { return len(srv.FleetWorkers()) == 3 })

	// Every worker caches some blocks first.
	for i := 0; ; i++ {
		m := srv.FleetWorkers()
		if m[ids[0]].Blocks > 0 && m[ids[1]].Blocks > 0 && m[ids[2]].Blocks > 0 {
			break
		}
		if i == 60 {
			t.Fatalf("60 prompts and a worker has no block: %v", m)
		}
		complete(t, c, strconv.Itoa(i)+" warm-up: "+servePrompt, 2)
	}

	const n = 24
	errs := make([]error, n)
	texts := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			res, err := c.Completions.New(ctx, openai.CompletionNewParams{
				Model:     "llama-3.1-8b",
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(servePrompt + " request " + strconv.Itoa(i%6))},
				MaxTokens: openai.Int(200),
			})
			if err == nil {
				texts[i] = res.Choices[0].Text
				if res.Usage.CompletionTokens != 200 {
					err = fmt.Errorf("%d tokens, want 200", res.Usage.CompletionTokens)
				}
			}
			errs[i] = err
		})
	}
	waitFor(t, "a request running on worker 0", func() bool { return srv.FleetWorkers()[ids[0]].Running > 0 })
	cmds[0].Process.Signal(syscall.SIGKILL)
	wg.Wait()
	ok, lost := outcomes(t, errs)
	t.Logf("%d completed, %d failed with the lost worker", ok, lost)
	if lost == 0 || ok == 0 {
		t.Errorf("%d completed and %d lost; want both: the kill found requests running", ok, lost)
	}
	waitFor(t, "the dead worker dropped", func() bool {
		m := srv.FleetWorkers()
		_, dead := m[ids[0]]
		return !dead && len(m) == 2
	})
	m := srv.FleetWorkers()
	if got, want := srv.IndexedBlocks(), m[ids[1]].Blocks+m[ids[2]].Blocks; got != want {
		t.Errorf("the router indexes %d blocks, the live workers %d: the dead worker's remain", got, want)
	}

	cmd, id := startWorker(t, bin, info.NATSURL, wargs...)
	waitFor(t, "the new worker", func() bool { _, ok := srv.FleetWorkers()[id]; return ok })
	for i := 0; srv.FleetWorkers()[id].Blocks == 0; i++ {
		if i == 60 {
			t.Fatal("60 new prompts and none went to the new worker")
		}
		complete(t, c, strconv.Itoa(i)+" fresh: "+servePrompt, 2)
	}

	// SIGTERM drains: the worker leaves routing and exits cleanly.
	cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the drained worker gone", func() bool { _, ok := srv.FleetWorkers()[id]; return !ok })
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker after SIGTERM: %v", err)
	}
}

// TestFleetWorkerEngines: `mocker worker --workers 3` is three fleet workers: the frontend routes to
// three ids, each of which caches blocks, and SIGTERM drains them all; --workers 0 is refused.
func TestFleetWorkerEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	bin := buildMocker(t)
	cfg := serveConfig()
	cfg.Workers, cfg.NATS, cfg.FleetTTLS = 0, "embedded", 1
	info, c := startServe(t, cfg)
	srv := info.Server

	out, err := exec.Command(bin, "worker", "--nats", info.NATSURL, "--workers", "0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "workers") || !strings.Contains(string(out), "at least 1") {
		t.Errorf("worker --workers 0: %v, %q; want an error naming workers", err, out)
	}

	cmd, _ := startWorker(t, bin, info.NATSURL, "--workers", "3")
	waitFor(t, "three workers", func() bool { return len(srv.FleetWorkers()) == 3 })
	for i := 0; ; i++ {
		busy := 0
		for _, w := range srv.FleetWorkers() {
			if w.Blocks > 0 {
				busy++
			}
		}
		if busy == 3 {
			break
		}
		if i == 60 {
			t.Fatalf("60 prompts and a worker has no block: %v", srv.FleetWorkers())
		}
		complete(t, c, strconv.Itoa(i)+" engines: "+servePrompt, 2)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the drained workers gone", func() bool { return len(srv.FleetWorkers()) == 0 })
	if err := cmd.Wait(); err != nil {
		t.Errorf("worker after SIGTERM: %v", err)
	}
}

// outcomes counts the requests that completed and those that failed with the 503 of a lost worker; any
// other error fails t.
func outcomes(t *testing.T, errs []error) (ok, lost int) {
	t.Helper()
	for i, err := range errs {
		var apiErr *openai.Error
		switch {
		case err == nil:
			ok++
		case errors.As(err, &apiErr) && apiErr.StatusCode == 503 && strings.Contains(apiErr.Message, "worker running the request was lost"):
			lost++
		default:
			t.Errorf("request %d: %v", i, err)
		}
	}
	return ok, lost
}
