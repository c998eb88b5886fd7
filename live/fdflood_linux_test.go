//go:build linux

package live

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBootstrapFDFlood: under a descriptor limit of 256, 400 idle connections and 2,000 connect–8
// bytes–close ones on the bootstrap port leave the server able to accept and serve requests. Before
// the bootstrap server capped its connections and noticed hang-ups, each took a descriptor for the 30 s
// room timeout and HTTP stopped answering. The server runs in a child process, whose limit this lowers.
func TestBootstrapFDFlood(t *testing.T) {
	if os.Getenv("MOCKER_FD_FLOOD_CHILD") == "1" {
		fdFloodChild(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestBootstrapFDFlood$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MOCKER_FD_FLOOD_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("child: %v\n%s", err, stderr.Bytes())
		}
	}()
	var httpAddr, bootAddr string
	if _, err := fmt.Fscan(stdout, &httpAddr, &bootAddr); err != nil {
		t.Fatalf("child said nothing: %v\n%s", err, stderr.Bytes())
	}
	go io.Copy(io.Discard, stdout)

	for range 400 {
		if nc, err := net.Dial("tcp", bootAddr); err == nil {
			defer nc.Close()
		}
	}
	for range 2000 {
		if nc, err := net.Dial("tcp", bootAddr); err == nil {
			nc.Write(make([]byte, 8))
			nc.Close()
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	for i := range 3 {
		body := `{"model":"` + testModel + `","prompt":"hello there","max_tokens":3}`
		resp, err := hc.Post("http://"+httpAddr+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"completion_tokens":3`) {
			t.Fatalf("request %d: status %d, body %s", i, resp.StatusCode, b)
		}
	}
}

// fdFloodChild lowers its descriptor limit, serves disaggregated until stdin closes, and prints its HTTP
// and first bootstrap address.
func fdFloodChild(t *testing.T) {
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 256, Max: 256}); err != nil {
		t.Fatal(err)
	}
	o := disaggOptions(1, 1, 100)
	o.Disagg.BootstrapMaxConns = 32
	s, hs, _ := start(t, o)
	fmt.Println(strings.TrimPrefix(hs.URL, "http://"), s.BootstrapAddrs()[0])
	io.Copy(io.Discard, os.Stdin)
}
