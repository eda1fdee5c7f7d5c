#!/usr/bin/env bash
# Leaping changes nothing but the number of events (docs/engine.md,
# "Leaping"): runs blis-sim with and without --no-leap on a matrix of
# clusters and workloads (routers, policy bundles, P/D, KV tiers,
# autoscaling, snapshots, timeouts, a horizon, the client cap, gateway flow
# control, KV events heard late (50 ms by default, 5 ms, live), DP/EP, decision traces with
# regret, sync and async scheduling, fitted and roofline models, 1,000
# replicas) and compares every output table's data (bench/datahash: the
# metadata, which names the flags, is left out). Prints one line per case
# with the events each mode took; exits 1 on the first difference.
#
#   bench/leap-exact.sh              # several minutes on 2 busy cores
#   ONLY=flow bench/leap-exact.sh    # the cases whose name contains "flow"
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/" ./cmd/blis-sim ./cmd/blis-synth ./bench/gen ./bench/datahash
sim=$work/blis-sim
"$work/gen" -n 20000 -rate 96 -seed 1 -o "$work/bench.arrows"
"$work/gen" -n 20000 -rate 2400 -seed 2 -o "$work/fleet.arrows"
for w in chat-multiturn mixed-tenants closed-loop react two-models autoscale-diurnal reasoning-multimodal flow-control; do
  "$work/blis-synth" -q -o "$work/$w.arrows" "examples/workloads/$w.yaml"
done
"$work/blis-synth" -q -o "$work/moe.arrows" bench/moe/chat.yaml
"$work/blis-synth" -q -o "$work/pd-long.arrows" bench/pd-hetero/long-prompt-70b.yaml
"$work/blis-synth" -q -o "$work/pd-mixed.arrows" bench/pd-selective/mixed.yaml
"$work/blis-synth" -q -o "$work/pd-day.arrows" bench/pd-planner/day.yaml
cat >"$work/sync.yaml" <<'EOF'
replicas: 8
engine: {async_scheduling: false}
router: {routing: least-loaded}
EOF
cat >"$work/snap.yaml" <<'EOF'
replicas: 8
router: {routing: least-kv}
snapshot_interval: 50ms
EOF

fail=0
check() { # name input args...
  local name=$1 in=$2
  shift 2
  case "$name" in *"${ONLY:-}"*) ;; *) return 0 ;; esac
  local out=() sums=()
  for mode in leap step; do
    local d="$work/$mode"
    rm -rf "$d" && mkdir -p "$d"
    local flag=() args=("${@//@D/$d}")
    [ $mode = step ] && flag=(--no-leap)
    "$sim" "${flag[@]}" "${args[@]}" -o "$d/results.arrow" --decisions "$d/decisions.arrow" --anomalies "$d/anomalies.arrow" \
      "$in" 2>"$d/stderr" || { cat "$d/stderr"; exit 1; }
    sums+=("$("$work/datahash" "$d"/*.arrow | awk '{print $1}' | tr '\n' ' ')")
    out+=("$(grep -o '[0-9]* events' "$d/stderr" | head -1)")
  done
  if [ "${sums[0]}" = "${sums[1]}" ]; then
    printf '%-34s identical  %s leaping, %s stepping\n' "$name" "${out[0]}" "${out[1]}"
  else
    printf '%-34s DIFFERENT\n' "$name"
    fail=1
  fi
}
# @D in an argument is the mode's output directory. --decisions turns the decision trace on (level decisions): every
# routing decision's view is recorded, so leaping replicas are read often.
check "round-robin, 8 replicas" "$work/bench.arrows" --replicas 8
check "least-loaded, regret 2%" "$work/bench.arrows" --replicas 8 --router least-loaded --regret-sample 0.02
check "prefix-affinity, chat" "$work/chat-multiturn.arrows" --replicas 16 --router prefix-affinity
check "prefix-affinity, 40 (index)" "$work/chat-multiturn.arrows" --replicas 40 --router prefix-affinity --kv-blocks 3000
check "weighted, tenants" "$work/mixed-tenants.arrows" --replicas 16 --router weighted
check "least-kv, snapshot 50ms" "$work/bench.arrows" --cluster "$work/snap.yaml"
check "power-of-two, timeout 3s" "$work/bench.arrows" --replicas 8 --router power-of-two --client-timeout 3s
check "random, horizon 60s" "$work/bench.arrows" --replicas 8 --router random --horizon 60s
check "sync scheduling" "$work/bench.arrows" --cluster "$work/sync.yaml"
check "policy bundle (Starlark)" "$work/bench.arrows" --replicas 8 --policy examples/policies/bench.yaml
check "policy bundle (tree)" "$work/bench.arrows" --replicas 8 --policy examples/policies/bench-tree.yaml
check "P/D, chat" "$work/chat-multiturn.arrows" --cluster examples/clusters/pd.yaml
check "KV tiers, chat" "$work/chat-multiturn.arrows" --cluster examples/clusters/tiered.yaml
check "two deployments" "$work/two-models.arrows" --cluster examples/clusters/deployments.yaml
check "autoscaled, diurnal" "$work/autoscale-diurnal.arrows" --cluster examples/clusters/autoscale.yaml --scale-events @D/scale.arrow
check "autoscaled, regret 5%" "$work/autoscale-diurnal.arrows" --cluster examples/clusters/autoscale.yaml --regret-sample 0.05
check "agents (react)" "$work/react.arrows" --replicas 4 --router least-loaded
check "multimodal" "$work/reasoning-multimodal.arrows" --replicas 4
check "fitted, qwen3-32b TP2" "$work/closed-loop.arrows" --model qwen3-32b --gpu h100 --tp 2
check "roofline MoE (gpt-oss-120b)" "$work/closed-loop.arrows" --model gpt-oss-120b --gpu h100 --latency roofline
# gpt-oss's 128-token sliding window: prompts on both sides of it, preemptions (small KV), prefix hits.
check "gpt-oss window, preempting" "$work/bench.arrows" --replicas 8 --model gpt-oss-120b --gpu h100 --latency roofline --kv-blocks 3000
check "gpt-oss window, chat TP2" "$work/chat-multiturn.arrows" --replicas 4 --model gpt-oss-120b --gpu h200 --tp 2 --latency roofline
check "prefix-affinity, live KV events" "$work/chat-multiturn.arrows" --replicas 16 --router prefix-affinity --kv-event-delay 0
check "weighted, KV events 5ms late" "$work/mixed-tenants.arrows" --replicas 16 --router weighted --kv-event-delay 5ms
check "client cap 16, least-loaded" "$work/bench.arrows" --replicas 8 --router least-loaded --max-in-flight 16
check "client cap 200, chat" "$work/chat-multiturn.arrows" --replicas 16 --router prefix-affinity --max-in-flight 200
check "gateway flow control" "$work/flow-control.arrows" --cluster examples/clusters/flow-control.yaml
check "flow control, chat" "$work/chat-multiturn.arrows" --cluster examples/clusters/flow-control.yaml
check "MoE DP8 + EP" "$work/moe.arrows" --cluster examples/clusters/moe-ep.yaml
check "P/D on hardware of its own" "$work/pd-long.arrows" --cluster examples/clusters/pd-hetero.yaml
check "P/D selective, fair links" "$work/pd-mixed.arrows" --cluster examples/clusters/pd-selective.yaml
check "P/D pools by the planner" "$work/pd-day.arrows" --cluster examples/clusters/pd-planner.yaml --scale-events @D/scale.arrow
check "E/P/D, multimodal" "$work/reasoning-multimodal.arrows" --cluster examples/clusters/epd.yaml
check "1,000 replicas, least-loaded" "$work/fleet.arrows" --replicas 1000 --router least-loaded
check "1,000 replicas, weighted" "$work/fleet.arrows" --replicas 1000 --router weighted
check "weighted, 40 (index), small KV" "$work/bench.arrows" --replicas 40 --router weighted --kv-blocks 3000
check "weighted, 40 (index), prefix holders" "$work/chat-multiturn.arrows" --replicas 40 --router weighted --kv-blocks 3000
exit $fail
