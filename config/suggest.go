package config

import (
	"slices"
	"strings"
)

// otherEngines maps the names vLLM, SGLang and their benchmarks give a setting to mocker's name for the
// same setting. An engine's own name is often a few edits from a different mocker flag (SGLang's
// tp-size from dp-size), and following such a hint would change the deployment without a word.
var otherEngines = map[string]string{
	"tensor-parallel-size": "tp",      // vLLM, SGLang
	"tp-size":              "tp",      // SGLang
	"expert-parallel-size": "ep",      // SGLang
	"ep-size":              "ep",      // SGLang
	"data-parallel-size":   "dp-size", // vLLM, SGLang
	"dp":                   "dp-size", // vLLM's -dp, SGLang's --dp
	"context-length":       "max-model-len",
	"max-running-requests": "max-num-seqs",
	"enable-dp-attention":  "dp-attention",
	"chunked-prefill-size": "sglang-chunked-prefill-size",
	"max-prefill-tokens":   "sglang-max-prefill-tokens",
	"schedule-policy":      "sglang-schedule-policy",
	"mem-fraction-static":  "gpu-memory-utilization",
	"served-model-name":    "model-name",
	"num-prompts":          "num-requests", // vllm bench serve, SGLang's bench_serving
	"max-concurrency":      "concurrency",
	"random-input-len":     "input-tokens",
	"random-output-len":    "output-tokens",
	"input-len":            "input-tokens",  // vllm bench throughput and latency
	"output-len":           "output-tokens", // not output-length-dist, which it extends
}

// Suggest is the name in known that a mistyped name most likely meant, for a "did you mean" hint.
// Another engine's name for a setting (otherEngines) gets mocker's name for it, or nothing when known
// lacks it. Otherwise, nearest first:
//   - one edit away (a letter added, dropped or changed), and a name that extends the typed one first;
//   - a name that extends the typed one of three letters or more ("max-model" for max-model-len), or
//     that the typed one lengthens the last word of ("max-model-length");
//   - two edits away.
//
// A typed name too short to guess from (more edits than half its letters) gets nothing, and so does a
// tie: "prefill" in a list of prefill-* flags names none, rather than the first sorted.
func Suggest(name string, known []string) string {
	if mocker, ok := otherEngines[name]; ok {
		if slices.Contains(known, mocker) {
			return mocker
		}
		return ""
	}
	best, bestScore, tie := "", 5, false
	for _, k := range known {
		if k == name || k == best {
			continue
		}
		score := 5 // no match
		if d := editDistance(name, k); d <= 2 && d <= len(name)/2 {
			score = 2 * d
		}
		extends := len(name) >= 3 && strings.HasPrefix(k, name)
		lengthens := len(k) >= 4 && strings.HasPrefix(name, k) && !strings.HasPrefix(name[len(k):], "-")
		if extends || lengthens {
			score = min(score-1, 3)
		}
		switch {
		case score < bestScore:
			best, bestScore, tie = k, score, false
		case score == bestScore:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes (flag names are ASCII).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// didYouMean is Suggest as the end of an error message: ` (did you mean "KEY"?)`, or "".
func didYouMean(name string, known []string) string {
	if s := Suggest(name, known); s != "" {
		return ` (did you mean "` + s + `"?)`
	}
	return ""
}
