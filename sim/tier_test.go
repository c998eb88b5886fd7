package sim

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/mocker-sim/mocker/engine"
	"github.com/mocker-sim/mocker/kvcache"
)

// TestTierProperties runs TestProperties' vLLM and TensorRT-LLM cases with prefix caching again with lower
// KV tiers below every pool (sizes, disk and link speeds drawn from the seed's own stream, so the cases
// TestGoldenProperties pins keep their configurations): the same checks after every pass (the tiers'
// accounting with the pool's), every request ends within its bound, a rerun is byte-identical; and over
// the cases, blocks are onboarded from both tiers.
func TestTierProperties(t *testing.T) {
	n := uint64(200)
	if testing.Short() {
		n = 60
	}
	var cpu, disk float64
	for seed := uint64(1); seed <= n; seed++ {
		c := newPropCase(seed)
		eo := c.o.Engine
		if c.o.PrefillWorkers > 0 {
			eo = c.o.PrefillEngine
		}
		if eo.Backend == engine.SGLang || !eo.VLLM.PrefixCaching {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, 0x74696572)) // "tier"
		to := kvcache.TierOptions{CPUBlocks: 1 + rng.IntN(64), CPUBandwidth: []float64{0.01, 1, 100}[rng.IntN(3)],
			BlockBytes: int64(1 + rng.IntN(100000))}
		if rng.IntN(2) == 0 {
			to.DiskBlocks, to.DiskBandwidth = 1+rng.IntN(256), []float64{0.01, 1}[rng.IntN(2)]
		}
		c.o.Engine.VLLM.Tiers, c.o.PrefillEngine.VLLM.Tiers, c.o.DecodeEngine.VLLM.Tiers = to, to, to
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			a := runProp(t, c)
			if b := runProp(t, c); !bytes.Equal(a, b) {
				t.Fatalf("same seed, different reports\ntiers %+v\n%s", to, c.describe())
			}
			var s struct {
				CPU  *float64 `json:"kv_cpu_hit_ratio"`
				Disk *float64 `json:"kv_disk_hit_ratio"`
			}
			if err := json.NewDecoder(bytes.NewReader(a)).Decode(&s); err != nil || s.CPU == nil || s.Disk == nil {
				t.Fatalf("report without the tiers' keys (%v)\n%s", err, a)
			}
			cpu += *s.CPU
			disk += *s.Disk
		})
	}
	if !(cpu > 0 && disk > 0) {
		t.Fatalf("Σ CPU hit ratio %v, Σ disk hit ratio %v over the cases: the tiers served nothing", cpu, disk)
	}
}
