package live

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// BenchmarkCompletion measures the server's cost per short completion (27 prompt tokens, 16 output
// tokens) at infinite speedup, with parallel clients over loopback HTTP.
func BenchmarkCompletion(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			_, hs, _ := start(b, testOptions(5, 1, math.Inf(1)))
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i++
					body := fmt.Sprintf(`{"model":"test-model","prompt":"Request %d asks the simulated model a short question about the weather in a city it has never seen, politely.","max_tokens":16,"stream":%v}`, i, stream)
					res, err := hc.Post(hs.URL+"/v1/completions", "application/json", bytes.NewReader([]byte(body)))
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
			})
		})
	}
}

// BenchmarkHandler measures the API's own cost per short completion (a 100-token prompt, 16 output
// tokens, infinite speedup), called by 64 goroutines without a network or an HTTP server in between:
// decoding, tokenising, routing, the engine's passes, the metrics and rendering. It reports the
// process's CPU time per request (cpu-µs/op), which a loaded machine inflates less than wall time.
func BenchmarkHandler(b *testing.B) {
	for _, stream := range []bool{false, true} {
		b.Run(fmt.Sprintf("stream=%v", stream), func(b *testing.B) {
			s := instantServer(b)
			h := s.Handler()
			filler := strings.Repeat(" Please", 74) // 26 + 74 tokens
			var n atomicCounter
			b.SetParallelism(64)
			cpu0 := cpuTime(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := fmt.Sprintf(`{"model":"test-model","prompt":"Request %06d asks the simulated model a short question about the weather in a city it has never seen, politely.%s","max_tokens":16,"stream":%v}`, n.next(), filler, stream)
					req, err := http.NewRequest("POST", "/v1/completions", strings.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					w := &discard{header: http.Header{}, code: 200}
					h.ServeHTTP(w, req)
					if w.code != 200 || w.n == 0 {
						b.Errorf("status %d, %d bytes", w.code, w.n)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// discard is a ResponseWriter that counts what it is given. It takes write deadlines, as net/http's
// does: an unsupported one costs http.ResponseController an error's allocations.
type discard struct {
	header http.Header
	code   int
	n      int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) WriteHeader(code int)        { d.code = code }
func (d *discard) Write(b []byte) (int, error) { d.n += len(b); return len(b), nil }
func (d *discard) Flush()                      {}

func (d *discard) SetWriteDeadline(time.Time) error { return nil }

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) next() int64 { return c.n.Add(1) % 1_000_000 }

// BenchmarkDecode measures decoding bench/serve's completion body (a 100-token prompt) by decodeSimple
// and by the v2 decoder with v1Options, which decodeBody falls back to.
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"model":"llama-3.1-8b","prompt":"Request 000001 asks the simulated model a short question about the weather in a city it has never seen, politely.` +
		strings.Repeat(" Please", 72) + `","max_tokens":16,"stream":false}`)
	for _, tc := range []struct {
		name   string
		decode func(*completionRequest) bool
	}{
		{"simple", func(r *completionRequest) bool { return decodeSimple(body, r) }},
		{"v2", func(r *completionRequest) bool { return jsonv2.Unmarshal(body, r, v1Options) == nil }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			var r completionRequest
			for b.Loop() {
				r = completionRequest{}
				if !tc.decode(&r) {
					b.Fatal("refused")
				}
			}
		})
	}
}
