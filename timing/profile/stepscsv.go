package profile

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The step-profile CSV format (shared/data/SOURCES.md §5): one row per measured point.
//
//	model,kind,batch,tokens,ctx,ms_p50,ms_p10,ms_p90,reps
//
// Kinds and the fields they use (others are carried but ignored):
//
//	linear        non-attention work of the whole model for tokens tokens          batch = 1
//	attn_prefill  causal attention of all layers, one sequence of tokens tokens    batch = 1
//	attn_decode   decode attention of all layers, batch sequences at context ctx   tokens = batch, ctx ≥ 1
//	prefill       the full forward pass of one sequence of tokens tokens           batch = 1
//	decode        one full decode step of batch sequences at context ctx           tokens = batch, ctx ≥ 1
//
// Times are milliseconds; the model uses ms_p50.
const stepsHeader = "model,kind,batch,tokens,ctx,ms_p50,ms_p10,ms_p90,reps"

const (
	kindLinear      = "linear"
	kindAttnPrefill = "attn_prefill"
	kindAttnDecode  = "attn_decode"
	kindPrefill     = "prefill"
	kindDecode      = "decode"
)

// stepRow is one validated row of a step profile.
type stepRow struct {
	line               int
	model, kind        string
	batch, tokens, ctx int
	p50, p10, p90      float64
	reps               int
}

func (r stepRow) tokensF() float64 { return float64(r.tokens) }
func (r stepRow) batchF() float64  { return float64(r.batch) }
func (r stepRow) ctxF() float64    { return float64(r.ctx) }
func (r stepRow) p50ms() float64   { return r.p50 }

func column(rows []stepRow, f func(stepRow) float64) []float64 {
	out := make([]float64, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

// StepsFile is a step profile in the built-in CSV format (see the data/ file), read and validated: every
// row, of every model it holds, from which one model's Steps are built.
type StepsFile struct {
	path string
	rows []stepRow
}

// ReadSteps reads and validates a step profile; errors name the file, line and column.
func ReadSteps(path string) (*StepsFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	defer f.Close()
	rows, err := parseSteps(path, f)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return &StepsFile{path: path, rows: rows}, nil
}

// Models are the models the file's rows name, in the order of their first rows.
func (f *StepsFile) Models() []string {
	var models []string
	for _, r := range f.rows {
		if !slices.Contains(models, r.model) {
			models = append(models, r.model)
		}
	}
	return models
}

// Steps builds the Steps of model's rows.
func (f *StepsFile) Steps(model string) (*Steps, error) {
	s, err := newSteps(f.path, model, f.rows)
	if err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return s, nil
}

// parseSteps reads and validates a step profile. file names it in errors.
func parseSteps(file string, in io.Reader) ([]stepRow, error) {
	r := csv.NewReader(in)
	r.FieldsPerRecord = -1 // checked here, to say which column is missing
	r.ReuseRecord = true
	header, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s: empty file, want the header %s", file, stepsHeader)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	want := strings.Split(stepsHeader, ",")
	for i, name := range want {
		if i >= len(header) || strings.TrimSpace(header[i]) != name {
			return nil, fmt.Errorf("%s:1: header %q, want %s", file, strings.Join(header, ","), stepsHeader)
		}
	}
	if len(header) != len(want) {
		return nil, fmt.Errorf("%s:1: header %q, want %s", file, strings.Join(header, ","), stepsHeader)
	}

	type key struct {
		model, kind        string
		batch, tokens, ctx int
	}
	seen := map[key]int{}
	var rows []stepRow
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%s:%d:%d: %w", file, pe.Line, pe.Column, pe.Err)
			}
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) != len(want) {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d (%s)", file, line, len(rec), len(want), stepsHeader)
		}
		p := rowParser{file: file, r: r, rec: rec}
		row := stepRow{
			line:   line,
			model:  strings.TrimSpace(rec[0]),
			kind:   strings.TrimSpace(rec[1]),
			batch:  p.int(2, 1),
			tokens: p.int(3, 1),
			ctx:    p.int(4, 0),
			p50:    p.ms(5),
			p10:    p.ms(6),
			p90:    p.ms(7),
			reps:   p.int(8, 1),
		}
		if row.model == "" {
			p.fail(0, "empty model name")
		}
		switch row.kind {
		case kindLinear, kindAttnPrefill, kindPrefill:
			if p.err == nil && row.batch != 1 {
				p.fail(2, "%s rows measure one sequence: batch %d, want 1", row.kind, row.batch)
			}
		case kindAttnDecode, kindDecode:
			if p.err == nil && row.tokens != row.batch {
				p.fail(3, "%s rows compute one token per sequence: tokens %d, want batch = %d", row.kind, row.tokens, row.batch)
			}
			if p.err == nil && row.ctx < 1 {
				p.fail(4, "%s rows need a context: ctx %d, want >= 1", row.kind, row.ctx)
			}
		default:
			p.fail(1, "unknown kind %q (want %s, %s, %s, %s or %s)", row.kind, kindLinear, kindAttnPrefill, kindAttnDecode, kindPrefill, kindDecode)
		}
		if p.err == nil && row.p50 <= 0 {
			p.fail(5, "ms_p50 %v, want > 0", row.p50)
		}
		if p.err == nil && !(row.p10 <= row.p50 && row.p50 <= row.p90) {
			p.fail(5, "percentiles out of order: p10 %v, p50 %v, p90 %v", row.p10, row.p50, row.p90)
		}
		if p.err != nil {
			return nil, p.err
		}
		k := key{row.model, row.kind, row.batch, row.tokens, row.ctx}
		if row.kind != kindAttnDecode && row.kind != kindDecode {
			k.ctx = 0 // ignored by these kinds, so it cannot tell two points apart
		}
		if prev, dup := seen[k]; dup {
			return nil, fmt.Errorf("%s:%d: the same point as line %d (%s %s batch %d tokens %d ctx %d)",
				file, line, prev, row.model, row.kind, row.batch, row.tokens, row.ctx)
		}
		seen[k] = line
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: no data rows", file)
	}
	return rows, nil
}

// rowParser parses the fields of one record, keeping the first error.
type rowParser struct {
	file string
	r    *csv.Reader
	rec  []string
	err  error
}

func (p *rowParser) fail(col int, format string, args ...any) {
	if p.err != nil {
		return
	}
	line, c := p.r.FieldPos(col)
	name := strings.Split(stepsHeader, ",")[col]
	p.err = fmt.Errorf("%s:%d:%d: column %s: %s", p.file, line, c, name, fmt.Sprintf(format, args...))
}

func (p *rowParser) int(col, least int) int {
	s := strings.TrimSpace(p.rec[col])
	v, err := strconv.Atoi(s)
	switch {
	case err != nil:
		p.fail(col, "%q is not an integer", s)
	case v < least:
		p.fail(col, "%d, want >= %d", v, least)
	}
	return v
}

func (p *rowParser) ms(col int) float64 {
	s := strings.TrimSpace(p.rec[col])
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil || !finite(v):
		p.fail(col, "%q is not a finite number", s)
	case v < 0:
		p.fail(col, "%v ms, want >= 0", v)
	}
	return v
}
