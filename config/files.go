package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// FileError words the error of reading the input file that setting key names (--config, --trace,
// --model-config, --tokenizer, ...) as predict words an output file's: "--KEY PATH: why", when err says
// that PATH, or the file read from that directory ("--KEY DIR: config.json: why"), cannot be opened or
// read (an *os.PathError, whose operation and path the flag's would repeat). Any other error is its
// reader's, which names the file, the line and the field, and is returned as it is.
func FileError(key, path string, err error) error { return pathError("--"+key, path, err) }

// pathError is FileError for the input file or directory that name gives: a flag, or an environment
// variable ("$MOCKER_PERF_DB DIR: why").
func pathError(name, path string, err error) error {
	var pe *os.PathError
	switch {
	case path == "" || !errors.As(err, &pe):
		return err
	case pe.Path == path:
		return fmt.Errorf("%s %s: %w", name, path, pe.Err)
	case filepath.Dir(pe.Path) == filepath.Clean(path):
		return fmt.Errorf("%s %s: %s: %w", name, path, filepath.Base(pe.Path), pe.Err)
	}
	return err
}

// fileError is FileError named by the file and line of c's config file that gave key, if one did.
func (c *Config) fileError(key, path string, err error) error {
	if fe := FileError(key, path, err); fe != err {
		return c.at(key, fe)
	}
	return err
}

// settingKey is the setting that gave key's value: the pool's own (prefill-KEY) where c is one pool's
// settings (ForRole) and the pool set key itself, else key.
func (c *Config) settingKey(key string) string {
	if slices.Contains(c.roleKeys, key) {
		return c.role + "-" + key
	}
	return key
}
