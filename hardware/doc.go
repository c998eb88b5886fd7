// Package hardware describes the GPU systems mocker simulates — memory, bandwidths, tensor-core peaks,
// interconnect — and sizes the KV cache that fits beside the weights.
//
// Start with System and Lookup (systems.go); KVBlocks (memory.go) is what --num-gpu-blocks auto
// computes. The built-in systems carry AIConfigurator's names (h100_sxm, h200_sxm, b200_sxm);
// LoadAIConfigurator reads any of its system YAML files (systems/<name>.yaml) for the others.
//
// Units are plain SI: bytes, bytes per second, floating-point operations per second. Bandwidths are per
// GPU and per direction. FLOPS are dense tensor-core peaks, without the 2:4 structured-sparsity doubling
// datasheets quote first.
package hardware
