#!/usr/bin/env bash
# KV transfer granularity and pipelining on P/D (issue 13): the 4 prefill +
# 4 decode H100s of bench/pd/pd44.yaml on bench/pd/long-prompt.yaml at RATE
# requests/s over a BW GB/s link, with granularity block, chunk and stream,
# pipelined off and on. Prints TTFT percentiles (ms) and the transfer time
# after the prefill's end (kv_transfer_us) per setting.
#   bench/pd-transfer.sh              # RATE=10 BW=50
#   BW=12.5 bench/pd-transfer.sh      # a 100 Gb/s NIC per GPU
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
sed "s/^aggregate_rate: .*/aggregate_rate: ${RATE:-10}/" bench/pd/long-prompt.yaml >"$work/w.yaml"
"$work/blis-synth" -o "$work/req.arrows" "$work/w.yaml" 2>/dev/null
for g in block chunk stream; do
  for p in false true; do
    c="$g-pipelined=$p"
    sed "s/kv_transfer: {.*/kv_transfer: {bandwidth_gb_s: ${BW:-50}, latency: 20us, granularity: $g, pipelined: $p}/" bench/pd/pd44.yaml >"$work/c.yaml"
    "$work/blis-sim" -q --cluster "$work/c.yaml" -o "$work/r.arrows" "$work/req.arrows"
    "$work/blis-report" --format csv "$work/r.arrows" >"$work/r.csv"
    awk -F, -v c="$c" '
      $1=="latency" && $2=="all/ttft" && ($3=="p50" || $3=="p90" || $3=="p99") {v[$3]=$4}
      $1=="pd" && ($3=="p50_ms" || $3=="p99_ms") {v["x" $3]=$4}
      END {printf "%-22s ttft p50/p90/p99 %s/%s/%s ms  transfer after prefill p50/p99 %s/%s ms\n", c, v["p50"], v["p90"], v["p99"], v["xp50_ms"], v["xp99_ms"]}' "$work/r.csv"
  done
done
