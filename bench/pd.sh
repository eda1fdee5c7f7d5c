#!/usr/bin/env bash
# P/D disaggregation vs aggregated serving on the same 8 H100s (issue 13):
# bench/pd/long-prompt.yaml (median 4,000-token prompts, 150-token answers)
# at RATE requests/s, aggregated and split 2/6, 3/5, 4/4. Prints TTFT and
# TPOT percentiles (ms) and the hand-off's transfer time per cluster.
#   bench/pd.sh            # RATE=10
#   RATE=14 bench/pd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
sed "s/^aggregate_rate: .*/aggregate_rate: ${RATE:-10}/" bench/pd/long-prompt.yaml >"$work/w.yaml"
"$work/blis-synth" -o "$work/req.arrows" "$work/w.yaml" 2>/dev/null
for c in agg pd26 pd35 pd44; do
  "$work/blis-sim" -q --cluster "bench/pd/$c.yaml" -o "$work/$c.arrows" "$work/req.arrows"
  "$work/blis-report" --format csv "$work/$c.arrows" >"$work/$c.csv"
  awk -F, -v c="$c" '
    $1=="latency" && ($2=="all/ttft" || $2=="all/tpot") && ($3=="p50" || $3=="p90" || $3=="p99") {split($2, m, "/"); v[m[2] " " $3]=$4}
    $1=="pd" && ($3=="p50_ms" || $3=="p99_ms") {v["xfer " $3]=$4}
    $1=="throughput" && $3=="output_tok_per_s" {tp=$4}
    END {printf "%-5s ttft p50/p90/p99 %s/%s/%s ms  tpot p50/p90/p99 %s/%s/%s ms  output %s tok/s", c, v["ttft p50"], v["ttft p90"], v["ttft p99"], v["tpot p50"], v["tpot p90"], v["tpot p99"], tp
         if (v["xfer p50_ms"] != "") printf "  transfer p50/p99 %s/%s ms", v["xfer p50_ms"], v["xfer p99_ms"]
         print ""}' "$work/$c.csv"
done
