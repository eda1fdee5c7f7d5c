#!/usr/bin/env bash
# Cache misses of bench/fleet.sh's SWEEP runs, counted by valgrind's
# cachegrind (this project's machines have no hardware counters; the
# simulated counts are exact and repeatable where timings are noisy):
# 100,000 requests on 1,000 replicas at 96, 1,200 and 12,000 req/s, and on
# 8 replicas at 96 req/s. Each run is simulated twice: with the machine's
# third-level cache as the last level, and with its second-level cache
# (cachegrind models two levels; sizes from /sys, whose figures are the
# machine's: cpuid can name a whole package's L3). Runs use one P
# (GOMAXPROCS=1): an idle P's spinning would otherwise count as work.
# Needs valgrind (apt-get install valgrind); about 5 minutes.
#
#   bench/misses.sh
#   TOP=15 bench/misses.sh     # and each run's 15 functions with the most misses
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "bench/misses.sh: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -pgo="${PGO:-cmd/default.pgo}" -o "$work/" ./cmd/blis-sim ./bench/gen ./bench/cgsum

runs=("8 96" "1000 96" "1000 1200" "1000 12000")
for r in "${runs[@]}"; do
  set -- $r
  [ -f "$work/r$2.arrows" ] || "$work/gen" -n 100000 -rate "$2" -mean 512 -sd 256 -min 2 -max 7000 -seed 1 -o "$work/r$2.arrows"
done

# cache LEVEL: "size,ways,line" in bytes for cachegrind's --LL.
cache() {
  local d=/sys/devices/system/cpu/cpu0/cache/index$1 size
  size=$(cat "$d/size" 2>/dev/null) || { echo "bench/misses.sh: no $d (not Linux?)" >&2; exit 1; }
  case "$size" in *K) size=$((${size%K} * 1024)) ;; *M) size=$((${size%M} * 1024 * 1024)) ;; esac
  echo "$size,$(cat "$d/ways_of_associativity"),$(cat "$d/coherency_line_size")"
}
l3=$(cache 3)
l2=$(cache 2)

sim() { # replicas rate ll out
  GOMAXPROCS=1 valgrind --tool=cachegrind --cache-sim=yes --LL="$3" --cachegrind-out-file="$4" \
    "$work/blis-sim" --replicas "$1" --router least-loaded --model llama-3.1-8b --gpu h100 --tp 1 \
    -o /dev/null "$work/r$2.arrows" 2>"$4.log" || { cat "$4.log" >&2; exit 1; }
}

# Two runs at a time: cachegrind is single-threaded.
for r in "${runs[@]}"; do
  set -- $r
  sim "$1" "$2" "$l3" "$work/llc-$1x$2" &
  sim "$1" "$2" "$l2" "$work/l2-$1x$2" &
  wait
done

for r in "${runs[@]}"; do
  set -- $r
  printf '%s replicas at %s req/s: %s, %s\n' "$1" "$2" "$(grep -o '[0-9]* events' "$work/llc-$1x$2.log" | head -1)" \
    "$(grep -o 'at most [0-9]* requests held' "$work/llc-$1x$2.log" | head -1)"
done
echo
echo "last level: the third-level cache ($l3: bytes, ways, line):"
(cd "$work" && ./cgsum ${TOP:+-top $TOP} llc-8x96 llc-1000x96 llc-1000x1200 llc-1000x12000)
echo
echo "last level: the second-level cache ($l2):"
(cd "$work" && ./cgsum ${TOP:+-top $TOP} l2-8x96 l2-1000x96 l2-1000x1200 l2-1000x12000)
