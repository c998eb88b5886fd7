package live

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLoadUnloadLoRA: /v1/load_lora_adapter and /v1/unload_lora_adapter change which model names a
// request may give and /v1/models lists, with vLLM's answers and errors.
func TestLoadUnloadLoRA(t *testing.T) {
	o := testOptions(1, 1, math.Inf(1))
	o.LoRAModules = []LoRAModule{{Name: "sql-lora", Path: "/adapters/sql"}}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	do := func(method, path, body string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
		b, _ := io.ReadAll(rec.Body)
		return rec.Code, string(b)
	}
	complete := func(model string) int {
		code, _ := do("POST", "/v1/completions", `{"model": "`+model+`", "prompt": "hi", "max_tokens": 1}`)
		return code
	}
	models := func() string {
		_, body := do("GET", "/v1/models", "")
		var l struct{ Data []struct{ ID, Root string } }
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range l.Data {
			ids = append(ids, m.ID+"@"+m.Root)
		}
		return strings.Join(ids, " ")
	}
	errOf := func(body string) string {
		var e struct {
			Error struct{ Message, Param string }
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		return e.Error.Param + ": " + e.Error.Message
	}
	steps := []struct {
		path, body string
		code       int
		answer     string
	}{
		{"/v1/load_lora_adapter", `{"lora_name": "chat", "lora_path": "/adapters/chat"}`, 200, "Success: LoRA adapter 'chat' added successfully."},
		{"/v1/load_lora_adapter", `{"lora_name": "chat", "lora_path": "/elsewhere"}`, 400, "lora_name: The lora adapter 'chat' has already been loaded."},
		{"/v1/load_lora_adapter", `{"lora_name": "` + testModel + `", "lora_path": "/x"}`, 400, "lora_name: The lora adapter '" + testModel + "' has already been loaded."},
		{"/v1/load_lora_adapter", `{"lora_name": "` + strings.Repeat("x", 257) + `", "lora_path": "/x"}`, 400, "lora_name: An adapter's name is at most 256 bytes."},
		{"/v1/load_lora_adapter", `{"lora_name": "x"}`, 400, "lora_path: Both 'lora_name' and 'lora_path' must be provided."},
		{"/v1/load_lora_adapter", `{"lora_path": "/x"}`, 400, "lora_name: 'lora_name' must be provided."},
		{"/v1/unload_lora_adapter", `{"lora_name": "sql-lora"}`, 200, "Success: LoRA adapter 'sql-lora' removed successfully."},
		{"/v1/unload_lora_adapter", `{"lora_name": "sql-lora"}`, 404, "lora_name: The lora adapter 'sql-lora' cannot be found."},
	}
	for _, st := range steps {
		code, body := do("POST", st.path, st.body)
		got := body
		if code != http.StatusOK {
			got = errOf(body)
		}
		if code != st.code || got != st.answer {
			t.Fatalf("%s %s: %d %q, want %d %q", st.path, st.body, code, got, st.code, st.answer)
		}
	}
	if got, want := models(), testModel+"@"+testModel+" chat@/adapters/chat"; got != want {
		t.Errorf("/v1/models: %s, want %s", got, want)
	}
	for model, want := range map[string]int{"chat": 200, "sql-lora": 404, testModel: 200} {
		if code := complete(model); code != want {
			t.Errorf("model %s: %d, want %d", model, code, want)
		}
	}
}
