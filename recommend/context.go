package recommend

import (
	"errors"
	"fmt"
	"io"

	"github.com/mocker-sim/mocker/config"
	"github.com/mocker-sim/mocker/workload"
)

// withinContext refuses a workload whose requests go beyond the context (config.Config.ContextLen):
// every engine rejects a request whose prompt + max_tokens exceed it, whatever the deployment, and a
// deployment that rejects a request fails; so every deployment would fail, each after its runs.
//
// It reads the prompts as the simulator sends them: a conversation's turn with history carries its
// earlier turns' prompts and outputs (workload.Request.History), the whole output of a turn that ran
// and none of one rejected (sim's arrive). A deployment that rejects an earlier turn for another reason
// (its pool) fails anyway.
func withinContext(base *config.Config) error {
	limit, err := base.ContextLen()
	if err != nil || limit == 0 {
		return err
	}
	c := *base
	if c.DesyncAuto() {
		c.ConcurrencyDesyncMs = 0 // it moves arrivals, not prompts: no need to resolve it here
	}
	src, err := c.Source()
	if err != nil {
		return err
	}
	n, total, first := 0, 0, ""
	var made workload.Request
	for {
		s, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		keep, history := s.History(), 0
		for i := range s.Len() {
			t := s.TurnAt(i, &made)
			total++
			if !keep || !t.History {
				history = 0
			}
			prompt := history + t.PromptLen()
			history = prompt + t.OutputLen
			if t.OutputLen > limit-prompt {
				history = prompt
				if n++; n == 1 {
					which := fmt.Sprintf("request %q", t.Name())
					if t.Line > 0 {
						which = fmt.Sprintf("trace line %d", t.Line)
					}
					first = fmt.Sprintf("the first (%s) has prompt (%d tokens) + max_tokens (%d)", which, prompt, t.OutputLen)
				}
			}
		}
	}
	switch {
	case n == 0:
		return nil
	case base.MaxModelLen > 0:
		return fmt.Errorf("max-model-len %d: %d of %d requests exceed it, so every deployment would reject them and fail: %s",
			limit, n, total, first)
	}
	return fmt.Errorf("%d of %d requests exceed the model's context, %d tokens (its max_position_embeddings), so every deployment would reject them and fail: %s; give --max-model-len to serve a longer context",
		n, total, limit, first)
}
