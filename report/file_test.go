package report

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// names lists dir, to catch temporary files left behind.
func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteFile(t *testing.T) {
	errWrite := errors.New("write failed")
	tests := []struct {
		name  string
		old   string // existing content; "" for no file
		write func(io.Writer) error
		want  string // content afterwards; "" for no file
		err   error
	}{
		{"new", "", func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }, "new", nil},
		{"replace", "old", func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }, "new", nil},
		{"fail", "", func(w io.Writer) error { io.WriteString(w, "partial"); return errWrite }, "", errWrite},
		{"fail keeps old", "old", func(w io.Writer) error { io.WriteString(w, "partial"); return errWrite }, "old", errWrite},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		path := filepath.Join(dir, "report.json")
		if tt.old != "" {
			if err := os.WriteFile(path, []byte(tt.old), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		err := WriteFile(path, tt.write)
		if !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("%s: WriteFile error = %v, want %v", tt.name, err, tt.err)
		}
		got, err := os.ReadFile(path)
		switch {
		case tt.want == "" && !errors.Is(err, os.ErrNotExist):
			t.Errorf("%s: file exists (%q, %v), want none", tt.name, got, err)
		case tt.want != "" && string(got) != tt.want:
			t.Errorf("%s: file = %q (%v), want %q", tt.name, got, err, tt.want)
		}
		want := []string{"report.json"}
		if tt.want == "" {
			want = nil
		}
		if got := names(t, dir); !slices.Equal(got, want) {
			t.Errorf("%s: directory holds %q, want %q", tt.name, got, want)
		}
		if tt.want != "" {
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("%s: mode = %v, %v; want 0644", tt.name, fi.Mode(), err)
			}
		}
	}
}

func TestWriteFilePanic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() { recover() }()
		WriteFile(path, func(w io.Writer) error {
			io.WriteString(w, "partial")
			panic("boom")
		})
	}()
	if got, err := os.ReadFile(path); err != nil || string(got) != "old" {
		t.Errorf("file = %q, %v; want \"old\"", got, err)
	}
	if got := names(t, dir); !slices.Equal(got, []string{"report.json"}) {
		t.Errorf("directory holds %q, want only report.json", got)
	}
}

func TestWriteFileNoDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "report.json")
	err := WriteFile(path, func(io.Writer) error { return nil })
	if want := "report: write " + path + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("WriteFile(%s) = %v, want %q", path, err, want)
	}
}
