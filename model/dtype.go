package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// dtypeBytes maps the dtype names of HF configs, vLLM's --dtype/--kv-cache-dtype and AIConfigurator's
// quant modes to bytes per element.
var dtypeBytes = map[string]int{
	"float32": 4, "fp32": 4, "float": 4,
	"bfloat16": 2, "bf16": 2,
	"float16": 2, "fp16": 2, "half": 2,
	"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
	"fp8_block": 1, "int8": 1, "int8_wo": 1,
}

// DtypeBytes is the size in bytes of one element of the named dtype, e.g. 2 for "bfloat16" or "fp16",
// 1 for "fp8" or "int8". Names are case-insensitive. "auto" (vLLM's default: the model's dtype) must be
// resolved by the caller, and 4-bit formats have no whole byte size (see BytesPerWeight); both are errors.
func DtypeBytes(name string) (int, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimPrefix(n, "torch.")
	if b, ok := dtypeBytes[n]; ok {
		return b, nil
	}
	if n == "auto" {
		return 0, fmt.Errorf("model: dtype %q: resolve it to the model's dtype first", name)
	}
	if _, ok := subByte[n]; ok {
		return 0, fmt.Errorf("model: dtype %q is not a whole number of bytes; use BytesPerWeight", name)
	}
	return 0, fmt.Errorf("model: unknown dtype %q (known: %s)", name, knownDtypes())
}

// subByte holds bytes per weight of block-scaled 4-bit formats, scales included: MXFP4 stores 32 4-bit
// values with one 8-bit scale (4.25 bits), NVFP4 16 with one 8-bit scale (4.5 bits; its one fp32 scale
// per tensor is ignored).
var subByte = map[string]float64{
	"mxfp4": 4.25 / 8,
	"nvfp4": 4.5 / 8,
	"fp4":   4.5 / 8, // AIConfigurator's "fp4" precision is NVFP4
}

// BytesPerWeight is the memory one weight takes in the named format: DtypeBytes for whole-byte formats
// (per-block scales of fp8_block, one fp32 per 128×128 weights, are ignored), and the 4-bit formats
// "mxfp4", "nvfp4" and "fp4" with their scales. Use it to fill a Precision.
func BytesPerWeight(format string) (float64, error) {
	n := strings.ToLower(strings.TrimSpace(format))
	if b, ok := subByte[n]; ok {
		return b, nil
	}
	b, err := DtypeBytes(format)
	return float64(b), err
}

func knownDtypes() string {
	names := slices.AppendSeq(slices.Collect(maps.Keys(dtypeBytes)), maps.Keys(subByte))
	slices.Sort(names)
	return strings.Join(names, ", ")
}
