package live

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// TestBootstrapHijack: a client that reads response ids and connects to the bootstrap ports with the
// next ones (Dynamo's room ids, 8 bytes little-endian) takes no acknowledgement: every later request is
// served. Before room ids were random, those requests failed after the rendezvous timeout.
func TestBootstrapHijack(t *testing.T) {
	o := disaggOptions(1, 1, 100)
	o.Disagg.BootstrapTimeout = 2 * time.Second
	s, _, c := start(t, o)
	params := openai.CompletionNewParams{Model: testModel,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(longPrompt)}, MaxTokens: openai.Int(3)}
	r, err := c.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	last, err := strconv.ParseUint(strings.TrimPrefix(r.ID, "cmpl-"), 10, 64)
	if err != nil {
		t.Fatalf("response id %q", r.ID)
	}
	const n = 8
	for _, addr := range s.BootstrapAddrs() {
		for id := last + 1; id <= last+n; id++ {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.Write(binary.LittleEndian.AppendUint64(nil, id))
		}
	}
	for range n {
		r, err := c.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		if r.Usage.CompletionTokens != 3 {
			t.Fatalf("%s: %d completion tokens, want 3", r.ID, r.Usage.CompletionTokens)
		}
	}
}

// TestBootstrapFailureError: a failed rendezvous reaches the client as an OpenAI error that names no
// room, address or Go error.
func TestBootstrapFailureError(t *testing.T) {
	o := disaggOptions(1, 1, 100)
	o.Disagg.BootstrapTimeout = time.Nanosecond // every room expires before its decode side connects
	_, hs, _ := start(t, o)
	body := `{"model":"` + testModel + `","prompt":"hello there","max_tokens":3}`
	resp, err := http.Post(hs.URL+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct {
			Message, Type string
			Param, Code   *string
		}
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	want := "KV transfer to the decode worker failed; retry later"
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Message != want || e.Error.Type != "service_unavailable" ||
		e.Error.Param != nil || e.Error.Code != nil {
		t.Fatalf("status %d, body %s; want 503 with message %q", resp.StatusCode, bytes.TrimSpace(b), want)
	}
}
