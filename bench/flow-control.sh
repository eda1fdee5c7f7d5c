#!/usr/bin/env bash
# Gateway flow control vs none at 120 % load (issue 31, item 1): 4 Llama-3.1-8B
# replicas on H100 (roofline) sustain about 90 requests/s of
# examples/workloads/flow-control.yaml (60 % interactive chat at priority 1,
# 40 % sheddable batch at priority -1); this sends RATE (default 108) for
# 300 s with clients that give up after 60 s, to three clusters:
#   none           the router routes every request at once; vLLM FCFS
#   vllm-priority  the same, vLLM's priority scheduling
#   gateway        llm-d-style flow control (bench/flow-control/gateway.yaml)
# and prints per class: completed / rejected / timed out, TTFT and TPOT
# p50/p99 (ms), the interactive SLO (TTFT <= 1 s, TPOT <= 60 ms) and
# goodput, and the run's output throughput.
#   bench/flow-control.sh
#   RATE=135 bench/flow-control.sh     # 150 %
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
sed "s/^aggregate_rate: .*/aggregate_rate: ${RATE:-108}/" examples/workloads/flow-control.yaml >"$work/w.yaml"
"$work/blis-synth" -q -o "$work/req.arrows" "$work/w.yaml"
printf '%-13s %-11s %9s %8s %9s %20s %18s %9s %10s %11s\n' cluster class completed rejected timed_out "ttft p50/p99 ms" "tpot p50/p99 ms" slo_met goodput/s "out tok/s"
for c in none vllm-priority gateway; do
  "$work/blis-sim" -q --cluster "bench/flow-control/$c.yaml" -o "$work/$c.arrows" "$work/req.arrows"
  "$work/blis-report" --format csv --by slo_class --slo "interactive:ttft=1s,tpot=60ms" "$work/$c.arrows" >"$work/$c.csv"
  awk -F, -v c="$c" '
    $1=="requests" {v[$2 " " $3]=$4}
    $1=="latency" {split($2, m, "/"); v[m[1] " " m[2] " " $3]=$4}
    $1=="slo" && $2 ~ /^"interactive/ {v["slo " $4]=$5}  # the quoted target holds a comma
    $1=="throughput" && $2=="all" && $3=="output_tok_per_s" {tp=$4}
    END {
      n = split("interactive batch", cls, " ")
      for (i = 1; i <= n; i++) {
        k = cls[i]
        slo = (k == "interactive") ? sprintf("%.2f%%", v["slo all_met_pct"]) : "-"
        gp = (k == "interactive") ? v["slo goodput_req_per_s"] : "-"
        printf "%-13s %-11s %9d %8d %9d %9.0f/%-10.0f %8.1f/%-9.1f %9s %10s %11s\n", c, k, v[k " completed"], v[k " rejected"], v[k " timed_out"],
          v[k " ttft p50"], v[k " ttft p99"], v[k " tpot p50"], v[k " tpot p99"], slo, gp, (i == 1) ? tp : ""
      }
    }' "$work/$c.csv"
done
