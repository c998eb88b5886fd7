package workload

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Azure LLM inference trace (Splitwise, 2023): CSV with the header
// azureHeader, timestamps like "2023-11-16 18:15:46.6805900" and no prefix
// information, so every prompt token is request-unique.
const azureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens"

// azureTime parses TIMESTAMP; Go accepts any fraction of a second after the
// seconds when parsing.
const azureTime = "2006-01-02 15:04:05"

// readAzure loads an Azure CSV trace, which must be sorted, as the published
// ones are. Arrivals are offsets from the first timestamp.
func readAzure(lr *lineReader, name string) (*sessionList, error) {
	header, err := lr.next()
	if err == io.EOF {
		return nil, &TraceError{Path: name, Err: fmt.Errorf("empty file, want the header %q", azureHeader)}
	}
	if err != nil {
		return nil, &TraceError{Path: name, Line: lr.line + 1, Err: err}
	}
	if string(bytes.TrimSpace(header)) != azureHeader {
		return nil, &TraceError{Path: name, Line: lr.line, Field: "header", Err: fmt.Errorf("got %q, want %q", header, azureHeader)}
	}
	var (
		reqs   []Request
		stamps []time.Time
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
		stamp, rest, _ := bytes.Cut(line, []byte(","))
		ctx, gen, ok := bytes.Cut(rest, []byte(","))
		if !ok || bytes.IndexByte(gen, ',') >= 0 {
			return nil, fail("", fmt.Errorf("want 3 comma-separated fields (%s), got %q", azureHeader, line))
		}
		t, err := time.Parse(azureTime, string(stamp))
		if err != nil {
			return nil, fail("TIMESTAMP", fmt.Errorf("want a time like 2023-11-16 18:15:46.6805900, got %q", stamp))
		}
		if n := len(stamps); n > 0 && t.Before(stamps[n-1]) {
			return nil, fail("TIMESTAMP", fmt.Errorf("%s is before line %d's (the trace must be in time order)", stamp, reqs[n-1].Line))
		}
		in, err := strconv.ParseUint(string(ctx), 10, 64)
		if err != nil || in < 1 || in > MaxTokens {
			return nil, fail("ContextTokens", fmt.Errorf("want an integer in [1, %d], got %q", MaxTokens, ctx))
		}
		out, err := strconv.ParseUint(string(gen), 10, 64)
		if err != nil || out > MaxTokens {
			return nil, fail("GeneratedTokens", fmt.Errorf("want an integer in [0, %d], got %q", MaxTokens, gen))
		}
		reqs = append(reqs, Request{Key: uint64(len(reqs)), Line: lr.line, InputLen: int(in), OutputLen: int(out)})
		stamps = append(stamps, t)
	}
	if len(reqs) == 0 {
		return &sessionList{}, nil
	}
	sessions := make([]Session, len(reqs))
	for i := range reqs {
		reqs[i].At = stamps[i].Sub(stamps[0])
		sessions[i] = Session{Turns: reqs[i : i+1 : i+1]}
	}
	return &sessionList{sessions: sessions, requests: len(reqs)}, nil
}
