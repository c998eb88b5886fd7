#!/usr/bin/env bash
# Replays the full Mooncake conversation trace (12,031 requests, 59 minutes of arrivals) on one worker,
# pinned to one core, and prints wall time, simulated time / wall time and peak memory (mocker's own
# stderr line). Figures vary with the machine; compare ratios within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=../shared/data/mooncake/conversation_trace.jsonl
if [ ! -f "$trace" ]; then
	echo "bench: $trace not found (../shared/data is needed)" >&2
	exit 1
fi
go build -o bench/mocker ./cmd/mocker
run() {
	echo "== $*"
	GOMAXPROCS=1 taskset -c 0 bench/mocker predict --trace "$trace" "$@" >/dev/null
}
run                                                    # defaults: Llama-3.1-8B on an H200 (55,522 blocks of 16), measured profile timing
run --block-size 64 --num-gpu-blocks 4000000           # a pool that never evicts
run --workers 8                                        # eight workers, round robin
run --workers 8 --router kv                            # eight workers behind the KV-aware router
run --workers 8 --router kv --block-size 64 --num-gpu-blocks 16384 --timing polynomial # the same on the reference's defaults
rm -f bench/mocker
