package cluster

import (
	"fmt"
	"math"
	"slices"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
)

// disagg is the cluster's prefill/decode disaggregation part: the hand-offs
// between a P/D deployment's prefill and decode pools and the links they
// cross. It exists only when some deployment has P/D pools (Cluster.pd).
type disagg struct {
	c        *Cluster
	outQ     []int32            // per prefill replica: hand-offs not yet transferred
	linkFree []int64            // per prefill replica: its outgoing link is busy until
	incoming [][]*request.State // per decode replica: hand-offs waiting for its blocks
	links    *links             // fair sharing (pdlink.go); nil when every link is fifo
	// bound counts, per decode replica, the requests bound to it that have
	// not reached it (prefilling, or in transfer): a draining decode
	// replica stops only when none is left. orphans are hand-offs waiting
	// for a decode replica to serve (an autoscaled decode pool at zero).
	bound   []int32
	orphans []*request.State
	// quiet is a replica being killed (evict): P/D code neither starts a
	// step on it nor stops it meanwhile; -1 otherwise.
	quiet int32
}

// kick starts a step on rep if it can (Cluster.kick), unless it is being
// killed.
func (dg *disagg) kick(rep *replica.Replica) {
	if rep.Index != dg.quiet {
		dg.c.kick(rep)
	}
}

func newDisagg(c *Cluster) *disagg {
	n := len(c.reps)
	dg := &disagg{c: c, outQ: make([]int32, n), linkFree: make([]int64, n), incoming: make([][]*request.State, n),
		bound: make([]int32, n), quiet: -1}
	for _, d := range c.deps {
		if d.pd != nil && d.pd.fair && dg.links == nil {
			dg.links = newLinks(c)
		}
	}
	return dg
}

// event runs a P/D event: a request's transfer (or pipelined start) at
// its time, or the end of the next fair-shared flow (no request).
func (dg *disagg) event(ev *event) {
	if ev.r == nil {
		dg.linkEvent(ev.life())
		return
	}
	dg.xferDone(ev.r)
}

// clone copies the part for d, a clone of its cluster (m maps requests).
func (dg *disagg) clone(d *Cluster, m *request.Clone) *disagg {
	x := &disagg{c: d, outQ: append([]int32(nil), dg.outQ...), linkFree: append([]int64(nil), dg.linkFree...),
		incoming: make([][]*request.State, len(dg.incoming)), bound: append([]int32(nil), dg.bound...), quiet: -1}
	for _, r := range dg.orphans {
		x.orphans = append(x.orphans, m.Map(r))
	}
	if dg.links != nil {
		x.links = dg.links.clone(m)
	}
	for i, q := range dg.incoming {
		if len(q) > 0 {
			x.incoming[i] = make([]*request.State, len(q))
			for j, r := range q {
				x.incoming[i][j] = m.Map(r)
			}
		}
	}
	return x
}

// pdState is a disaggregated deployment's KV transfer: a request prefills
// on a replica of its prefill pool, its KV moves over the prefill
// replica's outgoing link, and it decodes on a replica of its decode pool.
type pdState struct {
	bytesUS     float64 // link bandwidth, bytes per µs
	latUS       int64
	maxQueue    int32
	decodeFirst bool
	// overlap: granularity chunk or stream, the prefill replica sends while
	// the prefill runs (stream: layer by layer within each chunk's step).
	overlap, stream bool
	pipelined       bool
	fair            bool // sharing: fair (pdlink.go)
	layers          int64
	bytesPerToken   float64
	decode          *group // the decode pool's candidates
	// route chooses the decode replica: a copy of the routing policy made
	// at the start, so that a stateful policy (round-robin's turn, random's
	// stream) keeps one state per pool instead of alternating between them.
	route policy.Routing
	// The decider (config.PD): selective is false for always (every
	// request with output tokens is disaggregated, nothing is decided per
	// request); threshold is the uncached prompt tokens from which a
	// request is disaggregated (never: beyond any prompt); maxPQ the
	// prefill pool's queue per replica above which a request stays local
	// (0: no limit).
	selective bool
	threshold int64
	maxPQ     int
}

// Decision kinds of disaggregated serving (the decisions table's kind).
const (
	decisionPD     = "pd"
	decisionDecode = "decode_routing"
	decisionEncode = "encode_routing"
)

// newTiers builds one replica's lower KV tiers from its deployment's kv
// section (nil when it has none).
func newTiers(cfg *config.Cluster, i int, d *config.Deployment, store kv.Store) (*kv.Tiers, error) {
	if d.KV == nil || !d.KV.HasTiers() {
		return nil, nil
	}
	var specs []kv.TierSpec
	for j, t := range d.KV.Tiers {
		if t.BandwidthGBs == nil || t.CapacityBlocks <= 0 || d.KV.BytesPerToken <= 0 {
			return nil, fmt.Errorf("%s: capacity in blocks, bandwidth or KV bytes per token unset (engine.Prepare fills them)", cfg.DeploymentKey(i, fmt.Sprintf("kv.tiers[%d]", j)))
		}
		ev := kv.EvictLRU
		switch t.Eviction {
		case "lfu":
			ev = kv.EvictLFU
		case "priority":
			ev = kv.EvictPriority
		}
		specs = append(specs, kv.TierSpec{Name: t.Name, Blocks: int32(t.CapacityBlocks), BytesUS: *t.BandwidthGBs * 1e3,
			LatencyUS: t.Latency.US(), Eviction: ev})
	}
	pol := kv.OffloadLazy
	switch d.KV.Offload {
	case "eager":
		pol = kv.OffloadEager
	case "threshold":
		pol = kv.OffloadThreshold
	}
	return kv.NewTiers(specs, pol, d.KV.Threshold, d.KV.BytesPerToken*float64(d.Engine.BlockSize), store), nil
}

// newPD reads a P/D deployment's transfer settings (engine.Prepare filled
// the defaults).
func newPD(cfg *config.Cluster, i int, d *config.Deployment) (*pdState, error) {
	x := d.KVTransfer
	// A transfer runs at the slower of the two pools' links (each pool's
	// own with heterogeneous P/D; engine.Prepare fills them), else at the
	// deployment's bandwidth.
	bw := math.Inf(1)
	for _, p := range d.Pools {
		if p.Role != "prefill" && p.Role != "decode" {
			continue
		}
		switch {
		case p.LinkGBs > 0:
			bw = min(bw, p.LinkGBs)
		case x != nil && x.BandwidthGBs != nil:
			bw = min(bw, *x.BandwidthGBs)
		default:
			bw = math.NaN()
		}
	}
	if x == nil || !(bw > 0) || math.IsInf(bw, 1) || d.KV == nil || d.KV.BytesPerToken <= 0 {
		return nil, fmt.Errorf("%s: the KV transfer's bandwidth and the KV bytes per token are unset (engine.Prepare fills them)", cfg.DeploymentKey(i, "kv_transfer"))
	}
	if x.NeedsLayers() && x.Layers <= 0 {
		return nil, fmt.Errorf("%s: the model's layer count is unset (engine.Prepare fills it)", cfg.DeploymentKey(i, "kv_transfer.layers"))
	}
	pd := &pdState{bytesUS: bw * 1e3, latUS: x.Latency.US(), maxQueue: int32(x.MaxQueue),
		decodeFirst: x.Routing == "decode-first", bytesPerToken: d.KV.BytesPerToken,
		overlap: x.Granularity != "block", stream: x.Granularity == "stream", pipelined: x.Pipelined,
		layers: int64(max(1, x.Layers)), fair: x.Sharing == "fair"}
	if p := d.PD; p != nil && p.Decider != "always" {
		pd.selective, pd.threshold, pd.maxPQ = true, int64(p.Threshold), p.MaxPrefillQueue
		if p.Decider == "never" {
			pd.threshold = math.MaxInt64
		}
	}
	return pd, nil
}

// pickDecode runs the routing policy over the decode pool of r's
// deployment: the same Routing stage as for prefill, given a view of the
// decode candidates (their roles say which pool a policy is choosing in).
func (dg *disagg) pickDecode(r *request.State, dep *Deployment) {
	c := dg.c
	g := dep.pd.decode
	if g.board.Len() == 0 {
		return // an autoscaled decode pool at zero: the caller waits
	}
	if c.liveView {
		c.refreshDirty()
	}
	c.cur, c.curG = r, g
	view := g.board.View(c.now, c.oracleFor(g), false)
	rv := policy.NewRequestView(&r.Req, c.now, c.pbFn)
	rd := dep.pd.route.Route(rv, view)
	if c.opts.Policies.Err != nil && c.policyFailed() {
		return
	}
	if rd.Wait {
		c.holdNowhere(r, rd, "in the decode pool of "+dep.ID)
		return
	}
	if rd.Target < 0 || rd.Target >= len(g.members) {
		c.fail(fmt.Errorf("routing policy %s returned decode candidate %d of %d", c.routingName, rd.Target, len(g.members)))
		return
	}
	dg.bind(r, g.members[rd.Target])
	if dec := c.opts.Decisions; dec != nil {
		dep.keys.Ensure(r)
		dec.Disagg(c.now, r, decisionDecode, view, rd.Target, "route", rd.Reason, int64(view.CachedBlocks(rd.Target)))
	}
}

// placed sets up a request the router placed on replica rep of P/D
// deployment dep: on a prefill replica it prefills only and is handed off
// (its decode replica chosen now with decode-first, or already by the
// decider); on a decode replica (kept local by the decider) it is an
// ordinary request. False: the run failed (c.err).
func (dg *disagg) placed(r *request.State, dep *Deployment, rep *replica.Replica) bool {
	c := dg.c
	if rep.Role == replica.Decode {
		r.PrefillOnly = false
		return true
	}
	if dep.pd.selective {
		r.PD.PReplica = rep.Index // decide gave r its hand-off state and decode replica
	} else {
		dg.unbind(r) // a redirected request's earlier decode replica
		r.NewHandoff().PReplica = rep.Index
	}
	r.PrefillOnly = r.Req.OutputTokens > 0
	if r.PrefillOnly {
		// It decodes with its whole sequence's KV on a decode replica.
		dp := dep.decodePool()
		B := int64(dp.engine.BlockSize)
		tokens := int64(r.Req.InputTokens) + int64(r.Req.OutputTokens) - 1
		if need := (tokens + B - 1) / B; need > dp.engine.KVBlocks {
			dg.unbind(r)
			r.Status = row.StatusDropped
			r.Reason = fmt.Sprintf("needs %d KV blocks (%d tokens), a decode replica of %s has %d", need, tokens, dep.ID, dp.engine.KVBlocks)
			c.terminal(r)
			return false
		}
	}
	if dep.pd.decodeFirst && r.PrefillOnly && r.PD.DReplica < 0 {
		dg.pickDecode(r, dep)
		if r.PD.DReplica < 0 {
			if c.err == nil {
				c.fail(fmt.Errorf("internal error: request %s placed with no decode replica serving", r.Req.ID))
			}
			return false
		}
	}
	return true
}

// decodePool is the deployment's decode pool.
func (d *Deployment) decodePool() *dpool {
	for i := range d.pools {
		if d.pools[i].role == replica.Decode {
			return &d.pools[i]
		}
	}
	return nil
}

// bind makes decode replica d r's: r counts among the requests d must
// receive before it may stop.
func (dg *disagg) bind(r *request.State, d int32) {
	r.PD.DReplica, r.PD.Bound = d, true
	dg.bound[d]++
}

// unbind ends r's count on its decode replica: r reached it, left, or
// goes elsewhere; a draining replica waiting for it may stop.
func (dg *disagg) unbind(r *request.State) {
	c := dg.c
	if r.PD == nil || !r.PD.Bound {
		return
	}
	r.PD.Bound = false
	d := r.PD.DReplica
	dg.bound[d]--
	if c.sc != nil && c.reps[d].State == replica.Draining && !c.reps[d].Busy() && d != dg.quiet {
		c.sc.drainedCheck(c.reps[d])
	}
}

// pdBusy reports whether rep still takes part in a hand-off: a prefill
// replica holding source blocks of transfers, a decode replica with
// requests bound to it or waiting for its blocks (a draining replica waits
// for them).
func (dg *disagg) pdBusy(rep *replica.Replica) bool {
	i := rep.Index
	return dg.outQ[i] > 0 || dg.bound[i] > 0 || len(dg.incoming[i]) > 0
}

// decide is the decider of a selective P/D deployment dep for r, admitted
// and prioritised over its prefill pool g. As llm-d's P/D profile handler
// and NVIDIA Dynamo's conditional disaggregation do, the decode replica is
// chosen first (the routing policy over the decode pool); then r goes to
// the prefill pool when the prompt tokens that replica does not hold in
// its prefix cache number at least the threshold (and, with
// max_prefill_queue, while the prefill pool's queue per replica is at most
// that), else it prefills on its decode replica, which serves both roles.
// It reports whether r was placed (kept local) or the run failed; false:
// r goes on to the prefill pool's routing, its decode replica chosen.
func (dg *disagg) decide(r *request.State, dep *Deployment, g *group) bool {
	c := dg.c
	pd := dep.pd
	dg.unbind(r) // a redirected request's earlier decode replica
	r.NewHandoff()
	if r.Req.OutputTokens == 0 && g.board.Len() > 0 {
		return false // a prefill-only request: nothing to decode
	}
	dg.pickDecode(r, dep)
	if r.PD.DReplica < 0 {
		if c.err == nil {
			c.fail(fmt.Errorf("internal error: request %s decided with no decode replica serving", r.Req.ID))
		}
		return true
	}
	d := c.reps[r.PD.DReplica]
	dep.keys.Ensure(r)
	st := d.Sched.KV()
	hit := int64(st.Lookup(r.Keys, len(r.Keys))) * int64(st.BlockSize())
	uncached := max(0, int64(r.Req.InputTokens)-hit)
	remote := uncached >= pd.threshold
	var reason string
	switch {
	case g.board.Len() == 0:
		remote, reason = false, "no prefill replica serving (an autoscaled pool at zero)"
	case pd.threshold == math.MaxInt64:
		reason = "decider never"
	case remote:
		reason = fmt.Sprintf("%d uncached prompt tokens on %s >= threshold %d", uncached, d.ID, pd.threshold)
	default:
		reason = fmt.Sprintf("%d uncached prompt tokens on %s < threshold %d", uncached, d.ID, pd.threshold)
	}
	if remote && pd.maxPQ > 0 {
		q := 0
		for _, m := range g.members {
			q += c.reps[m].Sched.Load().Waiting + c.reps[m].InFlight
		}
		if n := len(g.members); n == 0 || q > pd.maxPQ*n {
			remote = false
			reason += fmt.Sprintf("; prefill queue %d over %d replicas > max_prefill_queue %d per replica", q, n, pd.maxPQ)
		}
	}
	dg.traceDecision(r, dep, remote, reason, uncached)
	if remote {
		// Back to the prefill pool's decision: its candidates and oracle.
		c.cur, c.curG = r, g
		c.oracleFor(g)
		return false
	}
	dg.unbind(r) // an ordinary request on d from now
	dec := c.opts.Decisions
	pos := int(c.gpos[d.Index])
	if dec != nil {
		view := pd.decode.board.View(c.now, c.oracleFor(pd.decode), true)
		dec.Routed(c.now, r, policy.RouteDecision{Target: pos, Reason: reason}, view, pd.decode.members)
	}
	c.place(r, pd.decode, pos)
	return true
}

// traceDecision records the decider's choice (decision traces only).
func (dg *disagg) traceDecision(r *request.State, dep *Deployment, remote bool, reason string, uncached int64) {
	c := dg.c
	dec := c.opts.Decisions
	if dec == nil {
		return
	}
	action := "local"
	if remote {
		action = "disaggregate"
	}
	g := dep.pd.decode
	view := g.board.View(c.now, c.oracleFor(g), false)
	dec.Disagg(c.now, r, decisionPD, view, int(c.gpos[r.PD.DReplica]), action, reason, uncached)
}

// handoff takes a request whose prefill ended on p: its blocks there stay
// held (XferKV) until its KV has reached the decode replica, which must
// first reserve blocks for it (vLLM's decode side allocates them when the
// transfer starts; until it can, the request waits: backpressure).
func (dg *disagg) handoff(r *request.State, p *replica.Replica) {
	c := dg.c
	dep := c.deps[p.Deployment]
	// The prefill replica's blocks become XferKV; KV is the decode
	// replica's reservation when it was made during the prefill, else empty.
	r.PD.XferKV, r.KV = r.KV, r.PD.XferKV
	if r.KV.Blocks() == 0 {
		r.KV.IDs, r.KV.Anon = r.KV.IDs[:0], 0
	}
	r.NReg, r.Chunk = 0, 0
	r.Failed = false // its failed-admission marks were about the prefill replica's store
	r.PD.XferStart = c.now
	dg.outQ[p.Index]++
	if dg.outQ[p.Index] >= dep.pd.maxQueue {
		p.Sched.Hold(true)
	}
	if r.PD.DReplica < 0 {
		dg.pickDecode(r, dep)
		if r.PD.DReplica < 0 {
			if c.err == nil {
				dg.orphans = append(dg.orphans, r) // the decode pool is at zero
			}
			return
		}
	}
	dg.toDecode(r, dep)
}

// toDecode sends a handed-off request to its decode replica: it asks for
// the replica's blocks (or has them, reserved during its prefill) and its
// KV goes on the link once it has them.
func (dg *disagg) toDecode(r *request.State, dep *Deployment) {
	r.Replica = r.PD.DReplica
	d := dg.c.reps[r.PD.DReplica]
	switch {
	case r.KV.Blocks() > 0:
		// Reserved during the prefill (chunk, stream): the last chunk's
		// KV is on the link already.
		dg.sendRest(r, dep, d)
	case r.PD.XferQueued:
		// Waiting in the decode replica's queue since the prefill started.
	default:
		r.PD.XferQueued = true
		dg.incoming[r.PD.DReplica] = append(dg.incoming[r.PD.DReplica], r)
		dg.admitIncoming(d)
	}
}

// takeSends applies the progress of prefill replica p's prefill-only
// requests (granularity chunk or stream): a request entering a step asks
// its decode replica for blocks (the reservation precedes any byte, as in
// Splitwise and Mooncake, whose decode instance allocates before the
// prefill's layers are written to it); a finished chunk's KV goes on the
// link.
func (dg *disagg) takeSends(p *replica.Replica) {
	c := dg.c
	sn, ok := p.Sched.(interface{ TakeSends() []sched.Send })
	if !ok {
		return
	}
	dep := c.deps[p.Deployment]
	for _, x := range sn.TakeSends() {
		r := x.R
		if x.Start == row.Null {
			// Preempted: its prefill starts over, and it gives the decode
			// blocks back (a reservation must not outlive a running prefill,
			// or it could hold blocks the hand-offs ahead need while this
			// replica, held by max_queue, admits nothing: a deadlock); the
			// KV already sent is lost and is sent again.
			dg.unreserve(r)
			continue
		}
		if x.End == row.Null {
			// Reserve now if the decode replica has the blocks and no
			// earlier hand-off waits for them; otherwise the request asks
			// at its hand-off, like block (a reservation waiting through a
			// prefill could hold blocks the waiting hand-offs need).
			if !r.PD.XferQueued && r.PD.DReplica >= 0 && len(dg.incoming[r.PD.DReplica]) == 0 {
				d := c.reps[r.PD.DReplica]
				c.sync(d)
				st := d.Sched.KV()
				if st.Free() >= (r.Req.InputTokens+st.BlockSize()-1)/st.BlockSize() {
					r.PD.XferQueued = true
					r.PD.XferStart = c.now
					dg.incoming[r.PD.DReplica] = append(dg.incoming[r.PD.DReplica], r)
					dg.admitIncoming(d)
				}
			}
			continue
		}
		if r.PD.XferKV.Blocks() == 0 || r.Computed <= r.PD.XferTok {
			continue // not reserved yet (sent when it is), or recomputed after a preemption
		}
		if dep.pd.stream {
			dg.send(r, dep.pd, r.Computed, x.Start, x.End-x.Start)
		} else {
			dg.send(r, dep.pd, r.Computed, x.End, 0)
		}
	}
}

// send puts the KV of r's prompt tokens [XferTok, to) on its prefill
// replica's outgoing link (FIFO). Layer l of those tokens is ready at
// s + l·d/L (stream: the chunk's step runs from s for d µs; d = 0: all of
// it at s); the link sends them layer after layer at the link's bandwidth,
// from A = max(link free, decode blocks reserved, first layer ready), so
// layer l has left at f(l) = max(A + l·x/L, s + l·d/L + x/L), x the bytes'
// send time: the first layer at A + x/L, the last at max(A + x, s + d + x/L).
func (dg *disagg) send(r *request.State, pd *pdState, to int32, s, d int64) {
	from := r.PD.XferTok
	r.PD.XferTok = to
	bytes := int64(math.Ceil(float64(to)*pd.bytesPerToken)) - int64(math.Ceil(float64(from)*pd.bytesPerToken))
	r.PD.XferBytes += bytes
	if pd.fair {
		// A flow sharing the links from now (block and chunk: all of it
		// is ready at s = now).
		if bytes > 0 {
			dg.startFlow(r, bytes, r.PD.PReplica, r.PD.DReplica)
		}
		return
	}
	x := float64(bytes) / pd.bytesUS
	L := pd.layers
	a := max(dg.linkFree[r.PD.PReplica], r.PD.XferRes, s+(d+L-1)/L)
	end := a + int64(math.Ceil(x))
	if d > 0 {
		end = max(end, s+d+int64(math.Ceil(x/float64(L))))
	}
	dg.linkFree[r.PD.PReplica] = end
	r.PD.XferSendAt, r.PD.XferFirst, r.PD.XferEnd = a, a+int64(math.Ceil(x/float64(L))), end
}

// admitIncoming starts the transfers decode replica d can now reserve
// blocks for, first come first served.
func (dg *disagg) admitIncoming(d *replica.Replica) {
	c := dg.c
	q := dg.incoming[d.Index]
	if len(q) == 0 {
		return
	}
	c.cut(d)
	store := d.Sched.KV()
	dep := c.deps[d.Deployment]
	B := store.BlockSize()
	if ts := d.Sched.Tiers(); ts != nil {
		ts.SetNow(c.now, 0) // blocks the reservations evict are copied down now
	}
	k := 0
	for ; k < len(q); k++ {
		r := q[k]
		need := (r.Req.InputTokens + B - 1) / B
		if store.Free() < need {
			break
		}
		if c.now > r.PD.XferStart {
			c.sum.PDBackpressure++ // waited for the decode replica's blocks
		}
		r.PD.XferRes, r.PD.XferBP = c.now, c.now-r.PD.XferStart
		dep.keys.Ensure(r)
		if r.PrefillOnly {
			// Still prefilling (chunk, stream): the reservation is XferKV
			// until the hand-off; the chunks computed so far (and the
			// prefix-cache hits) go on the link now.
			store.Alloc(&r.PD.XferKV, need, min(int32(len(r.Keys)), need)) // as IDBlocks for an empty handle
			if r.Computed > r.PD.XferTok {
				dg.send(r, dep.pd, r.Computed, c.now, 0)
			}
			continue
		}
		store.Alloc(&r.KV, need, r.IDBlocks(need))
		dg.sendRest(r, dep, d)
	}
	n := copy(q, q[k:])
	clear(q[n:])
	dg.incoming[d.Index] = q[:n]
	c.markDirty(d.Index)
}

// sendRest puts the rest of r's prompt KV on the link at now (a handed-off
// request whose decode blocks are reserved) and schedules its arrival: at
// XferDone = the last byte's departure + latency (the latency pipelines,
// the link is busy for the bytes only). With pipelining the decode replica
// may take the request earlier, at XferReady (see pipelinedReady).
func (dg *disagg) sendRest(r *request.State, dep *Deployment, d *replica.Replica) {
	c := dg.c
	if in := r.Req.InputTokens; r.PD.XferTok < in {
		dg.send(r, dep.pd, in, c.now, 0)
	}
	if dep.pd.fair {
		r.PD.XferLast = true
		if r.PD.Flows > 0 {
			return // in place latency after its last flow ends (flowsDone)
		}
		r.PD.XferEnd = max(r.PD.XferEnd, c.now)
	}
	dg.transferEnds(r, dep, d)
}

// transferEnds schedules the arrival of r's KV, whose last byte left at
// XferEnd: at XferDone = XferEnd + latency (and, pipelined, the decode
// replica may take it at XferReady).
func (dg *disagg) transferEnds(r *request.State, dep *Deployment, d *replica.Replica) {
	c := dg.c
	r.PD.XferDone = r.PD.XferEnd + dep.pd.latUS
	r.PD.XferWaitUS = max(0, r.PD.XferSendAt-r.PD.XferStart)
	r.PD.XferReady = r.PD.XferDone
	if dep.pd.pipelined {
		r.PD.XferReady = dg.pipelinedReady(r, dep)
		if r.PD.XferReady < r.PD.XferDone {
			c.h.push(r.PD.XferReady, evXferDone, d.Index, r)
		}
	}
	c.sum.Transfers++
	c.sum.TransferBytes += r.PD.XferBytes
	c.h.push(r.PD.XferDone, evXferDone, d.Index, r)
	if c.opts.Decisions != nil {
		dg.traceTransfer(r, c.reps[r.PD.PReplica], d, r.KV.Blocks())
	}
}

// pipelinedReady is when a pipelined transfer lets the decode replica take r:
// its first decode-side step (the last prompt token over the whole
// context, estimated alone: T) reaches layer l at t + (l−1)·T/L and needs
// that layer's KV of every token then. The last piece's layers leave the
// link in order, the earlier pieces have all left before it began, so
// every layer is in place in time from
//
//	max(first layer of the last piece + latency, XferDone − (L−1)·T/L)
//
// on (the condition at l = 1 and l = L; between them it is linear in l),
// and not before now (the prefill's end or the reservation).
func (dg *disagg) pipelinedReady(r *request.State, dep *Deployment) int64 {
	c := dg.c
	L := dep.pd.layers
	t := dg.decodeStepEstimate(r, dep)
	return max(c.now, r.PD.XferFirst+dep.pd.latUS, r.PD.XferDone-t*(L-1)/L)
}

// decodeStepEstimate is the GPU time of r's first decode-side step alone:
// one prompt token over input−1 tokens of context. A busier step is longer
// and reaches each layer later, so the estimate errs on the safe side.
func (dg *disagg) decodeStepEstimate(r *request.State, dep *Deployment) int64 {
	ctx := int64(r.Req.InputTokens - 1)
	b := latency.Batch{PrefillSeqs: 1, PrefillTokens: 1, PrefillCtx: ctx, PrefillAttn: ctx + 1}
	return max(0, dep.poolOf(r.PD.DReplica).model.StepTime(&b))
}

// xferDone ends r's KV transfer: the prefill replica frees its blocks (one
// owner at a time) and the request joins the decode replica's queue with
// all but its last prompt token in KV: the decode replica computes that
// token and samples the first output token, as vLLM's P/D connectors do
// (the prefill replica's sampled token is dropped, so no token is counted
// twice).
//
// With pipelining the request may reach the decode replica first (at
// XferReady, a second event), and the source blocks are freed at XferDone.
func (dg *disagg) xferDone(r *request.State) {
	c := dg.c
	p := c.reps[r.PD.PReplica]
	d := c.reps[r.PD.DReplica]
	if c.now >= r.PD.XferDone && r.PD.XferKV.Blocks() > 0 {
		if c.checks && (r.Phase == request.Transfer && r.KV.Blocks() == 0 || c.now < r.PD.XferEnd) {
			c.fail(fmt.Errorf("invariant violated: request %s transfer ended at %d with %d source and %d destination blocks (last byte left at %d)", r.Req.ID, c.now, r.PD.XferKV.Blocks(), r.KV.Blocks(), r.PD.XferEnd))
		}
		dg.releaseSource(r, p)
	}
	if r.Phase != request.Transfer || c.now < r.PD.XferReady {
		return
	}
	if c.checks {
		dg.checkReady(r)
	}
	r.Computed = r.Req.InputTokens - 1
	c.cut(d)
	d.Sched.Resume(r)
	dg.unbind(r) // after it is on d: a draining d must not stop before
	c.markDirty(d.Index)
	dg.kick(d)
}

// checkReady checks the hand-off rule as the decode replica takes r: never
// before every byte arrived unless pipelined; pipelined, never before every
// layer of every block will be in place when its first step needs it.
func (dg *disagg) checkReady(r *request.State) {
	c := dg.c
	dep := c.deps[c.reps[r.PD.DReplica].Deployment]
	switch {
	case r.KV.Blocks() == 0:
		c.fail(fmt.Errorf("invariant violated: request %s handed to its decode replica without reserved blocks", r.Req.ID))
	case !dep.pd.pipelined && (c.now < r.PD.XferDone || r.PD.XferKV.Blocks() > 0):
		c.fail(fmt.Errorf("invariant violated: request %s decodes at %d before its KV arrived (%d) or its prefill replica freed it", r.Req.ID, c.now, r.PD.XferDone))
	case dep.pd.pipelined && (c.now < r.PD.XferFirst+dep.pd.latUS || (r.PD.XferDone-c.now)*dep.pd.layers > dg.decodeStepEstimate(r, dep)*(dep.pd.layers-1)):
		c.fail(fmt.Errorf("invariant violated: request %s decodes at %d, before enough of its KV arrived (first layer of the last piece %d, all %d)", r.Req.ID, c.now, r.PD.XferFirst+dep.pd.latUS, r.PD.XferDone))
	}
}

// releaseSource frees r's blocks on its prefill replica p and lets p take
// new prefills again once its outgoing queue is short.
func (dg *disagg) releaseSource(r *request.State, p *replica.Replica) {
	dg.freeSource(r, p)
	dg.kick(p)
}

// freeSource is releaseSource without starting a step on p.
func (dg *disagg) freeSource(r *request.State, p *replica.Replica) {
	c := dg.c
	c.cut(p)
	p.Sched.KV().Release(&r.PD.XferKV)
	dg.outQ[p.Index]--
	if dg.outQ[p.Index] < c.deps[p.Deployment].pd.maxQueue {
		p.Sched.Hold(false)
	}
	c.markDirty(p.Index)
}

// leave tidies the P/D state of r as it reaches a final state: its transfer
// (dropTransfer: the decode blocks it reserved), then its count on its
// decode replica, in that order: the last count gone, a draining decode
// replica stops with a fresh store at once.
func (dg *disagg) leave(r *request.State) {
	if r.IsPD() && (r.PD.XferKV.Blocks() > 0 || r.PrefillOnly && r.PD.XferQueued) {
		dg.dropTransfer(r)
	}
	dg.unbind(r)
}

// orphansOf counts dep's hand-offs waiting for a decode replica.
func (dg *disagg) orphansOf(dep *Deployment) int {
	n := 0
	for _, r := range dg.orphans {
		if dg.c.deps[dg.c.reps[r.PD.PReplica].Deployment] == dep {
			n++
		}
	}
	return n
}

// adoptOrphans gives the hand-offs that waited for a decode replica of
// dep one, now that its decode pool serves again.
func (dg *disagg) adoptOrphans(dep *Deployment) {
	c := dg.c
	k := 0
	for _, r := range dg.orphans {
		if c.deps[c.reps[r.PD.PReplica].Deployment] != dep || c.err != nil {
			dg.orphans[k] = r
			k++
			continue
		}
		dg.pickDecode(r, dep)
		if r.PD.DReplica < 0 {
			dg.orphans[k] = r
			k++
			continue
		}
		dg.toDecode(r, dep)
	}
	clear(dg.orphans[k:])
	dg.orphans = dg.orphans[:k]
}

// dropTransfer ends the transfer side of a P/D request that leaves early
// (timed out while prefilling with decode blocks asked for, or while its
// pipelined KV still arrives; dropped by an immediate drain of its decode
// replica) or that finished; a completed request must not free its source
// before the last byte left.
func (dg *disagg) dropTransfer(r *request.State) {
	c := dg.c
	if r.PrefillOnly {
		dg.unreserve(r)
		return
	}
	dg.dropFlows(r)
	if r.PD.XferKV.Blocks() > 0 {
		if c.checks && r.Status == row.StatusCompleted && c.now < r.PD.XferEnd {
			c.fail(fmt.Errorf("invariant violated: request %s finished at %d, before the last byte of its KV left its prefill replica (%d)", r.Req.ID, c.now, r.PD.XferEnd))
		}
		dg.releaseSource(r, c.reps[r.PD.PReplica])
	}
}

// unreserve gives back the decode blocks a request still prefilling
// reserved (or asked for); what it sent so far is sent again.
func (dg *disagg) unreserve(r *request.State) {
	c := dg.c
	if !r.PD.XferQueued {
		return
	}
	d := c.reps[r.PD.DReplica]
	c.cut(d)
	dg.dropFlows(r)
	if r.PD.XferKV.Blocks() > 0 {
		d.Sched.KV().Release(&r.PD.XferKV)
	} else {
		dg.unqueue(r, d)
	}
	r.PD.XferQueued, r.PD.XferTok = false, 0
	c.markDirty(d.Index)
	dg.admitIncoming(d)
	dg.kick(d)
}

// unqueue takes r out of decode replica d's incoming queue.
func (dg *disagg) unqueue(r *request.State, d *replica.Replica) {
	q := dg.incoming[d.Index]
	for i, x := range q {
		if x == r {
			copy(q[i:], q[i+1:])
			q[len(q)-1] = nil
			dg.incoming[d.Index] = q[:len(q)-1]
			return
		}
	}
}

// cancelTransfer drops a request whose client gave up during its hand-off.
func (dg *disagg) cancelTransfer(r *request.State) {
	c := dg.c
	if r.PD.DReplica < 0 {
		// Waiting for a decode replica to serve.
		dg.orphans = slices.DeleteFunc(dg.orphans, func(x *request.State) bool { return x == r })
		dg.releaseSource(r, c.reps[r.PD.PReplica])
		return
	}
	d := c.reps[r.PD.DReplica]
	c.cut(d)
	dg.dropFlows(r)
	if r.KV.Blocks() > 0 {
		d.Sched.KV().Release(&r.KV) // reserved, in flight
	} else {
		dg.unqueue(r, d)
	}
	dg.releaseSource(r, c.reps[r.PD.PReplica])
	dg.admitIncoming(d)
	dg.kick(d)
}

// pdResult fills a P/D request's result columns.
func (dg *disagg) pdResult(r *request.State, res *row.Result) {
	c := dg.c
	res.PrefillReplica = c.reps[r.PD.PReplica].ID
	if r.PD.DReplica >= 0 {
		res.DecodeReplica = c.reps[r.PD.DReplica].ID
	}
	if r.PD.XferDone != row.Null && r.PD.XferDone <= c.now {
		res.KVTransferUS = r.PD.XferDone - r.PD.XferStart
		res.KVTransferWaitUS = r.PD.XferWaitUS
	}
	res.KVTransferBytes = r.PD.XferBytes
}

// traceTransfer records a KV transfer as a kv_transfer decision, and a
// request that waited for the decode replica's blocks as a pd_backpressure
// anomaly (decision traces only).
func (dg *disagg) traceTransfer(r *request.State, p, d *replica.Replica, blocks int32) {
	c := dg.c
	reason := fmt.Sprintf("%d bytes; sent at %d µs, in place at %d µs", r.PD.XferBytes, r.PD.XferSendAt, r.PD.XferDone)
	if r.PD.XferReady < r.PD.XferDone {
		reason += fmt.Sprintf("; pipelined: decode may start at %d µs", r.PD.XferReady)
	}
	wait := r.PD.XferBP // waiting for d's blocks
	if wait > 0 {
		reason += fmt.Sprintf("; waited %d µs for the decode replica's KV blocks", wait)
	}
	c.TraceKVTransfer(r, p.ID, d.ID, int64(blocks), reason)
	if wait <= 0 {
		return
	}
	sev := "low"
	switch {
	case wait >= 1e6:
		sev = "high"
	case wait >= 100e3:
		sev = "medium"
	}
	c.ReportAnomaly(&row.Anomaly{Type: row.AnomalyPDBackpressure, TimeUS: r.PD.XferRes - wait, EndUS: r.PD.XferRes, Severity: sev,
		Magnitude: float64(wait), ReplicaID: d.ID, Requests: []string{r.Req.ID},
		Description: fmt.Sprintf("%s waited %d µs after its prefill on %s for %d KV blocks on decode replica %s", r.Req.ID, wait, p.ID, blocks, d.ID)})
}

// imageEncodeUS is the vision encoder's time per image on rep: its pool's
// latency.image_encode_us (or the deployment's); 0 on every replica but
// the encode pool's when the deployment has one (they receive embeddings).
func (d *Deployment) imageEncodeUS(rep *replica.Replica, cfg *config.Deployment) float64 {
	p := d.poolOf(rep.Index)
	us := cfg.Latency.ImageEncodeUS
	if p != nil && p.cfg.Latency != nil {
		us = p.cfg.Latency.ImageEncodeUS
	}
	if cfg.HasEncode() && (p == nil || p.role != replica.Encode) {
		return 0
	}
	return us
}

// rebind frees the requests bound to decode replica rep (draining with
// redirect) that have not been handed off yet: they choose a decode
// replica again at their hand-off; a reservation made for them is given
// back (what was sent is sent again).
func (dg *disagg) rebind(rep *replica.Replica) {
	c := dg.c
	for _, r := range dg.boundTo(rep) {
		if r.Phase == request.Transfer {
			continue // handed off: it finishes on rep
		}
		if r.PrefillOnly {
			dg.unreserve(r)
		}
		dg.unbind(r)
		r.PD.DReplica = -1
		if r.Replica >= 0 { // a request being routed again is on no replica yet
			c.markDirty(r.Replica)
		}
	}
}

// evict takes rep's part in hand-offs away as it is killed (drain
// immediate, or a drain's timeout): a hand-off in transfer to or from it is
// dropped (counted with the drain's drops); a request still prefilling for
// a decode replica rep chooses another at its hand-off; a pipelined request
// already decoding elsewhere keeps what has arrived (its source blocks are
// freed now: the rest was on the wire).
func (dg *disagg) evict(rep *replica.Replica, reason string) {
	c := dg.c
	// rep is idle and about to stop (the scaler keeps it quiet meanwhile):
	// its blocks are freed with its store.
	drop := func(r *request.State) {
		p := c.reps[r.PD.PReplica]
		dg.dropFlows(r)
		if r.PD.DReplica < 0 {
			dg.orphans = slices.DeleteFunc(dg.orphans, func(x *request.State) bool { return x == r })
		} else {
			d := c.reps[r.PD.DReplica]
			if r.KV.Blocks() > 0 {
				d.Sched.KV().Release(&r.KV)
			} else {
				dg.unqueue(r, d)
			}
			if d != rep {
				dg.admitIncoming(d)
			}
			dg.kick(d)
		}
		dg.freeSource(r, p)
		dg.kick(p)
		r.Status, r.Reason, r.Finished = row.StatusDropped, reason, c.now
		c.sum.DrainDropped++
		c.terminal(r)
	}
	if rep.Role == replica.Decode {
		for _, r := range dg.boundTo(rep) {
			switch {
			case r.Phase == request.Transfer:
				drop(r)
			case r.Replica != rep.Index:
				if r.PrefillOnly {
					dg.unreserve(r)
				}
				dg.unbind(r)
				r.PD.DReplica = -1
			}
		}
		return
	}
	var srcs []*request.State
	for r := c.liveH; r != nil; r = r.LNext {
		if r.IsPD() && r.PD.PReplica == rep.Index && r.PD.XferKV.Blocks() > 0 && (r.Phase == request.Transfer || r.Replica != rep.Index) {
			srcs = append(srcs, r)
		}
	}
	for _, r := range srcs {
		if r.Phase == request.Transfer {
			drop(r)
			continue
		}
		dg.dropFlows(r)
		dg.freeSource(r, rep)
	}
}

// boundTo lists the live requests bound to decode replica rep.
func (dg *disagg) boundTo(rep *replica.Replica) []*request.State {
	c := dg.c
	var out []*request.State
	if dg.bound[rep.Index] == 0 {
		return nil
	}
	for r := c.liveH; r != nil; r = r.LNext {
		if r.PD != nil && r.PD.Bound && r.PD.DReplica == rep.Index {
			out = append(out, r)
		}
	}
	return out
}
