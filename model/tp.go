package model

import (
	"fmt"
	"strconv"
	"strings"
)

// TPError says why tensor parallelism tp cannot shard m the way vLLM and SGLang shard it, or is nil when
// it can. Each GPU takes an equal share of the query heads (vLLM refuses num_attention_heads % tp != 0 at
// start-up), and an equal share of the key/value heads or, with fewer of them than GPUs, each key/value
// head is replicated on an equal number of GPUs (QKVParallelLinear in both engines: kv % tp == 0 or
// tp % kv == 0). An MLA model caches one latent that all its heads share, so only its query heads split.
// A dense MLP's intermediate size splits evenly (ColumnParallelLinear and RowParallelLinear divide it by
// tp, asserting), and so do Gated DeltaNet layers' key and value heads (both engines divide() each by tp).
// The routed experts split by their own TP (ExpertTPError). It panics unless tp is positive.
func (m *Model) TPError(tp int) error {
	mustPositive("TPError", 1, tp)
	switch {
	case m.shards(tp):
		return nil
	case m.Heads%tp != 0:
		return fmt.Errorf("%s's %d attention heads do not split over %d GPUs (%s)", m.Name, m.Heads, tp, m.tpRule())
	case !m.kvSplits(tp):
		return fmt.Errorf("%s's %d key/value heads do not split over %d GPUs, nor replicate over them evenly (%s)", m.Name, m.KVHeads, tp, m.tpRule())
	case m.Intermediate%tp != 0:
		return fmt.Errorf("%s's MLP size %d does not split over %d GPUs (%s)", m.Name, m.Intermediate, tp, m.tpRule())
	default:
		return fmt.Errorf("%s's %d/%d linear-attention key/value heads do not split over %d GPUs (%s)",
			m.Name, m.LinearKeyHeads, m.LinearValueHeads, tp, m.tpRule())
	}
}

// shards reports whether tp GPUs shard m evenly (TPError nil).
func (m *Model) shards(tp int) bool {
	return m.Heads%tp == 0 && m.kvSplits(tp) && m.Intermediate%tp == 0 && m.linearSplits(tp)
}

// ExpertTPError says why the routed experts cannot be split over moeTP GPUs each, the experts' tensor
// parallelism (tp × attention data parallelism / ep), or is nil when they can: vLLM's FusedMoE asserts
// moe_intermediate_size % tp == 0 over its MoE group, SGLang's divides it by its moe_tp_size. It panics
// unless moeTP is positive.
func (m *Model) ExpertTPError(moeTP int) error {
	mustPositive("ExpertTPError", 1, moeTP)
	if m.MoEIntermediate%moeTP != 0 {
		return fmt.Errorf("%s's expert MLP size %d does not split over %d GPUs", m.Name, m.MoEIntermediate, moeTP)
	}
	return nil
}

// SharedExpertTPError says why the shared experts cannot be split over tp GPUs, or is nil when they can
// (or the model has none): vLLM and SGLang build them as one dense MLP of SharedExperts ×
// MoEIntermediate (DeepseekV2MLP), whose MergedColumnParallelLinear divides that size by its TP,
// asserting. Which GPUs that is depends on the engine (config's sharedExpertSplit). It panics unless tp
// is positive.
func (m *Model) SharedExpertTPError(tp int) error {
	mustPositive("SharedExpertTPError", 1, tp)
	if n := m.SharedExperts * m.MoEIntermediate; n%tp != 0 {
		return fmt.Errorf("%s's shared-expert MLP size %d does not split over %d GPUs", m.Name, n, tp)
	}
	return nil
}

// ExpertEPError says why the routed experts cannot be split into ep equal shards of whole experts, or
// is nil when they can (or ep is 1): SGLang's FusedMoE and TensorRT-LLM's (without its load balancer)
// assert num_experts % ep_size == 0. vLLM refuses no such split (determine_expert_map gives the first
// num_experts % ep ranks one expert more), so its deployments are not asked. It panics unless ep is
// positive.
func (m *Model) ExpertEPError(ep int) error {
	mustPositive("ExpertEPError", 1, ep)
	if ep > 1 && m.MoE() && m.Experts%ep != 0 {
		return fmt.Errorf("%s's %d routed experts do not split into %d equal shards", m.Name, m.Experts, ep)
	}
	return nil
}

// kvSplits reports whether tp GPUs hold m's key/value heads evenly: split, or each replicated the same
// number of times.
func (m *Model) kvSplits(tp int) bool {
	kv := m.KVHeads
	return m.MLA() || kv <= 0 || kv%tp == 0 || tp%kv == 0
}

// linearSplits reports whether tp GPUs take equal shares of m's linear-attention key and value heads.
func (m *Model) linearSplits(tp int) bool {
	return m.LinearLayers == 0 || m.LinearKeyHeads%tp == 0 && m.LinearValueHeads%tp == 0
}

// tpRule states what a TP must do to shard m, and the TPs that do: divide the query heads, and meet
// each other constraint that rules out some divisor of them (the MLP size, the linear-attention heads, the
// key/value heads), so that the rule stated is the one the list follows.
func (m *Model) tpRule() string {
	binds := func(ok func(tp int) bool) bool {
		for tp := 1; tp <= m.Heads; tp++ {
			if m.Heads%tp == 0 && !ok(tp) {
				return true
			}
		}
		return false
	}
	divide := []string{strconv.Itoa(m.Heads)}
	for _, n := range []int{m.Intermediate, m.LinearKeyHeads, m.LinearValueHeads} {
		if n > 0 && binds(func(tp int) bool { return n%tp == 0 }) {
			divide = append(divide, strconv.Itoa(n))
		}
	}
	rule := "TP must divide " + divide[0]
	if k := len(divide); k > 1 {
		rule = "TP must divide " + strings.Join(divide[:k-1], ", ") + " and " + divide[k-1]
	}
	if binds(m.kvSplits) {
		rule += fmt.Sprintf(" and divide or be a multiple of %d", m.KVHeads)
	}
	var tps []string
	for tp := 1; tp <= m.Heads; tp++ {
		if m.shards(tp) {
			tps = append(tps, strconv.Itoa(tp))
		}
	}
	return rule + ": " + strings.Join(tps, ", ")
}
