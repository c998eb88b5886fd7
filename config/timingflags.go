package config

import (
	"fmt"
	"slices"
)

// timingOwn are the flags that only one timing model reads.
var timingOwn = []struct{ key, timing string }{{"prefill-ms", "fixed"}, {"decode-ms", "fixed"}, {"profile", "profile"}}

// validateTimingFlags refuses a timing model's own flag given where no pool's passes are priced by that
// model: --prefill-ms 5 under the op-level default would change nothing, silently.
func (c *Config) validateTimingFlags() error {
	names := []string{c.TimingName()}
	if c.PrefillWorkers > 0 {
		for _, r := range Roles {
			names = append(names, c.ForRole(r).TimingName())
		}
	}
	for _, f := range timingOwn {
		if c.isGiven(f.key) && !slices.Contains(names, f.timing) {
			return bad(f.key, c.fieldsByKey()[f.key].Interface(), fmt.Sprintf("applies to --timing %s, and the passes are priced by --timing %s", f.timing, names[0]))
		}
	}
	return nil
}
