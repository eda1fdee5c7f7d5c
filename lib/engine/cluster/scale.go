package cluster

import (
	"fmt"
	"math"
	"slices"

	"github.com/blis-sim/blis/lib/engine/autoscale"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/kv"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/replica"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/rng"
)

// Autoscaling (docs/engine.md, "Autoscaling"). An autoscaled pool keeps
// config.ScaleSlots replicas, most of them stopped; the autoscaler starts
// stopped ones (provisioning → loading weights → warming → serving) and
// drains serving ones (draining → stopped). A group with an autoscaled
// pool has a dynamic board: routing sees only its serving and warming
// replicas, and the board is rebuilt when that set changes (rare: scale
// events). The global prefix index keeps fixed slot positions; g.slotOf
// maps board positions to them. Without an autoscaler (and without
// Options.ScaleEvents) none of this exists: c.sc is nil.

// scaler is the cluster's autoscaling part: its state, and the methods
// that drive replicas' lifecycles and the pools' autoscalers.
type scaler struct {
	c         *Cluster
	pools     []*spool
	poolOf    []int32  // replica index -> pool, -1 for replicas of no autoscaled pool
	gen       []uint32 // replica index -> lifecycle generation (stale lifecycle events)
	killEnd   []bool   // replica index -> drained immediately when its step ends
	sampleUS  int64    // metric sampling period (smallest of the pools')
	ticking   bool
	policy    func(deployment string, pool int) autoscale.Policy
	rows      []row.ScaleEvent
	views     []autoscale.PoolView
	lat, lat2 []int64 // scratch for percentiles
	due       []int   // pools to evaluate at this tick
	noCount   bool    // an arrival being replayed (held, redirected): not a new request
	// counts of the schedulers replaced when replicas stopped
	preempts, evicts  int64
	tierOff, tierLoad []int64 // lower-tier counts of replaced schedulers, by the run's tier index
	thrash            int64
	lastReal          int64 // time of the last event that was not an autoscaler tick or a stale timer
}

// spool is one pool's autoscaling state.
type spool struct {
	dep    *Deployment
	depIdx int32
	idx    int
	role   replica.Role
	cfg    *config.Autoscaler // nil: a static pool (scale-events rows only)
	min    int
	max    int
	slots  []int32 // replica indices
	g      *group
	scfg   sched.Config
	engine config.Engine // its replicas' (a restarted one gets a fresh store of its size)
	perf   *poolPerf     // its engine as a performance model (the planner's profile)
	ctrl   *autoscale.Controller
	delay  *autoscale.Delay
	loadUS int64
	tp     int32
	price  float64

	nextEval   int64
	lastAction int64
	// acts are the pool's scale actions, kept only when decisions are
	// traced: scale_oscillation anomalies are found in them at the end.
	acts    []autoscale.Action
	trigger string // the trigger that fired at this tick ("" for the interval)
	// metrics: a ring of per-sample buckets covering the window
	ring     []bucket
	head     int // next bucket to write
	filled   int
	cur      bucket // events since the last sample
	lastTick int64
	lastBusy []int64 // per slot: BusyUS at the last sample
	// billing
	billed   int   // replicas not stopped
	billedAt int64 // when billed last changed
	gpuUS    float64
}

// bucket is one sampling period of a pool.
type bucket struct {
	dur                       int64
	queue, running, kv, ready float64 // sums over ready replicas at the sample
	busy, readyUS             int64
	arrivals, finished, met   int
	ttft, e2e                 []int64
	// for the planner: the arrivals' prompt and output tokens; the
	// completed requests' Σ TTFT, Σ TPOT (over those with one), Σ E2E
	inTok, outTok           int64
	ttftSum, itlSum, e2eSum float64
	itlN                    int
}

// scaleOn reports whether cfg or opts need the scaler.
func scaleOn(cfg []config.Deployment, opts *Options) bool {
	if opts.ScaleEvents || opts.ScaleEventsTo != nil {
		return true
	}
	for _, d := range cfg {
		for _, p := range d.Pools {
			if p.Autoscaler != nil {
				return true
			}
		}
	}
	return false
}

// poolSlots is the number of replicas New creates for a pool.
func poolSlots(p *config.Pool) int {
	if p.Autoscaler == nil {
		return p.Replicas
	}
	return config.ScaleSlots(p)
}

// addPool registers deployment dep's pool pi (replicas first..first+n−1).
func (sc *scaler) addPool(dep *Deployment, depIdx int, d *config.Deployment, pi int, first int32, scfg sched.Config) error {
	c := sc.c
	s := c.sc
	p := &d.Pools[pi]
	n := int32(poolSlots(p))
	hw := d.ForPool(pi) // the pool's own GPU, TP and price, else the deployment's
	dp := &dep.pools[len(dep.pools)-1]
	role, _ := replica.ParseRole(p.Role)
	sp := &spool{dep: dep, depIdx: int32(depIdx), idx: pi, role: role, cfg: p.Autoscaler, scfg: scfg, tp: int32(hw.GPUsPerReplica()),
		price: hw.GPUHourUSD, engine: dp.engine, lastAction: math.MinInt64,
		perf: &poolPerf{m: dp.model, e: dp.engine}}
	sp.min, sp.max = p.Bounds()
	for k := int32(0); k < n; k++ {
		sp.slots = append(sp.slots, first+k)
	}
	sp.billed = p.Replicas
	if a := p.Autoscaler; a != nil {
		var pol autoscale.Policy
		if s.policy != nil {
			pol = s.policy(d.ID, pi)
		}
		if pol == nil {
			var err error
			if pol, err = autoscale.New(a); err != nil {
				return err
			}
		}
		sp.ctrl = autoscale.NewController(pol, a.Stabilization.Up.US(), a.Stabilization.Down.US())
		sp.delay = autoscale.NewDelay(a.Provisioning, rng.PCG(c.cfg.Seed, fmt.Sprintf("autoscale:provisioning:%s/%d", d.ID, pi)))
		sp.loadUS = a.WeightLoad.Time.US()
		if sp.loadUS == 0 && a.WeightLoad.Bytes > 0 {
			sp.loadUS = int64(math.Round(a.WeightLoad.Bytes / (a.WeightLoad.BandwidthGBs * 1e9) * 1e6))
		}
		sp.nextEval = a.Interval.US()
		if s.sampleUS == 0 || a.Sample.US() < s.sampleUS {
			s.sampleUS = a.Sample.US()
		}
		sp.lastBusy = make([]int64, n)
		for k := p.Replicas; k < int(n); k++ {
			c.reps[first+int32(k)].State = replica.Stopped
		}
	}
	s.pools = append(s.pools, sp)
	return nil
}

// initScale finishes the scaler once replicas and groups exist.
func (sc *scaler) initScale() {
	c := sc.c
	s := c.sc
	s.poolOf = make([]int32, len(c.reps))
	for i := range s.poolOf {
		s.poolOf[i] = -1
	}
	s.gen = make([]uint32, len(c.reps))
	s.killEnd = make([]bool, len(c.reps))
	for i, sp := range s.pools {
		sp.g = sp.group()
		if sp.cfg != nil {
			for _, m := range sp.slots {
				s.poolOf[m] = int32(i)
			}
			win := sp.cfg.Window.US()
			if win == 0 {
				win = sp.cfg.Interval.US()
			}
			sp.ring = make([]bucket, max(1, int((win+s.sampleUS-1)/s.sampleUS)))
		}
		sc.scaleRow(sp, row.ScaleEvent{Action: row.ScaleStart, Reason: "replicas at the start"})
	}
	if s.sampleUS > 0 {
		s.ticking = true
		c.h.push(s.sampleUS, evScale, 0, nil)
	}
}

// group is the candidate group whose board shows the pool's replicas: a
// decode pool's own (P/D), else its deployment's.
func (sp *spool) group() *group {
	if sp.role == replica.Decode {
		return sp.dep.pd.decode
	}
	return sp.dep.group
}

// dynamic reports whether g has an autoscaled pool.
func (sc *scaler) dynamic(g *group) bool {
	if sc == nil {
		return false
	}
	for _, sp := range sc.pools {
		if sp.cfg != nil && sp.group() == g {
			return true
		}
	}
	return false
}

// canServe reports whether a request for g can be routed now: some
// replica of g serves, and with P/D whose decode replica is chosen at
// arrival, some decode replica too. A selective deployment with no
// prefill replica serving keeps its requests local.
func (sc *scaler) canServe(g *group) bool {
	pd := g.deps[0].pd
	if pd == nil || !pd.decodeFirst && !pd.selective {
		return g.board.Len() > 0
	}
	return pd.decode.board.Len() > 0 && (g.board.Len() > 0 || pd.selective)
}

func routable(st replica.State) bool { return st == replica.Serving || st == replica.Warming }

// rebuildBoard makes g's board hold its routable replicas, in slot order.
func (sc *scaler) rebuildBoard(g *group) {
	c := sc.c
	ms := make([]int32, 0, len(g.all))
	slotOf := make([]int32, 0, len(g.all))
	if g.posOfSlot == nil {
		g.posOfSlot = make([]int32, len(g.all))
	}
	for j, m := range g.all {
		g.posOfSlot[j] = -1
		c.gpos[m] = -1
		if routable(c.reps[m].State) {
			ms = append(ms, m)
			slotOf = append(slotOf, int32(j))
		}
	}
	ids, deps, roles := make([]string, len(ms)), make([]string, len(ms)), make([]string, len(ms))
	for i, m := range ms {
		r := c.reps[m]
		ids[i], deps[i], roles[i] = r.ID, c.deps[r.Deployment].ID, r.Role.String()
		c.gpos[m] = int32(i)
		g.posOfSlot[slotOf[i]] = int32(i)
	}
	g.members, g.slotOf = ms, slotOf
	g.board = policy.NewBoard(ids, deps, roles, c.opts.RouterIndexes)
	c.watchBoard(g)
	for i, m := range ms {
		c.report(g.board, i, m)
		if c.reps[m].State == replica.Warming {
			g.board.SetState(i, "warming")
		}
		if c.isDirty[m] {
			c.isDirty[m] = false // refreshed now; left in c.dirty, it is skipped
		}
	}
	if len(ms) > 0 && len(g.held) > 0 {
		sc.releaseHeld(g)
	}
	if d := g.deps[0]; d.pd != nil && g == d.pd.decode && len(ms) > 0 {
		// A decode pool back from zero: the requests that waited for it.
		c.pd.adoptOrphans(d)
		if len(d.group.held) > 0 && sc.canServe(d.group) {
			sc.releaseHeld(d.group)
		}
	}
}

// heldReq is a request waiting at the router for a replica to serve it.
type heldReq struct {
	r    *request.State
	life uint32
}

// hold keeps r at the router: no replica of its group can serve.
func (sc *scaler) hold(g *group, r *request.State) {
	c := sc.c
	r.Phase = request.Arriving
	g.held = append(g.held, heldReq{r, r.Life})
	c.sum.HeldAtRouter++
}

// releaseHeld routes the requests held at g's router, in arrival order.
func (sc *scaler) releaseHeld(g *group) {
	c := sc.c
	hs := g.held
	g.held = nil
	c.sc.noCount = true
	for _, h := range hs {
		r := h.r
		if r.Life != h.life || r.Phase != request.Arriving {
			continue // timed out meanwhile
		}
		c.sum.HeldUS += c.now - r.Req.ArrivalUS
		c.arrive(r)
	}
	c.sc.noCount = false
}

// scaleArrival counts request r arriving for g's pools.
func (sc *scaler) scaleArrival(g *group, r *request.State) {
	c := sc.c
	if c.sc.noCount {
		return
	}
	for _, sp := range c.sc.pools {
		if sp.cfg != nil && sp.dep.group == g {
			sp.cur.arrivals++
			sp.cur.inTok += int64(r.Req.InputTokens)
			sp.cur.outTok += int64(r.Req.OutputTokens)
		}
	}
}

// scaleFinished records r's outcome for its replica's pool.
func (sc *scaler) scaleFinished(r *request.State) {
	c := sc.c
	if r.IsPD() && r.PD.PReplica != r.Replica {
		// Its prefill pool sees it too (its TTFT is the prefill's doing).
		sc.finishedOn(c.sc.poolOf[r.PD.PReplica], r)
	}
	sc.finishedOn(c.sc.poolOf[r.Replica], r)
}

// finishedOn records r's outcome for autoscaled pool p (-1: none).
func (sc *scaler) finishedOn(p int32, r *request.State) {
	c := sc.c
	if p < 0 || r.Req.Kind != row.KindLLM {
		return
	}
	sp := c.sc.pools[p]
	b := &sp.cur
	b.finished++
	if r.Status != row.StatusCompleted {
		return
	}
	ttft, e2e := r.FirstTok-r.Req.ArrivalUS, r.Finished-r.Req.ArrivalUS
	b.ttft = append(b.ttft, ttft)
	b.e2e = append(b.e2e, e2e)
	b.ttftSum += float64(ttft)
	b.e2eSum += float64(e2e)
	tpot := int64(0)
	if r.Generated > 1 {
		tpot = (r.Finished - r.FirstTok) / int64(r.Generated-1)
		b.itlSum += float64(tpot)
		b.itlN++
	}
	slo := &sp.cfg.SLO
	if (slo.TTFT == 0 || ttft <= slo.TTFT.US()) && (slo.E2E == 0 || e2e <= slo.E2E.US()) && (slo.ITL == 0 || tpot <= slo.ITL.US()) {
		b.met++
	}
}

// scaleEvent runs an autoscaling event.
func (sc *scaler) scaleEvent(ev *event) {
	if ev.kind() == evScale {
		sc.scaleTick()
		return
	}
	sc.lifecycleEvent(ev)
}

// lifecycleEvent handles a replica's timer: ready to warm, warm, or the
// end of its drain's timeout.
func (sc *scaler) lifecycleEvent(ev *event) {
	c := sc.c
	i := ev.inst()
	s := c.sc
	if s.gen[i] != ev.life() {
		return // the replica changed state since
	}
	s.lastReal = c.now
	rep := c.reps[i]
	sp := s.pools[s.poolOf[i]]
	a := sp.cfg
	switch rep.State {
	case replica.Provisioning:
		if a.Warmup.Duration > 0 && a.Warmup.InitialFactor > 1 {
			rep.State = replica.Warming
			dur := a.Warmup.Duration.US()
			rep.Model = &warmModel{Model: rep.Model, now: &c.now, start: c.now, dur: dur, curve: a.Warmup.Curve, f0: a.Warmup.InitialFactor}
			s.gen[i]++
			c.h.pushGen(c.now+dur, evLifecycle, i, s.gen[i])
			sc.rebuildBoard(sp.g)
			sc.scaleRow(sp, row.ScaleEvent{Action: row.ScaleReady, ReplicaID: rep.ID, Reason: "provisioned, weights loaded: warming", WarmEndUS: c.now + dur})
			return
		}
		rep.State = replica.Serving
		s.gen[i]++
		sc.rebuildBoard(sp.g)
		sc.scaleRow(sp, row.ScaleEvent{Action: row.ScaleServing, ReplicaID: rep.ID, Reason: "provisioned, weights loaded"})
	case replica.Warming:
		rep.State = replica.Serving
		rep.Model = rep.Model.(*warmModel).Model
		s.gen[i]++
		if p := c.gpos[i]; p >= 0 {
			sp.g.board.SetState(int(p), "serving")
		}
		sc.scaleRow(sp, row.ScaleEvent{Action: row.ScaleServing, ReplicaID: rep.ID, Reason: "warm"})
	case replica.Draining:
		c.cut(rep) // a span's step may have ended before this timer
		if rep.Busy() {
			sc.killAtStepEnd(rep) // the GPU is released between steps
			return
		}
		reason := fmt.Sprintf("replica %s drained: timeout %s", rep.ID, a.Drain.Timeout)
		if s.killEnd[i] {
			reason = fmt.Sprintf("replica %s scaled down (drain: immediate)", rep.ID)
		}
		sc.kill(rep, reason)
	}
}

// scaleTick samples every autoscaled pool, evaluates those due or
// triggered, and schedules the next tick while anything can still happen.
func (sc *scaler) scaleTick() {
	c := sc.c
	s := c.sc
	s.ticking = false
	for _, sp := range s.pools {
		if sp.cfg == nil {
			continue
		}
		sc.sample(sp)
	}
	s.due = s.due[:0]
	for k, sp := range s.pools {
		if sp.cfg == nil {
			continue
		}
		if c.now >= sp.nextEval {
			for sp.nextEval <= c.now {
				sp.nextEval += sp.cfg.Interval.US()
			}
			sp.trigger = ""
			s.due = append(s.due, k)
		} else if sc.triggered(sp) {
			s.due = append(s.due, k)
		}
	}
	if len(s.due) > 0 {
		// Every pool's view: a policy may look across pools.
		s.views = s.views[:0]
		for _, sp := range s.pools {
			if sp.cfg != nil {
				s.views = append(s.views, sc.poolView(sp))
			}
		}
		for _, k := range s.due {
			sc.evaluate(s.pools[k], k)
		}
	}
	if c.h.Len() > 0 && (c.liveH != nil || sc.transitions()) {
		s.ticking = true
		c.h.push(c.now+s.sampleUS, evScale, 0, nil)
		return
	}
	if c.liveH == nil {
		return // the run is over
	}
	// Nothing else will happen: one more evaluation for requests held at
	// the router or queued at the gateway (a pool at zero replicas), then
	// stop.
	next := int64(math.MaxInt64)
	waits := func(g *group) bool { return len(g.held) > 0 || c.fc.queuedIn(g) > 0 }
	for _, sp := range s.pools {
		if sp.cfg != nil && (waits(sp.g) || sp.g != sp.dep.group && (waits(sp.dep.group) || c.pd.orphansOf(sp.dep) > 0)) {
			next = min(next, sp.nextEval)
		}
	}
	if next != math.MaxInt64 {
		s.ticking = true
		c.h.push(next, evScale, 0, nil)
	}
}

// transitions reports whether an autoscaled replica is provisioning,
// warming or draining.
func (sc *scaler) transitions() bool {
	c := sc.c
	for _, sp := range c.sc.pools {
		if sp.cfg == nil {
			continue
		}
		for _, m := range sp.slots {
			if st := c.reps[m].State; st == replica.Provisioning || st == replica.Warming || st == replica.Draining {
				return true
			}
		}
	}
	return false
}

// sample closes the pool's current bucket with the state at now.
func (sc *scaler) sample(sp *spool) {
	c := sc.c
	b := sp.cur
	b.dur = c.now - sp.lastTick
	sp.lastTick = c.now
	for j, m := range sp.slots {
		rep := c.reps[m]
		if rep.State == replica.Stopped {
			sp.lastBusy[j] = rep.BusyUS
			continue
		}
		c.sync(rep)
		busy := rep.BusyUS - sp.lastBusy[j]
		sp.lastBusy[j] = rep.BusyUS
		if !routable(rep.State) {
			continue
		}
		l := rep.Sched.Load()
		b.queue += float64(l.Waiting + rep.InFlight)
		if c.pd != nil {
			b.queue += float64(len(c.pd.incoming[m])) // hand-offs waiting for its blocks
		}
		b.running += float64(l.Running)
		if l.KVTotal > 0 {
			b.kv += float64(l.KVUsed) / float64(l.KVTotal)
		}
		b.ready++
		b.busy += busy
		b.readyUS += b.dur
	}
	b.queue += float64(sc.heldLive(sp.g))
	if sp.g != sp.dep.group {
		b.queue += float64(sc.heldLive(sp.dep.group) + c.pd.orphansOf(sp.dep))
	}
	// Keep the bucket's latency buffers for reuse.
	old := &sp.ring[sp.head]
	tt, ee := old.ttft[:0], old.e2e[:0]
	tt = append(tt, b.ttft...)
	ee = append(ee, b.e2e...)
	b.ttft, b.e2e = tt, ee
	sp.ring[sp.head] = b
	sp.head = (sp.head + 1) % len(sp.ring)
	sp.filled = min(sp.filled+1, len(sp.ring))
	sp.cur = bucket{ttft: sp.cur.ttft[:0], e2e: sp.cur.e2e[:0]}
}

// heldLive counts g's requests held at the router.
func (sc *scaler) heldLive(g *group) int {
	n := sc.c.fc.queuedIn(g) // and queued at the gateway (flow control)
	for _, h := range g.held {
		if h.r.Life == h.life && h.r.Phase == request.Arriving {
			n++
		}
	}
	return n
}

// recent returns the k-th newest bucket (k = 1: the last sample); the
// caller keeps k <= sp.filled.
func (sp *spool) recent(k int) *bucket {
	return &sp.ring[(sp.head-k+len(sp.ring))%len(sp.ring)]
}

// metrics averages the pool's last n buckets.
func (sc *scaler) metrics(sp *spool, n int) autoscale.Metrics {
	c := sc.c
	m := autoscale.Metrics{SLOAttainment: math.NaN()}
	var q, run, kvs, ready, busy, readyUS float64
	var arr, fin, met, itlN int
	var inTok, outTok int64
	var ttftSum, itlSum, e2eSum float64
	lat, e2e := c.sc.lat[:0], c.sc.lat2[:0]
	for k := 1; k <= min(n, sp.filled); k++ {
		b := sp.recent(k)
		m.WindowUS += b.dur
		q += b.queue
		run += b.running
		kvs += b.kv
		ready += b.ready
		busy += float64(b.busy)
		readyUS += float64(b.readyUS)
		arr += b.arrivals
		fin += b.finished
		met += b.met
		inTok, outTok = inTok+b.inTok, outTok+b.outTok
		ttftSum, itlSum, e2eSum, itlN = ttftSum+b.ttftSum, itlSum+b.itlSum, e2eSum+b.e2eSum, itlN+b.itlN
		lat = append(lat, b.ttft...)
		e2e = append(e2e, b.e2e...)
	}
	per := max(ready, 1)
	m.QueueDepth, m.Running = q/per, run/per
	if ready > 0 {
		m.KVUtilization = kvs / ready
	}
	if readyUS > 0 {
		m.Utilization = min(1, busy/readyUS)
	}
	if m.WindowUS > 0 {
		m.RequestRate = float64(arr) / (float64(m.WindowUS) / 1e6)
	}
	m.Finished = fin
	if arr > 0 {
		m.InputTokensMean, m.OutputTokensMean = float64(inTok)/float64(arr), float64(outTok)/float64(arr)
	}
	if n := len(lat); n > 0 {
		m.TTFTMeanUS, m.DurationMeanUS = ttftSum/float64(n), e2eSum/float64(n)
	}
	if itlN > 0 {
		m.ITLMeanUS = itlSum / float64(itlN)
	}
	if fin > 0 && (sp.cfg.SLO.TTFT > 0 || sp.cfg.SLO.E2E > 0 || sp.cfg.SLO.ITL > 0) {
		m.SLOAttainment = float64(met) / float64(fin)
	}
	m.TTFTP50US, m.TTFTP99US = percentiles(lat)
	m.E2EP50US, m.E2EP99US = percentiles(e2e)
	c.sc.lat, c.sc.lat2 = lat, e2e
	return m
}

// percentiles returns the nearest-rank p50 and p99 of xs (sorted in place).
func percentiles(xs []int64) (p50, p99 int64) {
	if len(xs) == 0 {
		return 0, 0
	}
	slices.Sort(xs)
	rank := func(p float64) int64 { return xs[max(0, int(math.Ceil(p*float64(len(xs))))-1)] }
	return rank(0.50), rank(0.99)
}

// counts returns the pool's replicas counted toward its size (not
// draining or stopped) and those routing can choose.
func (sc *scaler) counts(sp *spool) (current, ready int) {
	c := sc.c
	for _, m := range sp.slots {
		switch c.reps[m].State {
		case replica.Provisioning:
			current++
		case replica.Warming, replica.Serving:
			current++
			ready++
		}
	}
	return current, ready
}

func (sc *scaler) poolView(sp *spool) autoscale.PoolView {
	c := sc.c
	cur, ready := sc.counts(sp)
	v := autoscale.PoolView{Deployment: sp.dep.ID, Pool: sp.idx, NowUS: c.now, Current: cur, Ready: ready,
		Min: sp.min, Max: sp.max, Metrics: sc.metrics(sp, len(sp.ring)), SinceLastScaleUS: -1}
	if sp.lastAction != math.MinInt64 {
		v.SinceLastScaleUS = c.now - sp.lastAction
	}
	for _, m := range sp.slots {
		rep := c.reps[m]
		if rep.State != replica.Stopped {
			c.sync(rep)
			l := rep.Sched.Load()
			v.Waiting += l.Waiting
			v.Running += l.Running
			v.InFlight += rep.InFlight
		}
	}
	v.Pending = v.Waiting + v.InFlight + sc.heldLive(sp.g)
	if sp.g != sp.dep.group {
		// A decode pool at zero holds its deployment's arrivals (chosen
		// first) or hand-offs (chosen at the prefill's end).
		v.Pending += sc.heldLive(sp.dep.group) + c.pd.orphansOf(sp.dep)
	}
	v.Role = c.reps[sp.slots[0]].Role.String()
	v.Perf = sp.perf
	return v
}

// triggered checks the pool's event triggers on its latest samples (the
// reason goes in sp.trigger, for the decision's row).
func (sc *scaler) triggered(sp *spool) bool {
	sp.trigger = sc.trigger(sp)
	return sp.trigger != ""
}

func (sc *scaler) trigger(sp *spool) string {
	c := sc.c
	t := &sp.cfg.Triggers
	if sp.filled == 0 {
		return ""
	}
	last := sp.recent(1)
	if t.QueueDepthAbove > 0 {
		if q := last.queue / max(last.ready, 1); q > t.QueueDepthAbove {
			return fmt.Sprintf("trigger queue_depth_above: %.3g > %g", q, t.QueueDepthAbove)
		}
	}
	if t.SLOBelow > 0 {
		if m := sc.metrics(sp, len(sp.ring)); m.SLOAttainment < t.SLOBelow {
			return fmt.Sprintf("trigger slo_below: %.3f < %g", m.SLOAttainment, t.SLOBelow)
		}
	}
	if t.UtilizationHigh > 0 || t.UtilizationLow > 0 {
		span := sp.cfg.Triggers.Sustain.US()
		if span == 0 {
			span = sp.cfg.Window.US()
			if span == 0 {
				span = sp.cfg.Interval.US()
			}
		}
		n := int((span + c.sc.sampleUS - 1) / c.sc.sampleUS)
		if sp.filled >= n {
			hi, lo := true, true
			for k := 1; k <= n; k++ {
				b := sp.recent(k)
				u := 0.0
				if b.readyUS > 0 {
					u = float64(b.busy) / float64(b.readyUS)
				}
				hi = hi && u > t.UtilizationHigh
				lo = lo && u < t.UtilizationLow
			}
			if t.UtilizationHigh > 0 && hi {
				return fmt.Sprintf("trigger utilization_high: above %g for %s", t.UtilizationHigh, config.Duration(span*1000))
			}
			if t.UtilizationLow > 0 && lo {
				return fmt.Sprintf("trigger utilization_low: below %g for %s", t.UtilizationLow, config.Duration(span*1000))
			}
		}
	}
	if t.RateChange > 0 && sp.filled == len(sp.ring) && len(sp.ring) >= 2 {
		half := len(sp.ring) / 2
		var newer, older int
		for k := 0; k < 2*half; k++ {
			b := sp.recent(k + 1)
			if k < half {
				newer += b.arrivals
			} else {
				older += b.arrivals
			}
		}
		if older > 0 && math.Abs(float64(newer)/float64(older)-1) > t.RateChange {
			return fmt.Sprintf("trigger rate_change: %d → %d requests per %s", older, newer, config.Duration(int64(half)*c.sc.sampleUS*1000))
		}
	}
	return ""
}

// evaluate asks pool k's controller and actuates its decision.
func (sc *scaler) evaluate(sp *spool, k int) {
	c := sc.c
	var v *autoscale.PoolView
	vi := 0
	for j, p := range c.sc.pools {
		if p.cfg == nil {
			continue
		}
		if j == k {
			v = &c.sc.views[vi]
		}
		vi++
	}
	// A pool evaluated earlier in this tick may have changed the others'
	// counts: refresh this one's.
	v.Current, v.Ready = sc.counts(sp)
	d := sp.ctrl.Evaluate(v, c.sc.views)
	if c.opts.Policies.Err != nil {
		if err := c.opts.Policies.Err(); err != nil {
			c.fail(err) // a bundle's autoscaler stage failed
			return
		}
	}
	trig := sp.trigger
	sp.trigger = ""
	if d.Target == v.Current {
		return
	}
	if trig != "" {
		d.Reason = trig + ": " + d.Reason
	}
	ev := row.ScaleEvent{From: int32(v.Current), To: int32(d.Target), Reason: d.Reason,
		QueueDepth: v.Metrics.QueueDepth, Running: v.Metrics.Running, Utilization: v.Metrics.Utilization,
		KVUtilization: v.Metrics.KVUtilization, RequestRate: v.Metrics.RequestRate, SLOAttainment: v.Metrics.SLOAttainment,
		TTFTP50US: v.Metrics.TTFTP50US, TTFTP99US: v.Metrics.TTFTP99US, E2EP50US: v.Metrics.E2EP50US, E2EP99US: v.Metrics.E2EP99US,
		Pending: int32(v.Pending), ProvisioningUS: row.Null, WarmEndUS: row.Null}
	sp.lastAction = c.now
	sp.ctrl.LastAction = c.now
	if d.Target > v.Current {
		c.sum.ScaleUps++
		ev.Action = row.ScaleUp
		n := d.Target - v.Current
		var started []int32
		for _, m := range sp.slots {
			if n == 0 {
				break
			}
			if c.reps[m].State == replica.Stopped {
				started = append(started, m)
				n--
			}
		}
		if n > 0 {
			ev.To -= int32(n)
			ev.Reason += fmt.Sprintf("; %d replicas short: every slot is draining", n)
		}
		var maxDelay, warmEnd int64
		for _, m := range started {
			delay := sc.launch(sp, m)
			maxDelay = max(maxDelay, delay)
			warmEnd = max(warmEnd, c.now+delay+sp.cfg.Warmup.Duration.US())
		}
		if len(started) > 0 {
			ev.ProvisioningUS, ev.WarmEndUS = maxDelay, warmEnd
		}
		sc.scaleRow(sp, ev)
		sc.traceScale(sp, &ev, true)
	} else {
		ev.Action = row.ScaleDown
		c.sum.ScaleDowns++
		sc.scaleRow(sp, ev) // before the lifecycle rows it causes
		sc.traceScale(sp, &ev, false)
		n := v.Current - d.Target
		for _, st := range []replica.State{replica.Provisioning, replica.Warming, replica.Serving} {
			for j := len(sp.slots) - 1; j >= 0 && n > 0; j-- {
				if m := sp.slots[j]; c.reps[m].State == st {
					sc.retireReplica(sp, c.reps[m])
					n--
				}
			}
		}
	}
	if c.checks {
		if cur, _ := sc.counts(sp); cur < sp.min || cur > sp.max {
			c.fail(fmt.Errorf("invariant violated: pool %s/%d has %d replicas, outside [%d, %d]", sp.dep.ID, sp.idx, cur, sp.min, sp.max))
		}
	}
}

// launch starts a stopped replica; it returns its provisioning + weight
// load delay.
func (sc *scaler) launch(sp *spool, m int32) int64 {
	c := sc.c
	s := c.sc
	rep := c.reps[m]
	rep.State = replica.Provisioning
	s.gen[m]++
	delay := sp.delay.Draw() + sp.loadUS
	c.h.pushGen(c.now+delay, evLifecycle, m, s.gen[m])
	sc.bill(sp, +1)
	return delay
}

// retireReplica takes a replica out of the pool: one still provisioning
// stops at once; a warming or serving one drains.
func (sc *scaler) retireReplica(sp *spool, rep *replica.Replica) {
	c := sc.c
	s := c.sc
	i := rep.Index
	if rep.State == replica.Provisioning {
		sc.stop(sp, rep, "cancelled while provisioning")
		return
	}
	c.cut(rep)
	if w, ok := rep.Model.(*warmModel); ok {
		rep.Model = w.Model
	}
	rep.State = replica.Draining
	s.gen[i]++
	sc.rebuildBoard(sp.g)
	a := sp.cfg
	switch a.Drain.Mode {
	case "immediate":
		if rep.Busy() {
			s.killEnd[i] = true
			sc.killAtStepEnd(rep)
			return
		}
		sc.kill(rep, fmt.Sprintf("replica %s scaled down (drain: immediate)", rep.ID))
		return
	case "redirect":
		sc.redirect(rep)
	}
	if a.Drain.Timeout > 0 {
		c.h.pushGen(c.now+a.Drain.Timeout.US(), evLifecycle, i, s.gen[i])
	}
	sc.drainedCheck(rep)
}

// onReplica lists the requests routed to rep and not finished.
func (sc *scaler) onReplica(rep *replica.Replica, phases ...request.Phase) []*request.State {
	c := sc.c
	var out []*request.State
	for r := c.liveH; r != nil; r = r.LNext {
		if r.Replica == rep.Index && slices.Contains(phases, r.Phase) {
			out = append(out, r)
		}
	}
	return out
}

// redirect sends rep's waiting requests back through routing; running
// ones, those in their alpha delay (already sent) and preempted ones
// (scheduled before: their times are rep's) finish on rep.
func (sc *scaler) redirect(rep *replica.Replica) {
	c := sc.c
	c.cut(rep)
	if c.pd != nil && rep.Role == replica.Decode {
		c.pd.rebind(rep) // requests not yet sent to it choose again at their hand-off
	}
	for _, r := range sc.onReplica(rep, request.Waiting) {
		if r.FirstSched != row.Null {
			continue
		}
		rep.Cancel(r)
		r.Replica, r.Routed, r.Enqueued = -1, row.Null, row.Null
		r.Phase = request.Arriving
		c.sum.Redirected++
		c.markDirty(rep.Index)
		c.sc.noCount = true
		c.arrive(r)
		c.sc.noCount = false
	}
}

// kill stops rep now, dropping every request on it (counted).
func (sc *scaler) kill(rep *replica.Replica, reason string) {
	c := sc.c
	c.cut(rep)
	c.sc.killEnd[rep.Index] = false
	if c.pd != nil {
		// Nothing the drops below set off may start a step on rep or stop
		// it before its kill ends.
		c.pd.quiet = rep.Index
		c.pd.evict(rep, reason) // hand-offs from or to it
	}
	for _, r := range sc.onReplica(rep, request.Routed, request.Waiting, request.Running) {
		if r.Phase == request.Routed {
			rep.InFlight--
		} else {
			r.Generated = rep.Sched.Progress(r)
			rep.Cancel(r)
		}
		r.Status, r.Reason, r.Finished = row.StatusDropped, reason, c.now
		c.sum.DrainDropped++
		c.terminal(r)
	}
	if c.pd != nil {
		c.pd.quiet = -1
	}
	sc.stop(c.sc.pools[c.sc.poolOf[rep.Index]], rep, reason)
}

// killAtStepEnd schedules rep's kill at the end of its executing step
// (found in the event queue: rare, so a scan): a lifecycle timer of the
// same instant runs after the step end and before a next step starts.
func (sc *scaler) killAtStepEnd(rep *replica.Replica) {
	c := sc.c
	c.cut(rep)
	if t, ok := c.h.ends.at(rep.Index); ok {
		c.sc.gen[rep.Index]++
		c.h.pushGen(t, evLifecycle, rep.Index, c.sc.gen[rep.Index])
		return
	}
	c.fail(fmt.Errorf("internal error: replica %s is busy with no step end queued", rep.ID))
}

// drainedCheck stops a draining replica with nothing left to do; it
// reports whether rep stopped.
func (sc *scaler) drainedCheck(rep *replica.Replica) bool {
	c := sc.c
	if c.sc.killEnd[rep.Index] {
		return false // killed by its timer at the end of its step
	}
	if rep.Busy() || rep.InFlight > 0 || rep.Sched.HasWork() || c.pd != nil && c.pd.pdBusy(rep) {
		return false
	}
	sc.stop(c.sc.pools[c.sc.poolOf[rep.Index]], rep, "drained")
	return true
}

// stop makes rep stopped with a cold cache: a fresh KV store and
// scheduler, and no entry in the group's prefix index.
func (sc *scaler) stop(sp *spool, rep *replica.Replica, reason string) {
	c := sc.c
	i := rep.Index
	if c.checks && (rep.Busy() || rep.InFlight != 0 || rep.Sched.HasWork() || c.pd != nil && c.pd.pdBusy(rep)) {
		c.fail(fmt.Errorf("invariant violated: replica %s stopped with work (busy %v, in flight %d, waiting %d, running %d)",
			rep.ID, rep.Busy(), rep.InFlight, rep.Sched.Waiting(), rep.Sched.Running()))
	}
	rep.State = replica.Stopped
	c.sc.gen[i]++
	c.sc.killEnd[i] = false
	// The scheduler is replaced: keep its counts for the summary.
	if err := c.clashErr(rep); err != nil {
		c.fail(err)
	}
	c.sc.preempts += rep.Sched.Preemptions()
	c.sc.evicts += rep.Sched.KV().Evictions()
	if ts := rep.Sched.Tiers(); ts != nil {
		if c.sc.tierOff == nil {
			c.sc.tierOff, c.sc.tierLoad = make([]int64, len(c.tierNames)), make([]int64, len(c.tierNames))
		}
		for k, t := range ts.T {
			col := sp.dep.tierCol[k]
			c.sc.tierOff[col] += t.Stats.Offloads
			c.sc.tierLoad[col] += t.Stats.Loads
			c.sc.thrash += t.Stats.ThrashLoad
		}
	}
	e := sp.engine
	store := kv.NewPaged(int32(e.KVBlocks), int32(e.BlockSize))
	store.SetPrivate(c.opts.PrefixUnique && sp.dep.pd == nil)
	var order sched.Order
	var victim sched.Victim
	if c.opts.Policies.Scheduling != nil {
		order, victim = c.opts.Policies.Scheduling(i)
	}
	v := sched.NewVLLM(sp.scfg, store, sp.dep.keys, order, victim)
	if sp.dep.tiers != nil {
		// A restarted machine's host memory starts empty too.
		v.SetTiers(sp.dep.tiers(store))
	}
	rep.Sched = v
	if x := sp.g.index; x != nil {
		slot := int32(slices.Index(sp.g.all, i))
		x.purge(slot)
		store.SetObserver(x.observer(slot))
	}
	sc.bill(sp, -1)
	sc.scaleRow(sp, row.ScaleEvent{Action: row.ScaleStopped, ReplicaID: rep.ID, Reason: reason})
}

// bill changes the pool's billed replicas at now.
func (sc *scaler) bill(sp *spool, delta int) {
	c := sc.c
	sp.gpuUS += float64(sp.billed) * float64(sp.tp) * float64(c.now-sp.billedAt)
	sp.billedAt = c.now
	sp.billed += delta
}

// scaleRow appends a scale-events row for sp at now.
func (sc *scaler) scaleRow(sp *spool, e row.ScaleEvent) {
	c := sc.c
	e.TimeUS, e.Deployment, e.Pool = c.now, sp.dep.ID, int32(sp.idx)
	if e.Action != row.ScaleUp && e.Action != row.ScaleDown {
		for _, f := range []*float64{&e.QueueDepth, &e.Running, &e.Utilization, &e.KVUtilization, &e.RequestRate, &e.SLOAttainment} {
			*f = math.NaN()
		}
		e.TTFTP50US, e.TTFTP99US, e.E2EP50US, e.E2EP99US = row.Null, row.Null, row.Null, row.Null
		if e.ProvisioningUS == 0 {
			e.ProvisioningUS = row.Null
		}
		if e.WarmEndUS == 0 {
			e.WarmEndUS = row.Null
		}
	}
	if sp.cfg == nil {
		e.Replicas, e.Ready = int32(len(sp.slots)), int32(len(sp.slots))
	} else {
		_, ready := sc.counts(sp)
		e.Replicas, e.Ready = int32(sp.billed), int32(ready)
	}
	e.GPUsPerReplica, e.GPUHourUSD = sp.tp, sp.price
	c.sc.rows = append(c.sc.rows, e)
}

// finishHeld makes the requests still held at a router unfinished (the
// run ended with no replica to serve them).
func (sc *scaler) finishHeld() {
	c := sc.c
	for _, g := range c.grps {
		for _, h := range g.held {
			if r := h.r; r.Life == h.life && r.Phase == request.Arriving {
				r.Status, r.Reason = row.StatusUnfinished, "held at the router: no replica serving"
				c.terminal(r)
			}
		}
		g.held = nil
	}
}

// finishScale closes the run's autoscaling: the run ends at its last
// request event or lifecycle change (autoscaler ticks and stale timers
// after it do not count), billing is closed then, and each pool gets an
// end row.
func (sc *scaler) finishScale() {
	c := sc.c
	s := c.sc
	if s.lastReal < c.now {
		c.now = s.lastReal
		c.sum.SimEndUS = s.lastReal
	}
	c.sum.Preemptions += s.preempts
	c.sum.Evictions += s.evicts
	c.sum.GPUHours = c.sum.GPUHours[:0]
	for range c.deps {
		c.sum.GPUHours = append(c.sum.GPUHours, 0)
	}
	for _, sp := range c.sc.pools {
		sc.bill(sp, 0)
		c.sum.GPUHours[sp.depIdx] += sp.gpuUS / 3.6e9
		sc.scaleRow(sp, row.ScaleEvent{Action: row.ScaleEnd, Reason: "end of the run"})
		sc.reportOscillations(sp)
	}
	if c.opts.ScaleEventsTo != nil {
		c.opts.ScaleEventsTo(s.rows)
	}
}

// ScaleEvents returns the scale-events rows so far (Options.ScaleEvents or
// an autoscaled pool); nil otherwise.
func (c *Cluster) ScaleEvents() []row.ScaleEvent {
	if c.sc == nil {
		return nil
	}
	return c.sc.rows
}

// purge removes slot's entries from the index (its replica stopped: a
// restarted replica has a cold cache). The map is walked in Go's order,
// but each key's list is edited alone, so the result does not depend on it.
func (x *prefixIndex) purge(slot int32) {
	if x.small {
		x.masks.clearAll(1 << uint(slot))
	}
	// Events of the replica not yet heard are dropped with it.
	k := x.qh
	for _, e := range x.q[x.qh:] {
		if e.pos != slot {
			x.q[k] = e
			k++
		}
	}
	x.q = x.q[:k]
	for k, hs := range x.byKey {
		for i, p := range hs {
			if p == slot {
				hs[i] = hs[len(hs)-1]
				hs = hs[:len(hs)-1]
				break
			}
		}
		if len(hs) == 0 {
			delete(x.byKey, k)
		} else {
			x.byKey[k] = hs
		}
	}
}

// boardHolders translates the index's holders (slot positions) to board
// positions, skipping replicas routing cannot choose.
func (sc *scaler) boardHolders(g *group) []int32 {
	c := sc.c
	hs := g.index.holders(c)
	g.hbuf = g.hbuf[:0]
	for _, s := range hs {
		if p := g.posOfSlot[s]; p >= 0 {
			g.hbuf = append(g.hbuf, p)
		}
	}
	return g.hbuf
}

// clone copies the scaler for Cluster.Clone (requests through m).
func (s *scaler) clone(m *request.Clone, d *Cluster, depMap map[*Deployment]*Deployment, grpMap map[*group]*group) *scaler {
	x := *s
	x.c = d
	x.poolOf = append([]int32(nil), s.poolOf...)
	x.gen = append([]uint32(nil), s.gen...)
	x.killEnd = append([]bool(nil), s.killEnd...)
	x.rows = append([]row.ScaleEvent(nil), s.rows...)
	x.tierOff, x.tierLoad = slices.Clone(s.tierOff), slices.Clone(s.tierLoad)
	x.views, x.lat, x.lat2, x.due = nil, nil, nil, nil
	for _, rep := range d.reps {
		if w, ok := rep.Model.(*warmModel); ok {
			y := *w
			y.now = &d.now // the fork's clock
			rep.Model = &y
		}
	}
	x.pools = make([]*spool, len(s.pools))
	for i, sp := range s.pools {
		y := *sp
		y.dep = depMap[sp.dep]
		y.acts = slices.Clone(sp.acts)
		y.g = grpMap[sp.g]
		if sp.ctrl != nil {
			y.ctrl = sp.ctrl.Clone()
			y.delay = sp.delay.Clone()
		}
		y.ring = make([]bucket, len(sp.ring))
		for j, b := range sp.ring {
			b.ttft, b.e2e = slices.Clone(b.ttft), slices.Clone(b.e2e)
			y.ring[j] = b
		}
		y.cur.ttft, y.cur.e2e = slices.Clone(sp.cur.ttft), slices.Clone(sp.cur.e2e)
		y.lastBusy = slices.Clone(sp.lastBusy)
		x.pools[i] = &y
	}
	return &x
}

// warmModel is a warming replica's latency model: the deployment's, with
// step times multiplied by the warm-up curve's factor at the step's start
// (the cluster's clock). Swapping the model, rather than testing a flag on
// every step, keeps replicas that never warm free of the cost.
type warmModel struct {
	latency.Model
	now        *int64
	start, dur int64
	curve      string
	f0         float64
}

func (w *warmModel) StepTime(b *latency.Batch) int64 {
	d := w.Model.StepTime(b)
	return int64(float64(d) * autoscale.WarmFactor(w.curve, w.f0, *w.now-w.start, w.dur))
}

// traceScale records an autoscaler's action in the decision trace (when
// decisions are traced) and keeps it for the oscillation check.
func (sc *scaler) traceScale(sp *spool, row *row.ScaleEvent, up bool) {
	c := sc.c
	if c.opts.Decisions == nil {
		return
	}
	sp.acts = append(sp.acts, autoscale.Action{TimeUS: c.now, Up: up})
	c.TraceScale(sp.dep.ID, fmt.Sprintf("%s/pool%d", sp.dep.ID, sp.idx), string(row.Action), row.Reason, int(row.To))
}

// reportOscillations reports each up/down/up (or down/up/down) of the pool
// within autoscale.DefaultOscillationWindowUS as a scale_oscillation
// anomaly: the same rule blis-report applies to the scale-events table.
func (sc *scaler) reportOscillations(sp *spool) {
	c := sc.c
	for _, o := range autoscale.Oscillations(sp.acts, autoscale.DefaultOscillationWindowUS) {
		pattern := "down, up, down"
		if o.FirstUp {
			pattern = "up, down, up"
		}
		c.ReportAnomaly(&row.Anomaly{Type: row.AnomalyScaleOscillation, TimeUS: o.StartUS, EndUS: o.EndUS,
			Severity: "medium", Magnitude: float64(o.EndUS-o.StartUS) / 1e6,
			ReplicaID:   fmt.Sprintf("%s/pool%d", sp.dep.ID, sp.idx),
			Description: fmt.Sprintf("pool %s/%d scaled %s within %s", sp.dep.ID, sp.idx, pattern, config.Duration((o.EndUS-o.StartUS)*1000))})
	}
}

// poolPerf is a pool's engine as the planner's performance model
// (autoscale.Perf): its latency model (the GPU step, without the engine's
// CPU work or a warm-up) and its limits.
type poolPerf struct {
	m latency.Model
	e config.Engine
}

// PrefillUS is a lone prompt of n tokens prefilled in chunks of the step
// budget (and long_prefill_token_threshold), each step one chunk over the
// context before it.
func (p *poolPerf) PrefillUS(n float64) float64 {
	tokens := int64(math.Round(n))
	chunk := int64(p.e.MaxNumBatchedTokens)
	if t := int64(p.e.LongPrefillThreshold); t > 0 {
		chunk = min(chunk, t)
	}
	var us float64
	for done := int64(0); done < tokens; {
		k := min(chunk, tokens-done)
		b := latency.Batch{PrefillSeqs: 1, PrefillTokens: k, PrefillCtx: done, PrefillAttn: k * (done + (k+1)/2)}
		us += float64(p.m.StepTime(&b))
		done += k
	}
	return us
}

// DecodeStepUS is a step decoding batch sequences of ctx tokens each.
func (p *poolPerf) DecodeStepUS(batch int, ctx float64) float64 {
	b := latency.Batch{DecodeSeqs: batch, DecodeCtx: int64(math.Round(float64(batch) * ctx))}
	return float64(p.m.StepTime(&b))
}

// MaxBatch is the most sequences of ctx tokens a replica holds: its
// max_num_seqs, and its KV blocks over each sequence's.
func (p *poolPerf) MaxBatch(ctx float64) int {
	per := int64(math.Ceil(ctx / float64(p.e.BlockSize)))
	return int(min(int64(p.e.MaxNumSeqs), p.e.KVBlocks/max(per, 1)))
}
