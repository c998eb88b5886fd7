package model_test

import (
	"encoding/csv"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"llama-3.1-8b", "llama-3.1-8b"},
		{"LLAMA-3.1-8B", "llama-3.1-8b"},
		{" llama-3.1-8b ", "llama-3.1-8b"},
		{"meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"},
		{"meta-llama/llama-3.1-8b-instruct", "llama-3.1-8b"},
		{"nvidia/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b"},
		{"meta-llama/Llama-3.1-70B", "llama-3.1-70b"},
		{"Qwen/Qwen3-32B", "qwen3-32b"},
		{"Qwen/Qwen3-235B-A22B-FP8", "qwen3-235b-a22b"},
		{"qwen/qwen3-30b-a3b", "qwen3-30b-a3b"},
		{"openai/gpt-oss-120b", "gpt-oss-120b"},
		{"deepseek-ai/DeepSeek-V3", "deepseek-v3"},
		{"deepseek-ai/DeepSeek-R1", "deepseek-r1"},
		{"MiniMaxAI/MiniMax-M2.5", "minimax-m2.5"},
		{"minimaxai/minimax-m2.5", "minimax-m2.5"},
	}
	for _, tt := range tests {
		m, err := model.Lookup(tt.name)
		if err != nil {
			t.Errorf("Lookup(%q): %v", tt.name, err)
			continue
		}
		if m.Name != tt.want {
			t.Errorf("Lookup(%q).Name = %q, want %q", tt.name, m.Name, tt.want)
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	_, err := model.Lookup("llama-9")
	if err == nil {
		t.Fatal(`Lookup("llama-9") succeeded`)
	}
	for _, want := range append([]string{`"llama-9"`}, model.Names()...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Lookup error %q does not mention %s", err, want)
		}
	}
}

// TestLookupCopies checks that callers cannot change the catalog through a looked-up model.
func TestLookupCopies(t *testing.T) {
	mustLookup(t, "llama-3.1-8b").Layers = 1
	if got := mustLookup(t, "llama-3.1-8b").Layers; got != 32 {
		t.Errorf("after editing a looked-up model, Lookup gives Layers = %d, want 32", got)
	}
}

func TestNames(t *testing.T) {
	want := []string{"deepseek-r1", "deepseek-v3", "glm-5", "gpt-oss-120b", "kimi-k2.5", "llama-3.1-70b", "llama-3.1-8b",
		"minimax-m2.5", "qwen3-235b-a22b", "qwen3-30b-a3b", "qwen3-32b", "qwen3.5-397b-a17b"}
	if got := model.Names(); !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
}

func TestCatalogValid(t *testing.T) {
	for _, name := range model.Names() {
		m := mustLookup(t, name)
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		ids := model.HFIDs(name)
		if len(ids) == 0 {
			t.Errorf("HFIDs(%q) is empty", name)
		}
		for _, id := range ids {
			got := mustLookup(t, id)
			got.Quantization = m.Quantization // a quantized checkpoint's id: TestLookupCheckpointFormat
			if *got != *m {
				t.Errorf("Lookup(%q) = %+v, want %+v", id, got, m)
			}
		}
	}
}

// TestSiliconModels checks which models of AIConfigurator's measured H200 points the catalog covers.
func TestSiliconModels(t *testing.T) {
	const path = "../../shared/data/aiconfigurator/silicon_h200_dev.csv"
	f, err := os.Open(path)
	if err != nil {
		t.Skipf("shared data not present: %v", err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(rows[0], "model_path")
	if col < 0 {
		t.Fatalf("%s: no model_path column", path)
	}
	var covered, missing []string
	for _, row := range rows[1:] {
		id := row[col]
		if slices.Contains(covered, id) || slices.Contains(missing, id) {
			continue
		}
		if _, err := model.Lookup(id); err == nil {
			covered = append(covered, id)
		} else {
			missing = append(missing, id)
		}
	}
	slices.Sort(covered)
	slices.Sort(missing)
	wantCovered := []string{"MiniMaxAI/MiniMax-M2.5", "Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3.5-397B-A17B", "deepseek-ai/DeepSeek-R1",
		"deepseek-ai/DeepSeek-V3", "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-8B-Instruct",
		"moonshotai/Kimi-K2.5", "nvidia/Llama-3.1-8B-Instruct-FP8", "openai/gpt-oss-120b", "zhipuai/GLM-5"}
	var wantMissing []string
	if !slices.Equal(covered, wantCovered) || !slices.Equal(missing, wantMissing) {
		t.Errorf("catalog covers %q and misses %q, want %q and %q", covered, missing, wantCovered, wantMissing)
	}
}

func ExampleLookup() {
	m, err := model.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Name, m.Params(), m.KVBytesPerToken(2, 1), m.WeightBytes(2, 1))
	// Output: llama-3.1-8b 8030261248 131072 16060522496
}

// The catalog gives what vLLM reads from a checkpoint besides its shapes: the context it serves by
// default, and the BOS its tokenizer adds (Llama-3 and DeepSeek-V3 add one, Qwen3 none).
func TestCatalogContextAndBOS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		positions int
		bos       uint32
		adds      bool
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", 131072, 128000, true},
		{"qwen3-32b", 40960, 0, false},
		{"deepseek-r1", 163840, 0, true},
		{"gpt-oss-120b", 131072, 0, false},
	} {
		m := mustLookup(t, tc.name)
		if m.MaxPositions != tc.positions || m.BOS != tc.bos || m.AddsBOS != tc.adds {
			t.Errorf("%s: MaxPositions %d, BOS %d (%v); want %d, %d (%v)", tc.name, m.MaxPositions, m.BOS, m.AddsBOS, tc.positions, tc.bos, tc.adds)
		}
	}
}

// TestLookupCheckpointFormat checks that an id naming a quantized checkpoint of a catalog model
// gives that model in the checkpoint's format, and its other ids the model's own.
func TestLookupCheckpointFormat(t *testing.T) {
	tests := []struct{ id, want string }{
		{"nvidia/Llama-3.1-8B-Instruct-FP8", "fp8"},
		{"NVIDIA/llama-3.1-8b-instruct-fp8", "fp8"},
		{"meta-llama/Llama-3.1-8B-Instruct", ""},
		{"llama-3.1-8b", ""},
		{"Qwen/Qwen3-32B-FP8", "fp8_block"},
		{"Qwen/Qwen3-32B", ""},
		{"Qwen/Qwen3-30B-A3B-FP8", "fp8_block"},
		{"Qwen/Qwen3-235B-A22B-FP8", "fp8_block"},
		{"Qwen/Qwen3-235B-A22B", ""},
		{"zai-org/GLM-5-FP8", "fp8_block"},
		{"zhipuai/GLM-5", ""},
		{"deepseek-ai/DeepSeek-R1", "fp8_block"}, // published only in fp8: the model's own format
	}
	for _, tt := range tests {
		if got := mustLookup(t, tt.id).Quantization; got != tt.want {
			t.Errorf("Lookup(%q).Quantization = %q, want %q", tt.id, got, tt.want)
		}
	}
	if got := mustLookup(t, "llama-3.1-8b").Quantization; got != "" {
		t.Errorf("after looking up the FP8 id, llama-3.1-8b has Quantization %q, want none", got)
	}
}
