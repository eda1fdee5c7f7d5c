package cluster

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/latency"
)

// encState is a deployment's encode pool (E/P/D, as vLLM's disaggregated
// encoder and NVIDIA Dynamo's multimodal encode workers run it): a request
// with images is encoded on an encode replica, its image embeddings are
// sent to the replica that prefills it, and only then is it routed there.
//
// An encode replica is a FIFO server: a request's images take
// latency.ImageEncodeUS(image_encode_us, images) once the replica is free
// (the encoder's cost is linear in images, so batching them would change
// only which request waits); the embeddings, images × tokens_per_image ×
// bytes_per_token bytes, then leave on the replica's outgoing link, FIFO,
// and arrive latency later. Both are known when the request is sent, so a
// request costs one event (evEncodeDone) at the embeddings' arrival.
type encState struct {
	group      *group // the encode replicas' candidate group (its own board)
	route      policy.Routing
	usPerImage float64
	// embedding bytes per image, the link's bytes per µs and latency
	bytesPerImage, bytesPerUS float64
	latencyUS                 int64
	// per encode replica (a position in group.members): busy until, its
	// link busy until, and the requests encoding or sending there in order
	free, linkFree []int64
	queue          [][]encItem
}

type encItem struct {
	r    *request.State
	life uint32
	at   int64 // when its embeddings are in place
}

func newEnc(cfg *config.Cluster, i int, d *config.Deployment, dep *Deployment) (*encState, error) {
	e := d.Encode
	if e == nil {
		return nil, fmt.Errorf("%s: an encode pool needs an encode section", cfg.DeploymentKey(i, "encode"))
	}
	en := &encState{bytesPerImage: float64(e.TokensPerImage) * e.BytesPerToken, latencyUS: int64(e.Latency.US())}
	for i := range dep.pools {
		if p := &dep.pools[i]; p.role == replica.Encode {
			en.bytesPerUS = p.linkBytesUS
			if e.BandwidthGBs != nil {
				en.bytesPerUS = *e.BandwidthGBs * 1e3
			}
			en.usPerImage = d.Latency.ImageEncodeUS
			if l := p.cfg.Latency; l != nil { // a pool's section replaces the deployment's
				en.usPerImage = l.ImageEncodeUS
			}
		}
	}
	if !(en.bytesPerUS > 0) {
		return nil, fmt.Errorf("%s: the embeddings' bandwidth is unset (engine.Prepare fills it)", cfg.DeploymentKey(i, "encode.bandwidth_gb_s"))
	}
	return en, nil
}

// initEnc sizes the per-replica state once the encode group is built.
func (en *encState) initEnc() {
	n := len(en.group.members)
	en.free, en.linkFree, en.queue = make([]int64, n), make([]int64, n), make([][]encItem, n)
}

// needsEncode reports whether r must be encoded before its prefill: it has
// images, its deployment has an encode pool, and it was not encoded yet.
func needsEncode(g *group, r *request.State) bool {
	return g.enc != nil && r.Req.NumImages > 0 && !r.Encoded
}

// encode sends r, admitted and prioritised, to an encode replica of g's
// deployment chosen by the routing policy over the encode pool.
func (c *Cluster) encode(r *request.State, g *group) {
	dep := g.enc
	en := dep.enc
	eg := en.group
	if c.liveView {
		c.refreshDirty()
	}
	c.cur, c.curG = r, eg
	dec := c.opts.Decisions
	view := eg.board.View(c.now, c.oracleFor(eg), dec != nil)
	rd := en.route.Route(policy.NewRequestView(&r.Req, c.now, c.pbFn), view)
	if c.opts.Policies.Err != nil && c.policyFailed() {
		return
	}
	if rd.Wait {
		c.holdNowhere(r, rd, "in the encode pool of "+dep.ID)
		return
	}
	if rd.Target < 0 || rd.Target >= len(eg.members) {
		c.fail(fmt.Errorf("routing policy %s returned encode candidate %d of %d", c.routingName, rd.Target, len(eg.members)))
		return
	}
	k := rd.Target
	rep := c.reps[eg.members[k]]
	images := int(r.Req.NumImages)
	start := max(c.now, en.free[k])
	done := start + latency.ImageEncodeUS(en.usPerImage, images)
	bytes := float64(images) * en.bytesPerImage
	send := max(done, en.linkFree[k])
	wire := int64(math.Ceil(bytes / en.bytesPerUS))
	en.free[k], en.linkFree[k] = done, send+wire
	at := send + wire + en.latencyUS
	if dec != nil {
		dec.Disagg(c.now, r, decisionEncode, view, k, "route", fmt.Sprintf("%s; %d image(s) encoded [%d, %d), %.0f bytes of embeddings in place at %d", rd.Reason, images, start, done, bytes, at), int64(images))
	}
	r.Phase = request.Arriving
	rep.InFlight++
	c.markDirty(rep.Index)
	en.queue[k] = append(en.queue[k], encItem{r, r.Life, at})
	c.sum.Encodes++
	c.sum.EncodeBytes += int64(math.Ceil(bytes))
	c.sum.EncodeUS += at - c.now
	c.h.push(at, evEncodeDone, rep.Index, nil)
}

// encodeDone is the embeddings of the oldest request of encode replica
// inst arriving: it goes on to the decider and routing, as it would have
// at its arrival, unless it left meanwhile (its client timed out).
func (c *Cluster) encodeDone(inst int32) {
	rep := c.reps[inst]
	dep := c.deps[rep.Deployment]
	en := dep.enc
	k := int(c.gpos[inst])
	it := en.queue[k][0]
	en.queue[k][0] = encItem{}
	en.queue[k] = en.queue[k][1:]
	rep.InFlight--
	c.markDirty(inst)
	r := it.r
	if c.checks && it.at != c.now {
		// Causality: a request is routed exactly when its embeddings are
		// in place, and an encoder's requests leave in order.
		c.fail(fmt.Errorf("invariant violated: encode replica %s released %s at %d µs, its embeddings in place at %d", rep.ID, r.Req.ID, c.now, it.at))
		return
	}
	if r.Life != it.life || r.Phase == request.Done {
		return
	}
	r.Encoded = true
	g := dep.group
	if c.sc != nil && !c.sc.canServe(g) {
		c.sc.hold(g, r) // no replica serving: wait at the router (scale.go)
		return
	}
	if g.sel != nil && c.pd.decide(r, g.sel, g) {
		return
	}
	if c.liveView {
		c.refreshDirty()
	}
	c.cur, c.curG = r, g
	view := g.board.View(c.now, c.oracleFor(g), c.opts.Decisions != nil)
	c.route(r, g, policy.NewRequestView(&r.Req, c.now, c.pbFn), view)
}

// clone copies the encode state for a cloned cluster (m maps requests).
func (en *encState) clone(m *request.Clone) *encState {
	x := *en
	x.route = policy.Clone(en.route)
	x.free, x.linkFree = append([]int64(nil), en.free...), append([]int64(nil), en.linkFree...)
	x.queue = make([][]encItem, len(en.queue))
	for k, q := range en.queue {
		for _, it := range q {
			x.queue[k] = append(x.queue[k], encItem{m.Map(it.r), it.life, it.at})
		}
	}
	return &x
}
