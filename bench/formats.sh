#!/usr/bin/env bash
# A results table of N rows (default 1,000,000) saved by blis-sim as an Arrow
# IPC stream, an IPC file and Parquet, gzipped, and converted between them by
# blis-convert must give byte-identical blis-report output in every form, by
# path and on stdin (issue 10, item 1: blis-report panicked on IPC files of
# more than 32,768 rows). make test runs the same test at 100,000 rows.
#
#   bench/formats.sh            # 1,000,000 rows (about a minute of CPU; 3 min wall on a busy 2-core machine)
#   bench/formats.sh 200000
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-1000000}
BLIS_FORMATS_ROWS=$rows go test -count=1 -v -timeout 30m -run '^TestLargeResultsEveryFormat$' ./internal/e2e/ \
  | grep -E -e '--- (PASS|FAIL)' -e 'without the build' -e '^(ok|FAIL)' -e 'differs|Error|error'
echo "bench/formats.sh: $rows rows: the same report from stream, IPC file, Parquet, gzip and blis-convert's copies"
