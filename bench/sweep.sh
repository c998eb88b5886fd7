#!/usr/bin/env bash
# The distributed sweep: the same search as README's "plan a deployment" (first 1,000 requests of the
# Mooncake conversation trace at 3× its rate, vLLM TP 1/2/4/8, 1–32 workers), run through a local
# nats-server with JetStream by 1, then 2 `mocker sweep-worker --jobs 1` processes; prints each wall time
# and checks the reports are identical to a local run's. Builds nats-server from the module cache.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=../shared/data/mooncake/conversation_trace.jsonl
if [ ! -f "$trace" ]; then
	echo "bench: $trace not found (../shared/data is needed)" >&2
	exit 1
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
head -n 1000 "$trace" >"$tmp/trace.jsonl"
go build -o "$tmp/mocker" ./cmd/mocker
go build -o "$tmp/nats-server" github.com/nats-io/nats-server/v2
port=$((20000 + RANDOM % 20000))
"$tmp/nats-server" -a 127.0.0.1 -p "$port" -js -sd "$tmp/js" >/dev/null 2>&1 &
pids+=($!)
sleep 1
search() {
	"$tmp/mocker" recommend --trace "$tmp/trace.jsonl" --arrival-speedup-ratio 3 --ttft-p90-ms 500 --itl-p90-ms 30 \
		--tp-list 1,2,4,8 --max-workers 32 "$@" >/dev/null 2>"$tmp/stderr" || { cat "$tmp/stderr" >&2; exit 1; }
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
start=$(date +%s.%N)
search --report-json "$tmp/local.json"
echo "local (--threads $(nproc)): $(echo "$(date +%s.%N) - $start" | bc) s"
for n in 1 2; do
	workers=()
	for _ in $(seq "$n"); do
		"$tmp/mocker" sweep-worker --nats "nats://127.0.0.1:$port" --jobs 1 2>/dev/null &
		workers+=($!)
		pids+=($!)
	done
	start=$(date +%s.%N)
	search --nats "nats://127.0.0.1:$port" --report-json "$tmp/dist$n.json"
	echo "$n sweep-worker process(es): $(echo "$(date +%s.%N) - $start" | bc) s"
	cmp "$tmp/local.json" "$tmp/dist$n.json" && echo "  report identical to the local run's"
	kill "${workers[@]}"
	wait "${workers[@]}" 2>/dev/null || true
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
