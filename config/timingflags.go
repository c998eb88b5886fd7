package config

import (
	"fmt"
	"slices"
)

// timingOwn are the flags that only one timing model reads.
var timingOwn = []struct{ key, timing string }{{"prefill-ms", "fixed"}, {"decode-ms", "fixed"}, {"profile", "profile"}}

// validateTimingFlags refuses a timing model's own flag given where no pool's passes are priced by that
// model: --prefill-ms 5 under the op-level default would change nothing, silently. Under disaggregation
// each pool is priced by its own timing (ForRole), the shared one only where a pool sets none.
func (c *Config) validateTimingFlags() error {
	if c.role != "" {
		return nil // one pool's settings (ForRole): the whole was checked
	}
	names := []string{c.TimingName()}
	if c.PrefillWorkers > 0 {
		names = names[:0]
		for _, r := range Roles {
			pool := c.ForRole(r)
			if c.isGiven(r+"-profile") && pool.TimingName() != "profile" {
				return bad(r+"-profile", pool.Profile, fmt.Sprintf("applies to --timing profile, and the %s passes are priced by --timing %s", r, pool.TimingName()))
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
