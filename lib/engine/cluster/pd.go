package cluster

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/trace"
)

// pdState is a disaggregated deployment's KV transfer: a request prefills
// on a replica of its prefill pool, its KV moves over the prefill
// replica's outgoing link, and it decodes on a replica of its decode pool.
type pdState struct {
	bytesUS       float64 // link bandwidth, bytes per µs
	latUS         int64
	maxQueue      int32
	decodeFirst   bool
	bytesPerToken float64
	decode        *group // the decode pool's candidates
	// route chooses the decode replica: a copy of the routing policy made
	// at the start, so that a stateful policy (round-robin's turn, random's
	// stream) keeps one state per pool instead of alternating between them.
	route policy.Routing
}

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
	if x == nil || x.BandwidthGBs == nil || d.KV == nil || d.KV.BytesPerToken <= 0 {
		return nil, fmt.Errorf("%s: the KV transfer's bandwidth and the KV bytes per token are unset (engine.Prepare fills them)", cfg.DeploymentKey(i, "kv_transfer"))
	}
	return &pdState{bytesUS: *x.BandwidthGBs * 1e3, latUS: x.Latency.US(), maxQueue: int32(x.MaxQueue),
		decodeFirst: x.Routing == "decode-first", bytesPerToken: d.KV.BytesPerToken}, nil
}

// pickDecode runs the routing policy over the decode pool of r's
// deployment: the same Routing stage as for prefill, given a view of the
// decode candidates (their roles say which pool a policy is choosing in).
func (c *Cluster) pickDecode(r *request.State, dep *Deployment) {
	g := dep.pd.decode
	if c.liveView {
		c.refreshDirty()
	}
	c.cur, c.curG = r, g
	view := g.board.View(c.now, c.oracleFor(g), false)
	rv := policy.NewRequestView(&r.Req, c.now, c.pbFn)
	rd := dep.pd.route.Route(rv, view)
	if c.opts.PolicyErr != nil && c.policyFailed() {
		return
	}
	if rd.Target < 0 || rd.Target >= len(g.members) {
		c.fail(fmt.Errorf("routing policy %s returned decode candidate %d of %d", c.cfg.Router.Routing, rd.Target, len(g.members)))
		return
	}
	r.DReplica = g.members[rd.Target]
}

// handoff takes a request whose prefill ended on p: its blocks there stay
// held (XferKV) until its KV has reached the decode replica, which must
// first reserve blocks for it (vLLM's decode side allocates them when the
// transfer starts; until it can, the request waits: backpressure).
func (c *Cluster) handoff(r *request.State, p *replica.Replica) {
	dep := c.deps[p.Deployment]
	r.XferKV, r.KV = r.KV, r.XferKV
	r.KV.IDs, r.KV.Anon = r.KV.IDs[:0], 0
	r.NReg, r.Chunk = 0, 0
	r.Failed = false // its failed-admission marks were about the prefill replica's store
	r.XferStart = c.now
	c.outQ[p.Index]++
	if c.outQ[p.Index] >= dep.pd.maxQueue {
		p.Sched.Hold(true)
	}
	if r.DReplica < 0 {
		c.pickDecode(r, dep)
		if r.DReplica < 0 {
			return // c.err
		}
	}
	r.Replica = r.DReplica
	c.incoming[r.DReplica] = append(c.incoming[r.DReplica], r)
	c.admitIncoming(c.reps[r.DReplica])
}

// admitIncoming starts the transfers decode replica d can now reserve
// blocks for, first come first served.
func (c *Cluster) admitIncoming(d *replica.Replica) {
	q := c.incoming[d.Index]
	if len(q) == 0 {
		return
	}
	store := d.Sched.KV()
	dep := c.deps[d.Deployment]
	B := store.BlockSize()
	k := 0
	for ; k < len(q); k++ {
		r := q[k]
		need := (r.Req.InputTokens + B - 1) / B
		if store.Free() < need {
			break
		}
		if c.now > r.XferStart {
			c.sum.PDBackpressure++ // waited for the decode replica's blocks
		}
		dep.keys.Ensure(r)
		store.Alloc(&r.KV, need, r.IDBlocks(need))
		p := r.PReplica
		bytes := int64(math.Ceil(float64(r.Req.InputTokens) * dep.pd.bytesPerToken))
		send := int64(math.Ceil(float64(bytes) / dep.pd.bytesUS))
		start := max(c.now, c.linkFree[p])
		c.linkFree[p] = start + send
		r.XferBytes = bytes
		r.XferWaitUS = start - r.XferStart
		r.XferDone = start + send + dep.pd.latUS
		c.sum.Transfers++
		c.sum.TransferBytes += bytes
		c.h.push(r.XferDone, evXferDone, d.Index, r)
		if c.opts.Decisions != nil {
			c.traceTransfer(r, c.reps[p], d, need)
		}
	}
	n := copy(q, q[k:])
	clear(q[n:])
	c.incoming[d.Index] = q[:n]
	c.markDirty(d.Index)
}

// xferDone ends r's KV transfer: the prefill replica frees its blocks (one
// owner at a time) and the request joins the decode replica's queue with
// all but its last prompt token in KV: the decode replica computes that
// token and samples the first output token, as vLLM's P/D connectors do
// (the prefill replica's sampled token is dropped, so no token is counted
// twice).
func (c *Cluster) xferDone(r *request.State) {
	p := c.reps[r.PReplica]
	d := c.reps[r.DReplica]
	if c.checks && (r.XferKV.Blocks() == 0 || r.KV.Blocks() == 0) {
		c.fail(fmt.Errorf("invariant violated: request %s transfer ended with %d source and %d destination blocks", r.Req.ID, r.XferKV.Blocks(), r.KV.Blocks()))
	}
	c.releaseSource(r, p)
	r.Computed = r.Req.InputTokens - 1
	d.Sched.Resume(r)
	c.markDirty(d.Index)
	c.kick(d)
}

// releaseSource frees r's blocks on its prefill replica p and lets p take
// new prefills again once its outgoing queue is short.
func (c *Cluster) releaseSource(r *request.State, p *replica.Replica) {
	p.Sched.KV().Release(&r.XferKV)
	c.outQ[p.Index]--
	if c.outQ[p.Index] < c.deps[p.Deployment].pd.maxQueue {
		p.Sched.Hold(false)
	}
	c.markDirty(p.Index)
	c.kick(p)
}

// cancelTransfer drops a request whose client gave up during its hand-off.
func (c *Cluster) cancelTransfer(r *request.State) {
	d := c.reps[r.DReplica]
	if r.KV.Blocks() > 0 {
		d.Sched.KV().Release(&r.KV) // reserved, in flight
	} else {
		q := c.incoming[d.Index]
		for i, x := range q {
			if x == r {
				copy(q[i:], q[i+1:])
				q[len(q)-1] = nil
				c.incoming[d.Index] = q[:len(q)-1]
				break
			}
		}
	}
	c.releaseSource(r, c.reps[r.PReplica])
	c.admitIncoming(d)
	c.kick(d)
}

// pdResult fills a P/D request's result columns.
func (c *Cluster) pdResult(r *request.State, res *trace.Result) {
	res.PrefillReplica = c.reps[r.PReplica].ID
	if r.DReplica >= 0 {
		res.DecodeReplica = c.reps[r.DReplica].ID
	}
	if r.XferDone != trace.Null && r.XferDone <= c.now {
		res.KVTransferUS = r.XferDone - r.XferStart
		res.KVTransferWaitUS = r.XferWaitUS
	}
	res.KVTransferBytes = r.XferBytes
}

// armWake schedules a wake-up for an idle replica whose KV loads from a
// lower tier are in progress: nothing else would start its next step.
func (c *Cluster) armWake(rep *replica.Replica) {
	if c.wakeAt == nil || rep.Busy() || rep.StartPending() {
		return
	}
	t := rep.Sched.WakeAt()
	if t == trace.Null || t == c.wakeAt[rep.Index] {
		return
	}
	// A load that ended during the step just finished wakes it now.
	t = max(t, c.now)
	c.wakeAt[rep.Index] = t
	c.h.push(t, evWake, rep.Index, nil)
}

// wake handles an idle replica's load ending.
func (c *Cluster) wake(rep *replica.Replica) {
	if c.wakeAt[rep.Index] == c.now {
		c.wakeAt[rep.Index] = trace.Null
	}
	rep.Sched.Wake(c.now)
	c.markDirty(rep.Index)
	c.kick(rep)
	c.armWake(rep)
}

// traceTransfer records a KV transfer as a kv_transfer decision, and a
// request that waited for the decode replica's blocks as a pd_backpressure
// anomaly (decision traces only).
func (c *Cluster) traceTransfer(r *request.State, p, d *replica.Replica, blocks int32) {
	reason := fmt.Sprintf("%d bytes; sent at %d µs, in place at %d µs", r.XferBytes, r.XferStart+r.XferWaitUS, r.XferDone)
	wait := c.now - r.XferStart // waiting for d's blocks
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
	c.ReportAnomaly(&trace.Anomaly{Type: trace.AnomalyPDBackpressure, TimeUS: r.XferStart, EndUS: c.now, Severity: sev,
		Magnitude: float64(wait), ReplicaID: d.ID, Requests: []string{r.Req.ID},
		Description: fmt.Sprintf("%s waited %d µs after its prefill on %s for %d KV blocks on decode replica %s", r.Req.ID, wait, p.ID, blocks, d.ID)})
}
