package cluster

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/request"
)

// Fair link sharing (kv_transfer.sharing: fair). Every transfer in progress
// is a flow from its sender's outgoing link to its receiver's incoming
// link (each replica's NIC, full duplex, at its pool's bandwidth), and the
// flows in progress share the links max-min fairly, as concurrent RDMA
// transfers share NICs: each flow gets the largest rate such that no link
// is over its capacity and no flow could go faster without slowing one
// that is no faster (progressive filling). Rates change only when a flow
// starts or ends; between those instants every flow sends at its rate,
// and one event at the earliest end brings the next change.

// flow is one transfer in progress.
type flow struct {
	r        *request.State
	life     uint32  // r's Life when the flow started (a reused State is not this flow's)
	left     float64 // bytes not yet sent
	rate     float64 // bytes per µs, from the last filling
	src, dst int32   // link indices: 2 × replica for its outgoing link, 2 × replica + 1 for its incoming
	frozen   bool    // scratch of the filling
}

// links is the state of fair sharing.
type links struct {
	cap   []float64 // per link: bytes per µs
	flows []flow
	at    int64  // time the flows' bytes were last advanced to
	gen   uint32 // the pending link event's generation (older ones are stale)
	// scratch of the filling
	left []float64
	n    []int32
}

func newLinks(c *Cluster) *links {
	l := &links{cap: make([]float64, 2*len(c.reps))}
	for _, d := range c.deps {
		for i := range d.pools {
			p := &d.pools[i]
			bw := p.linkBytesUS
			if bw <= 0 && d.pd != nil {
				bw = d.pd.bytesUS // a config built without engine.Prepare: the deployment's
			}
			for m := p.first; m < p.first+p.n; m++ {
				l.cap[2*m], l.cap[2*m+1] = bw, bw
			}
		}
	}
	return l
}

func (l *links) clone(m *request.Clone) *links {
	x := &links{cap: l.cap, flows: append([]flow(nil), l.flows...), at: l.at, gen: l.gen}
	for i := range x.flows {
		x.flows[i].r = m.Map(x.flows[i].r)
	}
	return x
}

// startFlow puts bytes of r's KV (or embeddings) on the links from replica
// src to replica dst at now.
func (dg *disagg) startFlow(r *request.State, bytes int64, src, dst int32) {
	c := dg.c
	l := dg.links
	dg.advance()
	l.flows = append(l.flows, flow{r: r, life: r.Life, left: float64(bytes), src: 2 * src, dst: 2*dst + 1})
	r.PD.Flows++
	r.PD.XferSendAt = c.now
	dg.refill()
}

// flowsDone handles a request whose flows have all ended: a KV transfer
// whose whole prompt was on the links is in place latency later.
func (dg *disagg) flowsDone(r *request.State) {
	c := dg.c
	r.PD.XferEnd = c.now
	if !r.PD.XferLast {
		return // chunks sent during the prefill; the rest follows at its hand-off
	}
	dep := c.deps[c.reps[r.PD.PReplica].Deployment]
	dg.transferEnds(r, dep, c.reps[r.PD.DReplica])
}

// dropFlows ends r's flows (a cancelled or restarted transfer).
func (dg *disagg) dropFlows(r *request.State) {
	l := dg.links
	if l == nil || r.PD == nil || r.PD.Flows == 0 {
		return
	}
	dg.advance()
	k := 0
	for _, f := range l.flows {
		if f.r != r || f.life != r.Life {
			l.flows[k] = f
			k++
		}
	}
	clear(l.flows[k:])
	l.flows = l.flows[:k]
	r.PD.Flows = 0
	dg.refill()
}

// advance sends every flow's bytes from the last change to now.
func (dg *disagg) advance() {
	c := dg.c
	l := dg.links
	if dt := float64(c.now - l.at); dt > 0 {
		for i := range l.flows {
			l.flows[i].left -= l.flows[i].rate * dt
		}
	}
	l.at = c.now
}

// refill gives the flows their max-min fair rates and schedules the next
// end. Progressive filling: the link with the smallest fair share
// (remaining capacity / flows not yet fixed) fixes its flows at that
// share; their rate is taken from their other link; repeat.
func (dg *disagg) refill() {
	c := dg.c
	l := dg.links
	if len(l.flows) == 0 {
		l.gen++ // no event pending
		return
	}
	if l.left == nil {
		l.left, l.n = make([]float64, len(l.cap)), make([]int32, len(l.cap))
	}
	for i := range l.flows {
		f := &l.flows[i]
		f.frozen = false
		l.left[f.src], l.left[f.dst] = l.cap[f.src], l.cap[f.dst]
		l.n[f.src], l.n[f.dst] = 0, 0
	}
	for i := range l.flows {
		l.n[l.flows[i].src]++
		l.n[l.flows[i].dst]++
	}
	for fixed := 0; fixed < len(l.flows); {
		// The bottleneck: the smallest share among links with unfixed flows
		// (the lowest link index among equals: deterministic).
		best, share := int32(-1), math.Inf(1)
		for i := range l.flows {
			f := &l.flows[i]
			if f.frozen {
				continue
			}
			for _, k := range [2]int32{f.src, f.dst} {
				if s := l.left[k] / float64(l.n[k]); s < share || s == share && k < best {
					best, share = k, s
				}
			}
		}
		for i := range l.flows {
			f := &l.flows[i]
			if f.frozen || (f.src != best && f.dst != best) {
				continue
			}
			f.rate, f.frozen = share, true
			fixed++
			for _, k := range [2]int32{f.src, f.dst} {
				l.left[k] -= share
				l.n[k]--
			}
		}
	}
	next := int64(math.MaxInt64)
	for i := range l.flows {
		f := &l.flows[i]
		next = min(next, c.now+max(1, int64(math.Ceil(f.left/f.rate-1e-9))))
	}
	if c.checks {
		dg.checkLinks()
	}
	l.gen++
	c.h.pushGen(next, evXferDone, -1, l.gen)
}

// linkEvent ends the flows whose bytes are all sent by now.
func (dg *disagg) linkEvent(gen uint32) {
	l := dg.links
	if gen != l.gen {
		return // rates changed since it was scheduled
	}
	dg.advance()
	k := 0
	var done []*request.State
	for _, f := range l.flows {
		if f.left <= 1e-6*max(1, f.rate) {
			if f.r.Life == f.life {
				f.r.PD.Flows--
				done = append(done, f.r)
			}
			continue
		}
		l.flows[k] = f
		k++
	}
	clear(l.flows[k:])
	l.flows = l.flows[:k]
	dg.refill()
	for _, r := range done {
		if r.PD.Flows == 0 {
			dg.flowsDone(r)
		}
	}
}

// checkLinks asserts that no link carries more than its capacity and that
// every flow moves.
func (dg *disagg) checkLinks() {
	c := dg.c
	l := dg.links
	use := l.left // scratch: the filling is done with it
	for _, f := range l.flows {
		use[f.src], use[f.dst] = 0, 0
	}
	for _, f := range l.flows {
		if !(f.rate > 0) {
			c.fail(fmt.Errorf("invariant violated: request %s's transfer has rate %g", f.r.Req.ID, f.rate))
			return
		}
		use[f.src] += f.rate
		use[f.dst] += f.rate
	}
	for _, f := range l.flows {
		for _, k := range [2]int32{f.src, f.dst} {
			if use[k] > l.cap[k]*(1+1e-9) {
				c.fail(fmt.Errorf("invariant violated: link %d of replica %s carries %g bytes/µs, over its %g", k%2, c.reps[k/2].ID, use[k], l.cap[k]))
				return
			}
		}
	}
}
