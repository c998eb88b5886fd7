package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/router"
)

// TestLoRAsShareNoBlocks: the same prompt under two adapters and the base model shares no block, on one
// worker or behind the KV router (which hashes with each adapter's seed too, so it sends a request to the
// worker holding its adapter's blocks): every first request of an adapter computes all of it, every
// second one finds its whole blocks cached.
func TestLoRAsShareNoBlocks(t *testing.T) {
	var rows strings.Builder
	for i, lora := range []string{`"a"`, `"b"`, `null`, `"b"`, `"a"`, `null`} {
		fmt.Fprintf(&rows, `{"timestamp": %d, "input_length": 13, "output_length": 1, "hash_ids": [1, 2, 3, 4], "lora": %s}`+"\n", 1000*i, lora)
	}
	ro := router.DefaultOptions()
	ro.BlockSize, ro.MaxBatchedTokens = 4, 8
	for _, workers := range []int{1, 3} {
		eo := small()
		eo.VLLM.Events = true // the router's index is fed by KV events
		res := run(t, trace(t, rows.String()), Options{Workers: workers, Engine: eo, Router: ro})
		var b bytes.Buffer
		if err := res.Collector.WriteRequestsJSONL(&b); err != nil {
			t.Fatal(err)
		}
		var cached []int
		for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			var rec struct {
				Cached int `json:"cached_tokens"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			cached = append(cached, rec.Cached)
		}
		if got, want := fmt.Sprint(cached), "[0 0 0 12 12 12]"; got != want {
			t.Errorf("%d workers: cached tokens %s, want %s", workers, got, want)
		}
	}
}
