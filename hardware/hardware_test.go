package hardware_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
)

func mustLookup(t *testing.T, name string) *hardware.System {
	t.Helper()
	s, err := hardware.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"h200_sxm", "h200_sxm"},
		{"h200", "h200_sxm"},
		{"H200", "h200_sxm"},
		{"H200_SXM", "h200_sxm"},
		{"h200-sxm", "h200_sxm"},
		{"NVIDIA H200", "h200_sxm"},
		{"h100", "h100_sxm"},
		{"b200_sxm", "b200_sxm"},
		{"B200", "b200_sxm"},
	}
	for _, tt := range tests {
		s, err := hardware.Lookup(tt.name)
		if err != nil {
			t.Errorf("Lookup(%q): %v", tt.name, err)
			continue
		}
		if s.Name != tt.want {
			t.Errorf("Lookup(%q).Name = %q, want %q", tt.name, s.Name, tt.want)
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	_, err := hardware.Lookup("a100")
	if err == nil {
		t.Fatal(`Lookup("a100") succeeded`)
	}
	for _, want := range []string{`"a100"`, "b200_sxm", "h100_sxm", "h200_sxm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup error %q does not mention %s", err, want)
		}
	}
}

func TestLookupCopies(t *testing.T) {
	s := mustLookup(t, "h200")
	s.FLOPS["bf16"] = 1
	s.MemoryBytes = 1
	if got := mustLookup(t, "h200"); got.FLOPS["bf16"] != 989e12 || got.MemoryBytes != 151397597184 {
		t.Errorf("editing a looked-up system changed the catalog: %+v", got)
	}
}

func TestNames(t *testing.T) {
	if got, want := hardware.Names(), []string{"b200_sxm", "h100_sxm", "h200_sxm"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}

func TestSystems(t *testing.T) {
	tests := []struct {
		name        string
		memory      int64
		bandwidth   float64
		bf16, fp8   float64
		fp4         float64
		nvlink      float64
		interNode   float64
		gpusPerNode int
	}{
		{"h200_sxm", 141 << 30, 4.8e12, 989e12, 1978e12, 0, 450e9, 50e9, 8},
		{"h100_sxm", 80 << 30, 3.35e12, 989.5e12, 1979e12, 0, 450e9, 50e9, 8},
		{"b200_sxm", 180 << 30, 8e12, 2.25e15, 4.5e15, 9e15, 900e9, 50e9, 8},
	}
	for _, tt := range tests {
		s := mustLookup(t, tt.name)
		got := []float64{float64(s.MemoryBytes), s.MemBandwidth, s.FLOPS["bf16"], s.FLOPS["fp16"], s.FLOPS["fp8"],
			s.FLOPS["int8"], s.FLOPS["fp4"], s.NVLinkBandwidth, s.InterNodeBandwidth, float64(s.GPUsPerNode),
			float64(s.OtherMemBytes)}
		want := []float64{float64(tt.memory), tt.bandwidth, tt.bf16, tt.bf16, tt.fp8, tt.fp8, tt.fp4, tt.nvlink,
			tt.interNode, float64(tt.gpusPerNode), 3.5 * (1 << 30)}
		if !slices.Equal(got, want) {
			t.Errorf("%s: memory, bandwidth, bf16, fp16, fp8, int8, fp4, nvlink, inter-node, gpus/node, other mem =\n%v, want\n%v",
				tt.name, got, want)
		}
	}
}

// TestH200MatchesAIConfigurator checks the built-in h200_sxm against AIConfigurator's file, value for value.
func TestH200MatchesAIConfigurator(t *testing.T) {
	const path = "testdata/h200_sxm.yaml"
	// The copy in testdata is the shared data file, unchanged.
	if shared, err := os.ReadFile("../../shared/data/aiconfigurator/h200_sxm.yaml"); err == nil {
		local, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(local, shared) {
			t.Errorf("%s differs from ../../shared/data/aiconfigurator/h200_sxm.yaml", path)
		}
	}
	got, err := hardware.LoadAIConfigurator(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustLookup(t, "h200_sxm"); !reflect.DeepEqual(got, want) {
		t.Errorf("LoadAIConfigurator(%s) =\n%+v, want\n%+v", path, *got, *want)
	}
}

func TestLoadAIConfiguratorErrors(t *testing.T) {
	h200, err := os.ReadFile("testdata/h200_sxm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml, want string
	}{
		{"no-capacity", strings.Replace(string(h200), "mem_capacity:", "unused_capacity:", 1), `missing required key "gpu.mem_capacity"`},
		{"no-flops", strings.Replace(string(h200), "bfloat16_tc_flops:", "unused_flops:", 1), `"gpu.bfloat16_tc_flops"`},
		{"two", strings.NewReplacer("mem_bw:", "unused_bw:", "other_mem:", "unused_mem:").Replace(string(h200)),
			`missing required keys ["gpu.mem_bw" "misc.other_mem"]`},
		{"syntax", "gpu: [", "yaml"},
		{"zero", strings.Replace(string(h200), "num_gpus_per_node: 8", "num_gpus_per_node: 0", 1), "must be positive"},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), tt.name+".yaml")
		if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := hardware.LoadAIConfigurator(path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error = %v, want one containing %q and the path", tt.name, err, tt.want)
		}
	}
}

func TestKVBlocks(t *testing.T) {
	h200 := mustLookup(t, "h200")
	tests := []struct {
		name      string
		sys       *hardware.System
		weights   int64
		kvPerTok  int
		blockSize int
		util      float64
		want      int
	}{
		// llama-3.1-8b, bf16, TP 1, block 16, utilization 0.9 on an H200:
		//   151,397,597,184 B × 0.9         = 136,257,837,465 B (rounded down)
		//   − 16,060,522,496 B weights       (8,030,261,248 params × 2 B)
		//   − 3,758,096,384 B reserve        (other_mem)
		//   = 116,439,218,585 B for the KV cache
		//   / 2,097,152 B per block          (16 tokens × 131,072 B)
		//   = 55,522 blocks (888,352 tokens), 1,145,241 B left over.
		{"llama-3.1-8b", h200, 16060522496, 131072, 16, 0.9, 55522},
		// TP 2: 8,030,527,488 B weights and 65,536 B/token per GPU:
		// (136,257,837,465 − 8,030,527,488 − 3,758,096,384) / (16 × 65,536) = 118,703.
		{"llama-3.1-8b tp2", h200, 8030527488, 65536, 16, 0.9, 118703},
		// Exactly one block left.
		{"one block", &hardware.System{Name: "tiny", MemoryBytes: 1000, OtherMemBytes: 100}, 800, 10, 10, 1, 1},
	}
	for _, tt := range tests {
		got, err := hardware.KVBlocks(tt.sys, tt.weights, tt.kvPerTok, tt.blockSize, tt.util)
		if err != nil || got != tt.want {
			t.Errorf("%s: KVBlocks = %d, %v, want %d", tt.name, got, err, tt.want)
		}
	}
}

// TestKVBlocksFromModel derives the inputs from the model package, as --num-gpu-blocks auto does.
func TestKVBlocksFromModel(t *testing.T) {
	m, err := model.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	got, err := hardware.KVBlocks(mustLookup(t, "h200"), m.WeightBytes(2, 1), m.KVBytesPerToken(2, 1), 16, 0.9)
	if err != nil || got != 55522 {
		t.Errorf("KVBlocks(llama-3.1-8b on h200) = %d, %v, want 55522", got, err)
	}
}

func TestKVBlocksErrors(t *testing.T) {
	h200 := mustLookup(t, "h200")
	llama70b, err := model.Lookup("llama-3.1-70b")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		sys       *hardware.System
		weights   int64
		kvPerTok  int
		blockSize int
		util      float64
		want      []string
	}{
		// llama-3.1-70b in bf16 on one H200: 141,107,412,992 B of weights exceed the
		// 136,257,837,465 B budget before the reserve.
		{"too big", h200, llama70b.WeightBytes(2, 1), llama70b.KVBytesPerToken(2, 1), 16, 0.9,
			[]string{"does not fit on h200_sxm", "151397597184 B × 0.9", "141107412992 B weights", "3758096384 B reserve",
				"= -8607671911 B", "5242880 B"}},
		{"less than a block", &hardware.System{Name: "tiny", MemoryBytes: 1000, OtherMemBytes: 100}, 801, 10, 10, 1,
			[]string{"= 99 B, less than one KV block of 100 B"}},
		{"no system", nil, 0, 1, 1, 0.9, []string{"no system"}},
		{"utilization 0", h200, 0, 1, 16, 0, []string{"utilization 0"}},
		{"utilization 1.5", h200, 0, 1, 16, 1.5, []string{"utilization 1.5"}},
		{"block size", h200, 0, 1, 0, 0.9, []string{"block size 0"}},
		{"kv bytes", h200, 0, 0, 16, 0.9, []string{"KV bytes per token 0"}},
		{"weights", h200, -1, 1, 16, 0.9, []string{"weight bytes -1"}},
	}
	for _, tt := range tests {
		_, err := hardware.KVBlocks(tt.sys, tt.weights, tt.kvPerTok, tt.blockSize, tt.util)
		if err == nil {
			t.Errorf("%s: KVBlocks succeeded", tt.name)
			continue
		}
		for _, want := range tt.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, want)
			}
		}
	}
}

func ExampleKVBlocks() {
	m, _ := model.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	h200, _ := hardware.Lookup("h200")
	blocks, err := hardware.KVBlocks(h200, m.WeightBytes(2, 1), m.KVBytesPerToken(2, 1), 16, 0.9)
	fmt.Println(blocks, err)
	// Output: 55522 <nil>
}
