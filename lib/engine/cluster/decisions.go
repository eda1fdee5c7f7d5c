package cluster

import (
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Decisions hears every decision of the router and the replicas'
// schedulers (decision traces, lib/decision). With Options.Decisions nil
// the cluster pays one nil check per decision and nothing else. The views
// are only valid during the call.
type Decisions interface {
	Admitted(now int64, r *request.State, d policy.AdmitDecision, v *policy.ClusterView)
	Prioritized(now int64, r *request.State, prio float64, v *policy.ClusterView)
	// Routed: cands maps the view's candidate indices to cluster-wide
	// replica indices; r.Keys are derived.
	Routed(now int64, r *request.State, d policy.RouteDecision, v *policy.ClusterView, cands []int32)
	Preempted(now int64, rep *replica.Replica, victim *request.State)
	// Batch hears every step formed and ended, when WantBatches.
	Batch(s *row.Step)
	WantBatches() bool
	// Scale and KVTransfer are for autoscaling and prefill/decode
	// disaggregation to call (TraceScale, TraceKVTransfer); Anomaly for
	// detectors that live in those features (scale_oscillation,
	// pd_backpressure).
	Scale(now int64, deployment, replicaID, action, reason string, replicas int)
	KVTransfer(now int64, r *request.State, from, to string, blocks int64, reason string)
	// Disagg is a decision of disaggregated serving (pd.go): kind is
	// row.DecisionPD (the decider: action disaggregate or local),
	// row.DecisionDecodeRouting or row.DecisionEncodeRouting (a pick);
	// target is the replica it is about, a position in v.
	Disagg(now int64, r *request.State, kind string, v *policy.ClusterView, target int, action, reason string, value int64)
	// FlowControl hears the gateway queue's decisions (action: enqueue,
	// dispatch, reject, shed, expire; value: the band's priority, or the
	// wait in µs for dispatch).
	FlowControl(now int64, r *request.State, action, reason string, value int64)
	Anomaly(a *row.Anomaly)
}

// TraceScale records a scaling decision (action: scale_up, scale_down,
// drain, …; replicas: the pool's size after it) when decisions are traced.
func (c *Cluster) TraceScale(deployment, replicaID, action, reason string, replicas int) {
	if c.opts.Decisions != nil {
		c.opts.Decisions.Scale(c.now, deployment, replicaID, action, reason, replicas)
	}
}

// TraceKVTransfer records a KV transfer decision (prefill → decode) when
// decisions are traced.
func (c *Cluster) TraceKVTransfer(r *request.State, from, to string, blocks int64, reason string) {
	if c.opts.Decisions != nil {
		c.opts.Decisions.KVTransfer(c.now, r, from, to, blocks, reason)
	}
}

// ReportAnomaly records an anomaly detected by a feature of the cluster
// when decisions are traced.
func (c *Cluster) ReportAnomaly(a *row.Anomaly) {
	if c.opts.Decisions != nil {
		c.opts.Decisions.Anomaly(a)
	}
}

// Request returns the state of a request the cluster still holds, or nil.
func (c *Cluster) Request(id string) *request.State { return c.ids.get(id) }

// EachLive calls f on every request in flight (not yet final), in
// injection order.
func (c *Cluster) EachLive(f func(r *request.State)) {
	for r := c.liveH; r != nil; r = r.LNext {
		f(r)
	}
}

// CandidateBlockSize is the KV block size of cluster-wide replica i.
func (c *Cluster) CandidateBlockSize(i int32) int { return int(c.reps[i].Sched.KV().BlockSize()) }

type preemptHooker interface {
	SetPreemptHook(func(r *request.State))
}

// hookPreemptions connects (or, with on false, disconnects) the schedulers'
// preemptions to the decisions hook.
func (c *Cluster) hookPreemptions(on bool) {
	for _, rep := range c.reps {
		h, ok := rep.Sched.(preemptHooker)
		if !ok {
			continue
		}
		if !on {
			h.SetPreemptHook(nil)
			continue
		}
		rep := rep
		h.SetPreemptHook(func(r *request.State) { c.opts.Decisions.Preempted(c.now, rep, r) })
	}
}

// SetSink redirects the results (a fork's, before it runs on).
func (c *Cluster) SetSink(s Sink) { c.sink = s }
