// Package config is mocker's one configuration schema and its composition root: every setting of every
// command, with its default and its YAML key (the same as its command-line flag), and the constructors
// that map it onto the options of the packages that do the work (engine, timing/registry, workload, sim).
// Each package validates its own options; config names the place a bad setting came from. It runs
// nothing itself: ResolveDesync takes the measurement (sim.MeanE2EMs) from its caller.
//
// Start with Config and Default. Load reads a YAML file strictly: an unknown key is an error naming it
// and its line. Validate names the first invalid setting by its flag name, and by the file and line
// that gave it.
package config
