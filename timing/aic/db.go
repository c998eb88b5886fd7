package aic

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	"go.yaml.in/yaml/v3"
)

// The database layout (AIConfigurator's aic-core/src/aiconfigurator_core/systems/data):
//
//	<root>/<system>/<op>/<backend>/<version>/<table>.parquet
//	<root>/<system>/<op>/<backend>/<version>/reuse.yaml          table X reuses version Y's data
//	<root>/<system>/<op>/<backend>/<version>/collection_meta.yaml per-table status (complete|partial)
//	<root>/<system>.yaml                                          system spec (misc.nccl_version)
//
// A table of a version is found as AIConfigurator's loader finds it: the version directory's own file
// first, then the donors its reuse.yaml declares for that table (followed transitively). When both
// exist the own rows win and donor rows only fill shapes the own file lacks (AIConfigurator's
// "first source wins per shape"). A table that collection_meta.yaml marks partial is not used.

// tableRef names one table of one (op, backend, version) of a system.
type tableRef struct {
	op, backend, table string
}

// db is one system's directory in a database root.
type db struct {
	root   string // the database root, e.g. .../shared/data/aiconfigurator
	system string // e.g. h200_sxm
}

func (d db) dir(parts ...string) string {
	return filepath.Join(append([]string{d.root, d.system}, parts...)...)
}

// check reports whether the system has a directory in the root.
func (d db) check() error {
	st, err := statPath(d.dir())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("aic: no data for system %q: %s does not exist", d.system, d.dir())
		}
		return fmt.Errorf("aic: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("aic: %s is not a directory", d.dir())
	}
	return nil
}

// versions lists the version directories of backend under op, newest first.
func (d db) versions(op, backend string) []string {
	entries, err := readDirPath(d.dir(op, backend))
	if err != nil {
		return nil
	}
	var vs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			vs = append(vs, e.Name())
		}
	}
	slices.SortFunc(vs, func(a, b string) int { return compareVersions(b, a) })
	return vs
}

// sources returns the files holding ref's table for version, in priority order: the version's own
// file, then reuse.yaml donors. An empty list with a nil error means the table does not exist there.
func (d db) sources(ref tableRef, version string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	var walk func(v string) error
	walk = func(v string) error {
		if seen[v] {
			return nil // a reuse cycle adds nothing new
		}
		seen[v] = true
		dir := d.dir(ref.op, ref.backend, v)
		partial, err := partialTable(dir, ref.table)
		if err != nil {
			return err
		}
		if !partial {
			for _, ext := range []string{".parquet", compactExt} {
				if f := filepath.Join(dir, ref.table+ext); fileExists(f) {
					out = append(out, f)
					break
				}
			}
		}
		donors, err := reuseDonors(dir, ref.table)
		if err != nil {
			return err
		}
		for _, dv := range donors {
			if err := walk(dv); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(version); err != nil {
		return nil, err
	}
	return out, nil
}

func fileExists(path string) bool {
	st, err := statPath(path)
	return err == nil && st.Mode().IsRegular()
}

// reuseFile is reuse.yaml (AIConfigurator's Collector V3 provenance sidecar).
type reuseFile struct {
	Reuse *[]struct {
		Table       string `yaml:"table"`
		FromVersion string `yaml:"from_version"`
	} `yaml:"reuse"`
}

// reuseDonors returns the versions dir/reuse.yaml declares for table, in file order.
func reuseDonors(dir, table string) ([]string, error) {
	path := filepath.Join(dir, "reuse.yaml")
	data, err := readFilePath(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("aic: %w", err)
	}
	var r reuseFile
	if err := yaml.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("aic: %s: %w", path, err)
	}
	// As AIConfigurator's loader: a missing top-level "reuse" key is a typo, not "nothing reused".
	if r.Reuse == nil {
		return nil, fmt.Errorf("aic: %s: missing top-level key \"reuse\"", path)
	}
	var donors []string
	for i, e := range *r.Reuse {
		if e.Table == "" || e.FromVersion == "" {
			return nil, fmt.Errorf("aic: %s: reuse[%d] needs table and from_version", path, i)
		}
		if e.Table == table {
			donors = append(donors, e.FromVersion)
		}
	}
	return donors, nil
}

// partialTable reports whether dir/collection_meta.yaml marks table's collection as partial.
func partialTable(dir, table string) (bool, error) {
	path := filepath.Join(dir, "collection_meta.yaml")
	data, err := readFilePath(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("aic: %w", err)
	}
	var meta struct {
		Tables map[string]struct {
			Status string `yaml:"status"`
		} `yaml:"tables"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return false, fmt.Errorf("aic: %s: %w", path, err)
	}
	return meta.Tables[table].Status == "partial", nil
}

// ncclVersion is the system spec's misc.nccl_version, or "" without one. The spec is
// <root>/<system>.yaml, or in an AIConfigurator package <root>/../<system>.yaml (systems/<system>.yaml
// beside systems/data).
func (d db) ncclVersion() (string, error) {
	path := filepath.Join(d.root, d.system+".yaml")
	data, err := readFilePath(path)
	if errors.Is(err, fs.ErrNotExist) {
		path = filepath.Join(filepath.Dir(d.root), d.system+".yaml")
		data, err = readFilePath(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("aic: %w", err)
	}
	var spec struct {
		Misc struct {
			NCCLVersion string `yaml:"nccl_version"`
		} `yaml:"misc"`
	}
	if err := yaml.Unmarshal(data, &spec); err != nil {
		return "", fmt.Errorf("aic: %s: %w", path, err)
	}
	return spec.Misc.NCCLVersion, nil
}

// compareVersions orders version directory names as AIConfigurator does: by the numeric release
// (0.5.14 > 0.5.9), a pre-release (rc, dev) before its release, a .postN after it.
func compareVersions(a, b string) int {
	pa, pb := parseVersion(a), parseVersion(b)
	return slices.Compare(pa, pb)
}

func parseVersion(v string) []int {
	v = strings.ToLower(strings.TrimPrefix(strings.ToLower(v), "v"))
	var nums []int
	rest := v
	for {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 {
			break
		}
		n, _ := strconv.Atoi(rest[:i])
		nums = append(nums, n)
		rest = rest[i:]
		if len(rest) < 2 || rest[0] != '.' || rest[1] < '0' || rest[1] > '9' {
			break
		}
		rest = rest[1:]
	}
	for len(nums) < 3 {
		nums = append(nums, 0)
	}
	nums = nums[:3:3]
	rest = strings.TrimLeft(rest, ".-_+")
	// Stage: 0 dev, 1 rc, 2 release, 3 post; then the stage's number.
	stage, num := 2, 0
	for _, s := range []struct {
		prefix string
		stage  int
	}{{"dev", 0}, {"rc", 1}, {"post", 3}} {
		if strings.HasPrefix(rest, s.prefix) {
			stage = s.stage
			num, _ = strconv.Atoi(strings.TrimLeft(rest[len(s.prefix):], ".-_"))
			break
		}
	}
	return append(nums, stage, num)
}

// table is a parquet file read into memory: numeric columns as float64 (nulls as NaN), the rest as
// strings.
type table struct {
	path string
	rows int
	num  map[string][]float64
	str  map[string][]string
}

// f returns numeric column name, or an error naming the file.
func (t *table) f(name string) ([]float64, error) {
	if c, ok := t.num[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("aic: %s: no numeric column %q", t.path, name)
}

// s returns string column name, or an error naming the file.
func (t *table) s(name string) ([]string, error) {
	if c, ok := t.str[name]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("aic: %s: no string column %q", t.path, name)
}

// fOr returns numeric column name, or zeros when the file predates it (window_size in old versions).
func (t *table) fOr(name string) []float64 {
	if c, ok := t.num[name]; ok {
		return c
	}
	return make([]float64, t.rows)
}

// provenanceColumns are columns of every perf table that no model reads.
var provenanceColumns = map[string]bool{"framework": true, "version": true, "device": true, "power": true, "power_limit": true}

// tables caches parsed table files (parquet or compact) by path: each is read once per process.
var tables onceCache[*table]

// readTable returns the parsed contents of a table file, reading it on first use.
func readTable(path string) (*table, error) {
	abs := path
	if _, _, ok := embeddedPath(path); !ok {
		var err error
		if abs, err = filepath.Abs(path); err != nil {
			return nil, fmt.Errorf("aic: %w", err)
		}
	}
	return tables.get(abs, func() (*table, error) {
		if strings.HasSuffix(abs, compactExt) {
			return parseCompact(abs)
		}
		return parseParquet(abs)
	})
}

func parseParquet(path string) (*table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("aic: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("aic: %w", err)
	}
	return parquetTable(path, f, st.Size())
}

// parquetTable reads the columns a model may use from a parquet file.
func parquetTable(path string, f io.ReaderAt, size int64) (*table, error) {
	pf, err := parquet.OpenFile(f, size)
	if err != nil {
		return nil, fmt.Errorf("aic: %s: %w", path, err)
	}
	t := &table{path: path, rows: int(pf.NumRows()), num: map[string][]float64{}, str: map[string][]string{}}
	for _, col := range pf.Schema().Columns() {
		leaf, ok := pf.Schema().Lookup(col...)
		if !ok || len(col) != 1 || provenanceColumns[col[0]] {
			continue // perf tables have no nested columns; provenance is not needed
		}
		name := col[0]
		kind := leaf.Node.Type().Kind()
		numeric := kind == parquet.Int32 || kind == parquet.Int64 || kind == parquet.Float || kind == parquet.Double || kind == parquet.Boolean
		var nums []float64
		var strs []string
		intern := map[string]string{} // string columns hold a handful of distinct values
		for _, rg := range pf.RowGroups() {
			err := readColumn(rg.ColumnChunks()[leaf.ColumnIndex], func(v parquet.Value) {
				switch {
				case numeric:
					nums = append(nums, numericValue(v))
				case v.IsNull():
					strs = append(strs, "")
				default:
					b := v.ByteArray()
					s, ok := intern[string(b)]
					if !ok {
						s = string(b)
						intern[s] = s
					}
					strs = append(strs, s)
				}
			})
			if err != nil {
				return nil, fmt.Errorf("aic: %s: column %s: %w", path, name, err)
			}
		}
		if numeric {
			if len(nums) != t.rows {
				return nil, fmt.Errorf("aic: %s: column %s has %d values for %d rows", path, name, len(nums), t.rows)
			}
			t.num[name] = nums
		} else {
			if len(strs) != t.rows {
				return nil, fmt.Errorf("aic: %s: column %s has %d values for %d rows", path, name, len(strs), t.rows)
			}
			t.str[name] = strs
		}
	}
	return t, nil
}

func numericValue(v parquet.Value) float64 {
	if v.IsNull() {
		return math.NaN()
	}
	switch v.Kind() {
	case parquet.Int32:
		return float64(v.Int32())
	case parquet.Int64:
		return float64(v.Int64())
	case parquet.Float:
		return float64(v.Float())
	case parquet.Double:
		return v.Double()
	case parquet.Boolean:
		if v.Boolean() {
			return 1
		}
		return 0
	}
	return math.NaN()
}

func readColumn(chunk parquet.ColumnChunk, add func(parquet.Value)) error {
	pages := chunk.Pages()
	defer pages.Close()
	buf := make([]parquet.Value, 1024)
	for {
		p, err := pages.ReadPage()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		r := p.Values()
		for {
			n, err := r.ReadValues(buf)
			for _, v := range buf[:n] {
				add(v)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				parquet.Release(p)
				return err
			}
			if n == 0 {
				break
			}
		}
		parquet.Release(p)
	}
}

// NearestVersion returns the version directory of backend's GEMM tables for system under root that
// stands in best for engine version want: want itself if present, else the oldest version newer
// than want (the first release whose kernels the database measured after it), else the newest
// present. It is for replaying measurements of an engine release the database does not hold
// (AIConfigurator's silicon rows name vLLM 0.12.0, whose kernels 0.14.0 is the closest measured
// release of); the model itself takes Options.Version literally. An empty want returns "" (the
// model's own default: the newest version with every table). It is an error when the backend has
// no versions at all.
func NearestVersion(root, system, backend, want string) (string, error) {
	if want == "" {
		return "", nil
	}
	d := db{root: root, system: system}
	vs := d.versions(gemmTable.op, strings.ToLower(backend)) // newest first
	if len(vs) == 0 {
		return "", fmt.Errorf("aic: no %s versions for system %s: %s has none", backend, system, d.dir(gemmTable.op, backend))
	}
	best := vs[0]
	for _, v := range vs {
		c := compareVersions(v, want)
		if c == 0 {
			return v, nil
		}
		if c > 0 {
			best = v // newer than want: keep the oldest such
		}
	}
	return best, nil
}
