#!/usr/bin/env bash
# Speculative decoding's TPOT gain vs batch size (issue 31, item 8).
# Qwen3-32B on H100 (roofline latency) serving 512-token prompts and
# 256-token answers, the batch set by the client's in-flight cap
# (bench/spec/*.yaml). First the published point: vLLM V1's draft_model
# with Qwen3-1.7B drafting k = 4 for Qwen3-32B, acceptance length 3.28,
# measured at batch 1 TPOT 23.65 ms without and 10.46 ms with speculation
# (speed-up 2.26×; docs/latency.md quotes the source); then the speed-up
# of a draft model, an EAGLE-3 head and the draft model with
# disable_by_batch_size 64, at batch 1 to 256 on TP2 (TP1 holds too little
# KV for large batches next to the draft).
#   bench/speculative.sh
#   BATCHES="1 8 64" bench/speculative.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-synth ./cmd/blis-sim ./cmd/blis-report
"$work/blis-synth" -q -o "$work/req.arrows" bench/spec/fixed.yaml
tpot() { # cluster batch -> TPOT p50 ms
  "$work/blis-sim" -q --check-invariants --cluster "bench/spec/$1.yaml" --max-in-flight "$2" -o "$work/o.arrows" "$work/req.arrows"
  "$work/blis-report" --format csv "$work/o.arrows" | awk -F, '$1=="latency" && $2=="all/tpot" && $3=="p50" {print $4}'
}
base=$(tpot base-tp1 1)
spec=$(tpot draft-tp1 1)
awk -v b="$base" -v s="$spec" 'BEGIN {
  printf "published (vLLM V1 draft_model, Qwen3-32B + Qwen3-1.7B, k=4, AL 3.28): TPOT 23.65 -> 10.46 ms, speed-up 2.26x\n"
  printf "simulated (H100 tp1, alpha 0.786):                                  TPOT %.2f -> %.2f ms, speed-up %.2fx (%+.1f%%)\n\n", b, s, b/s, 100*(b/s/2.26-1) }'
printf '%6s %10s %22s %22s %22s\n' batch "base ms" "draft_model ms (x)" "eagle3 ms (x)" "draft+disable64 (x)"
for n in ${BATCHES:-1 2 4 8 16 32 64 128 256}; do
  b=$(tpot base-tp2 "$n"); d=$(tpot draft-tp2 "$n"); e=$(tpot eagle3-tp2 "$n"); x=$(tpot draft-tp2-disable "$n")
  awk -v n="$n" -v b="$b" -v d="$d" -v e="$e" -v x="$x" 'BEGIN {
    printf "%6d %10.2f %14.2f (%4.2fx) %14.2f (%4.2fx) %14.2f (%4.2fx)\n", n, b, d, b/d, e, b/e, x, b/x }'
done
