package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes the file at path atomically with what write produces: it writes to a
// temporary file in the same directory, syncs it, and renames it over path only if write
// returned nil and every step succeeded. On any failure, or if write panics, the temporary
// file is removed and an existing file at path is left untouched, so a reader sees the old
// report or the new one, never a torn one. The new file has mode 0644.
//
// write gets a buffered writer; it need not flush it.
func WriteFile(path string, write func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// Same directory, so the rename cannot cross file systems and is atomic.
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		// Name the file asked for, not the temporary one.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()

	bw := bufio.NewWriterSize(f, 64<<10)
	if err := write(bw); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	// CreateTemp makes the file 0600; a report is meant to be read by others.
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	// Sync before the rename, or a crash could leave the new name on empty data.
	if err := f.Sync(); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	done = true
	return nil
}
