package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

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
	if u := c.unreadTiming(c.TimingNames()); len(u) > 0 {
		return u[0].err
	}
	return nil
}

// unread is a setting given that c's deployment does not read, with the error naming it.
type unread struct {
	key string
	err error
}

// TimingNames are the timing models that price the deployment's passes: TimingName's, or under
// disaggregation each pool's, in the order of Roles.
func (c *Config) TimingNames() []string {
	if c.PrefillWorkers == 0 || c.role != "" {
		return []string{c.TimingName()}
	}
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = c.ForRole(r).TimingName()
	}
	return names
}

// unreadTiming are the timing models' own settings given, a pool's (--prefill-profile) and then the
// shared ones (--profile), that no pool's passes read, in timingOwn's order; names are c's TimingNames.
func (c *Config) unreadTiming(names []string) []unread {
	var list []unread
	if len(names) == len(Roles) { // disaggregated: each pool's own settings
		for i, r := range Roles {
			for _, f := range timingOwn {
				key := r + "-" + f.key
				if !c.isGiven(key) || names[i] == f.timing || f.inert != nil && f.inert(c.ForRole(r)) {
					continue
				}
				list = append(list, unread{key, bad(key, c.Role(r).Get(f.key), fmt.Sprintf("applies to --timing %s, and the %s passes are priced by --timing %s", f.timing, r, names[i]))})
			}
		}
	}
	pricedBy := pricedBy(names)
	for _, f := range timingOwn {
		if !c.isGiven(f.key) || (f.inert != nil && f.inert(c)) || c.sharedRead(f.key, f.timing, names) {
			continue
		}
		why := fmt.Sprintf("applies to --timing %s, and the passes are priced by --timing %s", f.timing, pricedBy)
		if slices.Contains(names, f.timing) { // disaggregated, and each pool it prices has its own
			var own []string
			for i, r := range Roles {
				if names[i] == f.timing {
					own = append(own, "--"+r+"-"+f.key)
				}
			}
			why = fmt.Sprintf("applies to --timing %s, and the pools it prices take their own (%s)", f.timing, strings.Join(own, ", "))
		}
		list = append(list, unread{f.key, bad(f.key, c.fieldsByKey()[f.key].Interface(), why)})
	}
	return list
}

// sharedRead is whether the shared setting key, which timing reads, is read by the deployment whose
// passes names price: aggregated, where timing prices them; disaggregated, where it prices a pool that
// has no key of its own (--prefill-profile takes the prefill pool's place).
func (c *Config) sharedRead(key, timing string, names []string) bool {
	if len(names) == 1 {
		return names[0] == timing
	}
	for i, r := range Roles {
		if names[i] == timing && c.Role(r).Get(key) == "" {
			return true
		}
	}
	return false
}

// pricedBy words the timing models that price a deployment's passes (TimingNames).
func pricedBy(names []string) string {
	if len(names) == 2 && names[0] != names[1] {
		return fmt.Sprintf("%s (%s) and %s (%s)", names[0], Roles[0], names[1], Roles[1])
	}
	return names[0]
}

// EPRead is nil when c's shared EP is read: it is 1, or a pool that runs it (one without its own ep)
// is priced by the op-level model, which alone prices the experts' shards. A search that lays shapes out
// at each EP of a list refuses the others by it, which would run as EP 1 under another name.
func (c *Config) EPRead() error {
	if c.EP == 1 {
		return nil
	}
	opLevel := registry.Models[0].Name
	names := c.TimingNames()
	if c.sharedRead("ep", opLevel, names) {
		return nil
	}
	return fmt.Errorf("ep %d: applies to --timing %s, and the passes that run it are priced by --timing %s", c.EP, opLevel, pricedBy(names))
}

// WithoutUnreadTiming is c with the timing models' own settings that no pool's passes read no longer
// counted as given: --profile on a vLLM deployment priced by the op-level model, or on a disaggregated
// one whose pools each run their own --timing; --prefill-profile where the prefill pool is not priced by
// profile. A search judges each of its deployments so, as OnBackend does a backend's own settings, and
// refuses a setting only where none of them reads it (TimingReadOnSome). Those values stay, read by no
// engine. One value is changed: the shared EP, where one pool reads it (EPRead), is no setting of a pool
// priced by another model than the op-level one, which alone prices the experts' shards: that pool gets
// EP 1 of its own, as a search's label says (ep8/1), rather than being checked at an EP its passes never
// run.
func (c Config) WithoutUnreadTiming() Config {
	names := c.TimingNames()
	if opLevel := registry.Models[0].Name; len(names) == len(Roles) && c.EP > 1 && c.sharedRead("ep", opLevel, names) {
		for i, r := range Roles {
			if names[i] != opLevel && c.Role(r).EP == nil {
				one := 1
				c.Role(r).EP = &one
			}
		}
	}
	u := c.unreadTiming(names)
	if len(u) == 0 {
		return c
	}
	c.given = maps.Clone(c.given)
	for _, s := range u {
		delete(c.given, s.key)
	}
	return c
}

// TimingReadOnSome is nil when each timing model's own setting given in deployments (a search's, of
// one base) is read by one of them at least, else the error of the first that none reads, as the first
// deployment that leaves it unread words it: --profile is taken where some of a search's shapes are
// priced by profile (the trtllm ones of --backends vllm,trtllm, the aggregated ones beside pools on their
// own --timing). A deployment reads a setting it has given and does not leave unread: an aggregated one,
// which has no pools (Deployed), reads no pool's setting.
func TimingReadOnSome(deployments []Config) error {
	var order []string         // the unread settings, as first met
	errs := map[string]error{} // the first error for each
	read := map[string]bool{}  // read by some deployment
	for i := range deployments {
		c := &deployments[i]
		u := c.unreadTiming(c.TimingNames())
		for _, v := range u {
			if _, ok := errs[v.key]; !ok {
				order = append(order, v.key)
				errs[v.key] = c.placed(v.err)
			}
		}
		for _, f := range timingOwn {
			for _, key := range []string{f.key, Roles[0] + "-" + f.key, Roles[1] + "-" + f.key} {
				if c.isGiven(key) && !slices.ContainsFunc(u, func(v unread) bool { return v.key == key }) {
					read[key] = true
				}
			}
		}
	}
	for _, key := range order {
		if !read[key] {
			return errs[key]
		}
	}
	return nil
}
