package workload_test

import (
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/mocker-sim/mocker/workload"
)

func ExampleReadTrace() {
	const trace = `{"timestamp": 1000, "input_length": 6, "output_length": 2, "hash_ids": [1, 2]}
{"timestamp": 1250, "input_length": 3, "output_length": 1, "hash_ids": [1], "session_id": "chat"}
{"delay": 500, "input_length": 4, "output_length": 1, "hash_ids": [3], "session_id": "chat"}
`
	src, err := workload.ReadTrace(strings.NewReader(trace), "example.jsonl", workload.TraceOptions{TraceBlockSize: 4})
	if err != nil {
		log.Fatal(err)
	}
	for {
		s, err := src.Next()
		if err == io.EOF {
			break
		}
		for _, r := range s.Turns {
			fmt.Printf("line %d turn %d at %v delay %v: %v\n", r.Line, r.Turn, r.At, r.Delay, r.AppendTokens(nil))
		}
	}
	// Output:
	// line 1 turn 0 at 0s delay 0s: [1 1 1 1 2 2]
	// line 2 turn 0 at 250ms delay 0s: [1 1 1]
	// line 3 turn 1 at 750ms delay 500ms: [3 3 3 3]
}

func ExampleReadTrace_error() {
	const trace = `{"timestamp": 0, "input_length": 6, "output_length": 2}

{"timestamp": 0, "input_tokens": -6, "output_length": 2}
`
	_, err := workload.ReadTrace(strings.NewReader(trace), "bad.jsonl", workload.TraceOptions{})
	fmt.Println(err)
	// Output:
	// trace bad.jsonl line 3: input_tokens: must be >= 1, got -6
}

func ExampleNewSynthetic() {
	src, err := workload.NewSynthetic(workload.SyntheticOptions{
		NumRequests:     2,
		Input:           workload.Length{Mean: 1000},
		Output:          workload.Length{Mean: 100},
		RequestRate:     2,
		Arrival:         "constant",
		TurnsPerSession: 2,
		InterTurnDelay:  3 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(src.Requests(), "requests")
	for {
		s, err := src.Next()
		if err == io.EOF {
			break
		}
		for i := range s.Len() {
			r := s.Turn(i)
			fmt.Printf("key %d turn %d at %v delay %v history %v: %d+%d tokens\n",
				r.Key, r.Turn, r.At, r.Delay, r.History, r.InputLen, r.OutputLen)
		}
	}
	// Output:
	// 4 requests
	// key 0 turn 0 at 0s delay 0s history false: 1000+100 tokens
	// key 1 turn 1 at 0s delay 3s history true: 1000+100 tokens
	// key 2 turn 0 at 500ms delay 0s history false: 1000+100 tokens
	// key 3 turn 1 at 500ms delay 3s history true: 1000+100 tokens
}
