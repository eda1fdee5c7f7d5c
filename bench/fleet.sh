#!/usr/bin/env bash
# Fleet-scale blis-sim runs (issue 28): 100,000 requests (normal(512, 256)
# tokens in and out, clamped to [2, 7000]) of Llama-3.1-8B on H100 TP1
#   - on 8 and 1,000 replicas at 96 req/s (over-provisioned: leaping's case)
#     and at 12,000 req/s (12 per replica), least-loaded, prefix-affinity
#     and weighted;
#   - on 10,000 replicas at 120,000 req/s;
# and with DAY=1 a day of a 1,000-replica fleet: 10 M requests with a
# diurnal rate (bench/fleet-day.yaml) piped from blis-synth, whose table
# promises that no two prompts start alike (blis.prefix_unique).
# Prints, per run, CPU time, wall time, peak RSS, events and steps. Leaping
# is on; NOLEAP=1 passes --no-leap (every step an event, as before).
#
#   bench/fleet.sh                 # the 100k runs (a few minutes)
#   ONLY=10000 bench/fleet.sh      # runs whose name contains 10000
#   DAY=1 bench/fleet.sh           # the day (about a minute of CPU; ~0.25 GB)
#   SWEEP=1 bench/fleet.sh         # 1,000 replicas from 96 to 12,000 req/s: a run's
#                                  # cost per event follows its working set
#   PGO=off bench/fleet.sh         # blis-sim built without cmd/default.pgo (as make build PGO=off)
# The same runs in process (no Arrow between the stages): BenchmarkFleet* in
# lib/engine, and BenchmarkFleetDay / BenchmarkFleetDay2h in lib/synth.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -pgo="${PGO:-cmd/default.pgo}" -o "$work/" ./cmd/blis-sim ./cmd/blis-synth ./bench/gen
flag=()
[ "${NOLEAP:-}" = 1 ] && flag=(--no-leap)

gen() { # name rate
  [ -f "$work/$1.arrows" ] || "$work/gen" -n 100000 -rate "$2" -mean 512 -sd 256 -min 2 -max 7000 -seed 1 -o "$work/$1.arrows"
}

report() { # name stderr-file
  local f=$2
  local user sys wall rss ev st held
  user=$(grep 'User time' "$f" | awk '{print $NF}')
  sys=$(grep 'System time' "$f" | awk '{print $NF}')
  wall=$(grep 'Elapsed (wall clock)' "$f" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$f" | awk '{print $NF}')
  ev=$(grep -o '[0-9]* events' "$f" | head -1)
  st=$(grep -o '[0-9]* steps' "$f" | head -1)
  held=$(grep -o 'at most [0-9]* requests held' "$f" | grep -o '[0-9]*' | head -1)
  printf '%-34s CPU %6.2f s  wall %8s  peak RSS %5d MB  %s, %s, %s held, CPU %.2f µs an event\n' "$1" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$wall" $((rss / 1024)) "$ev" "$st" "${held:-?}" \
    "$(awk -v u="$user" -v s="$sys" -v e="${ev%% *}" 'BEGIN{if (e > 0) print (u+s)*1e6/e; else print 0}')"
}

run() { # name input replicas router
  case "$1" in *"${ONLY:-}"*) ;; *) return 0 ;; esac
  /usr/bin/time -v "$work/blis-sim" "${flag[@]}" --replicas "$3" --router "$4" --model llama-3.1-8b --gpu h100 --tp 1 \
    -o /dev/null "$work/$2.arrows" 2>"$work/stderr" || { cat "$work/stderr"; exit 1; }
  report "$1" "$work/stderr"
}

if [ -n "${SWEEP:-}" ]; then
  # The same 100k requests, replicas and router; only the rate changes, and
  # with it how many replicas are busy and how many requests are held at
  # once (issue 28's last goal: docs/engine.md, "Issue 28's goals").
  for rate in 96 1200 3000 6000 12000; do
    gen "r$rate" "$rate"
    run "1000 replicas, $rate req/s" "r$rate" 1000 least-loaded
  done
  gen r96 96
  run "8 replicas, 96 req/s" r96 8 least-loaded
elif [ -z "${DAY:-}" ]; then
  gen r96 96
  gen r12k 12000
  gen r120k 120000
  for router in least-loaded prefix-affinity weighted; do
    run "8 replicas, 96 req/s, $router" r96 8 "$router"
    run "1000 replicas, 96 req/s, $router" r96 1000 "$router"
    run "8 replicas, 12k req/s, $router" r12k 8 "$router"
    run "1000 replicas, 12k req/s, $router" r12k 1000 "$router"
  done
  run "10000 replicas, 120k req/s, least-loaded" r120k 10000 least-loaded
else
  set -o pipefail
  /usr/bin/time -v "$work/blis-synth" -q bench/fleet-day.yaml 2>"$work/synth" |
    /usr/bin/time -v "$work/blis-sim" "${flag[@]}" --replicas 1000 --router least-loaded -o /dev/null - 2>"$work/stderr" ||
    { cat "$work/synth" "$work/stderr"; exit 1; }
  grep -E 'requests:' "$work/stderr" | head -1
  report "day of 1000 replicas, 10 M requests" "$work/stderr"
fi
echo "($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
