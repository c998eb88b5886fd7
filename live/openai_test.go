package live

import (
	"time"
)

// admit submits one engine request of maxTokens for prompt, as a choice with ignore_eos is submitted;
// the stream carries its output.
func (s *Server) admit(prompt []uint32, maxTokens int) (*Stream, *apiError) {
	if _, e := s.fit(&sampling{maxTokens: maxTokens, maxName: "max_tokens"}, len(prompt)); e != nil {
		return nil, e
	}
	req := s.newRequest(prompt, maxTokens)
	st := newStream(req.ID, len(prompt), time.Now())
	if err := s.submit(req, st); err != nil {
		return nil, submitError(err)
	}
	return st, nil
}
