package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestScalingJSONLNeedsPlanner: --scaling-jsonl without --planner-config has nothing to write, so it is
// refused before the run rather than leaving an empty file.
func TestScalingJSONLNeedsPlanner(t *testing.T) {
	dir := t.TempDir()
	s := filepath.Join(dir, "s.jsonl")
	out, stderr, err := mocker(t, "predict", "--num-requests", "5", "--scaling-jsonl", s)
	if want := `scaling-jsonl "` + s + `": applies to --planner-config, which is not given`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if out != "" || strings.Contains(stderr, "simulated") {
		t.Errorf("ran before failing:\n%s%s", out, stderr)
	}
	if _, err := os.Stat(s); err == nil {
		t.Errorf("left %s behind", s)
	}
}
