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

// TestTierProperties runs TestProperties' cases with prefix caching again with lower KV tiers below every
// pool (SGLang's: HiCache's host tier below the radix cache) (sizes, disk and link speeds drawn from the seed's own stream, so the cases
// TestGoldenProperties pins keep their configurations): the same checks after every pass (the tiers'
// accounting with the pool's), every request ends within its bound, a rerun is byte-identical; and over
// the cases, blocks are onboarded from both tiers, on SGLang's engines as on the others.
func TestTierProperties(t *testing.T) {
	n := uint64(200)
	if testing.Short() {
		n = 60
	}
	var cpu, disk [2]float64 // vLLM and TensorRT-LLM; SGLang
	for seed := uint64(1); seed <= n; seed++ {
		c := newPropCase(seed)
		eo := c.o.Engine
		if c.o.PrefillWorkers > 0 {
			eo = c.o.PrefillEngine
		}
		sgl := eo.Backend == engine.SGLang
		if sgl && !eo.SGLang.PrefixCaching || !sgl && !eo.VLLM.PrefixCaching {
			continue
		}
		rng := rand.New(rand.NewPCG(seed, 0x74696572)) // "tier"
		to := kvcache.TierOptions{CPUBlocks: 1 + rng.IntN(64), CPUBandwidth: []float64{0.01, 1, 100}[rng.IntN(3)],
			BlockBytes: int64(1 + rng.IntN(100000))}
		if rng.IntN(2) == 0 {
			to.DiskBlocks, to.DiskBandwidth = 1+rng.IntN(256), []float64{0.01, 1}[rng.IntN(2)]
		}
		for _, e := range []*engine.Options{&c.o.Engine, &c.o.PrefillEngine, &c.o.DecodeEngine} {
			e.VLLM.Tiers, e.SGLang.Tiers = to, to
		}
		k := 0
		if sgl {
			k = 1
		}
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
			cpu[k] += *s.CPU
			disk[k] += *s.Disk
		})
	}
	if testing.Short() {
		return // 60 cases need not reach a disk tier on every backend; the full 200 do
	}
	for k, name := range []string{"vllm and trtllm", "sglang"} {
		if !(cpu[k] > 0 && disk[k] > 0) {
			t.Fatalf("%s: Σ CPU hit ratio %v, Σ disk hit ratio %v over the cases: the tiers served nothing", name, cpu[k], disk[k])
		}
	}
}
