package live

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
)

// TestHandlerAllocs pins the allocations of one completion (a 100-token prompt, infinite speedup)
// through the API's handler and its worker, the test's own request aside: every allocation is paid
// for in the malloc and GC share of a request's CPU. A short answer (16 tokens), a 4 KiB one (700
// tokens) and an echoed one cost the same: a whole response's buffers are sized for its text at once.
func TestHandlerAllocs(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct {
		stream    bool
		maxTokens int
		echo      bool
		want      float64
	}{
		{false, 16, false, 22},
		{true, 16, false, 25},
		{false, 700, false, 22},
		{false, 16, true, 22},
	} {
		t.Run(fmt.Sprintf("stream=%v,max_tokens=%d,echo=%v", tc.stream, tc.maxTokens, tc.echo), func(t *testing.T) {
			s, err := New(testOptions(5, 1, math.Inf(1)))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h := s.Handler()
			const runs = 200
			filler := strings.Repeat(" Please", 74) // 26 + 74 tokens
			reqs := make([]*http.Request, runs+1)   // AllocsPerRun runs f once more to warm up
			ws := make([]*discard, runs+1)
			for i := range reqs {
				body := fmt.Sprintf(`{"model":"test-model","prompt":"Request %06d asks the simulated model a short question about the weather in a city it has never seen, politely.%s","max_tokens":%d,"echo":%v,"stream":%v}`, i, filler, tc.maxTokens, tc.echo, tc.stream)
				reqs[i], err = http.NewRequest("POST", "/v1/completions", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				ws[i] = &discard{header: http.Header{}, code: 200}
			}
			i := 0
			got := testing.AllocsPerRun(runs, func() {
				h.ServeHTTP(ws[i], reqs[i])
				i++
			})
			for i, w := range ws {
				if w.code != 200 || w.n == 0 {
					t.Fatalf("request %d: status %d, %d bytes", i, w.code, w.n)
				}
			}
			if got != tc.want {
				t.Errorf("%v allocations per completion, want %v", got, tc.want)
			}
		})
	}
}
