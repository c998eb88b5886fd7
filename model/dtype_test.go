package model_test

import (
	"strings"
	"testing"

	"github.com/mocker-sim/mocker/model"
)

func TestDtypeBytes(t *testing.T) {
	tests := []struct {
		name string
		want int
	}{
		{"bfloat16", 2}, {"bf16", 2}, {"BF16", 2}, {"torch.bfloat16", 2},
		{"float16", 2}, {"fp16", 2}, {"half", 2},
		{"float32", 4}, {"fp32", 4},
		{"fp8", 1}, {"fp8_e4m3", 1}, {"fp8_e5m2", 1}, {"fp8_block", 1}, {"int8", 1},
	}
	for _, tt := range tests {
		got, err := model.DtypeBytes(tt.name)
		if err != nil || got != tt.want {
			t.Errorf("DtypeBytes(%q) = %d, %v, want %d", tt.name, got, err, tt.want)
		}
	}
}

func TestDtypeBytesErrors(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"auto", "resolve it to the model's dtype"},
		{"nvfp4", "BytesPerWeight"},
		{"int3", "unknown dtype"},
	}
	for _, tt := range tests {
		_, err := model.DtypeBytes(tt.name)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("DtypeBytes(%q) error = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

func TestBytesPerWeight(t *testing.T) {
	tests := []struct {
		name string
		want float64
	}{
		{"bfloat16", 2}, {"fp8", 1}, {"fp8_block", 1},
		{"mxfp4", 0.53125}, // 4 bits + an 8-bit scale per 32
		{"nvfp4", 0.5625},  // 4 bits + an 8-bit scale per 16
		{"FP4", 0.5625},
	}
	for _, tt := range tests {
		got, err := model.BytesPerWeight(tt.name)
		if err != nil || got != tt.want {
			t.Errorf("BytesPerWeight(%q) = %v, %v, want %v", tt.name, got, err, tt.want)
		}
	}
	if _, err := model.BytesPerWeight("int3"); err == nil {
		t.Error(`BytesPerWeight("int3") succeeded`)
	}
}
