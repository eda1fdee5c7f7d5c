// Package policy is the router's decision points (admission → priority →
// routing) and the replica's (waiting order, preemption victim): their
// interfaces, the read-only views policies see, the decisions they return
// with their reasons, and the built-in policies as parameterised templates.
//
// A policy must be deterministic: no wall clock, no Go map iterated into a
// decision, randomness only from the stream it is given.
package policy

// Verdict is an admission decision.
type Verdict uint8

// Verdicts.
const (
	Admit Verdict = iota
	Reject
	Delay
)

func (v Verdict) String() string { return [...]string{"admit", "reject", "delay"}[v] }

// AdmitDecision is an admission policy's answer.
type AdmitDecision struct {
	Verdict Verdict
	Reason  string // why (required for Reject; kept for traces)
	DelayUS int64  // Delay: ask again this much later (> 0)
}

// RouteDecision is a routing policy's answer.
type RouteDecision struct {
	Target int    // candidate index in the ClusterView
	Reason string // short: which rule decided (kept for traces)
}

// Admission decides whether a request enters the cluster.
type Admission interface {
	Admit(r RequestView, c *ClusterView) AdmitDecision
}

// Priority gives a request's priority in the replicas' waiting queues
// (larger runs first) when engine.scheduling_policy is priority.
type Priority interface {
	Priority(r RequestView, c *ClusterView) int64
}

// Routing picks the replica for an admitted request among the candidates.
type Routing interface {
	Route(r RequestView, c *ClusterView) RouteDecision
}
