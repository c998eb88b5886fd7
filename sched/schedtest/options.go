package schedtest

import "testing"

// CheckOptions checks that ok is valid and that each edit of it in cases is refused, by validate and by
// build (a scheduler's New) alike, with exactly the message it is keyed by.
func CheckOptions[O any](t *testing.T, ok O, validate, build func(O) error, cases map[string]func(*O)) {
	t.Helper()
	if err := validate(ok); err != nil {
		t.Fatalf("valid options: %v", err)
	}
	for want, edit := range cases {
		o := ok
		edit(&o)
		if err := validate(o); err == nil || err.Error() != want {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
		if err := build(o); err == nil || err.Error() != want {
			t.Errorf("New() = %v, want %q", err, want)
		}
	}
}

// CheckParse checks that parse maps each name in values to its value and refuses each input in bad
// ("" included, if it should be) with exactly the error bad gives it.
func CheckParse[T comparable](t *testing.T, parse func(string) (T, error), values map[string]T, bad map[string]string) {
	t.Helper()
	for s, want := range values {
		if got, err := parse(s); got != want || err != nil {
			t.Errorf("parse(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for s, want := range bad {
		if _, err := parse(s); err == nil || err.Error() != want {
			t.Errorf("parse(%q) = %v, want %q", s, err, want)
		}
	}
}
