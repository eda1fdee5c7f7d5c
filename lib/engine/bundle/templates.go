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
	Waiting, Running         int     // Σ over its replicas
	InFlight                 int     // routed, not yet queued
	KVUtilization            float64 // mean over its serving replicas
	NowUS                    int64
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
	{name: "kv_utilization", k: kFloat, unit: "fraction", doc: "mean KV fraction in use over serving replicas", f: func(c *evalCtx) float64 { return c.pool.KVUtilization }},
	{name: "now_us", k: kInt, unit: "µs", doc: "time of the evaluation", i: func(c *evalCtx) int64 { return c.pool.NowUS }},
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
