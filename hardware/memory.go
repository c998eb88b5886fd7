package hardware

import (
	"errors"
	"fmt"
	"math"
)

// KVBlocks is the number of KV-cache blocks that fit on one GPU of sys — what --num-gpu-blocks "auto"
// computes, as vLLM sizes its cache: the memory it may use (MemoryBytes × utilization, as with
// --gpu-memory-utilization) less the weights it holds and the runtime reserve (OtherMemBytes), divided
// by the bytes of one block (blockSize tokens × kvBytesPerTokenPerGPU), rounded down.
//
// It is an error, naming the numbers, if not even one block fits (the model does not fit), or if an
// argument is out of range.
func KVBlocks(sys *System, weightBytesPerGPU int64, kvBytesPerTokenPerGPU int, blockSize int, utilization float64) (int, error) {
	switch {
	case sys == nil:
		return 0, errors.New("hardware: KVBlocks: no system")
	case !(utilization > 0 && utilization <= 1):
		return 0, fmt.Errorf("hardware: KVBlocks: GPU memory utilization %v is not in (0, 1]", utilization)
	case blockSize <= 0:
		return 0, fmt.Errorf("hardware: KVBlocks: block size %d is not positive", blockSize)
	case kvBytesPerTokenPerGPU <= 0:
		return 0, fmt.Errorf("hardware: KVBlocks: KV bytes per token %d is not positive", kvBytesPerTokenPerGPU)
	case weightBytesPerGPU < 0:
		return 0, fmt.Errorf("hardware: KVBlocks: weight bytes %d are negative", weightBytesPerGPU)
	}
	budget := int64(math.Floor(float64(sys.MemoryBytes) * utilization))
	free := budget - weightBytesPerGPU - sys.OtherMemBytes
	block := int64(blockSize) * int64(kvBytesPerTokenPerGPU)
	if free < block {
		return 0, fmt.Errorf("hardware: model does not fit on %s: %d B × %v utilization − %d B weights − %d B reserve = %d B, less than one KV block of %d B (%d tokens × %d B)",
			sys.Name, sys.MemoryBytes, utilization, weightBytesPerGPU, sys.OtherMemBytes, free, block, blockSize, kvBytesPerTokenPerGPU)
	}
	return int(free / block), nil
}
