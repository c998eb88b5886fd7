// Package config is mocker's one configuration schema: every setting of every command, with its default,
// its YAML key (the same as its command-line flag) and its validation, and the constructors that turn it
// into the options of the packages that do the work (engine, timing, workload, sim).
//
// Start with Config and Default. Load reads a YAML file strictly: an unknown key is an error naming it
// and its line. Validate names the first invalid setting by its flag name.
package config
