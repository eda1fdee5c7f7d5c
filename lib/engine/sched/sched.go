// Package sched forms the batches of one replica. A Scheduler owns the
// replica's waiting and running requests and its KV store's allocations;
// the replica asks it for each step's batch and hands it the step's end.
// VLLM, vLLM v1's scheduler, is the default (and today only) one; the
// waiting order and the preemption victim are seams (Order, Victim) that
// user policies plug into.
package sched

import (
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/latency"
)

// Scheduler forms and completes one replica's steps.
type Scheduler interface {
	// Enqueue puts r in the waiting queue.
	Enqueue(r *request.State)
	// HasWork reports whether a step would do anything.
	HasWork() bool
	// Form chooses the next step's work at now and describes it in b;
	// false means there is nothing to run.
	Form(now int64, b *latency.Batch) bool
	// Complete applies the step formed last, ending at now: requests that
	// finished (completed, or cancelled at their deadline) are appended to
	// *done in the order they finished, with their phase, status and times
	// set; the caller makes them terminal.
	Complete(now int64, done *[]*request.State)
	// Cancel removes a waiting request, or a running one between steps,
	// freeing its KV. Generated tokens are counted up to now's step.
	Cancel(r *request.State)
	// Progress is the tokens r has generated after the steps completed so
	// far (decode progress is implicit, see VLLM); it also brings r's KV
	// handle up to date (a decoding request's blocks are counted apart).
	Progress(r *request.State) int32

	Waiting() int
	Running() int
	// Load is what the router learns: queue lengths and KV use, in one
	// call (the router reads it for many replicas per decision).
	Load() Load
	// StepIndex is the index of the next (or executing) step.
	StepIndex() int64
	// Preempted is the number of preemptions while forming the last step.
	Preempted() int32
	// Preemptions counts every preemption so far.
	Preemptions() int64
	KV() kv.Store
	// Check verifies the scheduler's own invariants after a step formed
	// (batch limits, prefill order); full adds the KV store's walk.
	Check(full bool) error
	// Wake moves requests whose KV loads ended by now back to the waiting
	// queue; WakeAt is the earliest load end in progress (row.Null if
	// none): an idle replica must be woken then.
	Wake(now int64)
	WakeAt() int64
	// Resume queues a request whose KV was placed in its handle by the
	// caller (a P/D hand-off); Hold stops or resumes new admissions.
	Resume(r *request.State)
	Hold(on bool)
	// Tiers is the lower KV tiers (nil: GPU only).
	Tiers() *kv.Tiers
	// Clone copies the scheduler onto cloned requests, a cloned store and
	// the clone's key deriver.
	Clone(c *request.Clone, store kv.Store, keys *request.Keyer) Scheduler
	// SetPolicies replaces the waiting order and victim policies (a
	// fork's own copies of stateful ones); nil keeps vLLM's.
	SetPolicies(order Order, victim Victim)

	// Span says, right after Form, how many steps from the one formed are
	// determined (docs/engine.md, "Leaping"); false when the next step
	// could differ (a scheduler that cannot tell says false).
	Span() (Span, bool)
	// AdvanceTo applies a span's steps at once: those before next have
	// completed (the last ending at lastEnd), and step next has been
	// formed when formed is set (the last formed started at lastStart).
	// Only within the span given by the last Span.
	AdvanceTo(next int64, formed bool, lastStart, lastEnd int64)
	// NextAlloc is the first step after the last formed one that may take
	// a KV block in a span (ok false: none).
	NextAlloc() (int64, bool)
}

// Load is a replica's queue lengths and KV use.
type Load struct {
	Waiting, Running int
	KVUsed, KVTotal  int32
}

// Order decides the order in which waiting requests are considered for
// admission; nil keeps vLLM's (priority, then FCFS, preempted requests
// first). Sort reorders waiting in place before each step's admissions.
type Order interface {
	Sort(now int64, waiting []*request.State)
}

// Victim picks the running request to preempt when KV runs out; nil keeps
// vLLM's choice, the most recently admitted.
type Victim interface {
	// Choose returns a request among running (admission order, oldest
	// first); running is never empty.
	Choose(running []*request.State) *request.State
}
