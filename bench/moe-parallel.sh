#!/usr/bin/env bash
# MoE parallelism on 8 H100s (issue 31, item 7): Qwen3-30B-A3B (MODEL=
# changes it: deepseek-v2-lite, mixtral-8x7b, ...) served as 8 TP1 replicas,
# 4 TP2, one TP8, DP8 with the experts TP-sharded over the 8 GPUs (vLLM's
# default without EP), DP8 + EP8 over vLLM's default all-to-all and over
# DeepEP's low-latency kernels, and DP4 × TP2 + EP8 (bench/moe/*.yaml,
# roofline latency), under bench/moe/chat.yaml at RATE requests/s (default
# 120) for 120 s. Prints TTFT and TPOT p50/p99 (ms), output tokens/s and KV
# blocks per replica. A layout whose weights do not fit prints the reason.
#   bench/moe-parallel.sh
#   RATE=40 bench/moe-parallel.sh
#   MODEL=deepseek-v2-lite bench/moe-parallel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
model=${MODEL:-qwen3-30b-a3b}
sed "s/^aggregate_rate: .*/aggregate_rate: ${RATE:-120}/; s/model: qwen3-30b-a3b/model: $model/" bench/moe/chat.yaml >"$work/w.yaml"
"$work/blis-synth" -q -o "$work/req.arrows" "$work/w.yaml"
printf '%-14s %-48s %20s %18s %10s %9s\n' layout latency_model "ttft p50/p99 ms" "tpot p50/p99 ms" "out tok/s" kv_blocks
for c in tp1x8 tp2x4 tp8 dp8-tp dp8-ep dp8-ep-deepep dp4tp2-ep; do
  sed "s/model: qwen3-30b-a3b/model: $model/" "bench/moe/$c.yaml" >"$work/$c.yaml"
  if ! "$work/blis-sim" -q --cluster "$work/$c.yaml" -o "$work/$c.arrows" "$work/req.arrows" 2>"$work/$c.err"; then
    printf '%-14s %s\n' "$c" "$(sed "s|$work/||" "$work/$c.err" | head -1)"
    continue
  fi
  "$work/blis-report" --format csv "$work/$c.arrows" >"$work/$c.csv"
  awk -F, -v c="$c" '
    $1=="latency" && ($2=="all/ttft" || $2=="all/tpot") && ($3=="p50" || $3=="p99") {v[$2 " " $3]=$4}
    $1=="throughput" && $2=="all" && $3=="output_tok_per_s" {tp=$4}
    $1=="config" && $3=="latency" {lat=$4}
    $1=="config" && $3=="kv_blocks" {kv=$4}
    END {printf "%-14s %-48s %9.0f/%-10.0f %8.2f/%-9.2f %10.0f %9s\n", c, lat, v["all/ttft p50"], v["all/ttft p99"], v["all/tpot p50"], v["all/tpot p99"], tp, kv}' "$work/$c.csv"
done
