package config

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Role is one pool's own engine settings in disaggregated serving, as Dynamo deploys it: the prefill and
// the decode workers are separate engine processes, each started with its own flags (commonly another
// TP and other batch limits). Each field is a Config setting of the same key; nil keeps the shared
// setting. On the command line a key is --prefill-KEY or --decode-KEY; in YAML it sits in a prefill:
// or decode: section.
//
// The model, the block size, the KV cache dtype and the request limits stay shared: the KV a handoff
// moves must mean the same on both sides.
type Role struct {
	TP                             *int     `yaml:"tp"`
	EP                             *int     `yaml:"ep"`
	DPSize                         *int     `yaml:"dp-size"`
	DPAttention                    *bool    `yaml:"dp-attention"`
	NumGPUBlocks                   *int     `yaml:"num-gpu-blocks" auto:"model"`
	GPUMemoryUtilization           *float64 `yaml:"gpu-memory-utilization"`
	MaxNumSeqs                     *int     `yaml:"max-num-seqs" auto:"engine"`
	MaxNumBatchedTokens            *int     `yaml:"max-num-batched-tokens"`
	EnableChunkedPrefill           *bool    `yaml:"enable-chunked-prefill"`
	PreemptionMode                 *string  `yaml:"preemption-mode"`
	VLLMAdmission                  *string  `yaml:"vllm-admission"`
	SGLangSchedulePolicy           *string  `yaml:"sglang-schedule-policy"`
	SGLangMaxPrefillTokens         *int     `yaml:"sglang-max-prefill-tokens"`
	SGLangChunkedPrefillSize       *int     `yaml:"sglang-chunked-prefill-size"`
	SGLangClipMaxNewTokens         *int     `yaml:"sglang-clip-max-new-tokens"`
	SGLangScheduleConservativeness *float64 `yaml:"sglang-schedule-conservativeness"`
	SGLangEnableMixedChunk         *bool    `yaml:"sglang-enable-mixed-chunk"`
	SGLangOverlapSchedule          *bool    `yaml:"sglang-overlap-schedule"`
	Timing                         *string  `yaml:"timing"`
	Profile                        *string  `yaml:"profile"`
	BackendVersion                 *string  `yaml:"backend-version"`
	HostOverheadUs                 *float64 `yaml:"host-overhead-us"`
}

// Roles are the pools that take a Role, in the order their flags are listed.
var Roles = []string{"prefill", "decode"}

// RoleKeys are the settings a pool can set for itself, in the order of Role's fields.
func RoleKeys() []string {
	t := reflect.TypeFor[Role]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("yaml")
	}
	return keys
}

// Role returns the settings of pool name ("prefill" or "decode").
func (c *Config) Role(name string) *Role {
	switch name {
	case "prefill":
		return &c.Prefill
	case "decode":
		return &c.Decode
	}
	panic("config: no role " + name)
}

// field is r's field of key, with whether it takes Auto; ok false for an unknown key.
func (r *Role) field(key string) (f reflect.Value, auto, ok bool) {
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if sf.Tag.Get("yaml") == key {
			_, auto = sf.Tag.Lookup("auto")
			return v.Field(i), auto, true
		}
	}
	return reflect.Value{}, false, false
}

// Keys are the keys r sets, in the order of its fields.
func (r *Role) Keys() []string {
	var keys []string
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		if !v.Field(i).IsNil() {
			keys = append(keys, v.Type().Field(i).Tag.Get("yaml"))
		}
	}
	return keys
}

// Set parses and sets the setting of key as its flag would (an integer setting that takes Auto takes
// "auto").
func (r *Role) Set(key, s string) error {
	f, auto, ok := r.field(key)
	if !ok {
		return fmt.Errorf("unknown per-role key %q", key)
	}
	p := reflect.New(f.Type().Elem())
	var err error
	switch e := p.Elem(); e.Kind() {
	case reflect.Int:
		var n int
		if auto {
			n, err = IntOrAuto(s)
		} else if n, err = strconv.Atoi(s); err != nil {
			err = errors.New("want an integer")
		}
		e.SetInt(int64(n))
	case reflect.Float64:
		var x float64
		if x, err = strconv.ParseFloat(s, 64); err != nil {
			err = errors.New("want a number")
		}
		e.SetFloat(x)
	case reflect.Bool:
		var b bool
		if b, err = strconv.ParseBool(s); err != nil {
			err = errors.New("want true or false")
		}
		e.SetBool(b)
	default:
		e.SetString(s)
	}
	if err == nil {
		f.Set(p)
	}
	return err
}

// Get is the setting of key as its flag prints it; "" when r does not set it.
func (r *Role) Get(key string) string {
	f, auto, ok := r.field(key)
	if !ok || f.IsNil() {
		return ""
	}
	e := f.Elem()
	if auto && e.Int() == 0 {
		return Auto
	}
	return fmt.Sprint(e.Interface())
}

// TypeName names the kind of value key takes, as flags print it.
func (r *Role) TypeName(key string) string {
	f, auto, _ := r.field(key)
	switch {
	case auto:
		return "int|auto"
	case !f.IsValid():
		return ""
	}
	switch f.Type().Elem().Kind() {
	case reflect.Int:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Bool:
		return "bool"
	}
	return "string"
}

// IsBool reports whether key's setting is a bool (a flag that needs no value).
func (r *Role) IsBool(key string) bool {
	f, _, ok := r.field(key)
	return ok && f.Type().Elem().Kind() == reflect.Bool
}

// loadRole reads a prefill: or decode: section: a mapping of per-role keys.
func (c *Config) loadRole(path, name string, v *yaml.Node) error {
	if v.Kind != yaml.MappingNode {
		return fmt.Errorf("config %s line %d: %s: want a mapping of the %s workers' settings (key: value)", path, v.Line, name, name)
	}
	r := c.Role(name)
	seen := map[string]bool{}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		f, auto, ok := r.field(k.Value)
		switch {
		case !ok:
			return fmt.Errorf("config %s line %d: %s: unknown key %q%s (a pool sets %v)", path, k.Line, name, k.Value, didYouMean(k.Value, RoleKeys()), RoleKeys())
		case seen[k.Value]:
			return fmt.Errorf("config %s line %d: %s: key %q given twice", path, k.Line, name, k.Value)
		}
		seen[k.Value] = true
		c.Given(name+"-"+k.Value, fmt.Sprintf("config %s line %d", path, val.Line))
		p := reflect.New(f.Type().Elem())
		if err := (setting{p.Elem(), auto}).decode(val); err != nil {
			return valueErr(path, name+": "+k.Value, val, err)
		}
		f.Set(p)
	}
	return nil
}

// ForRole is c with pool name's own settings in place of the shared ones: the settings of that pool's
// engines.
func (c *Config) ForRole(name string) *Config {
	rc := *c
	rc.Prefill, rc.Decode, rc.role, rc.roleKeys = Role{}, Role{}, name, c.Role(name).Keys()
	fields := rc.fieldsByKey()
	r := reflect.ValueOf(c.Role(name)).Elem()
	for i := range r.NumField() {
		if f := r.Field(i); !f.IsNil() {
			fields[r.Type().Field(i).Tag.Get("yaml")].Set(f.Elem())
		}
	}
	return &rc
}

// Deployed is c on workers aggregated (prefill and decode 0), or on prefill and decode workers
// disaggregated (workers ignored), as a search deploys each shape of its space: the counts replace c's,
// given or not (a search's --workers sizes its shapes and contradicts neither form), and the pools' own
// settings, which only disaggregated workers read, are dropped from an aggregated deployment.
func (c Config) Deployed(workers, prefill, decode int) Config {
	c.given = maps.Clone(c.given)
	for _, key := range []string{"workers", "prefill-workers", "decode-workers"} {
		delete(c.given, key)
	}
	if prefill > 0 || decode > 0 {
		c.Workers, c.PrefillWorkers, c.DecodeWorkers = 1, prefill, decode
		return c
	}
	c.Workers, c.PrefillWorkers, c.DecodeWorkers = workers, 0, 0
	for _, r := range Roles {
		for _, key := range c.Role(r).Keys() {
			delete(c.given, r+"-"+key)
		}
	}
	c.Prefill, c.Decode = Role{}, Role{}
	return c
}

// validateRoles refuses per-role settings without disaggregated serving, and validates each pool's
// settings as the shared ones are, naming the per-role key (--prefill-tp, or the file's line).
func (c *Config) validateRoles() error {
	if c.role != "" {
		return nil // one pool's settings (ForRole): the whole was checked
	}
	pools := make([]*Config, len(Roles)) // each pool's settings, in the order of Roles
	for i, name := range Roles {
		pools[i] = c.ForRole(name)
		// Only a pool's own dp-size can be too large here: validateBounds refused a shared one.
		if dp := pools[i].DPSize; dp > MaxRanks {
			key := name + "-dp-size"
			return &settingError{key, fmt.Sprintf("%s %d: at most %d (%s)", key, dp, MaxRanks, rankMemory)}
		}
	}
	// Each pool's workers × its data-parallel ranks (workers and ranks are at most MaxRanks each).
	ranks := c.PrefillWorkers*max(pools[0].DPSize, 0) + c.DecodeWorkers*max(pools[1].DPSize, 0)
	if ranks > MaxRanks {
		return &settingError{"prefill-workers", fmt.Sprintf("prefill-workers %d × their dp-size and decode-workers %d × theirs are %d engine ranks; at most %d (%s)",
			c.PrefillWorkers, c.DecodeWorkers, ranks, MaxRanks, rankMemory)}
	}
	if c.PrefillWorkers > 0 {
		if err := c.validatePoolSplits(pools); err != nil {
			return err
		}
	}
	for i, name := range Roles {
		keys := c.Role(name).Keys()
		if len(keys) == 0 {
			continue
		}
		if c.PrefillWorkers == 0 {
			key := name + "-" + keys[0]
			return &settingError{key, fmt.Sprintf("%s %s: sets the %s workers of disaggregated serving; give --prefill-workers and --decode-workers (aggregated workers take --%s)",
				key, c.Role(name).Get(keys[0]), name, keys[0])}
		}
		if err := pools[i].validate(); err != nil {
			var se *settingError
			if errors.As(err, &se) && slices.Contains(keys, se.key) {
				return &settingError{name + "-" + se.key, name + "-" + se.msg}
			}
			return err
		}
	}
	return nil
}

// validatePoolSplits checks each pool's sharding and --dp-attention (validateEPSplit,
// validateDPAttention, validateTPSplit), pools in the order of Roles. An error about a pool's own
// setting names it ('prefill-tp 3: ...'); one about a shared setting names it as the user gave it, once
// ('tp 3: ...') where both pools fail on it alike, else with the pool it fails in ('decode workers: tp 3:
// ...').
func (c *Config) validatePoolSplits(pools []*Config) error {
	for _, check := range []func(*Config) error{(*Config).validateEPSplit, (*Config).validateDPAttention, (*Config).validateTPSplit} {
		errs := make([]*settingError, len(Roles))
		for i := range Roles {
			errors.As(check(pools[i]), &errs[i])
		}
		for i, name := range Roles {
			se := errs[i]
			switch {
			case se == nil:
			case slices.Contains(c.Role(name).Keys(), se.key):
				return &settingError{name + "-" + se.key, name + "-" + se.msg}
			case !slices.ContainsFunc(errs, func(o *settingError) bool { return o == nil || *o != *se }):
				return se
			default:
				return &settingError{se.key, fmt.Sprintf("%s workers: %s", name, se.msg)}
			}
		}
	}
	return nil
}
