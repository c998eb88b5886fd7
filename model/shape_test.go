package model_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

// TestShapeDiff: a checkpoint's config.json of a catalog model's architecture, in a folder of another
// name, computes that model's passes; one layer more is named, with both values.
func TestShapeDiff(t *testing.T) {
	llama := mustLookup(t, "llama-3.1-8b")
	read, err := model.FromHFConfig("testdata/llama-3.1-8b/config.json")
	if err != nil {
		t.Fatal(err)
	}
	read.Name = "Meta-Llama-3.1-8B-Instruct"
	if d := llama.ShapeDiff(read); d != "" {
		t.Errorf("llama-3.1-8b's config.json: ShapeDiff %q, want none", d)
	}
	read.Layers = 33
	if d, want := llama.ShapeDiff(read), "num_hidden_layers 33, not 32"; d != want {
		t.Errorf("33 layers: ShapeDiff %q, want %q", d, want)
	}
	if d, want := llama.ShapeDiff(mustLookup(t, "qwen3-32b")), "num_hidden_layers 64, not 32"; d != want {
		t.Errorf("qwen3-32b: ShapeDiff %q, want %q", d, want)
	}
	read.Layers = 32
	read.QKNorm = true
	if d, want := llama.ShapeDiff(read), "QK norm per head true, not false"; d != want {
		t.Errorf("QK norm: ShapeDiff %q, want %q", d, want)
	}
}

// TestShapeDiffFields: every field of Model either decides the passes (ShapeDiff sees it change) or is
// one of those said not to; a field added to Model fails here until it is sorted into one.
func TestShapeDiffFields(t *testing.T) {
	notPasses := []string{"Name", "Dtype", "Quantization", "MoEQuantization", "MaxPositions", "BOS", "AddsBOS",
		"ReplyHeader", "TiedEmbeddings", "QKVBias", "OBias", "MLPBias", "RouterBias", "Sinks"}
	base := mustLookup(t, "llama-3.1-8b")
	typ := reflect.TypeOf(*base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		edited := *base
		v := reflect.ValueOf(&edited).Elem().Field(i)
		switch v.Kind() {
		case reflect.Int:
			v.SetInt(v.Int() + 7)
		case reflect.Uint32:
			v.SetUint(v.Uint() + 7)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.String:
			v.SetString(v.String() + "x")
		default:
			t.Fatalf("field %s of kind %s: sort it here", f.Name, v.Kind())
		}
		decides, listed := base.ShapeDiff(&edited) != "", slices.Contains(notPasses, f.Name)
		if decides == listed {
			t.Errorf("field %s: ShapeDiff sees it change %v, and it is listed as not deciding the passes %v", f.Name, decides, listed)
		}
	}
}
