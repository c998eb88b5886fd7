//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/openai/openai-go/v3"

	"github.com/mocker-sim/mocker/live"
)

// ipCmd runs ip(8) with args and fails the test on an error.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// netnsUsable reports why network namespaces cannot be used here, or "" when they can.
func netnsUsable() string {
	if os.Geteuid() != 0 {
		return "not root"
	}
	name := fmt.Sprintf("mkprobe%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns add: %v: %s", err, strings.TrimSpace(string(out)))
	}
	exec.Command("ip", "netns", "del", name).Run()
	return ""
}

// sweepStaleNetns deletes the namespaces and veths of earlier runs whose test process is gone (one that
// panicked, or was killed by -timeout, ran no cleanup), with what still runs in them.
func sweepStaleNetns(t *testing.T) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		ns, _, _ := strings.Cut(line, " ")
		var pid, i int
		if n, _ := fmt.Sscanf(ns, "mkf%d-%d", &pid, &i); n != 2 || syscall.Kill(pid, 0) == nil {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, p := range strings.Fields(string(pids)) {
			if n, err := strconv.Atoi(p); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
		exec.Command("ip", "link", "del", fmt.Sprintf("mkf%dr%d", pid%100000, i)).Run()
		exec.Command("ip", "netns", "del", ns).Run()
		t.Logf("removed %s, left by test process %d", ns, pid)
	}
}

// TestFleetNetns: TestFleet with each worker process in its own network namespace, joined to the
// root namespace by a veth pair with its own /30; the test's NATS server listens on the first pair's
// root-side address, which the other namespaces reach through their own pair. One worker is cut off
// with a link-down, not a kill, while it runs requests: every request completes or fails with a 503
// naming the lost worker, none hangs; the worker leaves routing with its blocks within the TTL; the
// link back up, the same worker rejoins and serves. Cut off again just before a load, the requests the
// frontend sent it before the TTL passed are routed again and complete; it rejoins once more.
func TestFleetNetns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	if why := netnsUsable(); why != "" {
		t.Skipf("network namespaces unusable (%s): the netns variant of TestFleet needs root and ip netns", why)
	}
	sweepStaleNetns(t)
	bin := buildMocker(t)
	pid := os.Getpid()
	subnet := fmt.Sprintf("10.213.%d.", pid%256) // unique per run on this host, like the names
	const workers = 3
	hosts := make([]string, workers) // the root side of pair i
	nss := make([]string, workers)
	vethRoot := make([]string, workers)
	for i := range workers {
		nss[i] = fmt.Sprintf("mkf%d-%d", pid, i)
		vethRoot[i] = fmt.Sprintf("mkf%dr%d", pid%100000, i)
		peer := fmt.Sprintf("mkf%dn%d", pid%100000, i)
		hosts[i] = subnet + strconv.Itoa(4*i+1)
		ns, veth := nss[i], vethRoot[i]
		ipCmd(t, "netns", "add", ns)
		t.Cleanup(func() { // runs after the workers' cleanups: they are registered later
			exec.Command("ip", "link", "del", veth).Run()
			exec.Command("ip", "netns", "del", ns).Run()
		})
		ipCmd(t, "link", "add", veth, "type", "veth", "peer", "name", peer, "netns", ns)
		ipCmd(t, "addr", "add", hosts[i]+"/30", "dev", veth)
		ipCmd(t, "link", "set", veth, "up")
		ipCmd(t, "-n", ns, "addr", "add", subnet+strconv.Itoa(4*i+2)+"/30", "dev", peer)
		ipCmd(t, "-n", ns, "link", "set", peer, "up")
		ipCmd(t, "-n", ns, "route", "add", "default", "via", hosts[i])
	}

	ns, err := server.NewServer(&server.Options{Host: hosts[0], Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(30 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	url := "nats://" + net.JoinHostPort(hosts[0], strconv.Itoa(ns.Addr().(*net.TCPAddr).Port))

	cfg := serveConfig()
	cfg.Workers, cfg.NATS, cfg.FleetTTLS = 0, url, 2 // long enough to see requests wait on a cut-off worker
	info, c := startServe(t, cfg)
	srv := info.Server
	ids := make([]uint64, workers)
	for i := range workers {
		// Real time: a request lasts over a second, so the cut (an ip command, slow to start on a busy
		// machine) still finds the requests it saw running (at 10× they could end first).
		cmd := exec.Command("ip", "netns", "exec", nss[i], bin, "worker", "--nats", url, "--speedup-ratio", "1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // a test that panics runs no cleanup
		_, ids[i] = startWorkerCmd(t, cmd)
	}
	waitFor(t, "three workers", func() bool { return len(srv.FleetWorkers()) == workers })
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

	// The cut worker is the last: the NATS server's address is on the first pair.
	cut := workers - 1
	const n = 24
	errs := make([]error, n)
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
			if err == nil && res.Usage.CompletionTokens != 200 {
				err = fmt.Errorf("%d tokens, want 200", res.Usage.CompletionTokens)
			}
			errs[i] = err
		})
	}
	waitFor(t, "a request running on the worker to cut", func() bool { return srv.FleetWorkers()[ids[cut]].Running > 0 })
	ipCmd(t, "link", "set", vethRoot[cut], "down")
	wg.Wait()
	ok, lost := outcomes(t, errs)
	t.Logf("%d completed, %d failed with the cut-off worker", ok, lost)
	if lost == 0 || ok == 0 {
		t.Errorf("%d completed and %d lost; want both: the cut found requests running", ok, lost)
	}
	waitFor(t, "the cut-off worker dropped", func() bool {
		m := srv.FleetWorkers()
		_, there := m[ids[cut]]
		return !there && len(m) == workers-1
	})
	m := srv.FleetWorkers()
	if got, want := srv.IndexedBlocks(), m[ids[0]].Blocks+m[ids[1]].Blocks; got != want {
		t.Errorf("the router indexes %d blocks, the reachable workers %d: the cut-off worker's remain", got, want)
	}
	// Requests started after the cut go to the reachable workers.
	for i := range 4 {
		complete(t, c, strconv.Itoa(i)+" after the cut: "+servePrompt, 2)
	}

	ipCmd(t, "link", "set", vethRoot[cut], "up")
	rejoin(t, c, srv, ids[cut], "rejoined")

	// Cut off again before a load: the frontend routes to the worker until its TTL passes, and what it
	// sent there, never started, is routed again when the worker is dropped: every request completes.
	ipCmd(t, "link", "set", vethRoot[cut], "down")
	const m2 = 12
	errs = make([]error, m2)
	for i := range m2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			res, err := c.Completions.New(ctx, openai.CompletionNewParams{
				Model:     "llama-3.1-8b",
				Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(strconv.Itoa(i) + " before the TTL: " + servePrompt)},
				MaxTokens: openai.Int(20),
			})
			if err == nil && res.Usage.CompletionTokens != 20 {
				err = fmt.Errorf("%d tokens, want 20", res.Usage.CompletionTokens)
			}
			errs[i] = err
		})
	}
	waitFor(t, "a request waiting on the cut-off worker", func() bool { return srv.FleetWorkers()[ids[cut]].Waiting > 0 })
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d sent after the cut: %v", i, err)
		}
	}
	if _, there := srv.FleetWorkers()[ids[cut]]; there {
		t.Error("the cut-off worker is still routed to after its requests were rerouted")
	}
	ipCmd(t, "link", "set", vethRoot[cut], "up")
	rejoin(t, c, srv, ids[cut], "back again")
}

// rejoin waits for worker id to be routed to again and sends prompts until it caches blocks.
func rejoin(t *testing.T, c openai.Client, srv *live.Server, id uint64, what string) {
	t.Helper()
	waitFor(t, "the cut-off worker "+what, func() bool { _, ok := srv.FleetWorkers()[id]; return ok })
	for i := 0; srv.FleetWorkers()[id].Blocks == 0; i++ {
		if i == 60 {
			t.Fatalf("60 new prompts and none went to the worker %s", what)
		}
		complete(t, c, strconv.Itoa(i)+" "+what+": "+servePrompt, 2)
	}
}
