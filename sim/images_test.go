package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestPropertiesImages runs property cases (newPropCase) with images added: synthetic cases get one or
// two images per prompt from a small pool (and one turn per session), trace rows get up to two images of
// a few ids at random places. The checks are TestProperties' — accounting and the encoder cache after
// every pass, the router's index equal to the engines' caches (so both hash images alike), every request
// ended, byte-identical reruns.
func TestPropertiesImages(t *testing.T) {
	n := uint64(120)
	if testing.Short() {
		n = 30
	}
	encoded := 0
	for seed := uint64(1); seed <= n; seed++ {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			c := newPropCase(seed)
			rng := rand.New(rand.NewPCG(seed, 0x1a9e))
			if c.syn != nil {
				c.syn.TurnsPerSession, c.requests = 1, c.syn.NumRequests
				c.syn.ImagesPerRequest, c.syn.ImageTokens, c.syn.ImagePool = 1+rng.IntN(2), 1+rng.IntN(60), rng.IntN(4)
			} else {
				c.trace = addTraceImages(t, c.trace, rng)
			}
			a := runProp(t, c)
			if b := runProp(t, c); string(a) != string(b) {
				t.Fatalf("same seed, different reports\n%s", c.describe())
			}
			if strings.Contains(string(a), `"images_encoded"`) {
				encoded++
			}
		})
	}
	if encoded < int(n)/2 {
		t.Errorf("only %d of %d cases encoded an image", encoded, n)
	}
	t.Logf("%d of %d cases encoded images", encoded, n)
}

// addTraceImages gives each row of a trace up to two images inside its prompt, named from a pool of three.
func addTraceImages(t *testing.T, trace string, rng *rand.Rand) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(trace), "\n") {
		var row map[string]any
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatal(err)
		}
		in, _ := row["input_length"].(float64)
		var images []map[string]any
		for at := 0; at < int(in) && len(images) < 2 && rng.IntN(3) > 0; {
			start := at + rng.IntN(int(in)-at)
			size := 1 + rng.IntN(int(in)-start)
			images = append(images, map[string]any{"id": fmt.Sprint(rng.IntN(3)), "tokens": size, "offset": start})
			at = start + size
		}
		if images != nil {
			row["images"] = images
		}
		out, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
		b.WriteByte('\n')
	}
	return b.String()
}
