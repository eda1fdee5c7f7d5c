#!/usr/bin/env bash
# The tests that replay the public traces and measurements kept beside the
# repository (../shared/data, or $BLIS_SHARED_DATA): converting every real
# trace, replaying a real vLLM run. make test runs them on their own,
# verbosely, so that it says when they were skipped because the data is not
# there; `go test ./...` alone would report a skipped test as "ok".
# BLIS_REQUIRE_SHARED=1 (CI) makes a missing directory a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(go test -count=1 -v -run 'SharedData' ./lib/convert/ ./bench/fidelity/ 2>&1)
status=$?
if [ $status -ne 0 ]; then
  echo "$out"
  exit $status
fi
skipped=$(grep -c -- '--- SKIP' <<<"$out" || true)
passed=$(grep -c -- '--- PASS' <<<"$out" || true)
if [ "$skipped" -gt 0 ]; then
  echo "shared-data tests: SKIPPED $skipped of $((skipped + passed)): ${BLIS_SHARED_DATA:-../shared/data} is not beside the repository (the public traces and measurements), so real traces were not converted nor real runs replayed; TestREADMECommands skipped the README commands that read it too"
  grep -B1 -- '--- SKIP' <<<"$out" | grep -v -e '^--$' -e '--- SKIP' | sed 's/^ */  /'
else
  echo "shared-data tests: $passed passed on ${BLIS_SHARED_DATA:-../shared/data}"
fi
