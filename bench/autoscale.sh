#!/usr/bin/env bash
# Autoscaling trade-off (issue #14): examples/workloads/autoscale-diurnal.yaml (a
# compressed one-hour day, Llama-3.1-70B) on an autoscaled cluster
# (examples/clusters/autoscale.yaml) and on a static one sized for the peak
# (examples/clusters/autoscale-static.yaml). Prints, for each, GPU-hours and SLO
# attainment (ttft <= 500 ms and tpot <= 50 ms), and the simulation's CPU
# time.
#
#   bench/autoscale.sh
#   SLO="ttft=1s" bench/autoscale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
slo=${SLO:-ttft=500ms,tpot=50ms}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
"$work/blis-synth" -q -o "$work/requests.arrows" examples/workloads/autoscale-diurnal.yaml
for run in static autoscale; do
  cfg=examples/clusters/autoscale-$run.yaml
  [ "$run" = autoscale ] && cfg=examples/clusters/autoscale.yaml
  /usr/bin/time -f '%U %S' -o "$work/$run.time" "$work/blis-sim" -q --cluster "$cfg" \
    --scale-events "$work/$run.scale.arrow" -o "$work/$run.arrows" "$work/requests.arrows"
  "$work/blis-report" --format csv --slo "$slo" --scale-events "$work/$run.scale.arrow" "$work/$run.arrows" > "$work/$run.csv"
  gpuh=$(grep '^autoscaling,' "$work/$run.csv" | grep ',gpu_hours,' | cut -d, -f4)
  meanr=$(grep '^autoscaling,' "$work/$run.csv" | grep ',mean_replicas,' | cut -d, -f4)
  maxr=$(grep '^autoscaling,' "$work/$run.csv" | grep ',max_replicas,' | cut -d, -f4)
  ups=$(grep '^autoscaling,' "$work/$run.csv" | grep ',scale_ups,' | cut -d, -f4)
  osc=$(grep '^autoscaling,' "$work/$run.csv" | grep ',oscillations,' | cut -d, -f4)
  att=$(grep '^slo,' "$work/$run.csv" | grep ',all_met_pct,' | head -1 | awk -F, '{print $NF}')
  p99=$(grep '^latency,all/ttft,p99,' "$work/$run.csv" | cut -d, -f4)
  read -r user sys < "$work/$run.time"
  printf '%-9s GPU-hours %7s  mean replicas %5s (max %s, %s scale-ups, %s oscillations)  SLO %s met %6s%%  ttft p99 %s ms  CPU %ss\n' \
    "$run" "$gpuh" "$meanr" "$maxr" "$ups" "$osc" "$slo" "$att" "$p99" "$(echo "$user + $sys" | bc)"
done
