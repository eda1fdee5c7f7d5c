#!/usr/bin/env bash
# Heterogeneous P/D (issue 31, item 2): the same 16 GPUs for Llama-3.1-70B
# split three ways on bench/pd-hetero/long-prompt-70b.yaml: prefill and
# decode both H100 TP4 (2 + 2 replicas); prefill on H100 TP2 (4 replicas)
# with decode on H100 TP4 (2); prefill on H200 TP2 (4 replicas) with decode
# on H100 TP4 (2), the pools of examples/clusters/pd-hetero.yaml. Prints
# TTFT and TPOT percentiles (ms) and the KV transfers' time.
#   bench/pd-hetero.sh
#   RATE=6 bench/pd-hetero.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
sed "s/^aggregate_rate: .*/aggregate_rate: ${RATE:-4}/" bench/pd-hetero/long-prompt-70b.yaml >"$work/w.yaml"
"$work/blis-synth" -q -o "$work/requests.arrows" "$work/w.yaml"
pools() { # prefill pool keys
  sed "s|- {role: prefill, .*|- {role: prefill, $1, engine: {max_num_batched_tokens: 16384}}|" examples/clusters/pd-hetero.yaml
}
pools "replicas: 2" >"$work/h100-tp4.yaml"
pools "replicas: 4, tp: 2" >"$work/h100-tp2.yaml"
pools "replicas: 4, gpu: h200, tp: 2" >"$work/h200-tp2.yaml"
for c in h100-tp4 h100-tp2 h200-tp2; do
  "$work/blis-sim" -q --cluster "$work/$c.yaml" -o "$work/$c.arrows" "$work/requests.arrows"
  "$work/blis-report" --format csv "$work/$c.arrows" >"$work/$c.csv"
  awk -F, -v c="prefill $c" '
    $1=="latency" && ($2=="all/ttft" || $2=="all/tpot") && ($3=="p50" || $3=="p90" || $3=="p99") {split($2, m, "/"); v[m[2] " " $3]=$4}
    $1=="pd" && $2=="all" && ($3=="p50_ms" || $3=="p99_ms") {v["xfer " $3]=$4}
    END {printf "%-17s ttft p50/p90/p99 %s/%s/%s ms  tpot p50/p90/p99 %s/%s/%s ms  transfer p50/p99 %s/%s ms\n", c, v["ttft p50"], v["ttft p90"], v["ttft p99"], v["tpot p50"], v["tpot p90"], v["tpot p99"], v["xfer p50_ms"], v["xfer p99_ms"]}' "$work/$c.csv"
done
