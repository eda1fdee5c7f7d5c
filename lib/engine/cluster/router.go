package cluster

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// groupOf returns the candidate group serving r's model, or nil with the
// reason r is rejected. The flat config form serves every request whatever
// its model (it has one deployment); with deployments, a request without
// a model goes to the only group, and is an input error when there are
// several.
func (c *Cluster) groupOf(r *request.State) (*group, string) {
	if c.flat {
		return c.grps[0], ""
	}
	m := r.Req.Model
	if m == "" {
		if c.nmodel == 1 {
			return c.grps[0], ""
		}
		c.fail(c.rowErr(&r.Req, r.Row, "column %s: null, but the cluster serves several models (%s): every request must name one", row.ColModel, c.servedModels()))
		return nil, ""
	}
	g, ok := c.byModel[m]
	if !ok {
		g = c.byModel[modelKey(m)]
		if len(c.byModel) < 1<<16 {
			c.byModel[m] = g // remember the raw name (a miss too)
		}
	}
	if g == nil {
		return nil, "no deployment serves model " + m
	}
	return g, ""
}

func (c *Cluster) servedModels() string {
	s := ""
	for i, d := range c.deps {
		if i > 0 {
			s += ", "
		}
		s += d.Model
	}
	return s
}

// arrive runs the router pipeline for a request entering the cluster:
// admission → priority → routing.
func (c *Cluster) arrive(r *request.State) {
	if c.checks && len(r.Req.DependsOn) > 0 && (r.Pending != 0 || c.now < r.ReadyAt()) {
		c.fail(fmt.Errorf("invariant violated: %s started at %d with %d dependencies pending, the last finished at %d", r.Req.ID, c.now, r.Pending, r.ReadyAt()))
	}
	if r.Req.Kind == row.KindTool {
		r.Phase = request.Tool
		c.h.push(c.now+r.Req.DelayUS, evToolDone, -1, r)
		return
	}
	if c.client != nil && !c.clientSend(r) {
		return // waits for one of the client's slots
	}
	if r.Deadline() == row.Null {
		// The client's clock starts at its first arrival (an admission
		// delay does not reset it).
		d := row.Null
		if t := r.Req.TimeoutUS; t > 0 {
			d = c.now + t
		} else if c.timeout > 0 {
			d = c.now + c.timeout
		}
		if d != row.Null {
			r.Rare().Deadline = d
			c.h.push(d, evTimeout, -1, r)
		}
	}
	if c.inTransit(r) {
		return // reaches the router after the client → gateway transfer (network.go)
	}
	g, why := c.groupOf(r)
	if g == nil {
		if why == "" {
			return // an input error (c.err)
		}
		r.Status, r.Reason = row.StatusRejected, why
		c.terminal(r)
		return
	}
	if r.Req.LoRA != "" && !c.loraKnown(g, r) {
		return
	}
	if c.sc != nil {
		c.sc.scaleArrival(g, r)
		if !c.sc.canServe(g) {
			c.sc.hold(g, r) // no replica serving: wait at the router (scale.go)
			return
		}
	}
	if c.liveView {
		c.refreshDirty()
	}
	c.cur, c.curG = r, g
	dec := c.opts.Decisions
	view := g.board.View(c.now, c.oracleFor(g), dec != nil)
	rv := policy.NewRequestView(&r.Req, c.now, c.pbFn)
	ad := c.admission.Admit(rv, view)
	if c.opts.Policies.Err != nil && c.policyFailed() {
		return
	}
	if dec != nil {
		dec.Admitted(c.now, r, ad, view)
	}
	switch ad.Verdict {
	case policy.Reject:
		r.Status, r.Reason = row.StatusRejected, ad.Reason
		c.terminal(r)
		return
	case policy.Delay:
		if ad.DelayUS <= 0 {
			c.fail(fmt.Errorf("admission policy delayed request %s by %d µs: a delay must be > 0", r.Req.ID, ad.DelayUS))
			return
		}
		r.Phase = request.Arriving
		c.h.push(c.now+ad.DelayUS, evArrival, -1, r)
		return
	}
	r.Admitted = c.now
	r.Prio = c.priority.Priority(rv, view)
	if dec != nil {
		dec.Prioritized(c.now, r, r.Prio, view)
	}
	if c.fc != nil && c.fc.gate(r, g) {
		return // waits at the gateway, or was rejected by it (gateway.go)
	}
	if needsEncode(g, r) {
		c.encode(r, g) // its images first, on an encode replica (encode.go)
		return
	}
	if g.sel != nil && c.pd.decide(r, g.sel, g) {
		return // kept on its decode replica (pd.go), or c.err
	}
	if dec != nil {
		view = g.board.View(c.now, c.oracleFor(g), true) // fresh scores for routing
	}
	c.route(r, g, rv, view)
}

// route runs the routing stage for r over its group's view and places it.
func (c *Cluster) route(r *request.State, g *group, rv policy.RequestView, view *policy.ClusterView) {
	dec := c.opts.Decisions
	rd := c.routing.Route(rv, view)
	if c.opts.Policies.Err != nil && c.policyFailed() {
		return
	}
	if rd.Wait {
		c.hold(r, g, rd, view) // hold.go
		return
	}
	if rd.Target < 0 || rd.Target >= len(g.members) {
		c.fail(fmt.Errorf("routing policy %s returned candidate %d of %d", c.routingName, rd.Target, len(g.members)))
		return
	}
	if dec != nil {
		g.deps[0].keys.Ensure(r)
		dec.Routed(c.now, r, rd, view, g.members)
	}
	c.place(r, g, rd.Target)
}

// place sends r to candidate target of its group g (the routing decided):
// dropped if it can never fit, else on its way to the replica's queue. A
// restricted fork (fork.go) places its request with no group (g nil).
func (c *Cluster) place(r *request.State, g *group, target int) {
	var rep *replica.Replica
	if g != nil {
		rep = c.reps[g.members[target]]
	} else {
		rep = c.reps[target]
	}
	if c.checks && rep.State != replica.Serving && rep.State != replica.Warming {
		c.fail(fmt.Errorf("invariant violated: request %s routed to replica %s while %s", r.Req.ID, rep.ID, rep.State))
		return
	}
	dep := c.deps[rep.Deployment]
	if dep.Engine.SchedulingPolicy != "priority" {
		r.Prio = 0
	}
	r.Replica = rep.Index
	r.Routed = c.now
	// In int64: input+output can overflow the int32 token counters, and a
	// request's KV must stay within them (blocks round up by B−1).
	kv := rep.Sched.KV()
	B := int64(kv.BlockSize())
	tokens := int64(r.Req.InputTokens) + int64(max(r.Req.OutputTokens, 1)) - 1
	if dep.pd != nil && rep.Role == replica.Prefill && r.Req.OutputTokens > 0 {
		tokens = int64(r.Req.InputTokens) // its prompt's KV only here; placed checks the decode pool's
	}
	need := (tokens + B - 1) / B
	if h := dep.hybrid; h != nil {
		need += h.PeakBlocks(need, int32(dep.Engine.MaxNumBatchedTokens), int32(dep.Engine.LongPrefillThreshold), int32(B))
	}
	if need > int64(kv.Total()) || tokens > math.MaxInt32-B {
		r.Status = row.StatusDropped
		if need > int64(kv.Total()) {
			r.Reason = fmt.Sprintf("needs %d KV blocks (%d tokens), a replica of %s has %d", need, tokens, dep.ID, kv.Total())
			if len(c.deps) == 1 {
				r.Reason = fmt.Sprintf("needs %d KV blocks (%d tokens), an instance has %d", need, tokens, kv.Total())
			}
		} else {
			r.Reason = fmt.Sprintf("needs %d KV blocks (%d tokens): more than %d tokens per request", need, tokens, math.MaxInt32-B)
		}
		c.terminal(r)
		return
	}
	if dep.pd != nil && !c.pd.placed(r, dep, rep) {
		return // c.err
	}
	rep.InFlight++
	if g != nil {
		g.board.AddInFlight(target)
	}
	c.markDirty(rep.Index)
	r.Phase = request.Routed
	c.h.push(c.now+rep.Model.Alpha().QueueDelay(r.Req.InputTokens), evEnqueue, rep.Index, r)
}

// promptBlocks answers RequestView.PrefixBlocks for the decision in
// progress: the request's keyed prompt blocks at its group's (first
// deployment's) block size.
func (c *Cluster) promptBlocks() int {
	d := c.curG.deps[0]
	d.keys.Ensure(c.cur)
	return len(c.cur.Keys)
}

// groupOracle answers CachedBlocks for the decision in progress, from the
// group's prefix index or by probing each candidate's cache.
type groupOracle struct {
	c *Cluster
	g *group
}

func (o *groupOracle) CachedBlocks(i int) int {
	c, g := o.c, o.g
	if g.index != nil {
		if g.slotOf != nil {
			i = int(g.slotOf[i])
		}
		return g.index.cached(c, i)
	}
	rep := c.reps[g.members[i]]
	c.sync(rep) // a span's steps may have evicted cached blocks
	c.deps[rep.Deployment].keys.Ensure(c.cur)
	kv := rep.Sched.KV()
	return kv.Lookup(c.cur.Keys, len(c.cur.Keys))
}

func (o *groupOracle) Holders() ([]int32, bool) {
	if o.g.index == nil {
		return nil, false
	}
	if o.g.slotOf != nil {
		return o.c.sc.boardHolders(o.g), true
	}
	return o.g.index.holders(o.c), true
}

func (c *Cluster) oracleFor(g *group) policy.PrefixOracle {
	c.oracle.c, c.oracle.g = c, g
	if g.index != nil {
		g.index.begin(c.now)
	}
	return &c.oracle
}
