//go:build unix

package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestWriteFileInPlace: a path that is no regular file (a named pipe here, as /dev/null and /dev/stdout
// are devices) is written into, and stays what it was. WriteFile renamed a temporary file over it, which
// replaced /dev/null with a regular file when run as root.
func TestWriteFileInPlace(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Opened without blocking, the reader lets the writer open; with no writer it reads EOF at once.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := WriteFile(fifo, func(w io.Writer) error { _, err := io.WriteString(w, "report"); return err }); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	if string(got) != "report" {
		t.Errorf("the pipe's reader got %q (%v), want \"report\"", got, err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("after WriteFile the pipe is %v (%v), want a named pipe", fi.Mode(), err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"fifo"}) {
		t.Errorf("directory holds %q, want only fifo", got)
	}
}

// TestWriteFileSymlink: a symbolic link to a report is kept, and the file it names is replaced
// (atomically, in the file's own directory); WriteFile replaced the link with a file.
func TestWriteFileSymlink(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	target, link := filepath.Join(other, "report.json"), filepath.Join(dir, "link.json")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if err := WriteFile(link, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("after WriteFile the link is %v (%v), want a symbolic link", fi.Mode(), err)
	}
	if got, err := os.ReadFile(target); string(got) != "new" {
		t.Errorf("the linked file holds %q (%v), want \"new\"", got, err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"link.json"}) {
		t.Errorf("the link's directory holds %q, want only link.json", got)
	}
	if got := names(t, other); !slices.Equal(got, []string{"report.json"}) {
		t.Errorf("the file's directory holds %q, want only report.json", got)
	}
}

// TestWriteFileThroughDescriptor: a path that names an open descriptor (/dev/stdout is
// /proc/self/fd/1) writes into the file the descriptor has, after what it holds; the process's own
// standard output is written through its descriptor, so that what it writes next lands after the report.
// Renaming over the path resolved to that file replaced the file with the report alone.
func TestWriteFileThroughDescriptor(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	out := filepath.Join(t.TempDir(), "out.txt")
	for _, asStdout := range []bool{false, true} {
		f, err := os.Create(out) // as a shell's > opens it
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(f, "summary\n")
		before, _ := f.Stat()
		saved := os.Stdout
		if asStdout {
			os.Stdout = f
		}
		path := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
		err = WriteFile(path, func(w io.Writer) error { _, err := io.WriteString(w, "report\n"); return err })
		os.Stdout = saved
		if err != nil {
			t.Fatal(err)
		}
		want := "summary\nreport\n"
		if asStdout { // written through the descriptor itself, whose offset what follows takes up
			io.WriteString(f, "after\n")
			want += "after\n"
		}
		f.Close()
		got, err := os.ReadFile(out)
		if string(got) != want {
			t.Errorf("standard output %v: the file holds %q (%v), want %q", asStdout, got, err, want)
		}
		if now, err := os.Stat(out); err != nil || !os.SameFile(before, now) {
			t.Errorf("standard output %v: the file was replaced (%v)", asStdout, err)
		}
	}
}

// TestWriteFileDanglingLink: a link to a report not yet written stays a link, and the report is
// written where it points.
func TestWriteFileDanglingLink(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	link, target := filepath.Join(dir, "latest.json"), filepath.Join(other, "r1.json")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if err := WriteFile(link, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("after WriteFile the link is %v (%v), want a symbolic link", fi.Mode(), err)
	}
	if got, err := os.ReadFile(target); string(got) != "new" {
		t.Errorf("the file the link names holds %q (%v), want \"new\"", got, err)
	}
}

// TestWriteFileLinkLoop: a path in a loop of links is an error, and the links stay; it was replaced by
// a file. A path under /proc that names no descriptor is a file like any other, replaced, not appended to.
func TestWriteFileLinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if os.Symlink(b, a) != nil || os.Symlink(a, b) != nil {
		t.Skip("no symbolic links")
	}
	err := WriteFile(a, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err })
	if err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
		t.Errorf("WriteFile into a loop: %v", err)
	}
	if fi, err := os.Lstat(a); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link became %v (%v)", fi.Mode(), err)
	}
	if _, inPlace := Target("/proc/self/cwd"); inPlace {
		t.Error("/proc/self/cwd taken for a descriptor")
	}
	if _, inPlace := Target("/proc/self/fd/1"); !inPlace {
		t.Error("/proc/self/fd/1 not taken for a descriptor")
	}
}
