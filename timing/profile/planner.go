package profile

import (
	"cmp"
	"encoding/csv"
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

	"github.com/sbinet/npyio/npy"
	"github.com/sbinet/npyio/npz"

	"github.com/mocker-sim/mocker/timing"
)

// minDecodeMs is the reference's floor on any decode step (dynamo-mocker.md §6).
const minDecodeMs = 1.0

// Files of a Dynamo profiler results directory, and the CSV copies of their arrays.
const (
	plannerPrefillNPZ = "selected_prefill_interpolation/raw_data.npz"
	plannerDecodeNPZ  = "selected_decode_interpolation/raw_data.npz"
	plannerPrefillCSV = "prefill_profile.csv"
	plannerDecodeCSV  = "decode_profile.csv"
)

// Planner is the reference's interpolated model (dynamo-mocker.md §6, "Interpolated") built from a Dynamo
// SLA-planner profile: TTFT of one request by prompt length, and ITL measured at scattered
// (KV usage, context length) points.
//
//	prefill = TTFT(T), T = Σ New over prefill seqs (batch × (isl − prefix)); piecewise linear, extrapolated, ≥ 0
//	decode  = max(1 ms, ITL(active KV tokens, mean context of the sampling requests))
//
// The decode points are not a grid: each measured context has its own series of KV usages. They are gridded
// on their natural axes: per context, a piecewise-linear curve of ITL over active KV tokens
// (x_kv_usage · max_kv_tokens), extrapolated linearly; between the two contexts that bracket the mean
// context, linear interpolation (extrapolation beyond the first and last). Where the points form a
// rectangle this is the reference's bilinear interpolation. See Grid.
//
// Active KV tokens are absolute, as in the reference: a pool of another size is priced by how many tokens it
// holds, not by its usage fraction. A Planner is immutable and safe for concurrent use.
type Planner struct {
	prefill     Curve // TTFT ms by new tokens
	decode      Grid  // ITL ms: rows = context length, curves over active KV tokens
	maxKVTokens int
}

var _ timing.Model = (*Planner)(nil)

// PlannerTables are a planner profile's measurements, as read from its files.
type PlannerTables struct {
	PrefillISL    []float64 // prompt length of the one request
	PrefillTTFTMs []float64 // its time to first token

	DecodeKVUsage []float64 // fraction of the KV pool in use, per point
	DecodeContext []float64 // context length of every request, per point
	DecodeITLMs   []float64 // inter-token latency, per point
	MaxKVTokens   int       // the KV pool size the usage fractions refer to
}

// NewPlanner builds a Planner from tables.
func NewPlanner(t PlannerTables) (*Planner, error) {
	p, err := newPlanner(t)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return p, nil
}

func newPlanner(t PlannerTables) (*Planner, error) {
	if len(t.PrefillISL) != len(t.PrefillTTFTMs) {
		return nil, fmt.Errorf("%d prefill ISLs but %d TTFTs", len(t.PrefillISL), len(t.PrefillTTFTMs))
	}
	if n := len(t.DecodeKVUsage); n != len(t.DecodeContext) || n != len(t.DecodeITLMs) {
		return nil, fmt.Errorf("decode arrays differ in length (%d KV usages, %d contexts, %d ITLs)",
			n, len(t.DecodeContext), len(t.DecodeITLMs))
	}
	if t.MaxKVTokens <= 0 {
		return nil, fmt.Errorf("max_kv_tokens = %d, want > 0", t.MaxKVTokens)
	}
	// Profilers write points in measurement order; sort them by ISL.
	idx := make([]int, len(t.PrefillISL))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(t.PrefillISL[a], t.PrefillISL[b]) })
	x, y := make([]float64, len(idx)), make([]float64, len(idx))
	for k, i := range idx {
		x[k], y[k] = t.PrefillISL[i], t.PrefillTTFTMs[i]
	}
	prefill, err := NewCurve(x, y)
	if err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	active := make([]float64, len(t.DecodeKVUsage))
	for i, u := range t.DecodeKVUsage {
		active[i] = u * float64(t.MaxKVTokens)
	}
	decode, err := NewGridPoints(t.DecodeContext, active, t.DecodeITLMs)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return &Planner{prefill: prefill, decode: decode, maxKVTokens: t.MaxKVTokens}, nil
}

// LoadPlanner reads a Dynamo profiler results directory: selected_prefill_interpolation/raw_data.npz
// (arrays prefill_isl, prefill_ttft) and selected_decode_interpolation/raw_data.npz (x_kv_usage,
// y_context_length, z_itl, max_kv_tokens). A directory holding prefill_profile.csv (columns prefill_isl,
// prefill_ttft_ms) and decode_profile.csv (x_kv_usage, y_context_length, z_itl_ms, max_kv_tokens) — the
// same arrays written out as CSV — is accepted too.
func LoadPlanner(dir string) (*Planner, error) {
	var t PlannerTables
	var err error
	switch {
	case exists(filepath.Join(dir, plannerPrefillNPZ)) || exists(filepath.Join(dir, plannerDecodeNPZ)):
		err = readPlannerNPZ(dir, &t)
	case exists(filepath.Join(dir, plannerPrefillCSV)) || exists(filepath.Join(dir, plannerDecodeCSV)):
		err = readPlannerCSV(dir, &t)
	default:
		return nil, fmt.Errorf("profile: %s: no planner profile found: want %s and %s, or %s and %s",
			dir, plannerPrefillNPZ, plannerDecodeNPZ, plannerPrefillCSV, plannerDecodeCSV)
	}
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	p, err := newPlanner(t)
	if err != nil {
		return nil, fmt.Errorf("profile: %s: %w", dir, err)
	}
	return p, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func readPlannerNPZ(dir string, t *PlannerTables) error {
	pre := filepath.Join(dir, plannerPrefillNPZ)
	arrs, err := readNPZ(pre, "prefill_isl", "prefill_ttft")
	if err != nil {
		return err
	}
	t.PrefillISL, t.PrefillTTFTMs = arrs[0], arrs[1]

	dec := filepath.Join(dir, plannerDecodeNPZ)
	arrs, err = readNPZ(dec, "x_kv_usage", "y_context_length", "z_itl", "max_kv_tokens")
	if err != nil {
		return err
	}
	t.DecodeKVUsage, t.DecodeContext, t.DecodeITLMs = arrs[0], arrs[1], arrs[2]
	if len(arrs[3]) != 1 {
		return fmt.Errorf("%s: max_kv_tokens has %d values, want 1", dec, len(arrs[3]))
	}
	t.MaxKVTokens, err = wholeNumber(arrs[3][0])
	if err != nil {
		return fmt.Errorf("%s: max_kv_tokens: %w", dec, err)
	}
	return nil
}

// readNPZ reads the named arrays of an .npz file as float64, whatever their numeric dtype.
func readNPZ(path string, names ...string) ([][]float64, error) {
	r, err := npz.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: missing (a planner profile needs both %s and %s)", path, plannerPrefillNPZ, plannerDecodeNPZ)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer r.Close()
	out := make([][]float64, len(names))
	for i, name := range names {
		key := name + ".npy"
		if !slices.Contains(r.Keys(), key) {
			return nil, fmt.Errorf("%s: no array %q (has %s)", path, name, strings.Join(r.Keys(), ", "))
		}
		out[i], err = readNPY(r, key)
		if err != nil {
			return nil, fmt.Errorf("%s: array %q: %w", path, name, err)
		}
	}
	return out, nil
}

func readNPY(r *npz.Reader, key string) ([]float64, error) {
	rc, err := r.Open(key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	nr, err := npy.NewReader(rc)
	if err != nil {
		return nil, err
	}
	if len(nr.Header.Descr.Shape) > 1 {
		return nil, fmt.Errorf("shape %v, want a vector", nr.Header.Descr.Shape)
	}
	// npy reads only into the stored type, so pick it from the header and convert.
	switch typ := nr.Header.Descr.Type; typ[len(typ)-2:] {
	case "f8":
		var v []float64
		err = nr.Read(&v)
		return v, err
	case "f4":
		return readAs[float32](nr)
	case "i8":
		return readAs[int64](nr)
	case "i4":
		return readAs[int32](nr)
	case "u8":
		return readAs[uint64](nr)
	case "u4":
		return readAs[uint32](nr)
	default:
		return nil, fmt.Errorf("dtype %s, want a float or integer type", typ)
	}
}

func readAs[T float32 | int64 | int32 | uint64 | uint32](nr *npy.Reader) ([]float64, error) {
	var v []T
	if err := nr.Read(&v); err != nil {
		return nil, err
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out, nil
}

func readPlannerCSV(dir string, t *PlannerTables) error {
	pre := filepath.Join(dir, plannerPrefillCSV)
	cols, err := readColumns(pre, "prefill_isl", "prefill_ttft_ms")
	if err != nil {
		return err
	}
	t.PrefillISL, t.PrefillTTFTMs = cols[0], cols[1]

	dec := filepath.Join(dir, plannerDecodeCSV)
	cols, err = readColumns(dec, "x_kv_usage", "y_context_length", "z_itl_ms", "max_kv_tokens")
	if err != nil {
		return err
	}
	t.DecodeKVUsage, t.DecodeContext, t.DecodeITLMs = cols[0], cols[1], cols[2]
	if len(cols[3]) == 0 {
		return fmt.Errorf("%s: no data rows", dec)
	}
	// The CSV repeats the scalar max_kv_tokens on every row.
	for i, m := range cols[3] {
		if m != cols[3][0] {
			return fmt.Errorf("%s: max_kv_tokens differs between rows (%v on data row 1, %v on data row %d)", dec, cols[3][0], m, i+1)
		}
	}
	t.MaxKVTokens, err = wholeNumber(cols[3][0])
	if err != nil {
		return fmt.Errorf("%s: max_kv_tokens: %w", dec, err)
	}
	return nil
}

// readColumns reads the named numeric columns of a CSV file with a header row; other columns are ignored.
func readColumns(path string, names ...string) ([][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: missing (a planner profile needs both %s and %s)", path, plannerPrefillCSV, plannerDecodeCSV)
		}
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: header: %w", path, err)
	}
	at := make([]int, len(names))
	for i, name := range names {
		at[i] = slices.Index(header, name)
		if at[i] < 0 {
			return nil, fmt.Errorf("%s: no column %q (header: %s)", path, name, strings.Join(header, ","))
		}
	}
	out := make([][]float64, len(names))
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for i, c := range at {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[c]), 64)
			if err != nil || !finite(v) {
				line, col := r.FieldPos(c)
				return nil, fmt.Errorf("%s:%d:%d: column %s: %q is not a finite number", path, line, col, names[i], rec[c])
			}
			out[i] = append(out[i], v)
		}
	}
	return out, nil
}

func wholeNumber(v float64) (int, error) {
	if v != math.Trunc(v) || v < 0 || v > 1<<53 {
		return 0, fmt.Errorf("%v is not a whole number of tokens", v)
	}
	return int(v), nil
}

// Cost implements timing.Model.
func (p *Planner) Cost(b *timing.Batch) timing.Cost {
	var c timing.Cost
	if n, isl, prefix := b.Prefill(); n > 0 && isl > prefix {
		c.Prefill = ms(p.PrefillMs(float64(isl - prefix)))
	}
	if n, sumCtx := b.Sampling(); n > 0 {
		c.Decode = ms(p.DecodeMs(float64(b.ActiveKVTokens), float64(sumCtx)/float64(n)))
	}
	return c
}

// PrefillMs is the modelled time to prefill newTokens prompt tokens (at least 0).
func (p *Planner) PrefillMs(newTokens float64) float64 {
	if newTokens <= 0 {
		return 0
	}
	return max(p.prefill.At(newTokens), 0)
}

// DecodeMs is the modelled time of a decode step with activeKVTokens in the pool and requests of mean
// context length meanContext (at least the reference's 1 ms floor).
func (p *Planner) DecodeMs(activeKVTokens, meanContext float64) float64 {
	return max(p.decode.At(meanContext, activeKVTokens), minDecodeMs)
}

// MaxKVTokens is the KV pool size of the profiled deployment, which the profile's usage fractions refer to.
func (p *Planner) MaxKVTokens() int { return p.maxKVTokens }
