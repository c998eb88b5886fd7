package live

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzPromptField: a completion's prompt, decoded in its body by decodeBody, reads as json.Unmarshal reads it: a
// plain string is the string json.Unmarshal gives, and any other value keeps its JSON for
// completionPrompts.
func FuzzPromptField(f *testing.F) {
	for _, s := range []string{`"hi"`, `""`, `"a\"b"`, `"\u00e9t\u00e9"`, `"\ud83d\ude00"`, `"caf` + "\xc3\xa9" + `"`,
		`"bad ` + "\xff" + ` utf-8"`, `"` + "\xef\xbf\xbd" + `"`, `[1, 2]`, `["a", "b"]`, `null`, `7`, `{"a": 1}`, `"\/"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		body := append(append([]byte(`{"prompt": `), value...), '}')
		if !json.Valid(body) {
			return
		}
		var req completionRequest
		if e := decodeBody(body, &req); e != nil {
			t.Fatalf("%s: %v", body, e)
		}
		var want string
		wantErr := json.Unmarshal(value, &want)
		p := req.Prompt
		if p.plain {
			if wantErr != nil || p.text != want {
				t.Fatalf("%q: read as the plain string %q; json.Unmarshal gives %q (error %v)", value, p.text, want, wantErr)
			}
			return
		}
		if !bytes.Equal(p.raw, bytes.TrimSpace(value)) {
			t.Fatalf("%q: kept the JSON %q", value, p.raw)
		}
		if v := bytes.TrimSpace(value); v[0] == '"' && !bytes.Contains(v, []byte{'\\'}) && !bytes.ContainsRune(v, 0xfffd) {
			t.Fatalf("%q: a string without escapes or invalid UTF-8 was not read as plain", value)
		}
	})
}

func TestPromptFieldPlain(t *testing.T) {
	for _, tc := range []struct {
		body  string
		plain bool
		text  string
	}{
		{`{"prompt": "Request 7 asks"}`, true, "Request 7 asks"},
		{`{"prompt": "caf` + "\xc3\xa9" + `"}`, true, "café"},
		{`{"prompt": "a\nb"}`, false, ""},
		{`{"prompt": "bad ` + "\xff" + `"}`, false, ""},
		{`{"prompt": [1, 2]}`, false, ""},
	} {
		var req completionRequest
		if e := decodeBody([]byte(tc.body), &req); e != nil {
			t.Fatal(e)
		}
		if req.Prompt.plain != tc.plain || req.Prompt.text != tc.text {
			t.Errorf("%s: plain %v text %q, want %v %q", tc.body, req.Prompt.plain, req.Prompt.text, tc.plain, tc.text)
		}
	}
}
