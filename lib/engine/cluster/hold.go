package cluster

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
)

// A routing policy may hold a request at the router instead of routing it
// (policy.RouteDecision.Wait: docs/policies.md, "Holding a request at the
// router"). The request waits where flow control's queued requests wait,
// in the gateway (gateway.go): parked in the band of its priority, counted
// against the queue's bounds and its TTL, until the time the policy gave
// (evHoldWake); it then joins its flow like a newly queued request (its
// place by the ordering policy from when it first entered) and is routed
// again when the gateway dispatches it: at once when the pool is not
// saturated, or when it no longer is. The policy is asked again at its own
// time, not at every event: a policy that wants to look sooner says so.
// Without router.flow_control the first hold makes a passive gateway: no
// saturation gate, no bounds, no TTL, and arrivals never queue in it, so
// a held request is routed again exactly at its time. A run whose policy
// never holds has no gateway and pays nothing.

// hold keeps r at the router for rd.WaitUS, as routing decided over view.
func (c *Cluster) hold(r *request.State, g *group, rd policy.RouteDecision, view *policy.ClusterView) {
	if rd.WaitUS <= 0 {
		c.fail(fmt.Errorf("routing policy %s returned wait %d µs for request %s (reason %q): a wait must be > 0", c.routingName, rd.WaitUS, r.Req.ID, rd.Reason))
		return
	}
	if dec := c.opts.Decisions; dec != nil {
		dec.Routed(c.now, r, rd, view, g.members)
	}
	if c.fc == nil {
		c.fc = &gateway{c: c, limit: 1, passive: true, where: map[*request.State]*gpos{}}
	}
	wake := int64(math.MaxInt64) // never: the client's timeout, or the run's end, ends the wait
	if rd.WaitUS < math.MaxInt64-c.now {
		wake = c.now + rd.WaitUS
	}
	c.fc.park(r, g, wake, c.holdFrom)
}

// park keeps r in g's queue until wake. from is where r was queued when
// the gateway dispatched it (nil: it comes straight from admission).
func (gw *gateway) park(r *request.State, g *group, wake int64, from *gpos) {
	c := gw.c
	c.sum.RouteHolds++
	at, heldAt, first := c.now, c.now, true
	if from != nil {
		at = from.at // the TTL counts from its first entry
		if from.held {
			heldAt, first = from.heldAt, false
		}
	}
	if first {
		c.sum.RouteHeld++
	}
	q := gw.queueOf(g)
	b := gw.band(q, bandOf(r.Prio))
	tok := int64(r.Req.InputTokens)
	if !gw.room(r, q, b, tok) {
		return // rejected (a hold again: its wait is counted by dispatch)
	}
	gw.seq++
	b.n++
	b.tokens += tok
	b.parked++
	q.n++
	q.tokens += tok
	q.parked++
	gw.held++
	gw.where[r] = &gpos{q: q, b: b, f: gw.flow(b, r.Req.TenantID), seq: gw.seq, at: at, tokens: tok,
		parked: true, held: true, heldAt: heldAt, wake: wake}
	gw.sync(q)
	r.Phase = request.Arriving
	if gw.ttl > 0 && at == c.now {
		c.h.push(c.now+gw.ttl, evGateTTL, -1, r)
	}
	if wake != math.MaxInt64 {
		c.h.push(wake, evHoldWake, -1, r)
	}
	if c.checks {
		gw.check(q)
	}
}

// wake queues r, parked until now, for dispatch (which runs after the
// event).
func (gw *gateway) wake(r *request.State) {
	p := gw.where[r]
	if p == nil || !p.parked || p.wake != gw.c.now {
		return // gone (shed, expired, timed out) or held again since
	}
	p.parked = false
	p.b.parked--
	p.q.parked--
	gw.held--
	p.f.h.Push(gitem{key: gw.key(r, p.at), seq: p.seq, r: r})
	p.f.n++
	gw.queued++
	gw.sync(p.q)
}

// holdNowhere fails a hold from a routing call whose request cannot wait:
// the decode pick of a prefill/decode deployment, taken after the prefill.
func (c *Cluster) holdNowhere(r *request.State, rd policy.RouteDecision, where string) {
	c.fail(fmt.Errorf("routing policy %s returned wait %d µs (reason %q) for request %s %s: a request cannot be held there, only before it is routed", c.routingName, rd.WaitUS, rd.Reason, r.Req.ID, where))
}
