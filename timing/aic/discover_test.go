package aic

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mocker-sim/mocker/model"
)

// fakeLookups replaces the environment and python3's sys.path for one test.
func fakeLookups(t *testing.T, env map[string]string, sysPath []string) {
	t.Helper()
	oldEnv, oldPy := getenv, pythonPaths
	getenv = func(k string) string { return env[k] }
	pythonPaths = func() []string { return sysPath }
	t.Cleanup(func() { getenv, pythonPaths = oldEnv, oldPy })
}

// fakeSitePackages lays out an installed AIConfigurator package with systems data for system
// under a temporary site-packages directory, in the layout of pkg (aiconfigurator_core or
// aiconfigurator), and returns the site-packages directory.
func fakeSitePackages(t *testing.T, pkg, system string) string {
	t.Helper()
	site := filepath.Join(t.TempDir(), "lib", "python3.12", "site-packages")
	if err := os.MkdirAll(filepath.Join(site, pkg, "systems", "data", system, "gemm", "vllm", "0.99.0"), 0o755); err != nil {
		t.Fatal(err)
	}
	return site
}

func TestDiscoverOrder(t *testing.T) {
	site := fakeSitePackages(t, "aiconfigurator_core", "h200_sxm")
	pyRoot := filepath.Join(site, "aiconfigurator_core", "systems", "data")
	empty := t.TempDir()
	for _, tc := range []struct {
		name    string
		flag    string
		env     map[string]string
		sysPath []string
		want    Source
	}{
		{"flag first", "/db/flag", map[string]string{EnvPerfDB: "/db/env"}, []string{site}, Source{"/db/flag", "flag"}},
		{"then the environment", "", map[string]string{EnvPerfDB: "/db/env"}, []string{site}, Source{"/db/env", "env"}},
		{"then the python package", "", nil, []string{"", empty, site}, Source{pyRoot, "python"}},
		{"then the embedded tables", "", nil, []string{empty}, Source{EmbeddedRoot, "embedded"}},
		{"nothing at all", "", nil, nil, Source{EmbeddedRoot, "embedded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeLookups(t, tc.env, tc.sysPath)
			if got := Discover(tc.flag, "h200_sxm"); got != tc.want {
				t.Errorf("Discover = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A package without the system's data (or of an older layout) is found as AIConfigurator lays it out.
func TestDiscoverPythonLayouts(t *testing.T) {
	old := fakeSitePackages(t, "aiconfigurator", "h200_sxm")
	fakeLookups(t, nil, []string{old})
	if got, want := Discover("", "h200_sxm"), (Source{filepath.Join(old, "aiconfigurator", "systems", "data"), "python"}); got != want {
		t.Errorf("older layout: Discover = %+v, want %+v", got, want)
	}
	if got := Discover("", "b200_sxm"); got.How != "embedded" {
		t.Errorf("a package without b200_sxm data: Discover = %+v, want the embedded tables", got)
	}
}

// pythonSysPath asks python3 itself, and is empty (no error) without it.
func TestPythonSysPath(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho /fake/site-packages\necho /fake/lib\n"
	if err := os.WriteFile(filepath.Join(dir, "python3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if got, want := pythonSysPath("python3"), []string{"/fake/site-packages", "/fake/lib"}; !slices.Equal(got, want) {
		t.Errorf("pythonSysPath = %q, want %q", got, want)
	}
	t.Setenv("PATH", t.TempDir())
	if got := pythonSysPath("python3"); got != nil {
		t.Errorf("without python3: pythonSysPath = %q, want nil", got)
	}
}

// cachedSysPath asks python3 once per interpreter and environment within pyCacheTTL: a second call
// reads the cache (the interpreter, were it run again, would say something else), a changed
// environment asks again, and without a cache directory every call asks.
func TestCachedSysPath(t *testing.T) {
	bin, cache := t.TempDir(), t.TempDir()
	count := filepath.Join(t.TempDir(), "runs")
	// Each run counts itself in count (shell builtins only: PATH holds nothing else) and prints the
	// count as a path: the answer changes with every run.
	script := "#!/bin/sh\nn=0\n[ -f " + count + " ] && read n < " + count + "\nn=$((n+1))\necho $n > " + count + "\necho /site-$n\n"
	if err := os.WriteFile(filepath.Join(bin, "python3"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("VIRTUAL_ENV", "")
	for i, want := range []string{"/site-1", "/site-1"} {
		if got := cachedSysPath("python3", cache); !slices.Equal(got, []string{want}) {
			t.Errorf("call %d: %q, want [%s]", i+1, got, want)
		}
	}
	t.Setenv("VIRTUAL_ENV", "/venv")
	if got := cachedSysPath("python3", cache); !slices.Equal(got, []string{"/site-2"}) {
		t.Errorf("another environment: %q, want [/site-2]", got)
	}
	if got := cachedSysPath("python3", ""); !slices.Equal(got, []string{"/site-3"}) {
		t.Errorf("no cache directory: %q, want [/site-3]", got)
	}
	// An answer older than the TTL is asked again.
	entries, _ := os.ReadDir(cache)
	for _, e := range entries {
		old := time.Now().Add(-2 * pyCacheTTL)
		os.Chtimes(filepath.Join(cache, e.Name()), old, old)
	}
	if got := cachedSysPath("python3", cache); !slices.Equal(got, []string{"/site-4"}) {
		t.Errorf("expired: %q, want [/site-4]", got)
	}
}

// The embedded tables price nothing but H200, and say how to get more.
func TestEmbeddedMissingSystem(t *testing.T) {
	llama, err := model.Lookup("llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	m := Options{Model: llama, Root: EmbeddedRoot, Backend: "vllm"}
	sys := *h200(t)
	sys.Name = "b200_sxm"
	m.System = &sys
	_, err = New(m)
	if err == nil {
		t.Fatal("New on the embedded tables for b200_sxm: no error")
	}
	for _, want := range []string{`no data for system "b200_sxm"`, "--perf-db", EnvPerfDB, "aiconfigurator Python package", "--timing"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// A configuration error is not a data problem: no hint.
	m.System, m.TP = h200(t), 3
	if _, err := New(m); err == nil || strings.Contains(err.Error(), "--perf-db") {
		t.Errorf("tp 3 on the embedded tables: error %v, want one without the data hint", err)
	}
}
