package live

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestInjectedFailuresReachClients: with --failure-rate 1 every request fails with the chosen type's
// status, OpenAI error type, code and param, as the openai-go client sees them.
func TestInjectedFailuresReachClients(t *testing.T) {
	for _, tc := range []struct {
		typ, errType, code, param string
		status                    int
	}{
		{FailureRateLimit, "rate_limit_error", "rate_limit_exceeded", "", 429},
		{FailureInvalidAPIKey, "authentication_error", "invalid_api_key", "", 401},
		{FailureContextLength, "invalid_request_error", "context_length_exceeded", "messages", 400},
		{FailureServerError, "server_error", "service_unavailable", "", 503},
		{FailureInvalidRequest, "invalid_request_error", "", "model", 400},
		{FailureModelNotFound, "invalid_request_error", "model_not_found", "model", 404},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			o := testOptions(5, 1, math.Inf(1))
			o.FailureRate, o.FailureTypes = 1, []string{tc.typ}
			_, _, c := start(t, o)
			ctx := context.Background()
			_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: testModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxCompletionTokens: openai.Int(2)})
			var e *openai.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *openai.Error", err)
			}
			if e.StatusCode != tc.status || e.Type != tc.errType || e.Code != tc.code || e.Param != tc.param {
				t.Errorf("status %d, type %q, code %q, param %q; want %d, %q, %q, %q", e.StatusCode, e.Type, e.Code, e.Param, tc.status, tc.errType, tc.code, tc.param)
			}
			st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
				Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(2)})
			for st.Next() {
			}
			if !errors.As(st.Err(), &e) || e.StatusCode != tc.status {
				t.Errorf("stream: err %v, want status %d", st.Err(), tc.status)
			}
		})
	}
}

// outcomes sends n requests one at a time and returns each one's status.
func outcomes(t *testing.T, rate float64, seed uint64, n int) []int {
	o := testOptions(5, 1, math.Inf(1))
	o.FailureRate, o.FailureSeed = rate, seed
	_, _, c := start(t, o)
	var got []int
	for range n {
		_, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
			Model: testModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(1)})
		var e *openai.Error
		switch {
		case err == nil:
			got = append(got, 200)
		case errors.As(err, &e):
			got = append(got, e.StatusCode)
		default:
			t.Fatal(err)
		}
	}
	return got
}

// TestInjectedFailuresDeterministic: a seed fixes which requests fail and how; the share follows the
// rate.
func TestInjectedFailuresDeterministic(t *testing.T) {
	const n = 200
	a, b := outcomes(t, 0.3, 1, n), outcomes(t, 0.3, 1, n)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different outcomes:\n%v\n%v", a, b)
	}
	if c := outcomes(t, 0.3, 2, n); slices.Equal(a, c) {
		t.Error("seeds 1 and 2 gave the same outcomes")
	}
	failed := n - countOf(a, 200)
	// Binomial(200, 0.3): mean 60, sd 6.5; [30, 90] is beyond 4.5 sd.
	if failed < 30 || failed > 90 {
		t.Errorf("%d of %d requests failed at rate 0.3", failed, n)
	}
	statuses := map[int]bool{}
	for _, s := range a {
		statuses[s] = true
	}
	for _, s := range []int{200, 400, 401, 404, 429, 503} {
		if !statuses[s] {
			t.Errorf("no request answered %d among %v", s, a)
		}
	}
	if got := outcomes(t, 0, 7, 20); countOf(got, 200) != 20 {
		t.Errorf("rate 0: outcomes %v, want all 200", got)
	}
}

func countOf(xs []int, v int) int {
	n := 0
	for _, x := range xs {
		if x == v {
			n++
		}
	}
	return n
}

func TestFailureOptionsValidated(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		types []string
		want  string
	}{
		{1.5, nil, "failure-rate 1.5: must be in [0, 1]"},
		{math.NaN(), nil, "failure-rate NaN: must be in [0, 1]"},
		{0.5, []string{"rate_limit", "timeout"}, `failure-types "timeout": want one of rate_limit, invalid_api_key, context_length, server_error, invalid_request, model_not_found`},
	} {
		o := testOptions(5, 1, math.Inf(1))
		o.FailureRate, o.FailureTypes = tc.rate, tc.types
		s, err := New(o)
		if err == nil {
			s.Close()
		}
		if err == nil || err.Error() != tc.want {
			t.Errorf("rate %s, types %v: New = %v, want %q", strconv.FormatFloat(tc.rate, 'g', -1, 64), tc.types, err, tc.want)
		}
	}
}

// TestOptionsValidate: each invalid option is refused by Validate and by New with one message that starts
// with its flag; zero values are valid (New's defaults).
func TestOptionsValidate(t *testing.T) {
	if err := (Options{Disagg: &Disagg{}}).Validate(); err != nil {
		t.Fatalf("zero options: %v", err)
	}
	for want, edit := range map[string]func(*Options){
		"max-waiting -1: must be >= 0 (0: unbounded)":                    func(o *Options) { o.MaxWaiting = -1 },
		"max-connections -1: must be in [0, 1048576] (0: 4096)":          func(o *Options) { o.HTTP.MaxConns = -1 },
		"max-connections 1048577: must be in [0, 1048576] (0: 4096)":     func(o *Options) { o.HTTP.MaxConns = 1<<20 + 1 },
		"failure-rate -0.5: must be in [0, 1]":                           func(o *Options) { o.FailureRate = -0.5 },
		"bootstrap-port 65536: must be in [0, 65535] (0: any free port)": func(o *Options) { o.Disagg = &Disagg{DecodeWorkers: 1, BootstrapPort: 65536} },
	} {
		o := testOptions(5, 1, math.Inf(1))
		edit(&o)
		if err := o.Validate(); err == nil || err.Error() != want {
			t.Errorf("Validate() = %v, want %q", err, want)
		}
		s, err := New(o)
		if err == nil {
			s.Close()
		}
		if err == nil || err.Error() != want {
			t.Errorf("New() = %v, want %q", err, want)
		}
	}
}
