package bundle

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/sched"
)

// The scheduler, preemption and autoscaler stages' templates (the router
// stages' are policy.Templates()).
var stageTemplates = []*policy.Template{
	{Stage: StageScheduler, Name: "vllm", Doc: "vLLM's order: priority (under scheduling_policy: priority), then first come first served, preempted requests first"},
	{Stage: StageScheduler, Name: "shortest-first", Doc: "fewest prompt tokens left to compute first, then vLLM's order"},
	{Stage: StagePreemption, Name: "newest", Doc: "the most recently admitted running request (vLLM)"},
	{Stage: StagePreemption, Name: "least-progress", Doc: "the running request with the fewest generated tokens, the newest among equals"},
	{Stage: StageAutoscaler, Name: "target-load", Doc: "ceil(pool load / target) replicas, within [min_replicas, max_replicas]",
		Params: []policy.Param{{Name: "target", Default: 16, Min: 1, Max: math.Inf(1), Doc: "requests (waiting + running + in flight) per replica"}}},
}

// Templates lists every template of every stage, stage by stage.
func Templates() []*policy.Template {
	return append(append([]*policy.Template(nil), policy.Templates()...), stageTemplates...)
}

func findTemplate(stage, name string) (*policy.Template, error) {
	switch stage {
	case StageAdmission, StagePriority, StageRouting:
		return policy.Find(policy.Stage(stage), name)
	}
	for _, t := range stageTemplates {
		if string(t.Stage) == stage && t.Name == name {
			return t, nil
		}
	}
	return nil, fmt.Errorf("unknown %s policy %q (expected one of %s)", stage, name, strings.Join(templateNames(stage), ", "))
}

func templateNames(stage string) []string {
	var out []string
	for _, t := range Templates() {
		if string(t.Stage) == stage {
			out = append(out, t.Name)
		}
	}
	return out
}

func paramNames(t *policy.Template) []string {
	out := make([]string, len(t.Params))
	for i, p := range t.Params {
		out[i] = p.Name
	}
	return out
}

// vllmLess is vLLM's waiting order (sched's heap order).
func vllmLess(a, b *request.State) int {
	switch {
	case a.Prio != b.Prio:
		if a.Prio > b.Prio {
			return -1
		}
		return 1
	case a.Order < b.Order:
		return -1
	case a.Order > b.Order:
		return 1
	}
	return 0
}

type shortestFirst struct{}

func (shortestFirst) Sort(_ int64, w []*request.State) {
	slices.SortFunc(w, func(a, b *request.State) int {
		ra, rb := a.Req.InputTokens-a.Computed, b.Req.InputTokens-b.Computed
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		return vllmLess(a, b)
	})
}

type leastProgress struct{}

func (leastProgress) Choose(running []*request.State) *request.State {
	best := running[len(running)-1]
	for i := len(running) - 2; i >= 0; i-- {
		if running[i].Generated < best.Generated {
			best = running[i]
		}
	}
	return best
}

func schedTemplate(st *Stage) (sched.Order, sched.Victim) {
	switch st.Template {
	case "shortest-first":
		return shortestFirst{}, nil
	case "least-progress":
		return nil, leastProgress{}
	}
	return nil, nil // vllm, newest: the engine's own
}

// PoolView is what an autoscaler sees of one pool.
type PoolView struct {
	Deployment, Role         string
	Replicas                 int     // current replicas (not stopped)
	MinReplicas, MaxReplicas int     // bounds
	Serving                  int     // replicas serving
	Provisioning             int     // replicas started, not yet routable (provisioning)
	Waiting, Running         int     // Σ over its replicas
	InFlight                 int     // routed, not yet queued
	Pending                  int     // requests waiting for the pool: queued, in the alpha delay, held at the router
	KVUtilization            float64 // mean over its serving replicas
	NowUS                    int64
	// Over the pool's metrics window (the autoscaler's window):
	WindowUS             int64
	RequestRate          float64 // arrivals for the pool's model per second
	SLOAttainment        float64 // met / finished in the window; NaN: none finished, or no slo
	Utilization          float64 // step time / ready replica time
	QueuePerReplica      float64 // (waiting + in flight) per ready replica, averaged
	TTFTP50US, TTFTP99US int64   // of the requests completed in the window (0 when none)
	E2EP50US, E2EP99US   int64
	SinceLastScaleUS     int64 // since the pool's last scale action; -1 before any
}

// Load is waiting + running + in flight.
func (p *PoolView) Load() int { return p.Waiting + p.Running + p.InFlight }

var poolFields = []field{
	{name: "deployment", k: kString, doc: "the pool's deployment", s: func(c *evalCtx) string { return c.pool.Deployment }},
	{name: "role", k: kString, doc: "the pool's role", s: func(c *evalCtx) string { return c.pool.Role }},
	{name: "replicas", k: kInt, unit: "replicas", doc: "current replicas (not stopped)", i: func(c *evalCtx) int64 { return int64(c.pool.Replicas) }},
	{name: "min_replicas", k: kInt, unit: "replicas", doc: "lower bound", i: func(c *evalCtx) int64 { return int64(c.pool.MinReplicas) }},
	{name: "max_replicas", k: kInt, unit: "replicas", doc: "upper bound", i: func(c *evalCtx) int64 { return int64(c.pool.MaxReplicas) }},
	{name: "serving", k: kInt, unit: "replicas", doc: "replicas serving", i: func(c *evalCtx) int64 { return int64(c.pool.Serving) }},
	{name: "queue_depth", k: kInt, unit: "requests", doc: "Σ waiting", i: func(c *evalCtx) int64 { return int64(c.pool.Waiting) }},
	{name: "batch_size", k: kInt, unit: "requests", doc: "Σ running", i: func(c *evalCtx) int64 { return int64(c.pool.Running) }},
	{name: "in_flight", k: kInt, unit: "requests", doc: "Σ routed, not yet queued", i: func(c *evalCtx) int64 { return int64(c.pool.InFlight) }},
	{name: "outstanding", k: kInt, unit: "requests", doc: "queue_depth + batch_size + in_flight", i: func(c *evalCtx) int64 { return int64(c.pool.Load()) }},
	{name: "kv_utilization", k: kFloat, unit: "fraction", doc: "mean KV fraction in use over serving replicas (window)", f: func(c *evalCtx) float64 { return c.pool.KVUtilization }},
	{name: "now_us", k: kInt, unit: "µs", doc: "time of the evaluation", i: func(c *evalCtx) int64 { return c.pool.NowUS }},
	{name: "provisioning", k: kInt, unit: "replicas", doc: "replicas started and not yet routable (provisioning, loading weights)", i: func(c *evalCtx) int64 { return int64(c.pool.Provisioning) }},
	{name: "pending", k: kInt, unit: "requests", doc: "requests waiting for the pool now: in its queues, alpha delays, or held at the router", i: func(c *evalCtx) int64 { return int64(c.pool.Pending) }},
	{name: "window_us", k: kInt, unit: "µs", doc: "the metrics window the fields below are over (the autoscaler's window)", i: func(c *evalCtx) int64 { return c.pool.WindowUS }},
	{name: "request_rate", k: kFloat, unit: "requests/s", doc: "llm requests arriving for the pool's model per second over the window (whole pool)", f: func(c *evalCtx) float64 { return c.pool.RequestRate }},
	{name: "slo_attainment", k: kFloat, unit: "fraction", doc: "requests finished on the pool in the window that met the autoscaler's slo / finished (NaN: none finished, or no slo)", f: func(c *evalCtx) float64 { return c.pool.SLOAttainment }},
	{name: "utilization", k: kFloat, unit: "fraction", doc: "step time / ready replica time over the window", f: func(c *evalCtx) float64 { return c.pool.Utilization }},
	{name: "queue_per_replica", k: kFloat, unit: "requests", doc: "waiting + in flight (and held at the router) per ready replica, averaged over the window", f: func(c *evalCtx) float64 { return c.pool.QueuePerReplica }},
	{name: "ttft_p50_us", k: kInt, unit: "µs", doc: "median TTFT of the requests completed in the window (0 when none)", i: func(c *evalCtx) int64 { return c.pool.TTFTP50US }},
	{name: "ttft_p99_us", k: kInt, unit: "µs", doc: "p99 TTFT of the requests completed in the window (0 when none)", i: func(c *evalCtx) int64 { return c.pool.TTFTP99US }},
	{name: "e2e_p50_us", k: kInt, unit: "µs", doc: "median E2E latency of the requests completed in the window (0 when none)", i: func(c *evalCtx) int64 { return c.pool.E2EP50US }},
	{name: "e2e_p99_us", k: kInt, unit: "µs", doc: "p99 E2E latency of the requests completed in the window (0 when none)", i: func(c *evalCtx) int64 { return c.pool.E2EP99US }},
	{name: "since_last_scale_us", k: kInt, unit: "µs", doc: "time since the pool's last scale action (-1 before any)", i: func(c *evalCtx) int64 { return c.pool.SinceLastScaleUS }},
}

var poolTable = table(poolFields)

// Scaler is an autoscaler stage, for the autoscaling feature to call at
// each evaluation: the target replica count of pool (pools lists every
// pool, pool among them), and the reason. The caller clamps the target to
// the pool's bounds. A policy failure is a *RunError.
type Scaler interface {
	Scale(pool *PoolView, pools []*PoolView) (target int, reason string, err error)
}

type targetLoad struct{ target float64 }

func (t targetLoad) Scale(p *PoolView, _ []*PoolView) (int, string, error) {
	n := int(math.Ceil(float64(p.Load()) / t.target))
	n = max(n, p.MinReplicas)
	if p.MaxReplicas > 0 {
		n = min(n, p.MaxReplicas)
	}
	return n, fmt.Sprintf("target-load: load %d / %g per replica", p.Load(), t.target), nil
}

type treeScaler struct{ st *Stage }

func (t treeScaler) Scale(p *PoolView, _ []*PoolView) (int, string, error) {
	c := evalCtx{pool: p}
	leaf := t.st.tree.eval(&c)
	if leaf.absolute {
		return int(leaf.replicas), fmt.Sprintf("decision tree: replicas %d (line %d)", leaf.replicas, leaf.line), nil
	}
	n := p.Replicas + int(leaf.delta)
	if n < 0 {
		return 0, "", &RunError{File: t.st.b.Path, Line: leaf.line, Stage: StageAutoscaler, Err: errors.New("delta takes the pool below 0 replicas")}
	}
	return n, fmt.Sprintf("decision tree: delta %+d (line %d)", leaf.delta, leaf.line), nil
}

// sortScored orders by score, highest first, vLLM's order among equals.
func sortScored(b []scored) {
	slices.SortFunc(b, func(x, y scored) int {
		switch {
		case x.s > y.s:
			return -1
		case x.s < y.s:
			return 1
		}
		return vllmLess(x.r, y.r)
	})
}
