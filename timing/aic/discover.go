package aic

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// EnvPerfDB is the environment variable naming a database root when --perf-db is not given.
const EnvPerfDB = "MOCKER_PERF_DB"

// Source is where the op-level model's tables come from: Root for Options.Root and How it was found:
// "flag" (--perf-db), "env" (EnvPerfDB), "python" (an installed AIConfigurator package) or
// "embedded" (the tables built into the binary, Root EmbeddedRoot).
type Source struct {
	Root string
	How  string
}

// String names the source for reports: "embedded", or the directory and how it was found.
func (s Source) String() string {
	if s.How == "embedded" {
		return "embedded"
	}
	return s.Root + " (" + s.How + ")"
}

// The lookups Discover makes, replaceable by tests.
var (
	getenv = os.Getenv
	// pythonPaths lists python3's sys.path (nil without python3), asked once per $PATH.
	pythonPaths = func() []string {
		pyPaths.Lock()
		defer pyPaths.Unlock()
		path := os.Getenv("PATH")
		if p, ok := pyPaths.m[path]; ok {
			return p
		}
		if pyPaths.m == nil {
			pyPaths.m = map[string][]string{}
		}
		pyPaths.m[path] = cachedSysPath("python3", pyCacheDir())
		return pyPaths.m[path]
	}
	pyPaths struct {
		sync.Mutex
		m map[string][]string
	}
)

// Discover finds the database for system, in order: the directory given (--perf-db), the
// directory $MOCKER_PERF_DB names, the systems data of an AIConfigurator Python package installed
// for python3 when it has the system (aiconfigurator_core/systems/data in current releases,
// aiconfigurator/systems/data in older ones), else the embedded tables. A directory given by flag
// or environment is used as it is: a wrong one is an error when the model reads it, not a reason
// to fall back.
func Discover(flag, system string) Source {
	if src, ok := Given(flag); ok {
		return src
	}
	if root := pythonDataDir(pythonPaths(), system); root != "" {
		return Source{Root: root, How: "python"}
	}
	return Source{Root: EmbeddedRoot, How: "embedded"}
}

// Given is the database a directory given names: flag (--perf-db) or, without it, $MOCKER_PERF_DB; ok
// false when neither does.
func Given(flag string) (src Source, ok bool) {
	if flag != "" {
		return Source{Root: flag, How: "flag"}, true
	}
	if env := getenv(EnvPerfDB); env != "" {
		return Source{Root: env, How: "env"}, true
	}
	return Source{}, false
}

// pythonDataDir returns the first AIConfigurator systems data directory under the Python path
// entries paths that holds system, or "".
func pythonDataDir(paths []string, system string) string {
	for _, p := range paths {
		if p == "" {
			continue
		}
		for _, pkg := range []string{"aiconfigurator_core", "aiconfigurator"} {
			root := filepath.Join(p, pkg, "systems", "data")
			if st, err := os.Stat(filepath.Join(root, system)); err == nil && st.IsDir() {
				return root
			}
		}
	}
	return ""
}

// pyCacheTTL is how long an answer of python3's is kept: sys.path names directories, so a package
// installed into one of them is found at once; only a new directory (a first `pip install --user`)
// waits up to this long, or for --perf-db / $MOCKER_PERF_DB.
const pyCacheTTL = time.Hour

// pyCacheDir is where cachedSysPath keeps python3's answers ("": nowhere).
func pyCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "mocker", "python-sys-path")
}

// cachedSysPath is python's sys.path as pythonSysPath gives it, kept in dir for pyCacheTTL and keyed
// by the interpreter file, the working directory and the environment that choose a Python (a pyenv
// shim or a conda activation makes asking cost ~0.5 s of CPU and more of wall time: more than a
// replay). Without a cache directory it asks every time.
func cachedSysPath(python, dir string) []string {
	exe, err := exec.LookPath(python)
	if err != nil {
		return nil
	}
	st, err := os.Stat(exe)
	if err != nil || dir == "" {
		return sysPathOf(exe)
	}
	h := fnv.New64a()
	wd, _ := os.Getwd()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%s", exe, st.ModTime().UnixNano(), st.Size(), wd)
	for _, k := range []string{"PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_VERSION"} {
		fmt.Fprintf(h, "\x00%s=%s", k, os.Getenv(k))
	}
	file := filepath.Join(dir, fmt.Sprintf("%016x", h.Sum64()))
	if fi, err := os.Stat(file); err == nil && time.Since(fi.ModTime()) < pyCacheTTL {
		if b, err := os.ReadFile(file); err == nil {
			return strings.Split(strings.TrimSpace(string(b)), "\n")
		}
	}
	paths := sysPathOf(exe)
	if paths == nil {
		return nil // not kept: a python that failed may work next time
	}
	// Written whole or not at all (a rename), so a concurrent run never reads half an answer.
	if os.MkdirAll(dir, 0o755) == nil {
		if tmp, err := os.CreateTemp(dir, "tmp-*"); err == nil {
			_, werr := tmp.WriteString(strings.Join(paths, "\n") + "\n")
			if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), file) != nil {
				os.Remove(tmp.Name())
			}
		}
	}
	return paths
}

// pythonSysPath runs python to print its sys.path; nil when python is absent or fails (within 10 s).
func pythonSysPath(python string) []string {
	exe, err := exec.LookPath(python)
	if err != nil {
		return nil
	}
	return sysPathOf(exe)
}

// sysPathOf runs the interpreter exe to print its sys.path; nil when it fails (within 10 s).
func sysPathOf(exe string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "-c", "import sys; print('\\n'.join(sys.path))").Output()
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// missingHint says how to get data the embedded tables lack, for errors from a model built on them.
func missingHint() string {
	var have []string
	entries, _ := readDirPath(EmbeddedRoot)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		d := db{root: EmbeddedRoot, system: e.Name()}
		for _, b := range []string{"vllm", "sglang"} {
			if vs := d.versions(gemmTable.op, b); len(vs) > 0 {
				have = append(have, fmt.Sprintf("%s %s %s", e.Name(), b, strings.Join(vs, "/")))
			}
		}
	}
	return fmt.Sprintf("; the built-in tables hold %s only: give a database in AIConfigurator's layout with --perf-db DIR or $%s, install the aiconfigurator Python package, or choose another --timing (profile, polynomial, fixed)",
		strings.Join(have, ", "), EnvPerfDB)
}
