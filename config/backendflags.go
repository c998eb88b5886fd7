package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// backendOwn are the settings only some backends read, with those backends: their flags' help begins
// with the same names (a cmd/mocker test holds the two together).
var backendOwn = []struct {
	key      string
	backends []string
	instead  string // what the others read in its place, if anything
}{
	{"vllm-admission", []string{"vllm"}, "trtllm admits by guaranteed_no_evict, sglang by its own budgets"},
	{"max-loras", []string{"vllm", "trtllm"}, "sglang's is --max-loras-per-batch"},
	{"max-cpu-loras", []string{"vllm", "trtllm"}, "sglang keeps --max-loras-per-batch adapters loaded"},
	{"max-loras-per-batch", []string{"sglang"}, "vllm's and trtllm's is --max-loras"},
	{"page-size", []string{"sglang"}, ""},
	{"sglang-schedule-policy", []string{"sglang"}, ""},
	{"sglang-max-prefill-tokens", []string{"sglang"}, ""},
	{"sglang-chunked-prefill-size", []string{"sglang"}, ""},
	{"sglang-clip-max-new-tokens", []string{"sglang"}, ""},
	{"sglang-num-reserved-decode-tokens", []string{"sglang"}, ""},
	{"sglang-schedule-conservativeness", []string{"sglang"}, ""},
	{"sglang-enable-mixed-chunk", []string{"sglang"}, ""},
	{"sglang-overlap-schedule", []string{"sglang"}, ""},
}

// BackendOwn are the backends that read key's setting, nil for a setting every backend reads.
func BackendOwn(key string) []string {
	for _, o := range backendOwn {
		if o.key == key {
			return o.backends
		}
	}
	return nil
}

// UnreadByBackends refuses a backend's own setting given where none of backends reads it:
// --sglang-schedule-policy lpm on vLLM would change nothing, silently.
// Validate checks it for the deployment's own backend.
func (c *Config) UnreadByBackends(backends ...string) error { return c.placed(c.unreadBy(backends)) }

func (c *Config) validateBackendFlags() error {
	if c.role != "" {
		return nil // one pool's settings (ForRole): the whole was checked
	}
	return c.unreadBy([]string{c.Backend})
}

// unreadBy refuses a backend's own setting, shared or a pool's (--prefill-KEY), that none of backends reads.
func (c *Config) unreadBy(backends []string) error {
	for _, o := range backendOwn {
		if slices.ContainsFunc(backends, func(b string) bool { return slices.Contains(o.backends, b) }) {
			continue
		}
		key, v := o.key, any(nil)
		if c.isGiven(key) {
			v = c.fieldsByKey()[key].Interface()
		}
		for _, r := range Roles {
			if v == nil && c.isGiven(r+"-"+o.key) {
				key, v = r+"-"+o.key, c.Role(r).Get(o.key)
			}
		}
		if v == nil {
			continue
		}
		why := fmt.Sprintf("applies to --backend %s, and the deployment runs %s", strings.Join(o.backends, " or "), strings.Join(backends, " and "))
		if o.instead != "" {
			why += " (" + o.instead + ")"
		}
		return bad(key, v, why)
	}
	return nil
}

// OnBackend is c deployed on backend: a setting only other backends read, shared or a pool's, no longer
// counts as given, so a sweep over backends (recommend's --backends) applies each backend's own settings
// to its own deployments and refuses none of the others for them. Their values stay and are read by no
// engine.
func (c Config) OnBackend(backend string) Config {
	c.Backend = backend
	c.given = maps.Clone(c.given)
	for _, o := range backendOwn {
		if !slices.Contains(o.backends, backend) {
			delete(c.given, o.key)
			for _, r := range Roles {
				delete(c.given, r+"-"+o.key)
			}
		}
	}
	return c
}

// HoldsOnSome is nil when check accepts c deployed on one of backends (OnBackend) at least, else the
// first backend's error: a sweep over backends takes a setting some backend it sweeps can run.
func (c Config) HoldsOnSome(backends []string, check func(*Config) error) error {
	var first error
	for _, b := range backends {
		on := c.OnBackend(b)
		err := check(&on)
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}
