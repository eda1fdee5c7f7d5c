#!/usr/bin/env bash
# make bench: every benchmark script, with short defaults so that the whole
# takes a few minutes on 2 cores; FULL=1 runs each at the size its own header
# documents (the figures in the README). Each script prints its own summary
# line; run one alone for details.
#
#   bench/run.sh
#   FULL=1 bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${FULL:-}" ]; then
  sim=100000 report=10000000 runs=1000 load=10000 formats=1000000 serve=300
else
  sim=20000 report=1000000 runs=100 load=2000 formats=100000 serve=100
fi
step() { echo; echo "== $*"; "$@"; }
step bench/sim.sh "$sim"
step bench/report.sh "$report"
step env RUNS="$runs" bench/sweep.sh
step bench/load.sh "$load"
step bench/serve.sh "$serve"
step bench/formats.sh "$formats"
