package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mocker-sim/mocker/config"
)

// spoolTrace copies --trace to a temporary file when it is not a regular file (a pipe, as `--trace
// <(zcat t.jsonl.gz)` gives): a search reads its trace for its bounds and again for every run, and a
// pipe gives its bytes once. The copy keeps the name's extension, by which a trace's format is told.
// It returns what removes the copy. A trace that cannot be opened is left to the search to word.
func spoolTrace(cfg *config.Config, nats string) (remove func(), err error) {
	remove = func() {}
	if cfg.Trace == "" {
		return remove, nil
	}
	st, err := os.Stat(cfg.Trace)
	if err != nil || st.Mode().IsRegular() || st.IsDir() {
		return remove, nil
	}
	if nats != "" {
		return remove, fmt.Errorf("--trace %s: not a regular file, and --nats's sweep workers read the trace from its path: give a file", cfg.Trace)
	}
	src, err := os.Open(cfg.Trace)
	if err != nil {
		return remove, nil
	}
	defer src.Close()
	tmp, err := os.CreateTemp("", "mocker-trace-*"+filepath.Ext(cfg.Trace))
	if err != nil {
		return remove, fmt.Errorf("--trace %s: a copy to read once a run: %w", cfg.Trace, err)
	}
	remove = func() { os.Remove(tmp.Name()) }
	_, err = io.Copy(tmp, src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		remove()
		return func() {}, fmt.Errorf("--trace %s: a copy to read once a run: %w", cfg.Trace, err)
	}
	cfg.Trace = tmp.Name()
	return remove, nil
}
