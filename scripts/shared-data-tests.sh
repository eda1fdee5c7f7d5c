#!/usr/bin/env bash
# The tests that replay the public traces and measurements kept beside the
# repository (../shared/data, or $BLIS_SHARED_DATA): converting every real
# trace, replaying a real vLLM run. make test runs them on their own,
# verbosely, so that it says when they were skipped because the data is not
# there. BLIS_REQUIRE_SHARED=1 (CI) makes a missing directory a failure.
data=${BLIS_SHARED_DATA:-../shared/data}
exec "$(dirname "$0")/said-tests.sh" "shared-data tests" 'SharedData' \
  "$data is not beside the repository (the public traces and measurements), so real traces were not converted nor real runs replayed; TestREADMECommands skipped the README commands that read it too" \
  "on $data" ./lib/convert/ ./bench/fidelity/
