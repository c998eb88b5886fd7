package workload

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/valyala/fastjson"
)

// Applied Compute's agentic traces (Dynamo's applied_compute_agentic): one
// JSON object per line, each a whole agent session of num_turns model calls,
// each followed by a tool call, and a final answer. The session's requests
// are its num_turns + 1 calls: the first reads input_prompt_length tokens;
// each later one reads the whole conversation so far (History) plus the
// previous tool call's output, tool_call_latency[i] seconds after the
// previous call ends. The rows have no arrival times: every session starts
// at 0, so the trace is meant for --concurrency.
var appliedKeys = [...]string{
	"num_turns", "input_prompt_length", "assistant_response_length",
	"tool_call_output_length", "tool_call_latency", "final_assistant_response_length",
}

// readApplied loads an Applied Compute agentic trace.
func readApplied(lr *lineReader, name string, opts TraceOptions) (*sessionList, error) {
	var (
		sessions []Session
		n        int
		p        fastjson.Parser
		ignored  = map[string]int{}
	)
	for {
		line, err := lr.record(name)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		fail := func(field string, err error) error {
			return &TraceError{Path: name, Line: lr.line, Field: field, Err: err}
		}
		root, err := p.ParseBytes(line)
		if err == nil {
			err = fastjson.ValidateBytes(line)
		}
		if err != nil {
			field, err := syntaxError(line)
			return nil, fail(field, err)
		}
		if root.Type() != fastjson.TypeObject {
			return nil, fail("", fmt.Errorf("want a JSON object, got %s", root.Type()))
		}
		root.GetObject().Visit(func(k []byte, _ *fastjson.Value) {
			for _, known := range appliedKeys {
				if known == string(k) {
					return
				}
			}
			if _, ok := ignored[string(k)]; !ok {
				ignored[string(k)] = lr.line
			}
		})
		turns, field, err := appliedSession(root)
		if err != nil {
			return nil, fail(field, err)
		}
		for i := range turns {
			turns[i].Key, turns[i].Line = uint64(n), lr.line
			n++
		}
		sessions = append(sessions, Session{Turns: turns})
	}
	if len(ignored) > 0 && opts.Warn != nil {
		opts.Warn(ignoredWarning(name, ignored))
	}
	return &sessionList{sessions: sessions, requests: n}, nil
}

// appliedSession makes the requests of one row, or says which field is wrong.
func appliedSession(v *fastjson.Value) ([]Request, string, error) {
	count := func(key string, lo int) (int, error) {
		f := v.Get(key)
		if f == nil {
			return 0, fmt.Errorf("missing")
		}
		n, err := length(f)
		if err == nil && n < lo {
			err = fmt.Errorf("must be >= %d, got %d", lo, n)
		}
		return n, err
	}
	turns, err := count("num_turns", 0)
	if err != nil {
		return nil, "num_turns", err
	}
	input, err := count("input_prompt_length", 1)
	if err != nil {
		return nil, "input_prompt_length", err
	}
	final, err := count("final_assistant_response_length", 0)
	if err != nil {
		return nil, "final_assistant_response_length", err
	}
	var lists [3][]*fastjson.Value
	for i, key := range appliedKeys[2:5] {
		f := v.Get(key)
		if f == nil {
			return nil, key, fmt.Errorf("missing")
		}
		if lists[i], err = f.Array(); err != nil {
			return nil, key, fmt.Errorf("want an array, got %s", f.Type())
		}
		if len(lists[i]) != turns {
			return nil, key, fmt.Errorf("%d values, want num_turns = %d", len(lists[i]), turns)
		}
	}
	reqs := make([]Request, turns+1)
	reqs[0] = Request{InputLen: input}
	total := input
	for i := range turns {
		out, err := length(lists[0][i])
		if err == nil && out < 0 {
			err = fmt.Errorf("must be >= 0, got %d", out)
		}
		if err != nil {
			return nil, fmt.Sprintf("assistant_response_length[%d]", i), err
		}
		tool, err := length(lists[1][i])
		if err == nil && tool < 0 {
			err = fmt.Errorf("must be >= 0, got %d", tool)
		}
		if err != nil {
			return nil, fmt.Sprintf("tool_call_output_length[%d]", i), err
		}
		secs, err := float(lists[2][i])
		if err == nil && !(secs >= 0 && secs < math.MaxInt64/1e9) {
			err = fmt.Errorf("must be a number of seconds >= 0, got %s", lists[2][i])
		}
		if err != nil {
			return nil, fmt.Sprintf("tool_call_latency[%d]", i), err
		}
		if total += out + tool; total > MaxTokens {
			return nil, fmt.Sprintf("tool_call_output_length[%d]", i), fmt.Errorf("the conversation reaches %d tokens, more than %d", total, MaxTokens)
		}
		reqs[i].OutputLen = out
		reqs[i+1] = Request{Turn: i + 1, InputLen: tool, History: true, Delay: time.Duration(math.Round(secs * 1e9))}
	}
	reqs[turns].OutputLen = final
	return reqs, "", nil
}
