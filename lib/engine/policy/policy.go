// Package policy is the router's decision points (admission → priority →
// routing) and the replica's (waiting order, preemption victim): their
// interfaces, the read-only views policies see, the decisions they return
// with their reasons, and the built-in policies as parameterised templates.
//
// A policy must be deterministic: no wall clock, no Go map iterated into a
// decision, randomness only from the stream it is given.
package policy

import "fmt"

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

// RouteDecision is a routing policy's answer: a target, or, with Wait,
// hold the request at the router and ask again WaitUS later (flow control
// by the policy: docs/policies.md, "Holding a request at the router").
type RouteDecision struct {
	Target int    // candidate index in the ClusterView (ignored with Wait)
	Reason string // short: which rule decided (kept for traces)
	Wait   bool   // hold the request at the router instead of routing it
	WaitUS int64  // Wait: route it again this much later (> 0)
}

// Admission decides whether a request enters the cluster.
type Admission interface {
	Admit(r RequestView, c *ClusterView) AdmitDecision
}

// Priority gives a request's priority in the replicas' waiting queues, a
// score (larger runs first, and is preempted last) used when
// engine.scheduling_policy is priority. It must not be NaN.
type Priority interface {
	Priority(r RequestView, c *ClusterView) float64
}

// Routing picks the replica for an admitted request among the candidates.
type Routing interface {
	Route(r RequestView, c *ClusterView) RouteDecision
}

// Namer is implemented by a policy that names itself (in messages and in a
// run's metadata): a built-in template's name, "decision tree", ….
type Namer interface {
	Name() string
}

// NameOf is p's name, or its Go type for a policy that gives none.
func NameOf(p any) string {
	if n, ok := p.(Namer); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", p)
}

// PrefixReader is implemented by a routing policy that can tell whether it
// reads the prefix cache (ClusterView.CachedBlocks): the cluster keeps its
// global prefix index only for one that does. A policy that does not
// implement it is assumed to read it.
type PrefixReader interface {
	ReadsPrefix() bool
}

// ReadsPrefix reports whether routing policy p may read cached blocks.
func ReadsPrefix(p any) bool {
	if r, ok := p.(PrefixReader); ok {
		return r.ReadsPrefix()
	}
	return true
}

// Signal is a replica signal a routing policy weighs.
type Signal uint8

// Signals.
const (
	SignalLoad   Signal = 1 << iota // queue, batch, in flight
	SignalKV                        // KV blocks in use
	SignalPrefix                    // cached prompt blocks
)

// String lists the signals: "load,kv", or "none".
func (s Signal) String() string {
	out := ""
	for _, x := range []struct {
		b    Signal
		name string
	}{{SignalLoad, "load"}, {SignalKV, "kv"}, {SignalPrefix, "prefix"}} {
		if s&x.b != 0 {
			if out != "" {
				out += ","
			}
			out += x.name
		}
	}
	if out == "" {
		return "none"
	}
	return out
}

// SignalReader is implemented by a routing policy that can say which
// replica signals it weighs (the built-ins; code and trees cannot say).
type SignalReader interface {
	Signals() Signal
}

// SignalsOf returns what routing policy p weighs, and whether it can say.
func SignalsOf(p any) (Signal, bool) {
	if r, ok := p.(SignalReader); ok {
		return r.Signals(), true
	}
	return 0, false
}
