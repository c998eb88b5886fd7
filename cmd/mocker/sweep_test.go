package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// TestSweepOverNATS runs one search locally and once through an embedded JetStream server and three
// sweep-worker processes, the first killed while it holds a job: the job goes to another worker once
// the ack wait passes, and the report is byte-identical to the local one.
func TestSweepOverNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts worker processes")
	}
	dir := t.TempDir()
	args := []string{"recommend", "--num-requests", "3000", "--request-rate", "200", "--input-tokens", "256",
		"--output-tokens", "16", "--timing", "fixed", "--prefill-ms", "20", "--decode-ms", "5", "--max-num-batched-tokens", "512",
		"--ttft-p90-ms", "60", "--sla", "e2e:p50:300", "--tp-list", "1,2", "--routers", "round-robin,kv", "--max-workers", "6"}
	local := filepath.Join(dir, "local.json")
	if _, _, err := mocker(t, append(args, "--report-json", local)...); err != nil {
		t.Fatal(err)
	}

	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(dir, "js"), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("embedded NATS server not ready")
	}
	url := ns.ClientURL()

	// Each worker's log lines, "start RUN ID" and "done RUN ID", as they come.
	var mu sync.Mutex
	logs := make([][]string, 3)
	started := make(chan string, 1)
	var procs []*exec.Cmd
	startWorker := func(i int) {
		cmd := exec.Command(os.Args[0], "sweep-worker", "--nats", url, "--jobs", "1")
		cmd.Env = append(os.Environ(), "MOCKER_RUN_MAIN=1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				mu.Lock()
				logs[i] = append(logs[i], sc.Text())
				mu.Unlock()
				if i == 0 && strings.HasPrefix(sc.Text(), "start ") {
					select {
					case started <- strings.TrimPrefix(sc.Text(), "start "):
					default:
					}
				}
			}
		}()
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	})

	dist := filepath.Join(dir, "dist.json")
	errc := make(chan error, 1)
	go func() {
		_, _, err := mocker(t, append(args, "--nats", url, "--nats-ack-wait", "2s", "--report-json", dist)...)
		errc <- err
	}()
	startWorker(0)
	var held string
	select {
	case held = <-started:
	case err := <-errc:
		t.Fatalf("the search ended before any worker took a job: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("worker 0 took no job in 60 s")
	}
	procs[0].Process.Kill()
	procs[0].Wait()
	startWorker(1)
	startWorker(2)
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatal("distributed search unfinished after 5 minutes")
	}

	a, _ := os.ReadFile(local)
	b, _ := os.ReadFile(dist)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("distributed report differs from the local one:\nlocal %d bytes, distributed %d bytes", len(a), len(b))
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(logs[0], "\n"); strings.Contains(got, "done "+held) {
		t.Fatalf("worker 0 finished job %s before it was killed: nothing was redelivered\n%s", held, got)
	}
	rerun := 0
	for _, l := range append(logs[1], logs[2]...) {
		if l == "start "+held {
			rerun++
		}
	}
	if rerun == 0 {
		t.Errorf("job %s, held by the killed worker, never ran elsewhere; workers 1 and 2 logged:\n%v\n%v", held, logs[1], logs[2])
	}
	if len(logs[1]) == 0 || len(logs[2]) == 0 {
		t.Logf("a worker ran no job: %v / %v", logs[1], logs[2])
	}
}
