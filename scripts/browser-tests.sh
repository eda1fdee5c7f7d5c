#!/usr/bin/env bash
# The HTML pages (blis-report's report, blis-sweep's pages) checked in
# headless Chromium: no console error, nothing overflowing, every figure
# against its reference screenshot (lib/report/pagetest). make test runs
# them on their own, verbosely, so that it says when they were skipped
# because chromium is not installed; `go test ./...` alone would report a
# skipped test as "ok".
exec "$(dirname "$0")/said-tests.sh" "browser tests" 'InBrowser' \
  "chromium is not installed (apt-get install chromium), so the HTML pages were not checked in a browser" \
  "in headless Chromium" ./lib/report/... ./lib/sweep/ ./cmd/blis-sweep/
