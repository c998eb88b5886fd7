package main

import "github.com/spf13/cobra"

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "mocker",
		Short: "Simulate LLM inference engines (vLLM, SGLang, TensorRT-LLM) without GPUs",
		Long: `mocker simulates how LLM inference engines (vLLM, SGLang, TensorRT-LLM) schedule requests, manage
a paged KV cache with prefix caching, preempt under memory pressure and spend time per forward pass.

  mocker predict                      replay the built-in demo workload and print a report
  mocker predict --trace trace.jsonl  replay a Mooncake trace
  mocker recommend --ttft-p90-ms 500 --itl-p90-ms 30
                                      find the deployments of fewest GPUs that meet latency targets
  mocker serve                        run OpenAI-compatible simulated workers on the wall clock`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(unknownFlag)
	root.AddCommand(newPredictCmd(), newRecommendCmd(), newSweepWorkerCmd(), newEstimateCmd(), newServeCmd(), newWorkerCmd(), newFrontendCmd())
	return root
}
