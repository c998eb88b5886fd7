package report

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// WriteFile writes the file at path atomically with what write produces: it writes to a
// temporary file in the same directory, syncs it, and renames it over path only if write
// returned nil and every step succeeded. On any failure, or if write panics, the temporary
// file is removed and an existing file at path is left untouched, so a reader sees the old
// report or the new one, never a torn one. The new file has mode 0644. A path that is a
// symbolic link replaces the file it names, and one that names no regular file (/dev/null, a named
// pipe) or an open descriptor (/dev/stdout) is written in place (Target): a stream, which a failure
// may leave with part of the report.
//
// write gets a buffered writer; it need not flush it.
func WriteFile(path string, write func(io.Writer) error) error {
	if err := LinkError(path); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
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

// Target is the file WriteFile replaces for path: the file a symbolic link names (or would name, a link
// to a file not yet written), so that the link stays; and inPlace when path exists and is neither a
// regular file nor a directory (a device such as /dev/null, a named pipe), or names an open descriptor
// (/dev/stdout → /proc/self/fd/1, whichever file the shell sent it to), which WriteFile writes into as
// it is: renaming a file over it replaced the device, run as root, with a regular file, and a file
// standard output was sent to with a file holding the report alone.
func Target(path string) (target string, inPlace bool) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return dangling(path), false // a new file, or one a link names
	} else if err != nil {
		return path, false // a loop of links, a denied directory: WriteFile's error names it
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() || throughDescriptor(path) {
		return path, true
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real, false
	}
	return path, false
}

// descriptorName matches the names of a process's open descriptors.
var descriptorName = regexp.MustCompile(`^(/proc/(self|thread-self|[0-9]+)(/task/[0-9]+)?/fd|/dev/fd)/[0-9]+$`)

// LinkError is why path, a symbolic link, names no file WriteFile can write (a loop of links, a
// directory it may not enter), without the path, which the caller names; nil for a link to a file not
// yet written, or no link. A command checks its outputs by it before a run.
func LinkError(path string) error {
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return nil
	}
	if _, err := os.Stat(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return unwrapPath(err)
	}
	return nil
}

// maxLinks bounds the symbolic links followed from one path, as the kernel's 40.
const maxLinks = 40

// throughDescriptor reports whether path, or a link on the way from it, is a name of an open file
// descriptor (/proc/self/fd/N, /dev/fd/N).
func throughDescriptor(path string) bool {
	for range maxLinks {
		if abs, err := filepath.Abs(path); err == nil && descriptorName.MatchString(abs) {
			return true
		}
		next, ok := readLink(path)
		if !ok {
			return false
		}
		path = next
	}
	return false
}

// dangling is where a file written at path would be: the end of the symbolic links from path, or path.
func dangling(path string) string {
	for range maxLinks {
		next, ok := readLink(path)
		if !ok {
			return path
		}
		path = next
	}
	return path
}

// readLink is what the symbolic link path names, from path's directory; ok is false if path is no link.
func readLink(path string) (string, bool) {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		return "", false
	}
	link, err := os.Readlink(path)
	if err != nil {
		return "", false
	}
	if !filepath.IsAbs(link) {
		link = filepath.Join(filepath.Dir(path), link)
	}
	return link, true
}

// writeInPlace writes what write produces into path, which is not a regular file to replace: a device,
// a pipe, or a descriptor's file. Standard output's and error's own file is written through the
// process's descriptor, after what was written there; another is opened to append, so that a file
// a descriptor names keeps what it holds.
func writeInPlace(path string, write func(io.Writer) error) error {
	var f *os.File
	if fi, err := os.Stat(path); err == nil {
		for _, std := range []*os.File{os.Stdout, os.Stderr} {
			if sfi, err := std.Stat(); err == nil && os.SameFile(fi, sfi) {
				f = std
				break
			}
		}
	}
	own := f == nil
	if own {
		var err error
		if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err != nil {
			return fmt.Errorf("report: write %s: %w", path, unwrapPath(err))
		}
		defer f.Close() // on a panic; Close twice is harmless
	}
	bw := bufio.NewWriterSize(f, 64<<10)
	err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if own {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
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
