package hardware

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// System is one kind of GPU server: per-GPU memory and compute, and how GPUs talk within and across
// nodes.
type System struct {
	Name               string             // AIConfigurator's system name: "h100_sxm", "h200_sxm", "b200_sxm"
	MemoryBytes        int64              // HBM per GPU
	MemBandwidth       float64            // HBM bytes/s per GPU (peak)
	FLOPS              map[string]float64 // dense tensor-core peak by dtype: "bf16", "fp16", "fp8", "int8", "fp4" where it exists
	NVLinkBandwidth    float64            // bytes/s per GPU, one direction
	GPUsPerNode        int
	InterNodeBandwidth float64 // bytes/s per GPU, one direction (one NIC per GPU)
	PCIeBandwidth      float64 // bytes/s per GPU, one direction
	// OtherMemBytes is the memory AIConfigurator sets aside per GPU for the runtime, activations and
	// whatever else its memory model misses (other_mem).
	OtherMemBytes int64

	// AIConfigurator's empirical corrections ("nonofficial", fitted to observations): achieved HBM
	// bandwidth is MemBandwidth × MemBWScaling, each memory-bound op costs MemLatency more, and a
	// point-to-point transfer P2PLatency.
	MemBWScaling float64
	MemLatency   time.Duration
	P2PLatency   time.Duration
	// NCCLMemBytes is NCCL's buffer memory per GPU by number of GPUs in the communicator (nccl_mem).
	NCCLMemBytes map[int]int64
}

const gib = 1 << 30

// aicMisc are the empirical settings AIConfigurator's h100_sxm, h200_sxm and b200_sxm YAML files share
// (misc.nccl_mem, misc.other_mem, gpu.mem_bw_empirical_scaling_factor, gpu.mem_empirical_constant_latency,
// node.p2p_latency).
func aicMisc(s System) *System {
	s.OtherMemBytes = 3758096384 // 3.5 GiB
	s.MemBWScaling = 0.8
	s.MemLatency = 3 * time.Microsecond
	s.P2PLatency = 10 * time.Microsecond
	s.NCCLMemBytes = map[int]int64{1: 0, 2: 358612992, 4: 411041792, 8: 411041792}
	return &s
}

// systems are the built-in systems, by name.
var systems = map[string]*System{
	// ../shared/data/aiconfigurator/h200_sxm.yaml (ai-dynamo/aiconfigurator systems/h200_sxm.yaml),
	// value for value; a copy is in testdata. Its mem_capacity is 141 GiB (NVIDIA's "141GB"; the
	// driver of ../shared/data/SOURCES.md §5 reports 143,771 MiB). The file gives no fp16 rate:
	// Hopper's fp16 and bf16 tensor-core rates are equal (datasheet: 1,979 TFLOPS each with sparsity).
	"h200_sxm": aicMisc(System{
		Name:               "h200_sxm",
		MemoryBytes:        151397597184,
		MemBandwidth:       4.8e12,
		FLOPS:              map[string]float64{"bf16": 989e12, "fp16": 989e12, "fp8": 1978e12, "int8": 1978e12},
		NVLinkBandwidth:    450e9,
		GPUsPerNode:        8,
		InterNodeBandwidth: 50e9,
		PCIeBandwidth:      64e9,
	}),
	// NVIDIA H100 datasheet, SXM column (nvidia.com/en-us/data-center/h100): 80GB HBM3 at 3.35TB/s;
	// BF16 and FP16 1,979 TFLOPS and FP8 and INT8 3,958 with sparsity, so half that dense; NVLink
	// 900GB/s (both directions together); PCIe Gen5 (64GB/s a direction). The 80GB are 80 GiB of HBM,
	// as AIConfigurator's h100_sxm.yaml counts them. Inter-node: a DGX H100 has one 400Gb/s ConnectX-7
	// per GPU (AIConfigurator assumes half that, 25e9).
	"h100_sxm": aicMisc(System{
		Name:               "h100_sxm",
		MemoryBytes:        80 * gib,
		MemBandwidth:       3.35e12,
		FLOPS:              map[string]float64{"bf16": 989.5e12, "fp16": 989.5e12, "fp8": 1979e12, "int8": 1979e12},
		NVLinkBandwidth:    450e9,
		GPUsPerNode:        8,
		InterNodeBandwidth: 50e9,
		PCIeBandwidth:      64e9,
	}),
	// B200 SXM as shipped in HGX/DGX B200 (nvidia.com/en-us/data-center/hgx, dgx-b200): 8 GPUs with
	// 1,440GB of HBM3e, i.e. 180GB each (the 192GB sometimes quoted is the full package, not enabled
	// here), 8TB/s each; per HGX system FP4 144 PFLOPS, FP8 72, INT8 72 POPS, FP16/BF16 36, all with
	// sparsity, so per GPU dense FP4 9, FP8 4.5, INT8 4.5, BF16 2.25 PFLOPS; NVLink 5 1.8TB/s per GPU
	// (both directions); one 400Gb/s ConnectX-7 per GPU. Memory counted in GiB and PCIe Gen6 (128GB/s)
	// as AIConfigurator's b200_sxm.yaml does.
	"b200_sxm": aicMisc(System{
		Name:               "b200_sxm",
		MemoryBytes:        180 * gib,
		MemBandwidth:       8e12,
		FLOPS:              map[string]float64{"bf16": 2.25e15, "fp16": 2.25e15, "fp8": 4.5e15, "int8": 4.5e15, "fp4": 9e15},
		NVLinkBandwidth:    900e9,
		GPUsPerNode:        8,
		InterNodeBandwidth: 50e9,
		PCIeBandwidth:      128e9,
	}),
}

// Lookup returns a copy of the named built-in system. Names are AIConfigurator's ("h200_sxm"); case,
// hyphens, the "_sxm" suffix and an "NVIDIA " prefix are optional ("h200", "H200", "NVIDIA H200",
// "h200-sxm").
func Lookup(name string) (*System, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimPrefix(n, "nvidia ")
	n = strings.NewReplacer("-", "_", " ", "_").Replace(n)
	s := systems[n]
	if s == nil {
		s = systems[n+"_sxm"]
	}
	if s == nil {
		return nil, fmt.Errorf("hardware: unknown system %q (known: %s; or load an AIConfigurator system YAML)",
			name, strings.Join(Names(), ", "))
	}
	c := *s
	c.FLOPS = maps.Clone(s.FLOPS)
	c.NCCLMemBytes = maps.Clone(s.NCCLMemBytes)
	return &c, nil
}

// Names returns the built-in system names, sorted.
func Names() []string {
	return slices.Sorted(maps.Keys(systems))
}
