#!/usr/bin/env bash
# The HTML pages (blis-report's report, blis-sweep's pages) checked in
# headless Chromium: no console error, nothing overflowing, every figure
# against its reference screenshot (lib/report/pagetest). make test runs
# them on their own, verbosely, so that it says when they were skipped
# because chromium is not installed; `go test ./...` alone would report a
# skipped test as "ok".
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(go test -count=1 -v -run 'InBrowser' ./lib/report/... ./lib/sweep/ ./cmd/blis-sweep/ 2>&1)
status=$?
if [ $status -ne 0 ]; then
  echo "$out"
  exit $status
fi
# Top-level tests only (subtests are indented).
skipped=$(grep -c -- '^--- SKIP' <<<"$out" || true)
passed=$(grep -c -- '^--- PASS' <<<"$out" || true)
if [ "$skipped" -gt 0 ]; then
  echo "browser tests: SKIPPED $skipped of $((skipped + passed)): chromium is not installed (apt-get install chromium), so the HTML pages were not checked in a browser"
  grep -B1 -- '^--- SKIP' <<<"$out" | grep -v -e '^--$' -e '--- SKIP' | sed 's/^ */  /'
else
  echo "browser tests: $passed passed in headless Chromium"
fi
