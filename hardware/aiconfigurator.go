package hardware

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// aicSystem is the part of an AIConfigurator system YAML (systems/<name>.yaml) that System holds.
// Pointers tell a missing key from zero.
type aicSystem struct {
	GPU struct {
		MemBW        *float64 `yaml:"mem_bw"`
		MemBWScaling *float64 `yaml:"mem_bw_empirical_scaling_factor"`
		MemLatency   *float64 `yaml:"mem_empirical_constant_latency"` // seconds
		MemCapacity  *int64   `yaml:"mem_capacity"`
		BF16FLOPS    *float64 `yaml:"bfloat16_tc_flops"`
		FP16FLOPS    *float64 `yaml:"float16_tc_flops"`
		INT8FLOPS    *float64 `yaml:"int8_tc_flops"`
		FP8FLOPS     *float64 `yaml:"fp8_tc_flops"`
		FP4FLOPS     *float64 `yaml:"fp4_tc_flops"`
	} `yaml:"gpu"`
	Node struct {
		GPUsPerNode *int     `yaml:"num_gpus_per_node"`
		InterNodeBW *float64 `yaml:"inter_node_bw"`
		IntraNodeBW *float64 `yaml:"intra_node_bw"`
		PCIeBW      *float64 `yaml:"pcie_bw"`
		P2PLatency  *float64 `yaml:"p2p_latency"` // seconds
	} `yaml:"node"`
	Misc struct {
		NCCLMem  map[int]int64 `yaml:"nccl_mem"`
		OtherMem *int64        `yaml:"other_mem"`
	} `yaml:"misc"`
}

// LoadAIConfigurator reads an AIConfigurator system YAML file; the System is named after the file
// ("h200_sxm.yaml" → "h200_sxm"). Keys System does not hold are ignored, as AIConfigurator adds keys over
// time; a missing key System needs is an error naming it and the file. AIConfigurator lists one 16-bit
// tensor-core rate (bfloat16_tc_flops or float16_tc_flops); it stands for both, which are equal on the
// GPUs it describes.
func LoadAIConfigurator(path string) (*System, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hardware: %w", err)
	}
	var a aicSystem
	if err := yaml.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("hardware: %s: %w", path, err)
	}
	var missing []string
	need := func(key string, v *float64) float64 {
		if v == nil {
			missing = append(missing, key)
			return 0
		}
		return *v
	}
	opt := func(v *float64) float64 {
		if v == nil {
			return 0
		}
		return *v
	}
	seconds := func(v *float64) time.Duration { return time.Duration(opt(v) * float64(time.Second)) }

	s := &System{
		Name:               strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)),
		MemBandwidth:       need("gpu.mem_bw", a.GPU.MemBW),
		NVLinkBandwidth:    need("node.intra_node_bw", a.Node.IntraNodeBW),
		InterNodeBandwidth: need("node.inter_node_bw", a.Node.InterNodeBW),
		PCIeBandwidth:      opt(a.Node.PCIeBW),
		MemBWScaling:       opt(a.GPU.MemBWScaling),
		MemLatency:         seconds(a.GPU.MemLatency),
		P2PLatency:         seconds(a.Node.P2PLatency),
		NCCLMemBytes:       a.Misc.NCCLMem,
		FLOPS:              map[string]float64{},
	}
	if a.GPU.MemCapacity == nil {
		missing = append(missing, "gpu.mem_capacity")
	} else {
		s.MemoryBytes = *a.GPU.MemCapacity
	}
	if a.Node.GPUsPerNode == nil {
		missing = append(missing, "node.num_gpus_per_node")
	} else {
		s.GPUsPerNode = *a.Node.GPUsPerNode
	}
	if a.Misc.OtherMem == nil {
		missing = append(missing, "misc.other_mem")
	} else {
		s.OtherMemBytes = *a.Misc.OtherMem
	}
	half := a.GPU.BF16FLOPS
	if half == nil {
		half = a.GPU.FP16FLOPS
	}
	if half == nil {
		missing = append(missing, "gpu.bfloat16_tc_flops")
	} else {
		s.FLOPS["bf16"], s.FLOPS["fp16"] = *half, *half
	}
	for key, v := range map[string]*float64{"fp8": a.GPU.FP8FLOPS, "int8": a.GPU.INT8FLOPS, "fp4": a.GPU.FP4FLOPS} {
		if v != nil {
			s.FLOPS[key] = *v
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return nil, fmt.Errorf("hardware: %s: missing required key %q", path, missing[0])
	default:
		return nil, fmt.Errorf("hardware: %s: missing required keys %q", path, missing)
	}
	if s.MemoryBytes <= 0 || s.MemBandwidth <= 0 || s.GPUsPerNode <= 0 {
		return nil, fmt.Errorf("hardware: %s: mem_capacity %d, mem_bw %v and num_gpus_per_node %d must be positive",
			path, s.MemoryBytes, s.MemBandwidth, s.GPUsPerNode)
	}
	return s, nil
}
