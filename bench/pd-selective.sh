#!/usr/bin/env bash
# Selective vs always-disaggregate (issue 31, item 3): bench/pd-selective/mixed.yaml
# (5 minutes of multi-turn chat, whose turns are mostly cached on the
# replica that served the last one, beside long one-shot RAG prompts;
# Llama-3.1-8B) on 2 prefill + 6 decode H100s (examples/clusters/pd-selective.yaml)
# with each decider: always (every request through the prefill pool),
# prefix-threshold (1,024 uncached tokens on the decode replica chosen
# first) and never (the prefill pool idles). Prints SLO attainment (ttft <=
# 500 ms and tpot <= 25 ms), TTFT and TPOT percentiles, the prefix-cache hit
# rate and the KV transfers.
#
#   bench/pd-selective.sh
#   RATE=9 bench/pd-selective.sh        # sessions + prompts per second (default 18)
set -euo pipefail
cd "$(dirname "$0")/.."
slo=${SLO:-ttft=500ms,tpot=25ms}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
sed "s/^aggregate_rate: .*/aggregate_rate: ${RATE:-18}/" bench/pd-selective/mixed.yaml >"$work/w.yaml"
"$work/blis-synth" -q -o "$work/requests.arrows" "$work/w.yaml"
for d in always prefix-threshold never; do
  sed "s/decider: prefix-threshold/decider: $d/" examples/clusters/pd-selective.yaml >"$work/$d.yaml"
  "$work/blis-sim" -q --cluster "$work/$d.yaml" -o "$work/$d.arrows" "$work/requests.arrows"
  "$work/blis-report" --format csv --slo "$slo" "$work/$d.arrows" >"$work/$d.csv"
  awk -F, -v d="$d" -v slo="$slo" '
    $1=="latency" && ($2=="all/ttft" || $2=="all/tpot") && ($3=="p50" || $3=="p99") {split($2, m, "/"); v[m[2] " " $3]=$4}
    $1=="slo" && $(NF-1)=="all_met_pct" && met=="" {met=$NF}
    $1=="cache" && $2=="all" && $3=="hit_rate_pct" {hit=$4}
    $1=="pd" && $2=="all" && $3=="transfers" {x=$4}
    $1=="pd" && $2=="all" && $3=="gb_per_s" {gb=$4}
    END {printf "%-16s SLO %s met %6s%%  ttft p50/p99 %s/%s ms  tpot p50/p99 %s/%s ms  cache hit %s%%  transfers %s (%s GB/s)\n", d, slo, met, v["ttft p50"], v["ttft p99"], v["tpot p50"], v["tpot p99"], hit, x == "" ? 0 : x, gb == "" ? 0 : gb}' "$work/$d.csv"
done
