package model

import (
	"fmt"
	"strconv"
	"strings"
)

// TPError says why tensor parallelism tp cannot shard m's attention the way vLLM and SGLang shard it,
// or is nil when it can. Each GPU takes an equal share of the query heads (vLLM refuses num_attention_heads
// % tp != 0 at start-up), and an equal share of the key/value heads or, with fewer of them than GPUs,
// each key/value head is replicated on an equal number of GPUs (QKVParallelLinear in both engines: kv % tp
// == 0 or tp % kv == 0). An MLA model caches one latent that all its heads share, so only its query heads
// split. It panics unless tp is positive.
func (m *Model) TPError(tp int) error {
	mustPositive("TPError", 1, tp)
	switch {
	case m.Heads%tp != 0:
		return fmt.Errorf("%s's %d attention heads do not split over %d GPUs (TP must divide %d: %s)", m.Name, m.Heads, tp, m.Heads, m.tpList())
	case !m.kvSplits(tp):
		return fmt.Errorf("%s's %d key/value heads do not split over %d GPUs, nor replicate over them evenly (TP must divide %d and divide or be a multiple of %d: %s)",
			m.Name, m.KVHeads, tp, m.Heads, m.KVHeads, m.tpList())
	}
	return nil
}

// kvSplits reports whether tp GPUs hold m's key/value heads evenly: split, or each replicated the same
// number of times.
func (m *Model) kvSplits(tp int) bool {
	kv := m.KVHeads
	return m.MLA() || kv <= 0 || kv%tp == 0 || tp%kv == 0
}

// tpList lists the tensor parallelisms that shard m's attention (TPError nil), all of which divide Heads.
func (m *Model) tpList() string {
	var tps []string
	for tp := 1; tp <= m.Heads; tp++ {
		if m.Heads%tp == 0 && m.kvSplits(tp) {
			tps = append(tps, strconv.Itoa(tp))
		}
	}
	return strings.Join(tps, ", ")
}
