#!/usr/bin/env bash
# An encode pool vs encoding on the serving replicas (issue 31, item 5):
# bench/pd-encode/vision.yaml (half multimodal requests, 0-16 images of 576
# tokens, half plain chat; Llama-3.1-8B) on 4 H100s: 4 aggregated replicas
# that run the vision encoder in the step of a request's first prefill
# chunk, vs examples/clusters/epd.yaml's 1 encode + 3 serving replicas, at
# a vision encoder's cost per image of 1 ms (a ViT-L/14 at 336²,
# docs/latency.md's guide) and 20 ms (a large, high-resolution vision
# tower; set yours with ENCODE_US). Prints TTFT and TPOT percentiles (ms).
#   bench/pd-encode.sh
#   ENCODE_US="1000 5000" RATE=30 bench/pd-encode.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
sed "s/^aggregate_rate: .*/aggregate_rate: ${RATE:-24}/" bench/pd-encode/vision.yaml >"$work/w.yaml"
"$work/blis-synth" -q -o "$work/requests.arrows" "$work/w.yaml"
for us in ${ENCODE_US:-1000 20000}; do
  sed "s/image_encode_us: [0-9]*/image_encode_us: $us/" examples/clusters/epd.yaml >"$work/epd.yaml"
  sed -e '/encode: {tokens_per_image/d' -e '/role: encode/d' -e 's/role: monolithic, replicas: 3/role: monolithic, replicas: 4/' "$work/epd.yaml" >"$work/agg.yaml"
  for c in agg epd; do
    "$work/blis-sim" -q --cluster "$work/$c.yaml" -o "$work/$c.arrows" "$work/requests.arrows"
    "$work/blis-report" --format csv "$work/$c.arrows" >"$work/$c.csv"
    label="4 aggregated"
    [ "$c" = epd ] && label="1 encode + 3"
    awk -F, -v c="$label" -v us="$us" '
      $1=="latency" && ($2=="all/ttft" || $2=="all/tpot") && ($3=="p50" || $3=="p90" || $3=="p99") {split($2, m, "/"); v[m[2] " " $3]=$4}
      END {printf "encoder %5d us/image  %-13s ttft p50/p90/p99 %s/%s/%s ms  tpot p50/p90/p99 %s/%s/%s ms\n", us, c, v["ttft p50"], v["ttft p90"], v["ttft p99"], v["tpot p50"], v["tpot p90"], v["tpot p99"]}' "$work/$c.csv"
  done
done
