package aic_test

import (
	"fmt"
	"log"

	"github.com/mocker-sim/mocker/hardware"
	"github.com/mocker-sim/mocker/model"
	"github.com/mocker-sim/mocker/timing"
	"github.com/mocker-sim/mocker/timing/aic"
)

// Price one vLLM pass of Llama-3.1-8B in FP8 on one H200: a 2048-token prompt chunk over a
// 2048-token cached prefix beside two decoding requests. (It reads the shared AIConfigurator data,
// so it is compiled, not run, by go test.)
func Example() {
	m, err := model.Lookup("meta-llama/Llama-3.1-8B-Instruct")
	if err != nil {
		log.Fatal(err)
	}
	sys, err := hardware.Lookup("h200_sxm")
	if err != nil {
		log.Fatal(err)
	}
	tm, err := aic.New(aic.Options{
		Model:     m,
		System:    sys,
		Root:      "../shared/data/aiconfigurator",
		Backend:   "vllm", // newest vLLM tables present
		GEMMQuant: "fp8",
	})
	if err != nil {
		log.Fatal(err)
	}
	c := tm.Cost(&timing.Batch{Seqs: []timing.Seq{
		{New: 2048, Cached: 2048, Prefill: true, Samples: true}, // the prompt's last chunk
		{New: 1, Cached: 900, Samples: true},
		{New: 1, Cached: 3000, Samples: true},
	}})
	fmt.Printf("vLLM %s: prefill %v, decode %v\n", tm.Version(), c.Prefill, c.Decode)
}
