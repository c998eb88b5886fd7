package live

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
)

// Failure types a server can inject (Options.FailureTypes), the set llm-d-inference-sim offers for
// testing clients: each is answered with the status and OpenAI error an API server would send.
const (
	FailureRateLimit      = "rate_limit"
	FailureInvalidAPIKey  = "invalid_api_key"
	FailureContextLength  = "context_length"
	FailureServerError    = "server_error"
	FailureInvalidRequest = "invalid_request"
	FailureModelNotFound  = "model_not_found"
)

// FailureTypes lists the injectable failures.
func FailureTypes() []string {
	return []string{FailureRateLimit, FailureInvalidAPIKey, FailureContextLength, FailureServerError, FailureInvalidRequest, FailureModelNotFound}
}

// injected is the error a failure type answers with.
func (s *Server) injected(typ string) *apiError {
	switch typ {
	case FailureRateLimit:
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded",
			message: fmt.Sprintf("Rate limit reached for %s (injected failure); retry later.", s.o.ModelName)}
	case FailureInvalidAPIKey:
		return &apiError{status: http.StatusUnauthorized, typ: "authentication_error", code: "invalid_api_key",
			message: "Incorrect API key provided (injected failure)."}
	case FailureContextLength:
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded", param: "messages",
			message: "This model's maximum context length was exceeded (injected failure). Please reduce the length of the prompt or completion."}
	case FailureInvalidRequest:
		return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: "model",
			message: "Invalid request (injected failure)."}
	case FailureModelNotFound:
		return &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "model_not_found", param: "model",
			message: fmt.Sprintf("The model `%s` does not exist (injected failure).", s.o.ModelName)}
	}
	return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable",
		message: "The server is overloaded or not ready yet (injected failure)."}
}

// failures draws which requests fail and how. Draws follow the order requests reach the point of
// injection, so a seed gives the same sequence of outcomes to a client that sends one request at a time.
type failures struct {
	rate  float64
	types []string

	mu  sync.Mutex
	rng *rand.Rand
}

// newFailures draws failures of rate and types (validated: Options.Validate).
func newFailures(rate float64, types []string, seed uint64) *failures {
	if len(types) == 0 {
		types = FailureTypes()
	}
	// Its own stream of the seed, so injecting failures moves no other draw.
	return &failures{rate: rate, types: slices.Clone(types), rng: rand.New(rand.NewPCG(seed, 0x6661696c))}
}

// draw returns the failure type of the next request, or "" when it is served.
func (f *failures) draw() string {
	if f == nil || f.rate == 0 {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.Float64() >= f.rate {
		return ""
	}
	return f.types[f.rng.IntN(len(f.types))]
}
