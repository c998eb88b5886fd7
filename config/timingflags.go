package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/mocker-sim/mocker/timing/registry"
)

// timingOwn are the settings that only one timing model reads. The op-level model alone reads a
// database (--perf-db, --backend-version) and prices the experts' shards (--ep; --ep 1, no expert
// parallelism, is every model's and refused by none); $MOCKER_PERF_DB is no setting, and is read only
// where that model prices passes.
var timingOwn = []struct {
	key, timing string
	inert       func(*Config) bool // nil, or whether the value given changes nothing under any model
}{
	{"prefill-ms", "fixed", nil}, {"decode-ms", "fixed", nil}, {"profile", "profile", nil},
	{"perf-db", registry.Models[0].Name, nil}, {"backend-version", registry.Models[0].Name, nil},
	{"ep", registry.Models[0].Name, func(c *Config) bool { return c.EP == 1 }},
}

// validateTimingFlags refuses a timing model's own setting given where no pool's passes are priced by
// that model: --prefill-ms 5 under the op-level default would change nothing, silently. Under
// disaggregation each pool is priced by its own timing (ForRole), the shared one only where a pool sets
// none, and a pool's own setting (--prefill-profile) only where that pool is priced by its model.
func (c *Config) validateTimingFlags() error {
	if c.role != "" {
		return nil // one pool's settings (ForRole): the whole was checked
	}
	names := []string{c.TimingName()}
	if c.PrefillWorkers > 0 {
		names = names[:0]
		for _, r := range Roles {
			pool := c.ForRole(r)
			for _, f := range timingOwn {
				if key := r + "-" + f.key; c.isGiven(key) && pool.TimingName() != f.timing && (f.inert == nil || !f.inert(pool)) {
					return bad(key, c.Role(r).Get(f.key), fmt.Sprintf("applies to --timing %s, and the %s passes are priced by --timing %s", f.timing, r, pool.TimingName()))
				}
			}
			names = append(names, pool.TimingName())
		}
	}
	pricedBy := names[0]
	if len(names) == 2 && names[0] != names[1] {
		pricedBy = fmt.Sprintf("%s (%s) and %s (%s)", names[0], Roles[0], names[1], Roles[1])
	}
	for _, f := range timingOwn {
		if c.isGiven(f.key) && !slices.Contains(names, f.timing) && (f.inert == nil || !f.inert(c)) {
			return bad(f.key, c.fieldsByKey()[f.key].Interface(), fmt.Sprintf("applies to --timing %s, and the passes are priced by --timing %s", f.timing, pricedBy))
		}
	}
	return nil
}

// WithoutUnreadTiming is c with the shared timing models' own settings (--profile, --prefill-ms ...) that
// no pool's passes read no longer counted as given: a disaggregated deployment whose pools each run their
// own --timing reads none of them. A search over both modes, whose aggregated shapes read them, judges
// its disaggregated shapes so, as OnBackend does a backend's own settings. The values stay, read by no
// engine; an aggregated c is returned as it is.
func (c Config) WithoutUnreadTiming() Config {
	if c.PrefillWorkers == 0 {
		return c
	}
	c.given = maps.Clone(c.given)
	for _, f := range timingOwn {
		if !slices.ContainsFunc(Roles, func(r string) bool { return c.ForRole(r).TimingName() == f.timing }) {
			delete(c.given, f.key)
		}
	}
	return c
}
