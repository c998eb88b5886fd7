package config

import (
	"fmt"
	"slices"

	"github.com/mocker-sim/mocker/timing/registry"
)

// timingOwn are the settings that only one timing model reads. The op-level model alone reads a
// database (--perf-db, --backend-version) and prices the experts' shards (--ep); $MOCKER_PERF_DB is
// no setting, and is read only where that model prices passes.
var timingOwn = []struct{ key, timing string }{
	{"prefill-ms", "fixed"}, {"decode-ms", "fixed"}, {"profile", "profile"},
	{"perf-db", registry.Models[0].Name}, {"backend-version", registry.Models[0].Name}, {"ep", registry.Models[0].Name},
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
				if key := r + "-" + f.key; c.isGiven(key) && pool.TimingName() != f.timing {
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
		if c.isGiven(f.key) && !slices.Contains(names, f.timing) {
			return bad(f.key, c.fieldsByKey()[f.key].Interface(), fmt.Sprintf("applies to --timing %s, and the passes are priced by --timing %s", f.timing, pricedBy))
		}
	}
	return nil
}
