#!/usr/bin/env bash
# LoRA affinity vs least-loaded routing with 50 adapters (issue 31, item 6).
# Llama 3.1 8B on 8 H100s (roofline latency), each replica with 4 adapter
# slots of rank 32 (vLLM --max-loras 4 --max-lora-rank 32): 32 slots for
# 50 adapters of ranks 8, 16 and 32 on q/k/v/o. Chat sessions over the
# adapters with Zipf(1) popularity (bench/lora/workload.yaml). Per rate
# and router: TTFT p50/p99, TPOT p50, E2E p50 (ms) and the adapter loads.
#   bench/lora.sh
#   RATES="30 60" bench/lora.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
{
  cat <<'YAML'
deployments:
  - id: llama8b
    model: llama-3.1-8b
    gpu: h100
    tp: 1
    latency: {mode: roofline}
    pools: [{role: monolithic, replicas: 8}]
    lora:
      max_loras: 4
      max_lora_rank: 32
      target_modules: [q_proj, k_proj, v_proj, o_proj]
      adapters:
YAML
  for i in $(seq 0 49); do
    echo "        - {name: adapter-$i, rank: $((8 << (i % 3)))}"
  done
} >"$work/cluster.yaml"
printf '%5s %-14s %9s %9s %9s %9s %7s\n' rate router "ttft p50" "ttft p99" "tpot p50" "e2e p50" loads
for rate in ${RATES:-20 30 40}; do
  sed "s/^aggregate_rate: .*/aggregate_rate: $rate/" bench/lora/workload.yaml >"$work/w.yaml"
  "$work/blis-synth" -q -o "$work/req.arrows" "$work/w.yaml"
  for router in least-loaded lora-affinity; do
    loads=$("$work/blis-sim" --check-invariants --cluster "$work/cluster.yaml" --router "$router" -o "$work/o.arrows" "$work/req.arrows" 2>&1 |
      awk '/adapter loads/ {print $2}')
    "$work/blis-report" --format csv "$work/o.arrows" | awk -F, -v rate="$rate" -v r="$router" -v l="${loads:-0}" '
      $1=="latency" && $3=="p50" {p50[$2]=$4} $1=="latency" && $3=="p99" {p99[$2]=$4}
      END {printf "%5s %-14s %9.1f %9.1f %9.2f %9.1f %7d\n", rate, r, p50["all/ttft"], p99["all/ttft"], p50["all/tpot"], p50["all/e2e"], l}'
  done
done
