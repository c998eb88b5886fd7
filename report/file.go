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
// report or the new one, never a torn one. The new file has mode 0644. A path that is a
// symbolic link replaces the file it names, and one that names no regular file (/dev/null,
// /dev/stdout, a named pipe) is written in place (Target).
//
// write gets a buffered writer; it need not flush it.
func WriteFile(path string, write func(io.Writer) error) error {
	target, inPlace := Target(path)
	if inPlace {
		return writeInPlace(path, write)
	}
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	// Same directory, so the rename cannot cross file systems and is atomic.
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		// Name the file asked for, not the temporary one.
		return fmt.Errorf("report: write %s: %w", path, unwrapPath(err))
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
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	done = true
	return nil
}

// Target is the file WriteFile replaces for path: the regular file a symbolic link names, so that the
// link stays; and inPlace when path exists and is neither a regular file nor a directory (a device
// such as /dev/null or /dev/stdout, a named pipe), which WriteFile writes into as it is: renaming a
// file over it replaced the device, run as root, with a regular file.
func Target(path string) (target string, inPlace bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return path, false // a new file (or a dangling link, replaced)
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		return path, true
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real, false
	}
	return path, false
}

// writeInPlace writes what write produces into path, which is not a regular file: there is nothing to
// replace atomically, and what a reader sees is a stream.
func writeInPlace(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("report: write %s: %w", path, unwrapPath(err))
	}
	defer f.Close() // on a panic; Close twice is harmless
	bw := bufio.NewWriterSize(f, 64<<10)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	return nil
}

// unwrapPath drops an *os.PathError's operation and path, which the caller names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
