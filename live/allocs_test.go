package live

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
)

// TestHandlerAllocs pins the allocations of one short completion (a 100-token prompt, 16 output
// tokens, infinite speedup) through the API's handler and its worker, the test's own request aside:
// every allocation is paid for in the malloc and GC share of a request's CPU.
func TestHandlerAllocs(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	for _, tc := range []struct {
		stream bool
		want   float64
	}{{false, 22}, {true, 25}} {
		t.Run(fmt.Sprintf("stream=%v", tc.stream), func(t *testing.T) {
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
				body := fmt.Sprintf(`{"model":"test-model","prompt":"Request %06d asks the simulated model a short question about the weather in a city it has never seen, politely.%s","max_tokens":16,"stream":%v}`, i, filler, tc.stream)
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
