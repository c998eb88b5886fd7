// Package report turns what happened to each request during a run into the numbers
// `vllm bench serve` prints: time to first token (TTFT), time to second token (TTST), time per
// output token (TPOT), inter-token latency (ITL) and end-to-end latency (E2E) distributions,
// throughputs and prefix-cache reuse.
//
// Start with [Collector]. The driver (offline replay or live serving) calls [Collector.Arrived],
// [Collector.Admitted] and [Collector.Tokens] for a request as things happen to it, then
// [Collector.Finished] or [Collector.Rejected]. [Collector.Summary] reduces those records to a
// [Summary], which writes itself as JSON ([Summary.WriteJSON], the stable, machine-read format)
// or as a human table ([Summary.WriteTable]). [Collector.WriteRequestsJSONL] dumps one record
// per request, and [WriteFile] writes any of these atomically.
//
// The definitions follow Dynamo's replay collector (docs/reference/dynamo-mocker.md §9):
//
//   - TTFT = first token − arrival; E2E = finish − arrival.
//   - TTST = second delivery − first delivery, for requests with at least two deliveries.
//   - TPOT of a request = (last token − first token)/(n−1) over its n tokens, for n ≥ 2.
//   - ITL = every gap between consecutive deliveries of a request, pooled over all requests.
//     Several tokens delivered by one Tokens call are one delivery, as vllm bench serve
//     counts one SSE chunk as one arrival however many tokens it carries.
//   - With [Collector.SetHeader] n, the first n tokens of every reply are not deliveries (the
//     header a model's chat format opens each reply with, which the server streams no text for):
//     the first token, TTST, ITL and TPOT (over the tokens after the header) are the client's.
//     A reply no longer than the header, like an empty one, has none of them: Summary counts it
//     in NoTTFTRequests, and a distribution with no sample is all zeros, as vllm bench serve's.
//   - Every distribution reports mean, min, max, population standard deviation and the
//     percentiles 50, 75, 90, 95 and 99, where percentile p = sorted[round((n−1)·p/100)].
//
// Only completed requests (finished and not rejected) enter the distributions, totals and
// throughputs; rejected requests are only counted, and so are requests still in flight.
//
// The collector keeps one small fixed-size record per request, the ITL gaps of requests in
// flight in pooled chunks, and those of completed requests as a distribution of distinct values
// with counts, so recording a token never allocates beyond amortized growth and memory does not
// grow with the tokens of a run. It is not
// safe for concurrent use: the replay loop is single-threaded, and a live driver must
// serialize its calls.
package report
