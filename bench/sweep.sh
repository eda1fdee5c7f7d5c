#!/usr/bin/env bash
# blis-sweep overhead benchmark (issue #18): 1,000 runs of a 1,000-request
# workload (the first 1,000 requests of the demo trace on 4 H100 replicas,
# 1,000 seeds) through the binary, then the same simulation bare and as one
# sweep run in `go test -bench`. The overhead per run is the sweep's CPU
# time per run minus the bare simulation's.
#
#   bench/sweep.sh          # 1,000 runs, one worker per core
#   JOBS=1 bench/sweep.sh   # one worker
#   RUNS=200 bench/sweep.sh # fewer runs (bench/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-sweep
cat >"$work/bench.yaml" <<YAML
name: bench
workload: {trace: $PWD/testdata/azure2023_code.csv, limit: 1000}
axes:
  replicas: [4]
  seed: {replications: ${RUNS:-1000}}
YAML
jobs=()
[ -n "${JOBS:-}" ] && jobs=(-j "$JOBS")
/usr/bin/time -v "$work/blis-sweep" -q "${jobs[@]}" -o "$work/out" "$work/bench.yaml" >/dev/null 2>"$work/stderr" || {
  cat "$work/stderr"; exit 1; }
wall=$(grep 'Elapsed (wall clock)' "$work/stderr" | awk '{print $NF}')
user=$(grep 'User time' "$work/stderr" | awk '{print $NF}')
sys=$(grep 'System time' "$work/stderr" | awk '{print $NF}')
rss=$(grep 'Maximum resident set size' "$work/stderr" | awk '{print $NF}')
runs=$(find "$work/out/runs" -name '*.json' | wc -l)
echo "bench/sweep.sh: $runs runs: wall $wall, CPU ${user}s user + ${sys}s sys, peak RSS $((rss / 1024)) MB ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
/usr/bin/time -f '%e' "$work/blis-sweep" -q -o "$work/out" "$work/bench.yaml" >/dev/null 2>"$work/rerun"
echo "bench/sweep.sh: rerun (every run done): $(tail -1 "$work/rerun") s wall"
go test -run '^$' -bench 'BareRun|SweepRun' -benchtime 300x ./lib/sweep | tee "$work/bench" | grep ^Bench
bare=$(awk '/^BenchmarkBareRun/ {print $3}' "$work/bench")
swept=$(awk '/^BenchmarkSweepRun/ {print $3}' "$work/bench")
cpu=$(awk -v u="$user" -v s="$sys" -v n="$runs" 'BEGIN {printf "%.2f", (u + s) * 1000 / n}')
echo "bench/sweep.sh: per run: bare simulation $(awk -v b="$bare" 'BEGIN {printf "%.2f", b / 1e6}') ms, as a sweep run $(awk -v b="$swept" 'BEGIN {printf "%.2f", b / 1e6}') ms (in process); through the binary ${cpu} ms CPU"
echo "bench/sweep.sh: overhead per run: $(awk -v b="$bare" -v s="$swept" 'BEGIN {printf "%.2f", (s - b) / 1e6}') ms in process, $(awk -v b="$bare" -v c="$cpu" 'BEGIN {printf "%.2f", c - b / 1e6}') ms of CPU through the binary (budget: 50 ms)"
