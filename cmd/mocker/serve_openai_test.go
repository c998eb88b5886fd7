package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/mocker-sim/mocker/config"
)

// serve's defaults for a catalog model are vLLM's: the BOS its tokenizer adds ("hi" is 2 prompt tokens
// for Llama-3), max_model_len from its config (/v1/models, and a 400 at once for a longer prompt), and
// choices that end early with finish_reason "stop" unless they ignore EOS.
func TestServeOpenAIDefaults(t *testing.T) {
	cfg := config.Default()
	cfg.SpeedupRatio = 1000
	info, c := startServe(t, cfg)
	ctx := context.Background()

	res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "llama-3.1-8b",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(3),
	}, option.WithJSONSet("ignore_eos", true))
	if err != nil || res.Usage.PromptTokens != 2 || res.Usage.CompletionTokens != 3 || res.Choices[0].FinishReason != "length" {
		t.Fatalf(`"hi" with ignore_eos: %v %+v; want 2 prompt tokens, 3 generated, length`, err, res)
	}

	hr, err := http.Get("http://" + info.Addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			MaxModelLen *int `json:"max_model_len"`
		} `json:"data"`
	}
	err = json.NewDecoder(hr.Body).Decode(&models)
	hr.Body.Close()
	if err != nil || len(models.Data) != 1 || models.Data[0].MaxModelLen == nil || *models.Data[0].MaxModelLen != 131072 {
		t.Fatalf("/v1/models: %v %+v, want max_model_len 131072", err, models)
	}

	ids := make([]int64, 200_001)
	for i := range ids {
		ids[i] = 1000
	}
	_, err = c.Completions.New(ctx, openai.CompletionNewParams{Model: "llama-3.1-8b",
		Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ids}, MaxTokens: openai.Int(1)})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != "input_tokens" ||
		!strings.HasPrefix(ae.Message, "This model's maximum context length is 131072 tokens. However, your request has 200001 input tokens.") {
		t.Fatalf("200,001-token prompt: %v; want vLLM's 400", err)
	}

	// uniform by default: some of 20 choices of at most 50 tokens end early, each "stop" exactly when
	// it is shorter than max_tokens.
	res, err = c.Completions.New(ctx, openai.CompletionNewParams{Model: "llama-3.1-8b",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(servePrompt)}, MaxTokens: openai.Int(50),
		N: openai.Int(20), Logprobs: openai.Int(0)})
	if err != nil {
		t.Fatal(err)
	}
	stops := 0
	for _, ch := range res.Choices {
		n := len(ch.Logprobs.Tokens)
		if (n < 50) != (ch.FinishReason == "stop") || n < 1 || n > 50 {
			t.Fatalf("choice %d: %d tokens, finish_reason %q", ch.Index, n, ch.FinishReason)
		}
		if n < 50 {
			stops++
		}
	}
	if stops < 10 { // 19.6 expected
		t.Fatalf("%d of 20 choices ended early", stops)
	}
}
