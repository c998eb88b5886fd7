package config

import (
	"fmt"
	"io"
	"maps"
	"os"
	"strconv"

	"github.com/mocker-sim/mocker/workload"
)

// Bounds on settings that size memory: each engine rank (a worker's data-parallel rank) holds its
// scheduler and KV pool, whose bookkeeping grows with the blocks in use: an idle live worker takes
// ~64 KiB (its engine, Prometheus series and goroutine: live's TestIdleWorkersAreSmall), and a rank
// ~5 MiB more once mocker's default pool of 55,522 blocks is full (prefix caching on: ~100 B a block),
// so MaxRanks ranks so full hold ~5 GiB.
const (
	MaxRanks       = 1024    // engine ranks in all: (--workers, or --prefill-workers + --decode-workers) × --dp-size
	maxConfigBytes = 1 << 20 // a settings file; /dev/zero is refused, not read until memory runs out

	maxRequestBodyMB = 1024

	// rankMemory says why MaxRanks bounds the ranks, in their errors.
	rankMemory = "an engine rank holds ~100 B per KV block in use, ~5 MiB per 55k blocks"
)

// settingError is an invalid setting, with the key Validate names the file and line of.
type settingError struct{ key, msg string }

func (e *settingError) Error() string { return e.msg }

// bad is the error of setting name, of value v, with what is wrong with it.
func bad(name string, v any, want string) error {
	return &settingError{name, fmt.Sprintf("%s %v: %s", name, v, want)}
}

// Given records that key was set explicitly, from where ("config FILE line N"; "" for a flag), so
// Validate can name the place and refuse settings that contradict each other. A flag given after
// Load replaces the file's value, and its place.
func (c *Config) Given(key, where string) {
	if c.given == nil {
		c.given = map[string]string{}
	}
	c.given[key] = where
}

// Drop returns key's setting to its default and forgets that it was given: a file's setting that a
// command-line flag overrides under another name (--model-config over the file's model:).
func (c *Config) Drop(key string) {
	d := Default()
	c.fieldsByKey()[key].Set(d.fieldsByKey()[key].Value)
	delete(c.given, key)
}

// GivenKeys are the settings given explicitly (Given), each with where it came from ("" for a flag), as
// a copy: what another process needs, with the settings' values, to rebuild the same configuration.
func (c *Config) GivenKeys() map[string]string { return maps.Clone(c.given) }

// Where says, for an error, which file and line gave key (" (config run.yaml line 3)"), if a --config
// file did, else nothing.
func (c *Config) Where(key string) string {
	if w := c.given[key]; w != "" {
		return " (" + w + ")"
	}
	return ""
}

func (c *Config) isGiven(key string) bool {
	_, ok := c.given[key]
	return ok
}

// readConfig reads a settings file of at most maxConfigBytes.
func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, FileError("config", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	switch {
	case err != nil:
		return nil, FileError("config", path, fmt.Errorf("config %s: %w", path, err))
	case len(data) > maxConfigBytes:
		return nil, fmt.Errorf("config %s: larger than %d KiB (not a settings file?)", path, maxConfigBytes>>10)
	}
	return data, nil
}

// validateBounds refuses sizes that would exhaust memory and settings that contradict each other.
func (c *Config) validateBounds() error {
	workers, key := c.Workers, "workers"
	if c.PrefillWorkers > 0 || c.DecodeWorkers > 0 {
		workers, key = c.PrefillWorkers+c.DecodeWorkers, "prefill-workers"
	}
	switch {
	case (c.PrefillWorkers > 0 || c.DecodeWorkers > 0) && (c.isGiven("workers") || c.Workers != 1):
		return bad("workers", c.Workers, "contradicts --prefill-workers/--decode-workers (aggregated or disaggregated: give one)")
	case c.Workers > MaxRanks || c.PrefillWorkers > MaxRanks || c.DecodeWorkers > MaxRanks || c.DPSize > MaxRanks:
		for _, s := range []struct {
			key string
			v   int
		}{{"workers", c.Workers}, {"prefill-workers", c.PrefillWorkers}, {"decode-workers", c.DecodeWorkers}, {"dp-size", c.DPSize}} {
			if s.v > MaxRanks {
				return bad(s.key, s.v, fmt.Sprintf("at most %d (%s)", MaxRanks, rankMemory))
			}
		}
	case key == "workers" && workers > 0 && c.DPSize > 0 && workers*c.DPSize > MaxRanks: // disaggregated: validateRoles
		return bad(key, workers, fmt.Sprintf("× dp-size %d is %d engine ranks; at most %d (%s)", c.DPSize, workers*c.DPSize, MaxRanks, rankMemory))
	case c.TraceBlockSize > workload.MaxTokens:
		return bad("trace-block-size", c.TraceBlockSize, fmt.Sprintf("at most %d", workload.MaxTokens))
	case c.MaxModelLen > workload.MaxTokens:
		return bad("max-model-len", c.MaxModelLen, fmt.Sprintf("at most %d", workload.MaxTokens))
	case c.MaxRequestBodyMB > maxRequestBodyMB:
		// Beyond ~8.8e12 MiB the byte count overflows int64.
		return bad("max-request-body-mb", c.MaxRequestBodyMB, fmt.Sprintf("at most %d (a prompt of %d tokens is far less)", maxRequestBodyMB, workload.MaxTokens))
	}
	// vLLM reads PYTHONHASHSEED as Python does: an integer in [0, 2^32 − 1] (Python's "random" would
	// make the hashes differ from run to run).
	if _, err := strconv.ParseUint(c.KVHashSeed, 10, 32); err != nil {
		return bad("kv-hash-seed", strconv.Quote(c.KVHashSeed), "want an integer in [0, 4294967295], as PYTHONHASHSEED")
	}
	return nil
}
