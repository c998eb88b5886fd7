package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mocker-sim/mocker/live/vllmevents"
)

// TestServeLoRA: serve with --lora-modules lists the adapters in /v1/models as vLLM does, answers a
// request naming one under its name and refuses an unknown model with vLLM's 404; the same prompt shares
// its blocks with the same adapter only; the vLLM-format KV events carry the adapter (its name in the
// block hashes' extra keys, lora_name and lora_id in BlockStored); and /metrics exports
// vllm:lora_requests_info with the running adapters while a request runs.
func TestServeLoRA(t *testing.T) {
	cfg := serveConfig()
	cfg.SpeedupRatio = 1 // a long request runs for seconds, while /metrics is scraped
	cfg.NATS = "none"
	cfg.LoRAModules = []string{"sql-lora=/adapters/sql", "chat"}
	cfg.MaxLoRAs = 2
	cfg.ZMQKVEventsPort = freePort(t)
	cfg.KVHashSeed = "42"
	info, c := startServe(t, cfg)
	base := "http://" + info.Addr

	res, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID, Root    string
			Parent      *string
			MaxModelLen *int `json:"max_model_len"`
		}
	}
	err = json.NewDecoder(res.Body).Decode(&models)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range models.Data {
		parent := "null"
		if m.Parent != nil {
			parent = *m.Parent
		}
		got = append(got, fmt.Sprintf("%s root=%s parent=%s max_model_len=%v", m.ID, m.Root, parent, m.MaxModelLen != nil))
	}
	want := []string{
		"llama-3.1-8b root=llama-3.1-8b parent=null max_model_len=true",
		"sql-lora root=/adapters/sql parent=llama-3.1-8b max_model_len=false",
		"chat root= parent=llama-3.1-8b max_model_len=false",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("/v1/models:\n%q\nwant\n%q", got, want)
	}

	_, err = c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "nope", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(1)})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" || apiErr.Param != "model" {
		t.Fatalf("unknown model: %v, want a 404 model_not_found on param model", err)
	}

	msgs := subscribeZMQ(t, cfg.ZMQKVEventsPort, 256)

	send := func(modelName, prompt string, maxTokens int64) *openai.Completion {
		t.Helper()
		res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
			Model: openai.CompletionNewParamsModel(modelName), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)}, MaxTokens: openai.Int(maxTokens)})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// PUB drops what is published before the subscription arrives: send distinct prompts under sql-lora
	// until one's events come.
	hasher := vllmevents.NewHasher("42")
	var stored vllmevents.BlockStored
	var text string
	var sent []string
	deadline := time.Now().Add(30 * time.Second)
	for try := 0; stored.BlockHashes == nil; try++ {
		if time.Now().After(deadline) {
			t.Fatalf("no vLLM-format events arrived after %d requests", try)
		}
		sent = append(sent, fmt.Sprintf("attempt %d: %s", try, servePrompt))
		if r := send("sql-lora", sent[try], 1); r.Model != "sql-lora" {
			t.Fatalf("response model %q, want sql-lora", r.Model)
		}
		select {
		case m := <-msgs:
			b, err := vllmevents.DecodeBatch(m.Frames[2])
			if err != nil {
				t.Fatal(err)
			}
			if s, ok := b.Events[0].(vllmevents.BlockStored); ok {
				if txt, ok := sentPrompt(t, s, sent); ok {
					stored, text = s, txt
				}
			}
		case <-time.After(200 * time.Millisecond): // then another prompt, in case PUB dropped this one's
		}
	}
	prompt := serveTokens(text)
	parent := hasher.NoneHash()
	for i := range stored.BlockHashes {
		parent = hasher.LoRABlock(parent, prompt[16*i:16*(i+1)], "sql-lora")
		if stored.BlockHashes[i] != vllmevents.External(parent) {
			t.Fatalf("block %d: hash %x, want vLLM's with extra keys (sql-lora,) %x", i, stored.BlockHashes[i], vllmevents.External(parent))
		}
	}
	if len(stored.BlockHashes) != len(prompt)/16 || stored.LoraName != "sql-lora" || stored.LoraID != 1 {
		t.Fatalf("stored %d blocks of adapter %q (id %d), want %d of sql-lora (1)", len(stored.BlockHashes), stored.LoraName, stored.LoraID, len(prompt)/16)
	}

	// The same prompt again: its whole blocks cached under sql-lora only (but for the last token's, which
	// a whole cached prompt recomputes).
	full := int64((len(prompt) - 1) / 16 * 16)
	for _, ck := range []struct {
		model  string
		cached int64
	}{{"sql-lora", full}, {"chat", 0}, {"llama-3.1-8b", 0}, {"chat", full}} {
		if r := send(ck.model, text, 1); r.Usage.PromptTokensDetails.CachedTokens != ck.cached {
			t.Errorf("%s: %d cached tokens, want %d", ck.model, r.Usage.PromptTokensDetails.CachedTokens, ck.cached)
		}
	}

	// A long request of chat runs while /metrics is scraped.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
		Model: "chat", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("a long one")}, MaxTokens: openai.Int(4000)})
	if !st.Next() {
		t.Fatalf("stream: %v", st.Err())
	}
	res, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	cancel()
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	f := fams["vllm:lora_requests_info"]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("vllm:lora_requests_info: %v, want one series", f)
	}
	m := f.GetMetric()[0]
	var labels []string
	for _, l := range m.GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	wantLabels := []string{"engine=0", "max_lora=2", "running_lora_adapters=chat", "waiting_lora_adapters=", "worker=0"}
	if !slices.Equal(labels, wantLabels) {
		t.Errorf("labels %q, want %q", labels, wantLabels)
	}
	if v := m.GetGauge().GetValue(); v < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("value %v: want the time of the last update", v)
	}
	if f.GetType().String() != "GAUGE" || f.GetHelp() != "Running stats on lora requests." {
		t.Errorf("type %v, help %q", f.GetType(), f.GetHelp())
	}
}

// TestWorkerLoRAModules: `mocker worker` takes --lora-modules as serve does: a bad one is refused naming
// the flag, and a fleet worker given adapters exports vllm:lora_requests_info (in its registry: a fleet
// worker has no HTTP listener) and serves a request the frontend sends under an adapter.
func TestWorkerLoRAModules(t *testing.T) {
	cmd := newWorkerCmd()
	cmd.SetArgs([]string{"--nats", "nats://127.0.0.1:1", "--lora-modules", "=x"})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || err.Error() != `lora-modules "=x": want NAME or NAME=PATH` {
		t.Fatalf("worker --lora-modules =x: %v", err)
	}

	cfg := serveConfig()
	cfg.Workers, cfg.NATS, cfg.LoRAModules = 0, "embedded", []string{"chat"}
	info, c := startServe(t, cfg)

	wcfg := serveConfig()
	wcfg.NATS, wcfg.LoRAModules, wcfg.MaxLoRAs = info.NATSURL, []string{"chat"}, 3
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *serving, 1)
	done := make(chan error, 1)
	go func() { done <- serveAs(ctx, &wcfg, io.Discard, ready, true) }()
	var w *serving
	select {
	case w = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("worker: %v", err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker ended with %v", err)
		}
	}()

	rec := httptest.NewRecorder()
	w.Server.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	f := fams["vllm:lora_requests_info"]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("worker's vllm:lora_requests_info: %v, want one series", f)
	}
	var labels []string
	for _, l := range f.GetMetric()[0].GetLabel() {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	if want := []string{"engine=0", "max_lora=3", "running_lora_adapters=", "waiting_lora_adapters=", "worker=0"}; !slices.Equal(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}

	waitFor(t, "the worker in the frontend's fleet", func() bool { return len(info.Server.FleetWorkers()) == 1 })
	res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: "chat", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(servePrompt)}, MaxTokens: openai.Int(2)})
	if err != nil || res.Model != "chat" || res.Usage.CompletionTokens != 2 {
		t.Fatalf("completion under chat: %+v, %v", res, err)
	}
}
