package policy

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/blis-sim/blis/lib/rng"
)

var inf = math.Inf(1)

// templates is the registry: every built-in policy, in listing order. An
// explicit list (no init() registration) so that what exists is readable in
// one place.
var templates = []*Template{
	{Stage: StageAdmission, Name: "always", Doc: "admit every request",
		build: func(Params, Env) any { return admitAll{} }},
	{Stage: StageAdmission, Name: "queue-limit",
		Doc:    "reject when the requests waiting or in flight on the candidate replicas reach limit",
		Params: []Param{{Name: "limit", Default: 0, Min: 1, Max: inf, Integer: true, Doc: "Σ (waiting + in flight) at which requests are rejected"}},
		Check: func(p Params) error {
			if p["limit"] < 1 {
				return errors.New("parameter limit: expected an integer >= 1 (router.queue_limit), found 0")
			}
			return nil
		},
		build: func(p Params, _ Env) any { return queueLimit{limit: int(p["limit"])} }},
	tokenBucketTemplate, // gateway.go
	tierShedTemplate,

	{Stage: StagePriority, Name: "fcfs", Doc: "every request has priority 0: first come, first served",
		build: func(Params, Env) any { return fcfs{} }},
	{Stage: StagePriority, Name: "request", Doc: "the request's priority column (larger runs first)",
		build: func(Params, Env) any { return requestPriority{} }},

	{Stage: StageRouting, Name: "round-robin", Doc: "candidates in turn",
		build: func(Params, Env) any { return &roundRobin{} }},
	{Stage: StageRouting, Name: "least-loaded", Doc: "fewest waiting + running + in flight (lowest index on ties)",
		build: func(Params, Env) any { return leastLoaded{} }},
	{Stage: StageRouting, Name: "least-loaded-hold",
		Doc: "least loaded among the candidates with fewer than queue requests waiting or in flight; when none has, hold the request at the router and look again wait_us later (flow control by the router: replicas' queues stay short, requests bind late)",
		Params: []Param{
			{Name: "queue", Default: 1, Min: 1, Max: inf, Integer: true, Doc: "waiting + in flight at which a replica takes no more requests"},
			{Name: "wait_us", Default: 10000, Min: 1, Max: 1 << 50, Integer: true, Doc: "µs a held request waits before routing is asked again"},
		},
		build: func(p Params, _ Env) any { return leastLoadedHold{queue: int(p["queue"]), waitUS: int64(p["wait_us"])} }},
	{Stage: StageRouting, Name: "least-kv", Doc: "smallest fraction of KV blocks in use, then least loaded",
		build: func(Params, Env) any { return leastKV{} }},
	{Stage: StageRouting, Name: "prefix-affinity", Doc: "most leading prompt blocks in the prefix cache, then least loaded",
		build: func(Params, Env) any { return prefixAffinity{} }},
	{Stage: StageRouting, Name: "weighted",
		Doc:    "highest load·(1 − load/max load) + kv·(1 − KV used fraction) + prefix·(cached blocks / prompt blocks)",
		Sparse: true,
		Params: []Param{
			{Name: "load", Default: 1, Min: 0, Max: inf, Doc: "weight of the load score"},
			{Name: "kv", Default: 1, Min: 0, Max: inf, Doc: "weight of the free-KV score"},
			{Name: "prefix", Default: 1, Min: 0, Max: inf, Doc: "weight of the prefix-cache score"},
		},
		Check: func(p Params) error {
			if p["load"] == 0 && p["kv"] == 0 && p["prefix"] == 0 {
				return errors.New("expected at least one weight > 0 (all zero sends everything to the first replica)")
			}
			return nil
		},
		build: func(p Params, _ Env) any { return weighted{load: p["load"], kv: p["kv"], prefix: p["prefix"]} }},
	{Stage: StageRouting, Name: "lora-affinity",
		Doc: "highest −load + (slack + ½ if the request's LoRA adapter is resident; −(slack + ½) if not and every slot holds an adapter in use): the adapter's replicas unless more than slack requests busier than the least loaded, never one where it would wait for a slot if another has one",

		Params: []Param{{Name: "slack", Default: 8, Min: 0, Max: inf, Integer: true, Doc: "requests a replica holding the adapter may have over the least loaded and still be chosen"}},
		build:  func(p Params, _ Env) any { return loraAffinity{slack: p["slack"]} }},
	{Stage: StageRouting, Name: "random", Doc: "a candidate drawn uniformly (seeded stream policy:routing)",
		build: func(_ Params, env Env) any { return &random{src: *rng.PCG(env.Seed, "policy:routing")} }},
	{Stage: StageRouting, Name: "power-of-two", Doc: "the less loaded of two distinct candidates drawn uniformly (seeded stream policy:routing)",
		build: func(_ Params, env Env) any {
			return &powerOfTwo{rnd: random{src: *rng.PCG(env.Seed, "policy:routing")}}
		}},
}

// Names, and whether routing reads the prefix cache (the cluster keeps its
// global prefix index for the routing that does).
func (admitAll) Name() string        { return "always" }
func (queueLimit) Name() string      { return "queue-limit" }
func (fcfs) Name() string            { return "fcfs" }
func (requestPriority) Name() string { return "request" }
func (*roundRobin) Name() string     { return "round-robin" }
func (leastLoaded) Name() string     { return "least-loaded" }
func (leastLoadedHold) Name() string { return "least-loaded-hold" }
func (leastKV) Name() string         { return "least-kv" }
func (prefixAffinity) Name() string  { return "prefix-affinity" }
func (weighted) Name() string        { return "weighted" }
func (loraAffinity) Name() string    { return "lora-affinity" }
func (*random) Name() string         { return "random" }
func (*powerOfTwo) Name() string     { return "power-of-two" }

// What each built-in router weighs (Signals): advice that would tell it
// to weigh what it already weighs is wrong.
func (*roundRobin) Signals() Signal     { return 0 }
func (leastLoaded) Signals() Signal     { return SignalLoad }
func (leastLoadedHold) Signals() Signal { return SignalLoad }
func (leastKV) Signals() Signal         { return SignalKV | SignalLoad }
func (prefixAffinity) Signals() Signal  { return SignalPrefix | SignalLoad }
func (*random) Signals() Signal         { return 0 }
func (loraAffinity) Signals() Signal    { return SignalLoad }
func (*powerOfTwo) Signals() Signal     { return SignalLoad }
func (p weighted) Signals() Signal {
	var s Signal
	if p.load != 0 {
		s |= SignalLoad
	}
	if p.kv != 0 {
		s |= SignalKV
	}
	if p.prefix != 0 {
		s |= SignalPrefix
	}
	return s
}

func (*roundRobin) ReadsPrefix() bool     { return false }
func (leastLoaded) ReadsPrefix() bool     { return false }
func (leastLoadedHold) ReadsPrefix() bool { return false }
func (leastKV) ReadsPrefix() bool         { return false }
func (prefixAffinity) ReadsPrefix() bool  { return true }
func (p weighted) ReadsPrefix() bool      { return p.prefix != 0 }
func (*random) ReadsPrefix() bool         { return false }
func (loraAffinity) ReadsPrefix() bool    { return false }
func (*powerOfTwo) ReadsPrefix() bool     { return false }

type admitAll struct{}

func (admitAll) Blind() {}

func (admitAll) Admit(RequestView, *ClusterView) AdmitDecision { return AdmitDecision{} }

type queueLimit struct{ limit int }

func (q queueLimit) Admit(_ RequestView, c *ClusterView) AdmitDecision {
	n := 0
	for i := range c.b.reps {
		s := &c.b.reps[i].s
		n += s.Waiting + s.InFlight
	}
	if n >= q.limit {
		return AdmitDecision{Verdict: Reject, Reason: fmt.Sprintf("queue-limit: %d requests queued cluster-wide (limit %d)", n, q.limit)}
	}
	return AdmitDecision{}
}

type fcfs struct{}

func (fcfs) Blind() {}

func (fcfs) Priority(RequestView, *ClusterView) float64 { return 0 }

type requestPriority struct{}

func (requestPriority) Blind() {}

func (requestPriority) Priority(r RequestView, _ *ClusterView) float64 { return float64(r.Priority()) }

type roundRobin struct{ next int }

func (*roundRobin) Blind() {}

func (p *roundRobin) Route(_ RequestView, c *ClusterView) RouteDecision {
	i := p.next % c.Len()
	p.next = i + 1
	return RouteDecision{Target: i, Reason: "round-robin: next in turn"}
}

func (p *roundRobin) Clone() any { d := *p; return &d }

type leastLoaded struct{}

func (leastLoaded) Route(_ RequestView, c *ClusterView) RouteDecision {
	if !c.KeepsScores() {
		return RouteDecision{Target: c.LeastLoaded(), Reason: "least-loaded: fewest waiting + running + in flight"}
	}
	reps := c.b.reps
	best, bl := 0, reps[0].Load()
	c.Score(0, -float64(bl))
	for i := 1; i < len(reps); i++ {
		l := reps[i].Load()
		c.Score(i, -float64(l))
		if l < bl {
			best, bl = i, l
		}
	}
	return RouteDecision{Target: best, Reason: "least-loaded: fewest waiting + running + in flight"}
}

// leastLoadedHold routes to the least loaded candidate whose queue
// (waiting + in flight) is below queue, and holds the request when none
// is.
type leastLoadedHold struct {
	queue  int
	waitUS int64
}

func (p leastLoadedHold) Route(_ RequestView, c *ClusterView) RouteDecision {
	reps := c.b.reps
	best, bl := -1, 0
	for i := range reps {
		v := &reps[i]
		c.Score(i, -float64(v.Load()))
		if v.s.Waiting+v.s.InFlight >= p.queue {
			if c.KeepsScores() {
				c.Filter(i, fmt.Sprintf("queue %d ≥ %d", v.s.Waiting+v.s.InFlight, p.queue))
			}
			continue
		}
		if l := v.Load(); best < 0 || l < bl {
			best, bl = i, l
		}
	}
	if best < 0 {
		return RouteDecision{Wait: true, WaitUS: p.waitUS, Reason: fmt.Sprintf("least-loaded-hold: every candidate has ≥ %d waiting or in flight", p.queue)}
	}
	return RouteDecision{Target: best, Reason: "least-loaded-hold: fewest waiting + running + in flight among the short queues"}
}

type leastKV struct{}

func (leastKV) Route(_ RequestView, c *ClusterView) RouteDecision {
	reps := c.current()
	best := 0
	c.Score(0, -reps[0].KVUtilization())
	for i := 1; i < len(reps); i++ {
		a, b := &reps[i], &reps[best]
		c.Score(i, -a.KVUtilization())
		// Compare used fractions exactly: a.used/a.total < b.used/b.total.
		x, y := a.s.KVUsed*b.s.KVTotal, b.s.KVUsed*a.s.KVTotal
		if x < y || (x == y && a.Load() < b.Load()) {
			best = i
		}
	}
	return RouteDecision{Target: best, Reason: "least-kv: smallest KV fraction in use"}
}

type prefixAffinity struct{}

func (prefixAffinity) Route(_ RequestView, c *ClusterView) RouteDecision {
	if hs, ok := c.PrefixHolders(); ok && !c.KeepsScores() {
		// Only holders can beat the least loaded: the most cached blocks,
		// then the least load, then the lowest index.
		best, bh := -1, 0
		for _, i := range hs {
			h := c.CachedBlocks(int(i))
			if h > bh || h == bh && h > 0 && lessLoaded(c, int(i), best) {
				best, bh = int(i), h
			}
		}
		if best < 0 {
			return RouteDecision{Target: c.LeastLoaded(), Reason: "prefix-affinity: no cached prefix, least loaded"}
		}
		return RouteDecision{Target: best, Reason: "prefix-affinity: most cached prompt blocks"}
	}
	reps := c.b.reps
	best, bh := 0, c.CachedBlocks(0)
	c.Score(0, float64(bh))
	for i := 1; i < len(reps); i++ {
		h := c.CachedBlocks(i)
		c.Score(i, float64(h))
		if h > bh || (h == bh && reps[i].Load() < reps[best].Load()) {
			best, bh = i, h
		}
	}
	if bh == 0 {
		return RouteDecision{Target: best, Reason: "prefix-affinity: no cached prefix, least loaded"}
	}
	return RouteDecision{Target: best, Reason: "prefix-affinity: most cached prompt blocks"}
}

// lessLoaded reports whether candidate i goes before candidate j among
// equal prefix hits: smaller load, then lower index.
func lessLoaded(c *ClusterView, i, j int) bool {
	li, lj := c.b.reps[i].Load(), c.b.reps[j].Load()
	return li < lj || li == lj && i < j
}

// weighted scores each candidate by w_load·(1 − load/max load) +
// w_kv·(1 − KV used fraction) + w_prefix·(cached blocks / prompt blocks)
// and picks the highest (lowest index on ties).
type weighted struct{ load, kv, prefix float64 }

func (p weighted) Route(r RequestView, c *ClusterView) RouteDecision {
	pb := 0
	if p.prefix != 0 {
		pb = r.PrefixBlocks()
	}
	if p.kv != 0 && !c.KeepsScores() && c.b.tree != nil && p.finite() {
		hs, ok := []int32(nil), true
		if pb > 0 {
			hs, ok = c.PrefixHolders()
		}
		if ok {
			if best, ok := p.indexed(c, pb, hs); ok {
				return RouteDecision{Target: best, Reason: "weighted: highest score"}
			}
		}
	}
	reps := c.current()
	maxLoad := 1
	for i := range reps {
		if l := reps[i].Load(); l > maxLoad {
			maxLoad = l
		}
	}
	best, bs := 0, 0.0
	for i := range reps {
		v := &reps[i]
		sc := p.loadScore(v.Load(), maxLoad)
		if v.s.KVTotal > 0 {
			sc = p.withKV(sc, float64(v.s.KVUsed)/float64(v.s.KVTotal))
		}
		if pb > 0 {
			sc = p.withPrefix(sc, c.CachedBlocks(i), pb)
		}
		c.Score(i, sc)
		if i == 0 || sc > bs {
			best, bs = i, sc
		}
	}
	return RouteDecision{Target: best, Reason: "weighted: highest score"}
}

// loadScore and withKV are the score's first two terms, rounded at each
// operation (explicit conversions forbid fusing) so that the scan and the
// index compute the same numbers on every platform.
func (p weighted) loadScore(load, maxLoad int) float64 {
	return float64(p.load * float64(1-float64(load)/float64(maxLoad)))
}

func (p weighted) withKV(sc, used float64) float64 {
	return float64(sc + float64(p.kv*float64(1-used)))
}

func (p weighted) withPrefix(sc float64, cached, pb int) float64 {
	return float64(sc + float64(p.prefix*float64(cached)/float64(pb)))
}

func (p weighted) finite() bool {
	return !math.IsInf(p.load, 0) && !math.IsInf(p.kv, 0) && !math.IsInf(p.prefix, 0)
}

// indexed is Route's choice from the board's kvIndex: the scan's (the
// highest score, the lowest index among equals) from the first replica of
// each load that could still win, on the load and KV terms; then, with
// prompt blocks (pb > 0), the holders of its prefix (hs) scored in full.
// A replica holding none scores its two terms (the prefix term adds 0),
// so none beats the first pick, and one equal to it comes after it. Not ok
// when the index cannot be sure (then scan).
func (p weighted) indexed(c *ClusterView, pb int, hs []int32) (int, bool) {
	b := c.b
	x := b.kvIndex()
	if !x.usable() {
		return 0, false
	}
	if x.seq++; x.seq == 0 {
		clear(x.stamp)
		x.seq = 1
	}
	maxLoad := max(x.maxL, 1)
	best, bs := -1, 0.0
	visited := 0
	for l := int(uint32(b.tree[1] >> 32)); l <= x.maxL; l++ {
		if best >= 0 && p.withKV(p.loadScore(l, maxLoad), 0) < bs {
			break // no replica of this load or more can reach bs
		}
		if visited++; visited > len(b.reps) {
			return 0, false // loads too sparse: a scan is cheaper
		}
		i := x.first(b, l, c.now)
		if i < 0 {
			continue
		}
		q := x.q[i]
		s := p.withKV(p.loadScore(l, maxLoad), q)
		// Replicas of this load with a larger fraction score less, unless
		// rounding makes the next possible fraction score the same: then
		// the lowest index among them is not i's to know.
		if nq := x.nextAbove(q); !math.IsInf(nq, 1) && p.withKV(p.loadScore(l, maxLoad), nq) >= s {
			return 0, false
		}
		if best < 0 || s > bs || s == bs && i < best {
			best, bs = i, s
		}
	}
	if best < 0 {
		return 0, false
	}
	if pb > 0 && p.prefix != 0 {
		for _, h := range hs {
			i := int(h)
			v := c.Replica(i) // brought up to date, as the scan's
			s := p.loadScore(v.Load(), maxLoad)
			if v.s.KVTotal > 0 {
				s = p.withKV(s, float64(v.s.KVUsed)/float64(v.s.KVTotal))
			}
			s = p.withPrefix(s, c.CachedBlocks(i), pb)
			if s > bs || s == bs && i < best {
				best, bs = i, s
			}
		}
	}
	return best, true
}

// loraAffinity routes a request to a replica that has its LoRA adapter in
// a GPU slot (no cold load, no wait for a slot) unless that replica is
// more than slack requests busier than the least loaded, and away from
// replicas where it would wait for a slot (every slot held by an adapter
// running requests use; llm-d's LoRA affinity scorer ranks them last
// too): the highest −load + bonus, bonus slack + ½ if resident, −(slack +
// ½) if no slot is free, else 0; lowest index on ties. A request without
// an adapter goes to the least loaded.
type loraAffinity struct{ slack float64 }

func (p loraAffinity) Route(r RequestView, c *ClusterView) RouteDecision {
	name := r.LoRA()
	if name == "" && !c.KeepsScores() {
		return RouteDecision{Target: c.LeastLoaded(), Reason: "lora-affinity: no adapter, least loaded"}
	}
	reps := c.b.reps
	best, bs, res := 0, 0.0, false
	for i := range reps {
		v := &reps[i]
		sc := -float64(v.Load())
		h := v.HasLoRA(name)
		if h {
			sc += p.slack + 0.5
		} else if name != "" && v.LoRAFreeSlots() <= 0 {
			sc -= p.slack + 0.5
		}
		c.Score(i, sc)
		if i == 0 || sc > bs {
			best, bs, res = i, sc, h
		}
	}
	switch {
	case name == "":
		return RouteDecision{Target: best, Reason: "lora-affinity: no adapter, least loaded"}
	case res:
		return RouteDecision{Target: best, Reason: "lora-affinity: adapter resident"}
	}
	return RouteDecision{Target: best, Reason: "lora-affinity: adapter not resident within slack, least loaded"}
}

// random draws from its own PCG, held by value so that a clone continues
// the same stream independently.
type random struct{ src rand.PCG }

func (*random) Blind() {}

// intN is a uniform draw in [0, n) (Lemire's multiply-shift; bias < n/2^64).
func (p *random) intN(n int) int {
	hi, _ := bits.Mul64(p.src.Uint64(), uint64(n))
	return int(hi)
}

func (p *random) Route(_ RequestView, c *ClusterView) RouteDecision {
	return RouteDecision{Target: p.intN(c.Len()), Reason: "random"}
}

func (p *random) Clone() any { d := *p; return &d }

// powerOfTwo reads loads, so it holds its random stream rather than
// embedding random (which is Blind).
type powerOfTwo struct{ rnd random }

func (p *powerOfTwo) Route(_ RequestView, c *ClusterView) RouteDecision {
	n := c.Len()
	if n == 1 {
		return RouteDecision{Target: 0, Reason: "power-of-two: single candidate"}
	}
	a := p.rnd.intN(n)
	b := p.rnd.intN(n - 1)
	if b >= a {
		b++
	}
	la, lb := c.b.reps[a].Load(), c.b.reps[b].Load()
	c.Score(a, -float64(la))
	c.Score(b, -float64(lb))
	if lb < la {
		a = b
	}
	return RouteDecision{Target: a, Reason: "power-of-two: less loaded of two drawn"}
}

func (p *powerOfTwo) Clone() any { d := *p; return &d }
