package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"
)

// WriteRequestsJSONL writes one compact JSON object per request, in id order, with the keys
//
//	id, request_id, trace_line, worker, arrival_ms, first_admission_ms, first_token_ms,
//	finish_ms, input_tokens, max_tokens, output_tokens, cached_tokens,
//	ttft_ms, tpot_ms, e2e_ms, rejected, reject_reason, failed, fail_reason, retries
//
// request_id and trace_line are Identify's (null when not given; trace_line is null for a
// synthetic request), so a record joins back to its trace row.
// Times are float milliseconds from time 0. A value that does not exist for the request is
// null rather than left out, so every line has the same keys (reject_reason excepted, which
// appears only on rejected requests): first_admission_ms before admission, first_token_ms and
// ttft_ms before the first token, tpot_ms below two tokens, e2e_ms unless the request
// finished. finish_ms is the time the request ended, by finishing, rejection or failure. With fault
// injection, failed and fail_reason appear only on failed requests, and retries (the times the request
// started over) only when it is above 0.
// cached_tokens is the prefix reuse found at first admission. A collector that forgets ended requests
// (Forget) writes these lines as it goes, and this fails.
func (c *Collector) WriteRequestsJSONL(w io.Writer) error {
	if c.forget {
		return errors.New("report: WriteRequestsJSONL: the collector forgets ended requests (Forget writes their records)")
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var b []byte // one line, reused so a million requests cost no per-line allocation
	for i := range c.reqs {
		if c.reqs[i].state&arrived == 0 {
			continue
		}
		b = c.appendRecord(b[:0], c.base+i)
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// appendRecord appends the line of request id, which is held and arrived.
func (c *Collector) appendRecord(b []byte, id int) []byte {
	r := c.record(id)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(id), 10)
	n := c.name(id)
	b = append(b, `,"request_id":`...)
	if n.requestID == "" {
		b = append(b, "null"...)
	} else {
		b = appendString(b, n.requestID)
	}
	b = append(b, `,"trace_line":`...)
	if n.line == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(n.line), 10)
	}
	b = append(b, `,"worker":`...)
	if r.worker < 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(r.worker), 10)
	}
	b = appendMs(b, "arrival_ms", r.arrival, true)
	b = appendMs(b, "first_admission_ms", r.admission, r.state&admitted != 0)
	b = appendMs(b, "first_token_ms", r.firstToken, r.deliveries > 0)
	b = appendMs(b, "finish_ms", r.end, r.state&ended != 0)
	b = append(b, `,"input_tokens":`...)
	b = strconv.AppendInt(b, int64(r.inputTokens), 10)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(r.maxTokens), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(r.outputTokens), 10)
	b = append(b, `,"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(r.cachedTokens), 10)
	b = appendMs(b, "ttft_ms", r.firstToken-r.arrival, r.deliveries > 0)
	b = append(b, `,"tpot_ms":`...)
	if x, ok := r.tpot(); ok {
		b, _ = appendFloat(b, x)
	} else {
		b = append(b, "null"...)
	}
	b = appendMs(b, "e2e_ms", r.end-r.arrival, r.completed())
	if r.state&rejected != 0 {
		b = append(b, `,"rejected":true,"reject_reason":`...)
		b = appendString(b, c.reasons[id])
	} else {
		b = append(b, `,"rejected":false`...)
	}
	if r.state&failed != 0 {
		b = append(b, `,"failed":true,"fail_reason":`...)
		b = appendString(b, c.reasons[id])
	}
	if r.retries > 0 {
		b = append(b, `,"retries":`...)
		b = strconv.AppendInt(b, int64(r.retries), 10)
	}
	return append(b, "}\n"...)
}

// appendMs appends `,"key":` and d in milliseconds, or null if !ok.
func appendMs(b []byte, key string, d time.Duration, ok bool) []byte {
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `":`...)
	if !ok {
		return append(b, "null"...)
	}
	b, _ = appendFloat(b, ms(d)) // finite: it came from an integer
	return b
}

// appendString appends s as a JSON string: as it is when it needs no escaping (trace ids
// usually), else through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
