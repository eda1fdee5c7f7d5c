#!/usr/bin/env bash
# Regenerates cmd/default.pgo, the CPU profile `make build` (and bench/sim.sh,
# bench/fleet.sh) pass to go build (-pgo: profile-guided optimisation,
# https://go.dev/doc/pgo), from runs that stand for what users run:
#   - bench/sim.sh's workload (normal(512, 256) tokens in and out) on 8
#     replicas at 96 req/s, plain and under a Starlark policy bundle
#     (examples/policies/bench.yaml: the policy-search case);
#   - that workload on 1,000 replicas at 12,000 req/s, weighted routing;
#   - the first hour of bench/fleet-day.yaml on 1,000 replicas (leaping, the
#     prefix cache's eviction path, private runs: blis-synth promises
#     blis.prefix_unique for it);
#   - examples/workloads/chat-multiturn.yaml on 4 replicas under
#     prefix-affinity (prefix-cache hits).
# The profile changes no result, only which calls the compiler inlines and
# devirtualises (docs/engine.md, "Profile-guided optimisation"). Run it again
# when the hot path has changed much; a stale profile still works (Go only
# uses what still matches).
#
#   make pgo        # runs this script: writes cmd/default.pgo
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Built without a profile, so that the new one does not depend on the old.
go build -pgo=off -o "$work/" ./cmd/blis-sim ./cmd/blis-synth ./bench/gen
sim="$work/blis-sim"
"$work/gen" -n 1000000 -rate 96 -mean 512 -sd 256 -min 2 -max 7000 -seed 1 -o "$work/r96.arrows"
"$work/gen" -n 200000 -rate 96 -mean 512 -sd 256 -min 2 -max 7000 -seed 2 -o "$work/p96.arrows"
"$work/gen" -n 1000000 -rate 12000 -mean 512 -sd 256 -min 2 -max 7000 -seed 3 -o "$work/r12k.arrows"
sed -e 's/^horizon: 86400s/horizon: 3600s/' bench/fleet-day.yaml >"$work/hour.yaml"
grep -q '^horizon: 3600s' "$work/hour.yaml" || { echo "scripts/regen-pgo.sh: bench/fleet-day.yaml has no 'horizon: 86400s' line to cut" >&2; exit 1; }
"$work/blis-synth" -q -o "$work/hour.arrows" "$work/hour.yaml"
"$work/blis-synth" -q -o "$work/chat.arrows" examples/workloads/chat-multiturn.yaml

model=(--model llama-3.1-8b --gpu h100 --tp 1)
"$sim" -q --replicas 8 "${model[@]}" --cpuprofile "$work/1.pprof" -o /dev/null "$work/r96.arrows"
"$sim" -q --replicas 8 "${model[@]}" --policy examples/policies/bench.yaml --cpuprofile "$work/2.pprof" -o /dev/null "$work/p96.arrows"
"$sim" -q --replicas 1000 "${model[@]}" --router weighted --cpuprofile "$work/3.pprof" -o /dev/null "$work/r12k.arrows"
"$sim" -q --replicas 1000 --router least-loaded --cpuprofile "$work/4.pprof" -o /dev/null "$work/hour.arrows"
"$sim" -q --replicas 4 "${model[@]}" --router prefix-affinity --cpuprofile "$work/5.pprof" -o /dev/null "$work/chat.arrows"
go tool pprof -proto "$work"/[1-5].pprof >"$work/default.pgo"
mv "$work/default.pgo" cmd/default.pgo
echo "wrote cmd/default.pgo ($(wc -c <cmd/default.pgo) bytes)"
