#!/usr/bin/env bash
# blis-sim throughput benchmark (issue #3): N requests (default 100,000),
# 8 replicas of llama-3.1-8b on H100 TP1, Poisson arrivals at 96 req/s,
# input and output lengths normal(512, 256) clamped to [2, 7000].
# Prints wall time and peak RSS of the simulation alone (the workload is
# generated beforehand by bench/gen into a temporary Arrow file).
#
#   bench/sim.sh            # 100,000 requests
#   bench/sim.sh 1000000    # 1,000,000 requests
#   LATENCY=roofline bench/sim.sh   # pass --latency (default: auto)
#   SORTED=false bench/sim.sh       # unsorted table: blis-sim reads it into memory
#   REPLICAS=1000 RATE=12000 bench/sim.sh     # 1,000 replicas at the same load per replica
#   CLUSTER=bench/two-deployments.yaml MODELS=llama-3.1-8b,qwen3-14b RATE=12000 bench/sim.sh 1000000
#   TRACE=decisions bench/sim.sh    # --trace-level decisions|full with --decisions and --anomalies
#   REGRET=0.01 bench/sim.sh        # --regret-sample (counterfactual forks of 1% of routing decisions)
#   POLICY=examples/policies/bench.yaml bench/sim.sh   # a policy bundle (Starlark routing + admission)
#   PGO=off bench/sim.sh            # blis-sim built without cmd/default.pgo (as make build PGO=off)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -pgo="${PGO:-cmd/default.pgo}" -o "$work/" ./cmd/blis-sim ./bench/gen
"$work/gen" -n "$n" -rate "${RATE:-96}" -mean 512 -sd 256 -min 2 -max 7000 -seed 1 -sorted="${SORTED:-true}" \
  -models "${MODELS:-}" -o "$work/requests.arrows"
if [ -n "${CLUSTER:-}" ]; then
  set -- --cluster "$CLUSTER" ${ROUTER:+--router "$ROUTER"}
else
  set -- --replicas "${REPLICAS:-8}" --model llama-3.1-8b --gpu h100 --tp 1 --latency "${LATENCY:-auto}" ${ROUTER:+--router "$ROUTER"}
fi
if [ -n "${TRACE:-}" ]; then
  set -- "$@" --trace-level "$TRACE" --decisions "$work/decisions.arrows" --anomalies "$work/anomalies.arrows"
fi
if [ -n "${REGRET:-}" ]; then
  set -- "$@" --regret-sample "$REGRET"
fi
if [ -n "${POLICY:-}" ]; then
  set -- "$@" --policy "$POLICY"
fi
/usr/bin/time -v "$work/blis-sim" "$@" -o "$work/results.arrows" "$work/requests.arrows" 2>"$work/stderr" || {
  cat "$work/stderr"; exit 1; }
grep -v '^\s' "$work/stderr" | grep -v -e 'Command being timed' -e '^$' | head -3 || true
grep -E '^  (simulated|[0-9]+ replicas|[0-9]+ deployments|decisions:)|^    ' "$work/stderr" || true
wall=$(grep 'Elapsed (wall clock)' "$work/stderr" | awk '{print $NF}')
rss=$(grep 'Maximum resident set size' "$work/stderr" | awk '{print $NF}')
user=$(grep 'User time' "$work/stderr" | awk '{print $NF}')
sys=$(grep 'System time' "$work/stderr" | awk '{print $NF}')
# CPU time is the steadier figure on a shared machine.
echo "bench/sim.sh: $n requests: wall $wall, CPU ${user}s user + ${sys}s sys, peak RSS $((rss / 1024)) MB ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
