package policy

import (
	"fmt"
	"math"
)

// Gateway admission templates (token-bucket, tier-shed) and the saturation
// signals that the gateway's flow control (lib/engine/cluster/gateway.go)
// and tier-shed share: llm-d's EPP saturation detectors.

// UtilizationSaturation is llm-d's utilization detector on the view's
// candidates (Board.Utilization).
func UtilizationSaturation(c *ClusterView, queueDepth, kvCache float64) float64 {
	return c.b.Utilization(queueDepth, kvCache)
}

// Utilization is llm-d's utilization detector on the board's replicas:
// each scores max(queue / queueDepth, KV used fraction / kvCache) and the
// pool's saturation is the mean score (1 or more: saturated). The queue is
// the replica's waiting requests plus those routed there and not yet in its
// queue (the router knows what it sent; without them a burst arriving in
// one instant would all pass). An empty board is saturated (nothing can
// take work).
func (b *Board) Utilization(queueDepth, kvCache float64) float64 {
	reps := b.reps
	if len(reps) == 0 {
		return math.Inf(1)
	}
	var sum float64
	for i := range reps {
		s := &reps[i].s
		q := float64(s.Waiting+s.InFlight) / queueDepth
		if s.KVTotal > 0 {
			if k := float64(s.KVUsed) / float64(s.KVTotal) / kvCache; k > q {
				q = k
			}
		}
		sum += q
	}
	return sum / float64(len(reps))
}

// Concurrency is llm-d's concurrency detector in requests mode: Σ requests
// on the board's replicas (waiting + running + in flight) over
// maxConcurrency × replicas.
func (b *Board) Concurrency(maxConcurrency float64) float64 {
	reps := b.reps
	if len(reps) == 0 {
		return math.Inf(1)
	}
	n := 0
	for i := range reps {
		n += reps[i].Load()
	}
	return float64(n) / (maxConcurrency * float64(len(reps)))
}

var tokenBucketTemplate = &Template{Stage: StageAdmission, Name: "token-bucket",
	Doc: "a token bucket of burst tokens refilled at rate per second (per tenant with per_tenant 1); a request takes 1 token (its input tokens with per_token 1) or is rejected (delayed until the bucket holds enough with delay 1)",
	Params: []Param{
		{Name: "rate", Default: 10, Min: 1e-9, Max: inf, Doc: "tokens added per second"},
		{Name: "burst", Default: 10, Min: 1, Max: inf, Doc: "bucket size (tokens)"},
		{Name: "per_token", Default: 0, Min: 0, Max: 1, Integer: true, Doc: "1: a request costs its input tokens, 0: one token"},
		{Name: "per_tenant", Default: 0, Min: 0, Max: 1, Integer: true, Doc: "1: one bucket per tenant_id, 0: one for all"},
		{Name: "delay", Default: 0, Min: 0, Max: 1, Integer: true, Doc: "1: delay a request until its tokens are there (shaping), 0: reject it (policing)"},
	},
	build: func(p Params, _ Env) any {
		return &tokenBucket{rate: p["rate"], burst: p["burst"], perToken: p["per_token"] == 1,
			perTenant: p["per_tenant"] == 1, delay: p["delay"] == 1}
	}}

var tierShedTemplate = &Template{Stage: StageAdmission, Name: "tier-shed",
	Doc: "reject a request whose priority is below `below` while the pool is saturated (llm-d's utilization detector: mean of max(queue / queue_depth, KV used / kv_cache) ≥ 1); with step > 0, each tier lower sheds step earlier",
	Params: []Param{
		{Name: "queue_depth", Default: 5, Min: 1e-9, Max: inf, Doc: "waiting + in-flight requests per replica that count as saturated"},
		{Name: "kv_cache", Default: 0.8, Min: 1e-9, Max: 1, Doc: "KV used fraction that counts as saturated"},
		{Name: "below", Default: 0, Min: -1e9, Max: 1e9, Integer: true, Doc: "priorities below this are sheddable (llm-d: negative priorities)"},
		{Name: "step", Default: 0, Min: 0, Max: 1, Doc: "priority below−1−j is shed from saturation 1 − step·j"},
	},
	build: func(p Params, _ Env) any {
		return tierShed{queueDepth: p["queue_depth"], kvCache: p["kv_cache"], below: int64(p["below"]), step: p["step"]}
	}}

func (*tokenBucket) Name() string { return "token-bucket" }
func (tierShed) Name() string     { return "tier-shed" }

// bucket is one token bucket: its tokens at last.
type bucket struct {
	tokens float64
	last   int64
}

// tokenBucket polices (or shapes) the arrival rate: the classic token
// bucket of API gateways (Envoy's local rate limit), over requests or
// prompt tokens.
type tokenBucket struct {
	rate, burst                float64
	perToken, perTenant, delay bool
	all                        *bucket
	tenants                    map[string]*bucket
}

func (*tokenBucket) Blind() {}

func (p *tokenBucket) bucketOf(tenant string) *bucket {
	if !p.perTenant {
		if p.all == nil {
			p.all = &bucket{tokens: p.burst, last: math.MinInt64}
		}
		return p.all
	}
	if p.tenants == nil {
		p.tenants = map[string]*bucket{}
	}
	b := p.tenants[tenant]
	if b == nil {
		b = &bucket{tokens: p.burst, last: math.MinInt64}
		p.tenants[tenant] = b
	}
	return b
}

func (p *tokenBucket) Admit(r RequestView, _ *ClusterView) AdmitDecision {
	b := p.bucketOf(r.TenantID())
	now := r.NowUS()
	if b.last != math.MinInt64 && now > b.last {
		b.tokens = math.Min(p.burst, b.tokens+p.rate*float64(now-b.last)/1e6)
	}
	b.last = now
	cost := 1.0
	if p.perToken {
		cost = float64(max(r.InputTokens(), 1))
	}
	who := ""
	if p.perTenant {
		who = fmt.Sprintf(" of tenant %q", r.TenantID())
	}
	if cost > p.burst {
		return AdmitDecision{Verdict: Reject, Reason: fmt.Sprintf("token-bucket: costs %g tokens, more than the bucket%s holds (burst %g)", cost, who, p.burst)}
	}
	if b.tokens >= cost {
		b.tokens -= cost
		return AdmitDecision{}
	}
	if p.delay {
		wait := int64(math.Ceil((cost - b.tokens) / p.rate * 1e6))
		return AdmitDecision{Verdict: Delay, DelayUS: max(wait, 1),
			Reason: fmt.Sprintf("token-bucket: %.3g of %g tokens in the bucket%s; refilled in %d µs", b.tokens, cost, who, max(wait, 1))}
	}
	return AdmitDecision{Verdict: Reject, Reason: fmt.Sprintf("token-bucket: %.3g of %g tokens in the bucket%s (rate %g/s, burst %g)", b.tokens, cost, who, p.rate, p.burst)}
}

func (p *tokenBucket) Clone() any {
	d := *p
	if p.all != nil {
		a := *p.all
		d.all = &a
	}
	if p.tenants != nil {
		d.tenants = make(map[string]*bucket, len(p.tenants))
		for k, v := range p.tenants {
			b := *v
			d.tenants[k] = &b
		}
	}
	return &d
}

// tierShed is llm-d's admission without flow control (requests of negative
// priority are rejected while the pool is saturated), with tiers: priority
// below−1−j is shed once saturation reaches 1 − step·j.
type tierShed struct {
	queueDepth, kvCache float64
	below               int64
	step                float64
}

func (p tierShed) Admit(r RequestView, c *ClusterView) AdmitDecision {
	prio := int64(r.Priority())
	if prio >= p.below {
		return AdmitDecision{}
	}
	at := 1 - p.step*float64(p.below-1-prio)
	s := UtilizationSaturation(c, p.queueDepth, p.kvCache)
	if s >= at {
		return AdmitDecision{Verdict: Reject, Reason: fmt.Sprintf("tier-shed: priority %d shed at saturation %.2f (≥ %.2f)", prio, s, math.Max(at, 0))}
	}
	return AdmitDecision{}
}
