#!/usr/bin/env bash
# blis-serve's closed loop (issue 17): the first N requests (default 300) of
# the Azure 2023 code trace, 4× faster (5.5 req/s for 55 s), sent by blis-load
# to blis-serve (2 × Llama-3.1-8B on H100, roofline), each in a process of
# its own. Prints, per request:
#   1. blis-load's TTFT and E2E − blis-serve's simulated ones (same arrivals);
#   2. blis-sim on blis-serve's results table − blis-serve (0: the same run);
#   3. blis-sim on blis-load's results table (arrivals = send times) − blis-load;
# and the load of the machine.
#
#   bench/serve.sh          # 300 requests, about a minute
#   bench/serve.sh 100
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
work=$(mktemp -d)
srv=""
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/" ./cmd/blis-convert ./cmd/blis-serve ./cmd/blis-load ./cmd/blis-sim ./bench/closedloop
"$work/blis-convert" --limit "$n" --speedup 4 -o "$work/requests.arrow" testdata/azure2023_code.csv 2>"$work/convert.err" || { cat "$work/convert.err"; exit 1; }
"$work/blis-serve" --replicas 2 --model llama-3.1-8b --gpu h100 --latency roofline --listen 127.0.0.1:0 -o "$work/served.arrow" 2>"$work/serve.err" &
srv=$!
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[^ ]*/v1' "$work/serve.err" || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.err"; exit 1; }
echo "load before: $(uptime)"
"$work/blis-load" -q --url "$url" --model llama-3.1-8b -o "$work/real.arrow" "$work/requests.arrow"
echo "load after:  $(uptime)"
kill -INT "$srv"
wait "$srv" || true
srv=""
grep '^blis-serve: [0-9]* requests' "$work/serve.err"
"$work/blis-sim" -q --replicas 2 --model llama-3.1-8b --gpu h100 --latency roofline -o "$work/resim.arrow" "$work/served.arrow"
"$work/blis-sim" -q --replicas 2 --model llama-3.1-8b --gpu h100 --latency roofline -o "$work/sim.arrow" "$work/real.arrow"
echo "1. blis-load − blis-serve (same arrivals):"
"$work/closedloop" "$work/real.arrow" "$work/served.arrow" -serve
echo "2. blis-sim on blis-serve's results − blis-serve:"
"$work/closedloop" "$work/resim.arrow" "$work/served.arrow"
echo "3. blis-load − blis-sim on blis-load's results (arrivals shifted by the network):"
"$work/closedloop" "$work/real.arrow" "$work/sim.arrow"
