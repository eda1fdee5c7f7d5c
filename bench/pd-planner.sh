#!/usr/bin/env bash
# Autoscaling P/D pools with NVIDIA Dynamo's planner vs a fixed split
# (issue 31, item 4): bench/pd-planner/day.yaml (30 minutes of diurnal load,
# 4.8 to 43 req/s of ~2,300-token prompts and ~170-token answers to
# Llama-3.1-8B) on fixed splits of H100s (2 prefill + 2 decode, the
# planner's start; 3 + 2, sized for the peak) and on
# examples/clusters/pd-planner.yaml (each pool sized by the planner every
# 60 s, and every 15 s). Prints, for each, GPU-hours (both pools), mean
# prefill and decode replicas, SLO attainment (ttft <= 1 s and tpot <= 25
# ms) and TTFT / TPOT p99.
#
#   bench/pd-planner.sh
#   SLO="ttft=2s,tpot=25ms" bench/pd-planner.sh
set -euo pipefail
cd "$(dirname "$0")/.."
slo=${SLO:-ttft=1s,tpot=25ms}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
"$work/blis-synth" -q -o "$work/requests.arrows" bench/pd-planner/day.yaml
cp bench/pd-planner/fixed22.yaml bench/pd-planner/fixed32.yaml examples/clusters/pd-planner.yaml "$work/"
sed 's/interval: 60s.*/interval: 15s/' examples/clusters/pd-planner.yaml >"$work/pd-planner-15s.yaml"
for run in fixed22 fixed32 pd-planner pd-planner-15s; do
  "$work/blis-sim" -q --cluster "$work/$run.yaml" --scale-events "$work/$run.scale.arrow" \
    -o "$work/$run.arrows" "$work/requests.arrows"
  "$work/blis-report" --format csv --slo "$slo" --scale-events "$work/$run.scale.arrow" "$work/$run.arrows" >"$work/$run.csv"
  awk -F, -v run="$run" -v slo="$slo" '
    $1=="autoscaling" && $3=="pool" {p=$4}
    $1=="autoscaling" && $3=="gpu_hours" {g+=$4}
    $1=="autoscaling" && $3=="mean_replicas" {m[p]=$4}
    $1=="slo" && $(NF-1)=="all_met_pct" && met=="" {met=$NF}
    $1=="latency" && $2=="all/ttft" && $3=="p99" {ttft=$4}
    $1=="latency" && $2=="all/tpot" && $3=="p99" {tpot=$4}
    END {printf "%-15s GPU-hours %5.2f  mean replicas prefill %4s decode %4s  SLO %s met %6s%%  ttft p99 %9.1f ms  tpot p99 %5.1f ms\n", run, g, m[0], m[1], slo, met, ttft, tpot}' "$work/$run.csv"
done
