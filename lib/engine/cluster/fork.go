package cluster

import (
	"math"
	"slices"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
)

// Counterfactual forks (regret, lib/decision): copies of the cluster at a
// routing decision in progress, with the decision's request placed on
// another candidate, replayed on their own. A fork's router takes no more
// requests (StopArrivals), so what a replay measures is what was on the
// replicas at the decision plus the request, the same for every
// alternative.
//
// When the replicas cannot affect each other once the router is stopped
// (Separable; an autoscaled cluster until its autoscaler acts,
// SeparableUntil), a replay needs only the replicas it measures:
// ForkReplica copies one replica and the requests on it, so a sample costs
// the candidates' size, not the cluster's. Otherwise Fork copies
// everything.

// Separable reports whether the cluster's replicas evolve independently of
// each other once no request reaches the router. Every path by which the
// engine moves a request or changes a replica from outside that replica
// goes through the router (arrivals, admission delays, network transfers,
// released dependents: all stopped in a fork), except two features: a
// prefill/decode deployment (a hand-off picks a decode replica, queues on
// the prefill replica's link and waits for the decode replica's blocks) and
// autoscaling (it starts, drains and stops replicas, holds requests at the
// router and re-routes drained ones). With neither, the cluster is
// separable; with autoscaling alone, until the autoscaler acts
// (SeparableUntil).
func (c *Cluster) Separable() bool { return c.sc == nil && c.pd == nil && c.fc == nil && !c.encodes }

// SeparableUntil is Separable over time: once no request reaches the
// router, the replicas evolve independently of each other at every
// instant before the returned time (math.MaxInt64: always, the cluster is
// Separable; math.MinInt64: never, with prefill/decode, flow control or
// encode replicas). Autoscaling couples replicas only when it acts: at a
// replica's lifecycle timer (ready, warm, the end of a drain: held
// requests are released through the router, a killed replica's requests
// dropped) and when it evaluates a pool (it may launch replicas, drain
// any, redirect their requests through the router). Its other ticks only
// sample the replicas, which changes none of them. So an autoscaled
// cluster is separable until its next live lifecycle timer or the first
// instant a pool may be evaluated: its next interval, or with event
// triggers (read from samples of every replica) the next tick.
func (c *Cluster) SeparableUntil() int64 {
	if c.pd != nil || c.fc != nil || c.encodes {
		return math.MinInt64
	}
	if c.sc == nil {
		return math.MaxInt64
	}
	return c.sc.quietUntil()
}

// quietUntil is the first instant at or after now at which the autoscaler
// may act (math.MaxInt64: never).
func (sc *scaler) quietUntil() int64 {
	c := sc.c
	until, tick := int64(math.MaxInt64), int64(math.MaxInt64)
	for k := range c.h.S {
		e := &c.h.S[k]
		switch e.kind() {
		case evLifecycle:
			if sc.gen[e.inst()] == e.life() { // else stale: it does nothing
				until = min(until, e.t)
			}
		case evScale:
			tick = min(tick, e.t)
		}
	}
	if tick == math.MaxInt64 {
		return until // no tick queued: no evaluation either (only a tick queues the next)
	}
	for _, sp := range sc.pools {
		if sp.cfg == nil {
			continue
		}
		if sp.cfg.Triggers != (config.Triggers{}) {
			return min(until, tick) // any tick may fire a trigger
		}
		// A pool is evaluated at a tick at or after its next interval.
		until = min(until, max(tick, sp.nextEval))
	}
	return until
}

// StopArrivals makes the cluster's router take no more requests: later
// arrivals (rows read ahead, requests delayed by admission or in network
// transit, dependents released by a finish) are dropped. For forks: the
// cluster is never run to its end after it.
func (c *Cluster) StopArrivals() { c.noArrivals = true }

// ForkArena is the memory of counterfactual forks, reused from one fork to
// the next: a fork from an arena is dead (must not be used) once the next
// fork is taken from it. Its zero value is ready.
type ForkArena struct {
	m     request.Clone
	d     Cluster
	reps  []*replica.Replica // every slot the placeholder but the replica held
	held  int32
	miss  replica.Replica
	warm  warmModel // the replica's while it warms up (autoscaling)
	evs   []event
	ret   []retireEntry
	done  []*request.State
	work  []*request.State
	wake  []int64
	kv    kv.Store
	kvs   []kv.Store // whole forks': by replica
	ready bool
	// the leap set's and the step ends' positions (−1 but for the
	// replica held)
	leapPos []int32
	leapIDs []int32
	endPos  []int32
	ends    []endEntry
	endRep  int32
}

// Fork returns a copy of the whole cluster at the routing decision in
// progress (it must be called from Decisions.Routed), with the decision's
// request placed on candidate target (an index into the decision's view)
// instead of the policy's choice, its router stopped and its results
// discarded; and the copy of the request.
func (c *Cluster) Fork(a *ForkArena, target int) (*Cluster, *request.State) {
	a.m.Reset(-1)
	cur, curG := c.cur, c.curG
	d := c.cloneWith(&a.m, nil, nil, a)
	r := a.m.Map(cur) // live, so copied and linked by the clone
	var g *group
	for i, x := range c.grps {
		if x == curG {
			g = d.grps[i]
		}
	}
	d.noArrivals = true
	d.place(r, g, target)
	return d, r
}

// ForkReplica returns a fork of replica i alone (a cluster-wide index) at
// the routing decision in progress (called from Decisions.Routed), with
// the decision's request placed on it when with is set (and its copy;
// else nil): the replica, the requests on it and their dependents, and the
// events of those, with the router stopped. The cluster must be separable
// (SeparableUntil after now): a fork would otherwise miss what the other
// replicas do to this one. The fork runs only up to that instant (Step is
// Idle past it): an autoscaled cluster's fork is exact up to its
// autoscaler's next action, and the caller replays the whole cluster when
// it needs more. A fork that reaches a replica it does not hold panics
// with an internal error (the placeholder it holds in their place).
func (c *Cluster) ForkReplica(a *ForkArena, i int32, with bool) (*Cluster, *request.State) {
	until := c.SeparableUntil()
	if until == math.MinInt64 {
		panic("internal error: cluster.ForkReplica on a cluster that is not separable (prefill/decode, flow control or encode replicas)")
	}
	if !a.ready || len(a.reps) != len(c.reps) {
		a.miss = replica.Replica{ID: "(not held by this fork)", Index: -1, Sched: missing{}}
		a.reps = make([]*replica.Replica, len(c.reps))
		for k := range a.reps {
			a.reps[k] = &a.miss
		}
		a.held, a.ready = -1, true
	}
	if a.held >= 0 {
		// The previous fork is dead: keep the slices it grew.
		a.reps[a.held] = &a.miss
		p := &a.d
		a.evs, a.ret, a.done, a.work = p.h.S[:0], p.retired.S[:0], p.fx.Done[:0], p.work[:0]
	}
	m := &a.m
	m.Reset(i)
	src := c.reps[i]
	keys := c.deps[src.Deployment].keys
	var store kv.Store
	if pg, ok := src.Sched.KV().(*kv.Paged); ok {
		store = pg.CloneInto(a.kv) // the previous fork's store is dead
	} else {
		store = src.Sched.KV().Clone()
	}
	a.kv = store
	rep := src.CloneOnto(m, &request.Keyer{Enabled: keys.Enabled, Unique: keys.Unique, PrefixBlock: keys.PrefixBlock, Block: keys.Block}, store)
	rep.WantSteps = false
	if h, ok := rep.Sched.(preemptHooker); ok {
		h.SetPreemptHook(nil)
	}
	a.reps[i], a.held = rep, i

	// The replica's events, and the timeouts of the requests on it.
	evs := a.evs[:0]
	for _, e := range c.h.S {
		switch e.kind() {
		case evStepStart, evWake, evEnqueue:
			if e.inst() != i {
				continue
			}
		case evTimeout:
			r := e.r
			onIt := r.Replica == i && (r.Phase == request.Routed || r.Phase == request.Waiting || r.Phase == request.Running)
			if !onIt && !(with && r == c.cur) {
				continue
			}
		case evXferDone, evEncodeDone:
			panic("internal error: cluster.ForkReplica met a prefill/decode or encode event in a separable cluster")
		case evLifecycle, evScale:
			continue // at or after until (a tick before it only samples)
		default: // arrivals and tool timers: nothing a stopped router lets reach a replica
			continue
		}
		e.r = m.Map(e.r)
		evs = append(evs, e)
	}
	// Sorted is a heap, and pops in the original's order.
	slices.SortFunc(evs, func(x, y event) int {
		if x.Less(&y) {
			return -1
		}
		return 1
	})
	var r *request.State
	if with {
		r = m.Map(c.cur)
	}
	m.Finish()

	d := &a.d
	*d = Cluster{cfg: c.cfg, sink: discard{}, opts: c.opts, checks: c.checks, horizon: c.horizon, flat: c.flat, tierNames: c.tierNames,
		now: c.now, reps: a.reps, deps: c.deps, nmodel: c.nmodel, timeout: c.timeout,
		frontier: math.MinInt64, noArrivals: true, sum: Summary{Deployments: c.sum.Deployments}}
	if until != math.MaxInt64 {
		d.horizon = min(d.horizon, until-1)
	}
	if w, ok := rep.Model.(*warmModel); ok {
		// A warming replica's step times follow the fork's clock.
		a.warm = *w
		a.warm.now = &d.now
		rep.Model = &a.warm
	}
	d.opts.Steps, d.opts.Progress, d.opts.Decisions = nil, nil, nil
	// The router takes no more requests: its stages and what they hear
	// (OnResult) are not needed. Stateful scheduling policies (a policy
	// bundle's) get the fork's own copies (Policies.Fork).
	cp := &c.opts.Policies
	d.opts.Policies = Policies{Scheduling: cp.Scheduling, Autoscale: cp.Autoscale, Err: cp.Err}
	if cp.Fork != nil {
		f := cp.Fork()
		d.opts.Policies.Err = f.Err
		if f.Scheduling != nil {
			d.opts.Policies.Scheduling = f.Scheduling
			rep.Sched.SetPolicies(f.Scheduling(i))
		}
	}
	d.h.S, d.h.seq = evs, c.h.seq
	// Its step end (the step ends' heap has a slot per replica).
	if len(a.endPos) != len(c.reps) {
		a.endPos = make([]int32, len(c.reps))
		for j := range a.endPos {
			a.endPos[j] = -1
		}
		a.endRep = -1
	}
	if a.endRep >= 0 {
		a.endPos[a.endRep] = -1 // the previous fork's replica, whatever it did
	}
	d.h.ends = endHeap{s: a.ends[:0], pos: a.endPos}
	if e, ok := c.h.ends.entry(i); ok {
		d.h.ends.set(i, e.t, e.key)
	}
	a.ends, a.endRep = d.h.ends.s, i
	d.at = c.at
	if c.leap.pos != nil {
		if len(a.leapPos) != len(c.reps) {
			a.leapPos = make([]int32, len(c.reps))
			for j := range a.leapPos {
				a.leapPos[j] = -1
			}
			a.leapIDs = a.leapIDs[:0]
		}
		for _, j := range a.leapIDs {
			a.leapPos[j] = -1 // the previous fork's
		}
		d.leap = leapSet{ids: a.leapIDs[:0], pos: a.leapPos}
		if rep.Leaping() {
			d.leap.add(i)
		}
		a.leapIDs = append(a.leapIDs[:0], i) // to reset next time, whether or not it leaps
		d.leap.ids = a.leapIDs[:len(d.leap.ids)]
		d.bindLeap()
	}
	d.retired.S = a.ret[:0]
	d.fx.Done, d.work = a.done[:0], a.work[:0]
	if c.wakeAt != nil {
		a.wake = append(a.wake[:0], c.wakeAt...)
		d.wakeAt = a.wake
	}
	// The live list: the copies still in flight that belong to the fork.
	for _, s := range m.Copies() {
		if s.Phase == request.Done || m.Foreign(s) {
			continue
		}
		d.liveAdd(s)
	}
	a.evs = evs
	if with {
		d.place(r, nil, int(i))
	}
	return d, r
}

// missing stands in a restricted fork for every replica it does not hold:
// reaching one is a bug (the predicate Separable let a coupling through).
type missing struct{}

func (missing) fail() {
	panic("internal error: a counterfactual fork of one replica (cluster.ForkReplica) reached a replica it does not hold: a coupling between replicas that Cluster.Separable does not know")
}

func (m missing) Enqueue(*request.State)                { m.fail() }
func (m missing) HasWork() bool                         { m.fail(); return false }
func (m missing) Form(int64, *latency.Batch) bool       { m.fail(); return false }
func (m missing) Complete(int64, *[]*request.State)     { m.fail() }
func (m missing) Cancel(*request.State)                 { m.fail() }
func (m missing) Progress(*request.State) int32         { m.fail(); return 0 }
func (m missing) Waiting() int                          { m.fail(); return 0 }
func (m missing) Running() int                          { m.fail(); return 0 }
func (m missing) Load() sched.Load                      { m.fail(); return sched.Load{} }
func (m missing) StepIndex() int64                      { m.fail(); return 0 }
func (m missing) Preempted() int32                      { m.fail(); return 0 }
func (m missing) Preemptions() int64                    { m.fail(); return 0 }
func (m missing) KV() kv.Store                          { m.fail(); return nil }
func (m missing) Check(bool) error                      { m.fail(); return nil }
func (m missing) Wake(int64)                            { m.fail() }
func (m missing) WakeAt() int64                         { m.fail(); return row.Null }
func (m missing) Resume(*request.State)                 { m.fail() }
func (m missing) Hold(bool)                             { m.fail() }
func (m missing) Tiers() *kv.Tiers                      { m.fail(); return nil }
func (m missing) SetPolicies(sched.Order, sched.Victim) { m.fail() }
func (m missing) Span() (sched.Span, bool)              { m.fail(); return sched.Span{}, false }
func (m missing) AdvanceTo(int64, bool, int64, int64)   { m.fail() }
func (m missing) NextAlloc() (int64, bool)              { m.fail(); return 0, false }
func (m missing) Clone(*request.Clone, kv.Store, *request.Keyer) sched.Scheduler {
	m.fail()
	return nil
}
