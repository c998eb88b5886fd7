// Package workload turns a workload description — a trace file or synthetic
// parameters — into a stream of sessions of requests for the simulator.
//
// Start with source.go: a [Source] yields [Session]s (ordered turns of
// [Request]s) in order of arrival. A Request carries lengths and times only;
// its prompt tokens are synthesised on demand (tokens.go): [Request.AppendTokens]
// as token ids, [Request.AppendSequence] straight into a [tokens.Sequence]'s
// blocks, so a workload never holds the tokens of all its requests at once.
// The sources are:
//
//   - [OpenTrace] / [ReadTrace] (trace.go) over Mooncake JSONL (mooncake.go,
//     parsed strictly with fastjson), with the rows AIPerf and Dynamo write
//     (text and chats tokenised by [TraceOptions].Tokenizer, agentic waits)
//     and Bailian's; Applied Compute's agentic sessions (applied.go); or
//     Azure LLM inference CSV (azure.go). The whole file is validated up
//     front and only its metadata (and the tokens of text rows) is kept;
//     every error is a [*TraceError] naming the file, the 1-based line and
//     the field, and fields the replay does not read make one warning.
//   - [NewSynthetic] (synthetic.go), which generates sessions lazily from
//     length distributions, an arrival process, shared-prefix groups and
//     multi-turn parameters, each driven by its own random stream derived
//     from one seed (rng.go).
//
// The contract with the simulator: it pulls sessions with Next as its clock
// reaches them, sends turn 0 at Turns[0].At, sends turn k+1 Delay after turn
// k completes (and every request in its After: it holds a session whose
// first turn waits from the start), and makes a request's prompt with
// AppendSequence whenever it needs its blocks. Turns with History set continue
// the conversation: the simulator prepends the previous turns' prompts
// (AppendPromptTo) and their generated output, and the turn makes only its
// new tokens. Same input and seed, same sessions and tokens.
package workload
