#!/usr/bin/env bash
# What a CPU KV tier buys on multi-turn chat (issue 13): examples/workloads/chat-multiturn.yaml
# on 4 H100s of Llama-3.1-8B whose GPU KV is cut to GPU_BLOCKS blocks (default 8,000
# blocks = 128,000 tokens, about half of the conversations' working set), with a lazy
# CPU tier of 0 to 256 GiB per replica. Prints the prefix-cache hit rate by tier and
# TTFT per CPU tier size.
#   bench/tiers.sh
#   GPU_BLOCKS=4000 bench/tiers.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
"$work/blis-synth" -o "$work/req.arrows" examples/workloads/chat-multiturn.yaml 2>/dev/null
for gib in 0 4 16 64 256; do
  tiers=""
  [ "$gib" != 0 ] && tiers="    kv: {offload: lazy, tiers: [{name: cpu, capacity_gib: $gib}]}"
  cat >"$work/c.yaml" <<EOC
deployments:
  - id: chat
    model: llama-3.1-8b
    gpu: h100
    engine: {kv_blocks: ${GPU_BLOCKS:-8000}}
    pools: [{role: monolithic, replicas: 4}]
$tiers
router: {routing: prefix-affinity}
EOC
  "$work/blis-sim" -q --cluster "$work/c.yaml" -o "$work/r.arrows" "$work/req.arrows"
  "$work/blis-report" --format csv "$work/r.arrows" >"$work/r.csv"
  awk -F, -v g="$gib" '
    $1=="cache" && $3=="hit_rate_pct" {hit=$4}
    $1=="latency" && $2=="all/ttft" && ($3=="p50" || $3=="p99") {t[$3]=$4}
    $1=="kv_tiers" && ($3=="gpu_hit_pct" || $3=="cpu_hit_pct" || $3=="reload_mean_ms") {k[$3]=$4}
    END {printf "cpu tier %4s GiB: hit %6s%% (gpu %s%%, cpu %s%%), ttft p50 %s ms p99 %s ms, reload mean %s ms\n", g, hit, k["gpu_hit_pct"], k["cpu_hit_pct"], t["p50"], t["p99"], k["reload_mean_ms"]}' "$work/r.csv"
done
