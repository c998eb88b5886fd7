#!/usr/bin/env bash
# mocker recommend over the Mooncake conversation trace: aggregated and disaggregated (prefill:decode
# 1:1, 1:2, 2:1, per-role TP), TP 1/2/4/8, 1–32 workers: 52 shapes, 704 deployments. The first N
# requests (default 1,000: the trace's first ~5 minutes) at 3× the trace's arrival rate (~10 req/s),
# targets p90 TTFT 500 ms and p90 ITL 30 ms, as in issue 13. Prints the report, the wall time and the
# load average before and after (the figures depend on what else the machine runs).
#   bench/recommend.sh [N] [extra recommend flags]
set -euo pipefail
cd "$(dirname "$0")/.."
trace=../shared/data/mooncake/conversation_trace.jsonl
if [ ! -f "$trace" ]; then
	echo "bench: $trace not found (../shared/data is needed)" >&2
	exit 1
fi
n=${1:-1000}
shift || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -n "$n" "$trace" >"$tmp/trace.jsonl"
go build -o "$tmp/mocker" ./cmd/mocker
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
start=$(date +%s.%N)
"$tmp/mocker" recommend --trace "$tmp/trace.jsonl" --arrival-speedup-ratio 3 \
	--ttft-p90-ms 500 --itl-p90-ms 30 \
	--modes agg,disagg --ratios 1:1,1:2,2:1 --tp-list 1,2,4,8 --min-workers 1 --max-workers 32 \
	--report-json "$tmp/report.json" "$@"
end=$(date +%s.%N)
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "wall: $(echo "$end - $start" | bc) s for $n requests"
