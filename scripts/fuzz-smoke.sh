#!/usr/bin/env bash
# Runs every fuzz target briefly on top of its seed corpus, so parser crashes
# found by mutation surface in CI, not in production. Budgets are counts, not
# durations: a duration deadline can expire mid-execution on a loaded machine
# and fail with "context deadline exceeded"; minimising each new input is
# capped for the same reason (its default is a minute).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-2000x}
minimize=${FUZZMINIMIZE:-20x}
n=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "$pkg" >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; exit 1; }
    n=$((n + 1))
  done
done
rm -f /tmp/fuzz.$$.log
echo "fuzz-smoke: $n targets passed"
