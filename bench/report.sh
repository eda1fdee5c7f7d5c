#!/usr/bin/env bash
# blis-report on 10,000,000 result rows: wall time, CPU time and peak memory.
# Target: <= 10 s and <= 500 MB. Usage: bench/report.sh [rows] [workdir]
# The input is synthetic (seeded, same bytes every time), written by the
# TestGenerateBig helper in lib/report with trace.ResultWriter (~2 GB for 10M rows).
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-10000000}
dir=${2:-${TMPDIR:-/tmp}/blis-report-bench}
mkdir -p "$dir"
in="$dir/results-$rows.arrows"
go build -o "$dir/blis-report" ./cmd/blis-report
if [ ! -s "$in" ]; then
  echo "writing $in ($rows rows)..." >&2
  BLIS_REPORT_BIG="$in" BLIS_REPORT_ROWS="$rows" go test ./lib/report -run '^TestGenerateBig$' -count=1 -timeout 30m >/dev/null
fi
run() {
  local name=$1; shift
  /usr/bin/time -v "$dir/blis-report" "$@" >"$dir/$name.out" 2>"$dir/$name.time"
  awk -v n="$name" -F': ' '
    /User time/ {u=$2} /System time/ {s=$2} /Elapsed/ {e=$2} /Maximum resident/ {m=$2}
    END {printf "%-14s wall %s  user %ss  sys %ss  max RSS %.0f MB\n", n, e, u, s, m/1024}' "$dir/$name.time"
}
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
run default "$in"
run slo-by-tenant --slo "ttft=500ms,tpot=30ms" --by tenant "$in"
run json-html --format json --html "$dir/report.html" "$in"
