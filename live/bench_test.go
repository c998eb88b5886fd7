package live

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"testing"
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
