package sched

import "fmt"

// ParseEnum returns the value s names in values, or an error naming the flag, s and want (the values the
// flag takes, as users should read them), so every scheduler's flags are refused alike.
func ParseEnum[T any](flag, want, s string, values map[string]T) (T, error) {
	if v, ok := values[s]; ok {
		return v, nil
	}
	var zero T
	return zero, fmt.Errorf("%s %s: want %s", flag, s, want)
}

// ValidatePool reports the first invalid one of the options every scheduler has, naming its flag:
// sizeFlag names the tokens per KV block (or page), size.
func ValidatePool(sizeFlag string, size, blocks, maxSeqs, maxModelLen int) error {
	switch {
	case size < 1:
		return fmt.Errorf("%s %d: must be at least 1", sizeFlag, size)
	case blocks < 1:
		return fmt.Errorf("num-gpu-blocks %d: must be at least 1", blocks)
	case maxSeqs < 0:
		return fmt.Errorf("max-num-seqs %d: must not be negative", maxSeqs)
	case maxModelLen < 0:
		return fmt.Errorf("max-model-len %d: must not be negative", maxModelLen)
	}
	return nil
}
