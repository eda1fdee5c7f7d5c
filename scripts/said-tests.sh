#!/usr/bin/env bash
# Runs tests that skip when something outside the repository is missing
# (chromium, ../shared/data) on their own, verbosely, and says how many were
# skipped and why: `go test ./...` alone would report a skipped test as
# "ok". make test calls it through browser-tests.sh and shared-data-tests.sh.
#
#   scripts/said-tests.sh LABEL RUN-PATTERN WHY-SKIPPED WHERE-PASSED PKG...
set -uo pipefail
cd "$(dirname "$0")/.."
label=$1 pattern=$2 why=$3 where=$4
shift 4
out=$(go test -count=1 -v -run "$pattern" "$@" 2>&1)
status=$?
if [ $status -ne 0 ]; then
  echo "$out"
  exit $status
fi
# Top-level tests only (subtests are indented).
skipped=$(grep -c -- '^--- SKIP' <<<"$out" || true)
passed=$(grep -c -- '^--- PASS' <<<"$out" || true)
if [ "$skipped" -gt 0 ]; then
  echo "$label: SKIPPED $skipped of $((skipped + passed)): $why"
  grep -B1 -- '^--- SKIP' <<<"$out" | grep -v -e '^--$' -e '--- SKIP' | sed 's/^ */  /'
else
  echo "$label: $passed passed $where"
fi
