package cluster

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/internal/minheap"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
)

// Gateway flow control (docs/engine.md, "Gateway flow control"), after the
// flow control layer of llm-d's endpoint picker: an admitted, prioritised
// request is routed at once while its pool is below the saturation limit
// and its gateway queue is empty; otherwise it waits in the queue, in the
// band of its priority (strict: a band is served only when every higher
// one is empty), shared between tenants by the fairness policy and ordered
// by the ordering policy. After every event the gateway dispatches from
// each queue while its pool is not saturated, routing each request with
// the view of that moment (late binding). A full queue sheds the newest
// request of its lowest sheddable band (priority < 0) below the newcomer,
// or rejects the newcomer; a request that waits longer than the TTL is
// rejected. Without router.flow_control the cluster holds nil: one nil
// check per event.
//
// The gateway is also where a request waits when the routing policy holds
// it (hold.go): parked in its band until the time the policy gave, counted
// against the bounds and the TTL like a queued request, then queued for
// dispatch and routed again. A run without flow control gets a passive
// gateway at its first hold: no saturation gate, bounds or TTL.
type gateway struct {
	c       *Cluster
	cfg     config.FlowControl
	bandCfg map[int64]config.Band
	slo     map[string]int64
	ttl     int64
	limit   float64
	qs      []*gqueue // one per candidate group that queued anything, in first-use order
	where   map[*request.State]*gpos
	queued  int // requests queued, all groups
	seq     uint64
	busy    bool
	wakeAt  int64 // the evGateWake scheduled (snapshot views), 0 if none
	passive bool  // made for a hold, without router.flow_control: holds only
	held    int   // requests parked by a hold, all groups (not in queued)
}

// gqueue is one candidate group's gateway queue.
type gqueue struct {
	g      *group
	bands  []*gband // highest priority first
	n      int      // requests in the queue, parked ones included (the bounds count them)
	tokens int64
	parked int // of n, held by the routing policy until their time
}

// gband is one priority band of a queue.
type gband struct {
	prio   int64
	maxReq int
	maxTok int64
	n      int // requests, parked ones included
	tokens int64
	parked int
	flows  []*gflow // by tenant (round-robin); one flow under global-strict
	last   string   // round-robin: the tenant served last
	served bool
}

// gflow is one tenant's queue within a band (all tenants under
// global-strict). Its heap keeps entries of requests that left (timed
// out, shed): they are skipped when they come up.
type gflow struct {
	tenant string
	h      minheap.Heap[gitem, *gitem]
	n      int // in the heap and live (parked requests are not in it)
}

type gitem struct {
	key int64 // ordering key: smaller first
	seq uint64
	r   *request.State
}

func (a *gitem) Less(b *gitem) bool { return a.key < b.key || a.key == b.key && a.seq < b.seq }

// gpos is where a queued request is.
type gpos struct {
	q      *gqueue
	b      *gband
	f      *gflow
	seq    uint64
	at     int64 // when it entered the queue (the TTL counts from it)
	tokens int64
	// A request the routing policy held: parked until wake, then in its
	// flow; heldAt is its first hold (its wait is counted as held).
	parked, held bool
	heldAt, wake int64
}

func newGateway(c *Cluster, f *config.FlowControl) *gateway {
	gw := &gateway{c: c, cfg: *f, bandCfg: map[int64]config.Band{}, ttl: f.TTL.US(), limit: f.Saturation.Limit,
		where: map[*request.State]*gpos{}}
	for _, b := range f.Bands {
		gw.bandCfg[int64(b.Priority)] = b
	}
	if len(f.SLOTTFT) > 0 {
		gw.slo = map[string]int64{}
		for k, v := range f.SLOTTFT {
			gw.slo[k] = v.US()
		}
	}
	return gw
}

// saturation is g's pool saturation as the detector sees the router's board.
func (gw *gateway) saturation(g *group) float64 {
	if gw.passive {
		return 0
	}
	s := &gw.cfg.Saturation
	if s.Detector == "concurrency" {
		return g.board.Concurrency(float64(s.MaxConcurrency))
	}
	g.board.Refresh(gw.c.now) // the KV use of replicas in a span (leap.go)
	return g.board.Utilization(s.QueueDepth, s.KVCache)
}

func (gw *gateway) queueOf(g *group) *gqueue {
	if g.gate == nil {
		g.gate = &gqueue{g: g}
		gw.qs = append(gw.qs, g.gate)
	}
	return g.gate
}

// band returns q's band of priority p, made on first use.
// bandOf is the priority band of a priority score: its integer part
// rounded down (llm-d's bands are integer priorities; a policy's score of
// 1.5 queues in band 1).
func bandOf(p float64) int64 {
	switch {
	case p >= math.MaxInt64:
		return math.MaxInt64
	case p <= math.MinInt64:
		return math.MinInt64
	}
	return int64(math.Floor(p))
}

func (gw *gateway) band(q *gqueue, p int64) *gband {
	i := sort.Search(len(q.bands), func(i int) bool { return q.bands[i].prio <= p })
	if i < len(q.bands) && q.bands[i].prio == p {
		return q.bands[i]
	}
	b := &gband{prio: p}
	if bc, ok := gw.bandCfg[p]; ok {
		b.maxReq, b.maxTok = bc.MaxRequests, bc.MaxTokens
	}
	q.bands = append(q.bands, nil)
	copy(q.bands[i+1:], q.bands[i:])
	q.bands[i] = b
	return b
}

// flow returns b's flow of tenant (the band's only flow under global-strict).
func (gw *gateway) flow(b *gband, tenant string) *gflow {
	if gw.cfg.Fairness != "round-robin" {
		tenant = ""
	}
	i := sort.Search(len(b.flows), func(i int) bool { return b.flows[i].tenant >= tenant })
	if i < len(b.flows) && b.flows[i].tenant == tenant {
		return b.flows[i]
	}
	f := &gflow{tenant: tenant}
	b.flows = append(b.flows, nil)
	copy(b.flows[i+1:], b.flows[i:])
	b.flows[i] = f
	return f
}

// key is r's ordering key in its flow, for a request that entered the
// queue at at.
func (gw *gateway) key(r *request.State, at int64) int64 {
	switch gw.cfg.Ordering {
	case "edf":
		d := int64(math.MaxInt64)
		if dl := r.Deadline(); dl != row.Null {
			d = dl
		}
		if gw.ttl > 0 {
			d = min(d, at+gw.ttl)
		}
		return d
	case "slo-deadline":
		if t, ok := gw.slo[r.Req.SLOClass]; ok {
			return r.Req.ArrivalUS + t
		}
		return math.MaxInt64
	}
	return at
}

// gate takes an admitted, prioritised request of group g: false to route
// it now (the queue is empty and the pool not saturated), true when the
// gateway keeps it (queued, or rejected because the queue is full).
func (gw *gateway) gate(r *request.State, g *group) bool {
	if gw.passive {
		return false
	}
	c := gw.c
	q := g.gate
	if (q == nil || q.n-q.parked == 0) && gw.saturation(g) < gw.limit {
		return false
	}
	q = gw.queueOf(g)
	b := gw.band(q, bandOf(r.Prio))
	tok := int64(r.Req.InputTokens)
	if !gw.room(r, q, b, tok) {
		return true
	}
	f := gw.flow(b, r.Req.TenantID)
	gw.seq++
	f.h.Push(gitem{key: gw.key(r, c.now), seq: gw.seq, r: r})
	f.n++
	b.n++
	b.tokens += tok
	q.n++
	q.tokens += tok
	gw.queued++
	gw.where[r] = &gpos{q: q, b: b, f: f, seq: gw.seq, at: c.now, tokens: tok}
	gw.sync(q)
	r.Phase = request.Arriving
	c.sum.GatewayQueued++
	if gw.ttl > 0 {
		c.h.push(c.now+gw.ttl, evGateTTL, -1, r)
	}
	if dec := c.opts.Decisions; dec != nil {
		dec.FlowControl(c.now, r, "enqueue", fmt.Sprintf("pool saturation %.3f ≥ %g or requests queued ahead: waits in band %d", gw.saturation(g), gw.limit, b.prio), b.prio)
	}
	if c.checks {
		gw.check(q)
	}
	return true
}

// room makes room in q and its band b for r (tok prompt tokens), shedding
// a lower sheddable request when the queue is full; false when r was
// rejected instead (its band, or the queue with nothing to shed, is full).
func (gw *gateway) room(r *request.State, q *gqueue, b *gband, tok int64) bool {
	c := gw.c
	if b.maxReq > 0 && b.n+1 > b.maxReq || b.maxTok > 0 && b.tokens+tok > b.maxTok {
		gw.reject(r, fmt.Sprintf("flow control: priority band %d full (%d requests, %d tokens queued)", b.prio, b.n, b.tokens), "reject")
		c.sum.GatewayFull++
		return false
	}
	for gw.cfg.MaxRequests > 0 && q.n+1 > gw.cfg.MaxRequests || gw.cfg.MaxTokens > 0 && q.tokens+tok > gw.cfg.MaxTokens {
		v := gw.victim(q, bandOf(r.Prio))
		if v == nil {
			gw.reject(r, fmt.Sprintf("flow control: gateway queue full (%d requests, %d tokens queued)", q.n, q.tokens), "reject")
			c.sum.GatewayFull++
			return false
		}
		vp := gw.remove(v)
		vb := vp.b.prio
		gw.waited(vp)
		gw.reject(v, fmt.Sprintf("flow control: shed from priority band %d for a request of priority %s (queue full)", vb, strconv.FormatFloat(r.Prio, 'f', -1, 64)), "shed")
		c.sum.GatewayShed++
	}
	return true
}

// waited counts the wait of a request leaving the queue: at the gateway,
// or held by the routing policy since its first hold.
func (gw *gateway) waited(p *gpos) {
	if p.held {
		gw.c.sum.RouteHeldUS += gw.c.now - p.heldAt
	} else {
		gw.c.sum.GatewayWaitUS += gw.c.now - p.at
	}
}

// sync tells q's group's board how many of its requests wait at the router.
func (gw *gateway) sync(q *gqueue) { q.g.board.SetWaiting(q.parked, q.n-q.parked) }

// victim is the request a full queue sheds for a newcomer of priority p:
// the newest of the lowest sheddable band (priority < 0) below p, or nil.
func (gw *gateway) victim(q *gqueue, p int64) *request.State {
	for i := len(q.bands) - 1; i >= 0; i-- {
		b := q.bands[i]
		if b.prio >= 0 || b.prio >= p {
			return nil
		}
		if b.n == 0 {
			continue
		}
		var best *request.State
		var bs uint64
		for _, f := range b.flows {
			for j := range f.h.S {
				it := &f.h.S[j]
				if gw.live(it) && it.seq > bs {
					best, bs = it.r, it.seq
				}
			}
		}
		if b.parked > 0 {
			// Parked requests are in no heap: the newest is the largest
			// seq, whatever the map's order.
			for r, p := range gw.where {
				if p.parked && p.b == b && p.seq > bs {
					best, bs = r, p.seq
				}
			}
		}
		return best
	}
	return nil
}

func (gw *gateway) live(it *gitem) bool {
	p := gw.where[it.r]
	return p != nil && p.seq == it.seq
}

// remove takes r out of the queue's counts (its heap entry goes stale).
func (gw *gateway) remove(r *request.State) *gpos {
	p := gw.where[r]
	delete(gw.where, r)
	if p.parked {
		p.b.parked--
		p.q.parked--
		gw.held--
	} else {
		p.f.n--
		gw.queued--
	}
	p.b.n--
	p.b.tokens -= p.tokens
	p.q.n--
	p.q.tokens -= p.tokens
	gw.sync(p.q)
	return p
}

func (gw *gateway) reject(r *request.State, why, action string) {
	c := gw.c
	if dec := c.opts.Decisions; dec != nil && !gw.passive {
		dec.FlowControl(c.now, r, action, why, bandOf(r.Prio))
	}
	r.Status, r.Reason = row.StatusRejected, why
	r.Finished = c.now // when the client hears it
	c.terminal(r)
}

// cancel forgets a queued request whose client gave up.
func (gw *gateway) cancel(r *request.State) {
	if gw.where[r] != nil {
		gw.waited(gw.remove(r))
	}
}

// expire rejects r if it is still queued from the same enqueue TTL ago.
func (gw *gateway) expire(r *request.State) {
	p := gw.where[r]
	if p == nil || p.at+gw.ttl != gw.c.now {
		return // dispatched (or queued again since)
	}
	gw.remove(r)
	gw.waited(p)
	gw.c.sum.GatewayExpired++
	why := fmt.Sprintf("flow control: waited the gateway's TTL (%s) in priority band %d", gw.cfg.TTL, p.b.prio)
	if p.held {
		why += " (held by the routing policy)"
	}
	gw.reject(r, why, "expire")
}

// pop takes q's next request: the highest band with requests, its flow by
// the fairness policy, that flow's first by the ordering policy.
func (gw *gateway) pop(q *gqueue) *request.State {
	for _, b := range q.bands {
		if b.n-b.parked == 0 {
			continue
		}
		f := b.flows[0]
		if len(b.flows) > 1 {
			// Round-robin: the first tenant after the last served that has
			// requests, in tenant order (llm-d sorts its flow keys).
			k := sort.Search(len(b.flows), func(i int) bool { return b.flows[i].tenant > b.last })
			if !b.served {
				k = 0
			}
			for j := 0; j < len(b.flows); j++ {
				if f = b.flows[(k+j)%len(b.flows)]; f.n > 0 {
					break
				}
			}
			b.last, b.served = f.tenant, true
		}
		for {
			it := f.h.Pop()
			if gw.live(&it) {
				return it.r
			}
		}
	}
	return nil
}

// dispatch routes queued requests while their pools are not saturated.
func (gw *gateway) dispatch() {
	if gw.busy {
		return
	}
	gw.busy = true
	defer func() { gw.busy = false }()
	c := gw.c
	for _, q := range gw.qs {
		for q.n-q.parked > 0 && c.err == nil {
			if c.liveView {
				c.refreshDirty()
			}
			s := gw.saturation(q.g)
			if s >= gw.limit {
				break
			}
			r := gw.pop(q)
			p := gw.remove(r)
			if c.checks {
				for _, b := range q.bands {
					if b == p.b {
						break
					}
					if b.n-b.parked > 0 {
						c.fail(fmt.Errorf("invariant violated: gateway dispatched %s from band %d while band %d holds %d", r.Req.ID, p.b.prio, b.prio, b.n-b.parked))
						return
					}
				}
				gw.check(q)
			}
			if !p.held {
				c.sum.GatewayWaitUS += c.now - p.at
			}
			if dec := c.opts.Decisions; dec != nil && !gw.passive {
				dec.FlowControl(c.now, r, "dispatch", fmt.Sprintf("pool saturation %.3f < %g after %d µs in band %d", s, gw.limit, c.now-p.at, p.b.prio), c.now-p.at)
			}
			if c.sc != nil && !c.sc.canServe(q.g) {
				c.sc.hold(q.g, r) // an autoscaled pool with no replica serving (scale.go)
				continue
			}
			if needsEncode(q.g, r) {
				c.encode(r, q.g) // its images first (encode.go)
				continue
			}
			if q.g.sel != nil && c.pd.decide(r, q.g.sel, q.g) {
				if p.held {
					c.sum.RouteHeldUS += c.now - p.heldAt // kept on its decode replica: its hold ends
				}
				continue // kept on its decode replica (pd.go), or c.err
			}
			c.cur, c.curG = r, q.g
			view := q.g.board.View(c.now, c.oracleFor(q.g), c.opts.Decisions != nil)
			c.holdFrom = p // a hold again keeps its TTL and its first hold (hold.go)
			c.route(r, q.g, policy.NewRequestView(&r.Req, c.now, c.pbFn), view)
			c.holdFrom = nil
			if p.held && gw.where[r] == nil {
				c.sum.RouteHeldUS += c.now - p.heldAt // routed (or lost): its hold ends
			}
		}
	}
	if c.snapEvery > 0 && gw.queued > 0 && gw.wakeAt < c.snapAt {
		// A snapshot view changes only at the next snapshot, which is taken
		// before the next event: make sure there is one then, or requests
		// would wait for an event that may never come.
		gw.wakeAt = c.snapAt
		c.h.push(c.snapAt, evGateWake, -1, nil)
	}
}

// check asserts q's counts (--check-invariants).
func (gw *gateway) check(q *gqueue) {
	n, tok, parked := 0, int64(0), 0
	for _, b := range q.bands {
		fn := 0
		for _, f := range b.flows {
			fn += f.n
		}
		if fn != b.n-b.parked {
			gw.c.fail(fmt.Errorf("invariant violated: gateway band %d counts %d requests (%d parked), its flows %d", b.prio, b.n, b.parked, fn))
		}
		if b.maxReq > 0 && b.n > b.maxReq || b.maxTok > 0 && b.tokens > b.maxTok {
			gw.c.fail(fmt.Errorf("invariant violated: gateway band %d holds %d requests, %d tokens (bounds %d, %d)", b.prio, b.n, b.tokens, b.maxReq, b.maxTok))
		}
		n += b.n
		tok += b.tokens
		parked += b.parked
	}
	if n != q.n || tok != q.tokens || parked != q.parked {
		gw.c.fail(fmt.Errorf("invariant violated: gateway queue counts %d requests, %d tokens; its bands %d, %d", q.n, q.tokens, n, tok))
	}
	if m := gw.cfg.MaxRequests; m > 0 && q.n > m || gw.cfg.MaxTokens > 0 && q.tokens > gw.cfg.MaxTokens {
		gw.c.fail(fmt.Errorf("invariant violated: gateway queue holds %d requests, %d tokens (bounds %d, %d)", q.n, q.tokens, gw.cfg.MaxRequests, gw.cfg.MaxTokens))
	}
}

// queuedIn counts g's requests queued at the gateway.
func (gw *gateway) queuedIn(g *group) int {
	if gw == nil || g.gate == nil {
		return 0
	}
	return g.gate.n
}

// finish names the reason of requests still queued when the run ends.
func (gw *gateway) finish() {
	for r, p := range gw.where { // each request's own reason: the order cannot leak
		if p.parked {
			r.Reason = fmt.Sprintf("held at the router by the routing policy until %d µs", p.wake)
		}
	}
	for _, q := range gw.qs {
		for _, b := range q.bands {
			for _, f := range b.flows {
				for i := range f.h.S {
					if it := &f.h.S[i]; gw.live(it) {
						it.r.Reason = fmt.Sprintf("queued at the gateway (flow control, priority band %d)", b.prio)
					}
				}
			}
		}
	}
}

// clone copies the gateway for Cluster.Clone (requests through m).
func (gw *gateway) clone(m *request.Clone, d *Cluster, grpMap map[*group]*group) *gateway {
	x := *gw
	x.c = d
	x.busy = false // a fork taken during a dispatch dispatches on its own
	x.where = make(map[*request.State]*gpos, len(gw.where))
	x.qs = make([]*gqueue, len(gw.qs))
	bands := map[*gband]*gband{}
	flows := map[*gflow]*gflow{}
	for i, q := range gw.qs {
		y := &gqueue{g: grpMap[q.g], n: q.n, tokens: q.tokens, parked: q.parked}
		y.g.gate = y
		for _, b := range q.bands {
			yb := *b
			bands[b] = &yb
			yb.flows = make([]*gflow, len(b.flows))
			for j, f := range b.flows {
				yf := &gflow{tenant: f.tenant, n: f.n}
				flows[f] = yf
				yf.h.S = make([]gitem, len(f.h.S))
				for k, it := range f.h.S {
					yf.h.S[k] = gitem{key: it.key, seq: it.seq, r: m.Map(it.r)}
				}
				yb.flows[j] = yf
			}
			y.bands = append(y.bands, &yb)
		}
		x.qs[i] = y
	}
	for r, p := range gw.where { // into a map: the order cannot leak
		yp := *p
		yp.q, yp.b, yp.f = grpMap[p.q.g].gate, bands[p.b], flows[p.f]
		x.where[m.Map(r)] = &yp
	}
	return &x
}
