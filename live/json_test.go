package live

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestAppendJSONString: a string and the same bytes append the same JSON: the escapes JSON needs,
// U+FFFD for invalid UTF-8, U+2028 and U+2029 escaped, the rest as it is.
func TestAppendJSONString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"plain text", `"plain text"`},
		{"say \"hi\"\\ \n\r\t\x00\x1f\x7f", `"say \"hi\"\\ \n\r\t\u0000\u001f` + "\x7f\""},
		{"héllo 世界 🙂", `"héllo 世界 🙂"`},
		{"bad \xff\xfe end \xe4\xb8", `"bad \ufffd\ufffd end \ufffd\ufffd"`},
		{"line\u2028para\u2029", `"line\u2028para\u2029"`},
	} {
		if got := string(appendJSONString([]byte("x"), tc.in)); got != "x"+tc.want {
			t.Errorf("appendJSONString(%q) = %s, want x%s", tc.in, got, tc.want)
		}
		if got := string(appendJSONString([]byte("x"), []byte(tc.in))); got != "x"+tc.want {
			t.Errorf("appendJSONString([]byte(%q)) = %s, want x%s", tc.in, got, tc.want)
		}
	}
}

// FuzzAppendJSONString: for any input, the string and []byte forms agree, and the result is one JSON
// string that decodes to the input with each byte of invalid UTF-8 replaced by U+FFFD.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n\x01b", "\xff\xe4\xb8 世 \u2028", "\U0001F642\xf0\x9f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendJSONString(nil, s)
		if b := appendJSONString(nil, []byte(s)); !bytes.Equal(b, got) {
			t.Fatalf("string form %s, []byte form %s", got, b)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%s: %v", got, err)
		}
		if want := string([]rune(s)); back != want { // each invalid byte a U+FFFD, as encoding/json writes it
			t.Fatalf("%s decodes to %q, want %q", got, back, want)
		}
	})
}

// BenchmarkAppendJSONString measures appending a choice's text (4 KiB, a few escapes and runes) as JSON.
func BenchmarkAppendJSONString(b *testing.B) {
	text := []byte(strings.Repeat("The weather in Zürich is \"mild\".\n", 124))
	buf := make([]byte, 0, 2*len(text))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		buf = appendJSONString(buf[:0], text)
	}
}
