#!/usr/bin/env bash
# blis-load issue-time precision (issue 17): N requests (default 10,000) at
# a constant 1,000 req/s (one every millisecond, from blis-synth), 128-token
# prompts, 8 output tokens, sent to the in-repo fake server (bench/fakellm,
# TTFT 20 ms, 5 ms per token) running in a process of its own. Prints
# blis-load's summary (issue time − plan: p50, p99, max), its CPU time and
# the load of the machine.
#
#   bench/load.sh           # 10,000 requests, 10 s
#   bench/load.sh 60000     # a minute
#   RATE=2000 bench/load.sh
#   OUTPUT=1 bench/load.sh                  # one token per request: less response traffic
#   PROFILE=/tmp/load.pprof bench/load.sh   # a CPU profile of blis-load
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
rate=${RATE:-1000}
work=$(mktemp -d)
srv=""
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/" ./cmd/blis-load ./cmd/blis-synth ./bench/fakellm
cat >"$work/spec.yaml" <<SPEC
version: 1
seed: 1
num_requests: $n
aggregate_rate: $rate
clients:
  - {name: c, input: 128, output: ${OUTPUT:-8}, arrival: {process: constant}}
SPEC
"$work/blis-synth" -q -o "$work/requests.arrow" "$work/spec.yaml"
"$work/fakellm" -ttft 20ms -itl 5ms >"$work/url" &
srv=$!
for _ in $(seq 50); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(cat "$work/url")
/usr/bin/time -v "$work/blis-load" --url "$url" --warmup 50 ${PROFILE:+--cpuprofile "$PROFILE"} -o "$work/results.arrow" "$work/requests.arrow" 2>"$work/stderr" || {
  cat "$work/stderr"; exit 1; }
grep '^blis-load' "$work/stderr"
user=$(grep 'User time' "$work/stderr" | awk '{print $NF}')
sys=$(grep 'System time' "$work/stderr" | awk '{print $NF}')
rss=$(grep 'Maximum resident set size' "$work/stderr" | awk '{print $NF}')
echo "bench/load.sh: $n requests at $rate/s, ${OUTPUT:-8} output tokens: blis-load CPU ${user}s user + ${sys}s sys, peak RSS $((rss / 1024)) MB ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
