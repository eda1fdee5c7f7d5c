package summary

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/trace"
)

// runInfo is what ran, from the results' metadata (lib/sim records it):
// the suggestions are computed from it and never tell a run to do what it
// already does.
type runInfo struct {
	sched              []string // scheduling policies of the deployments (fcfs, priority)
	router, admission  string
	priority           string
	signals            string            // what the routing policy weighs ("load,kv", "none"); "" when it cannot say
	stages             map[string]string // the bundle's stages and their kinds
	bundle             string            // the bundle's id ("" without one)
	kvDelayUS          int64             // -1: unknown
	oracle             bool
	autoscaled, tiered bool
	hasDeployments     bool
	predictor          string
}

func readRunInfo(path string) runInfo {
	ri := runInfo{kvDelayUS: -1, stages: map[string]string{}}
	src, err := trace.Open(path, nil)
	if err != nil {
		return ri
	}
	defer src.Close()
	md := src.Meta()
	if deps, err := md.SimDeployments(); err == nil {
		for _, d := range deps {
			ri.hasDeployments = true
			if d.SchedulingPolicy != "" && !slices.Contains(ri.sched, d.SchedulingPolicy) {
				ri.sched = append(ri.sched, d.SchedulingPolicy)
			}
			ri.autoscaled = ri.autoscaled || d.Autoscaled
		}
	}
	ri.router, ri.admission, ri.priority = md.Get(trace.MetaSimRouter), md.Get(trace.MetaSimAdmission), md.Get(trace.MetaSimPriority)
	ri.signals = md.Get(trace.MetaSimRouterSignals)
	if v, err := strconv.ParseInt(md.Get(trace.MetaSimKVEventDelay), 10, 64); err == nil {
		ri.kvDelayUS = v
	}
	ri.bundle = md.Get("blis.policy.id")
	if md.Get("blis.policy.sha256") != "" && ri.bundle == "" {
		ri.bundle = "(no id)"
	}
	_ = json.Unmarshal([]byte(md.Get(row.MetaPolicyStageKinds)), &ri.stages)
	ri.oracle = md.Get("blis.policy.oracle") == "true"
	ri.predictor = md.Get("blis.policy.predictor")
	if tiers, err := md.KVTiers(); err == nil && len(tiers) > len(trace.FixedTiers) {
		ri.tiered = true
	}
	return ri
}

// priorityOn: some deployment orders its queue by priority.
func (ri *runInfo) priorityOn() bool { return slices.Contains(ri.sched, "priority") }

// weighs reports whether the routing policy weighs signal s, and whether it
// can say.
func (ri *runInfo) weighs(s string) (yes, known bool) {
	if ri.signals == "" {
		return false, false
	}
	return slices.Contains(strings.Split(ri.signals, ","), s), true
}

// stage describes the bundle's stage, or "" when the bundle does not give it.
func (ri *runInfo) stage(name string) string {
	if k, ok := ri.stages[name]; ok {
		return fmt.Sprintf("the bundle's %s stage (%s)", name, k)
	}
	return ""
}

// advise turns an anomaly cluster into a suggestion consistent with the run.
func (s *writer) advise(c *Cluster, shadow [2]int64) string {
	ri := &s.ri
	where := orDash(c.Replica)
	switch c.Type {
	case trace.AnomalyPriorityInversion:
		switch {
		case ri.hasDeployments && !ri.priorityOn():
			return fmt.Sprintf("Priority inversions on %s (%d): the replicas order their queues first come first served (engine.scheduling_policy: fcfs ignores priorities); set scheduling_policy: priority for the priorities to count.", where, c.Count)
		case ri.stage("priority") != "":
			return fmt.Sprintf("Priority inversions on %s (%d) are measured on the requests' priority column, while the queues order by %s: make it rank by the column, or read them as what the stage intends.", where, c.Count, ri.stage("priority"))
		case ri.priority == "fcfs":
			return fmt.Sprintf("Priority inversions on %s (%d): scheduling_policy is priority but the priority policy is fcfs (every request 0): use router.priority: request (the column) or a priority stage.", where, c.Count)
		}
		return fmt.Sprintf("Priority inversions on %s (%d): the queues already order by priority, so these come from KV admission and preemption (a high-priority request that does not fit waits while a smaller, lower one runs); weigh KV use in routing, or keep KV free for high priorities at admission.", where, c.Count)
	case trace.AnomalyHeadOfLine:
		x := fmt.Sprintf("Head-of-line blocking on %s (%d cases): short prompts wait behind long prefills; route long prompts apart from short ones, or weigh queued prompt tokens rather than queue length", where, c.Count)
		if k := ri.stages["scheduler"]; k == "" || k == "parameterized vllm" {
			x += ", or order each queue shortest-first (scheduler: {kind: parameterized, template: shortest-first})"
		} else {
			x += fmt.Sprintf(" (the queues already follow %s)", ri.stage("scheduler"))
		}
		return x + "."
	case trace.AnomalyPreemptionStorm:
		switch kv, known := ri.weighs("kv"); {
		case known && kv:
			return fmt.Sprintf("Preemption storms on %s (%d): KV runs out although routing already weighs KV use (%s weighs %s): admit less when KV is nearly full (an admission stage on kv_utilization), or lower max_num_seqs.", where, c.Count, ri.router, ri.signals)
		case known:
			return fmt.Sprintf("Preemption storms on %s (%d): KV runs out and routing does not weigh KV use (%s weighs %s): weigh it (least-kv, weighted with kv > 0, or kv_utilization in the policy), or admit less when KV is nearly full.", where, c.Count, ri.router, ri.signals)
		}
		return fmt.Sprintf("Preemption storms on %s (%d): KV runs out; if the routing policy does not read kv_utilization, weigh it, or admit less when KV is nearly full.", where, c.Count)
	case trace.AnomalySLOViolation:
		if ri.priorityOn() && (ri.stage("priority") != "" || ri.priority != "" && ri.priority != "fcfs") {
			by := ri.stage("priority")
			if by == "" {
				by = "the " + ri.priority + " priority policy"
			}
			return fmt.Sprintf("SLO violations on %s (%d) although the queues already order by %s: the misses are capacity or placement; add replicas, or route the violated classes to the least loaded.", where, c.Count, by)
		}
		return fmt.Sprintf("SLO violations on %s (%d): give the violated classes priority (scheduling_policy: priority with a priority stage) or reserve capacity for them.", where, c.Count)
	case trace.AnomalyShadowDivergence:
		if p, known := ri.weighs("prefix"); known && !p {
			return fmt.Sprintf("Shadow KV divergence on %s (%d) is informational: the routing policy (%s) does not weigh the prefix cache.", where, c.Count, ri.router)
		}
		if shadow[1] > shadow[0] {
			delay := "late"
			if ri.kvDelayUS >= 0 {
				delay = fmt.Sprintf("%g ms late (kv_event_delay)", float64(ri.kvDelayUS)/1000)
			}
			return fmt.Sprintf("Shadow KV divergence on %s (%d): in %d of the run's divergences the replica held more than the router had heard of (KV events reach it %s): the router's prefix view lags; that costs hits only when requests sharing a fresh prefix arrive within the delay.", where, c.Count, shadow[1], delay)
		}
		return fmt.Sprintf("Shadow KV divergence on %s (%d): in %d of the run's divergences a predicted cache hit was gone (evicted) when the request was scheduled: under KV pressure, trust cached blocks less (weigh kv_utilization with them).", where, c.Count, shadow[0])
	case trace.AnomalyCacheThrashing:
		return fmt.Sprintf("Cache thrashing on %s (%d windows): blocks ping-pong between the GPU and the lower tiers; a larger lower tier, or keep a session's requests on the replica that holds its blocks.", where, c.Count)
	case trace.AnomalyScaleOscillation:
		return fmt.Sprintf("Scale oscillation (%d): the autoscaler reversed itself within 10 minutes; lengthen stabilization.down, or widen the policy's tolerance.", c.Count)
	case trace.AnomalyPDBackpressure:
		return fmt.Sprintf("Prefill/decode backpressure on %s (%d): hand-offs waited for decode KV; more decode replicas or blocks, or choose decode replicas with free KV.", where, c.Count)
	}
	return fmt.Sprintf("%s on %s (%d).", c.Type, where, c.Count)
}
