package aic

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/csv"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// EmbeddedRoot is the Options.Root of the tables built into the binary: compact extracts of
// AIConfigurator's H200 database (embedded/PROVENANCE.md), in the same layout as a database on disk.
const EmbeddedRoot = "<embedded>"

//go:embed embedded/h200_sxm embedded/h200_sxm.yaml
var embedded embed.FS

// compactExt names a table stored as a gzip'd CSV of only the columns and rows the model reads
// (writeCompact). The header names each column with its kind, "name:f" (numbers, written exactly:
// strconv 'g', -1) or "name:s".
const compactExt = ".csv.gz"

// embeddedPath splits a path under EmbeddedRoot into the embedded FS and its slash path there.
func embeddedPath(p string) (fs.FS, string, bool) {
	rel, ok := strings.CutPrefix(p, EmbeddedRoot+string(filepath.Separator))
	if !ok {
		if p != EmbeddedRoot {
			return nil, "", false
		}
		rel = "."
	}
	return embedded, path.Join("embedded", filepath.ToSlash(rel)), true
}

func statPath(p string) (fs.FileInfo, error) {
	if fsys, rel, ok := embeddedPath(p); ok {
		return fs.Stat(fsys, rel)
	}
	return os.Stat(p)
}

func readDirPath(p string) ([]fs.DirEntry, error) {
	if fsys, rel, ok := embeddedPath(p); ok {
		return fs.ReadDir(fsys, rel)
	}
	return os.ReadDir(p)
}

func readFilePath(p string) ([]byte, error) {
	if fsys, rel, ok := embeddedPath(p); ok {
		return fs.ReadFile(fsys, rel)
	}
	return os.ReadFile(p)
}

// parseCompact reads a table written by writeCompact.
func parseCompact(p string) (*table, error) {
	data, err := readFilePath(p)
	if err != nil {
		return nil, fmt.Errorf("aic: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("aic: %s: %w", p, err)
	}
	r := csv.NewReader(bufio.NewReader(zr))
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("aic: %s: header: %w", p, err)
	}
	t := &table{path: p, num: map[string][]float64{}, str: map[string][]string{}}
	names := slices.Clone(head)
	numeric := make([]bool, len(head))
	for i, h := range head {
		name, kind, ok := strings.Cut(h, ":")
		if !ok || kind != "f" && kind != "s" {
			return nil, fmt.Errorf("aic: %s: header column %q: want name:f or name:s", p, h)
		}
		names[i], numeric[i] = name, kind == "f"
	}
	// The columns fill by position, and go into the table's maps by name at the end: a map update per
	// field was most of the time a deployment's tables took to read.
	nums, strs := make([][]float64, len(head)), make([][]string, len(head))
	intern := map[string]string{}
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("aic: %s: %w", p, err)
		}
		for i, v := range rec {
			if !numeric[i] {
				s, ok := intern[v]
				if !ok {
					s = strings.Clone(v)
					intern[s] = s
				}
				strs[i] = append(strs[i], s)
				continue
			}
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("aic: %s: line %d: column %s: %w", p, line, names[i], err)
			}
			nums[i] = append(nums[i], f)
		}
		t.rows++
	}
	if err := zr.Close(); err != nil {
		return nil, fmt.Errorf("aic: %s: %w", p, err)
	}
	for i, name := range names {
		switch {
		case t.rows == 0: // no column, as when the rows made them
		case numeric[i]:
			t.num[name] = nums[i]
		default:
			t.str[name] = strs[i]
		}
	}
	return t, nil
}

// writeCompact writes rows (indices into t) of t's columns cols as a compact table: a gzip'd CSV
// whose bytes depend only on the values (no timestamp or name in the gzip header).
func writeCompact(w io.Writer, t *table, cols []string, rows []int) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(zw)
	head := make([]string, len(cols))
	for i, c := range cols {
		if _, ok := t.num[c]; ok {
			head[i] = c + ":f"
		} else {
			head[i] = c + ":s"
		}
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	rec := make([]string, len(cols))
	for _, r := range rows {
		for i, c := range cols {
			if v, ok := t.num[c]; ok {
				rec[i] = strconv.FormatFloat(v[r], 'g', -1, 64)
			} else {
				rec[i] = t.str[c][r]
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return zw.Close()
}
