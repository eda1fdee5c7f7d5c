package bundle

import (
	"sort"

	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
)

// kind is a view field's value type.
type kind uint8

const (
	kInt kind = iota
	kFloat
	kString
	kBool
)

func (k kind) String() string { return [...]string{"int", "float", "string", "bool"}[k] }

// evalCtx is what one decision's fields are read from: decision trees
// evaluate their conditions against it and Starlark views read it. Only the
// parts the stage has are set.
type evalCtx struct {
	rv   policy.RequestView
	cv   *policy.ClusterView
	i    int            // the candidate replica (routing trees)
	st   *request.State // the request (scheduler and preemption stages)
	tr   *Tracker
	rep  *policy.ReplicaView
	pool *PoolView // autoscaler
	ml   int       // max load over the candidates, 0 until computed
	tier *policy.TierStatus
	ob   *observer // what the run's policies know of output lengths
}

// field is one view field: its name, type, unit and getter (one of i, f, s,
// b by kind).
type field struct {
	name, unit, doc string
	k               kind
	i               func(*evalCtx) int64
	f               func(*evalCtx) float64
	s               func(*evalCtx) string
	b               func(*evalCtx) bool
}

// requestFields are the request's, in every stage.
var requestFields = []field{
	{name: "id", k: kString, doc: "request id", s: func(c *evalCtx) string { return c.rv.ID() }},
	{name: "tenant_id", k: kString, doc: "tenant (\"\" if none)", s: func(c *evalCtx) string { return c.rv.TenantID() }},
	{name: "slo_class", k: kString, doc: "SLO class (\"\" if none)", s: func(c *evalCtx) string { return c.rv.SLOClass() }},
	{name: "model", k: kString, doc: "model the request asks for", s: func(c *evalCtx) string { return c.rv.Model() }},
	{name: "session_id", k: kString, doc: "session (\"\" if none)", s: func(c *evalCtx) string { return c.rv.SessionID() }},
	{name: "priority", k: kInt, doc: "the request's priority column", i: func(c *evalCtx) int64 { return int64(c.rv.Priority()) }},
	{name: "input_tokens", k: kInt, unit: "tokens", doc: "prompt length", i: func(c *evalCtx) int64 { return int64(c.rv.InputTokens()) }},
	{name: "output_tokens", k: kInt, unit: "tokens", doc: "the output length as a router can know it: the bundle's predictor's (predictor:), the true length only with oracle: true; None in Starlark when unknown (no predictor), and a tree may then not read it", i: outputField},
	{name: "arrival_us", k: kInt, unit: "µs", doc: "arrival time", i: func(c *evalCtx) int64 { return c.rv.ArrivalUS() }},
	{name: "lora", k: kString, doc: "LoRA adapter (\"\" = the base model)", s: func(c *evalCtx) string { return c.rv.LoRA() }},
	{name: "prefix_blocks", k: kInt, unit: "blocks", doc: "prompt blocks carrying a prefix-cache key", i: func(c *evalCtx) int64 { return int64(c.rv.PrefixBlocks()) }},
	{name: "now_us", k: kInt, unit: "µs", doc: "time of the decision", i: func(c *evalCtx) int64 { return c.rv.NowUS() }},
}

// schedRequestFields are the request's progress, in the scheduler and
// preemption stages only.
var schedRequestFields = []field{
	{name: "enqueued_us", k: kInt, unit: "µs", doc: "entered this replica's waiting queue", i: func(c *evalCtx) int64 { return c.st.Enqueued }},
	{name: "generated_tokens", k: kInt, unit: "tokens", doc: "output tokens generated so far (as of the last completed step)", i: func(c *evalCtx) int64 { return int64(c.st.Generated) }},
	{name: "computed_tokens", k: kInt, unit: "tokens", doc: "prompt tokens whose KV exists", i: func(c *evalCtx) int64 { return int64(c.st.Computed) }},
	{name: "preemptions", k: kInt, doc: "times preempted so far", i: func(c *evalCtx) int64 { return int64(c.st.Preemptions) }},
	{name: "cached_tokens", k: kInt, unit: "tokens", doc: "prompt tokens served from the prefix cache on first scheduling", i: func(c *evalCtx) int64 { return int64(c.st.CachedTok) }},
}

func (c *evalCtx) replica() *policy.ReplicaView {
	if c.rep != nil {
		return c.rep
	}
	return c.cv.Replica(c.i)
}

func (c *evalCtx) repStats() *replicaStats {
	return c.tr.replica(c.replica().ID(), c.rv.NowUS())
}

// replicaFields are a candidate replica's (routing; cluster.replicas in
// Starlark).
var replicaFields = []field{
	{name: "id", k: kString, doc: "replica id, <deployment>/<n>", s: func(c *evalCtx) string { return c.replica().ID() }},
	{name: "index", k: kInt, doc: "position among the candidates (0-based)", i: func(c *evalCtx) int64 { return int64(c.i) }},
	{name: "deployment", k: kString, doc: "its deployment", s: func(c *evalCtx) string { return c.replica().Deployment() }},
	{name: "pool_role", k: kString, doc: "its pool's role (monolithic)", s: func(c *evalCtx) string { return c.replica().Role() }},
	{name: "state", k: kString, doc: "lifecycle state (serving)", s: func(c *evalCtx) string { return c.replica().State() }},
	{name: "queue_depth", k: kInt, unit: "requests", doc: "in its waiting queue", i: func(c *evalCtx) int64 { return int64(c.replica().Waiting()) }},
	{name: "batch_size", k: kInt, unit: "requests", doc: "in its running batch", i: func(c *evalCtx) int64 { return int64(c.replica().Running()) }},
	{name: "in_flight", k: kInt, unit: "requests", doc: "routed there, not yet in its queue", i: func(c *evalCtx) int64 { return int64(c.replica().InFlight()) }},
	{name: "outstanding", k: kInt, unit: "requests", doc: "queue_depth + batch_size + in_flight (what least-loaded compares)", i: func(c *evalCtx) int64 { return int64(c.replica().Load()) }},
	{name: "kv_utilization", k: kFloat, unit: "fraction", doc: "KV blocks in use / total (0 when unknown)", f: func(c *evalCtx) float64 { return c.replica().KVUtilization() }},
	{name: "kv_free_blocks", k: kInt, unit: "blocks", doc: "KV blocks not in use", i: func(c *evalCtx) int64 { r := c.replica(); return r.KVTotal() - r.KVUsed() }},
	{name: "kv_used_blocks", k: kInt, unit: "blocks", doc: "KV blocks in use", i: func(c *evalCtx) int64 { return c.replica().KVUsed() }},
	{name: "kv_total_blocks", k: kInt, unit: "blocks", doc: "KV blocks of the replica", i: func(c *evalCtx) int64 { return c.replica().KVTotal() }},
	{name: "cached_blocks", k: kInt, unit: "blocks", doc: "leading prompt blocks of the request this replica holds, as the router has heard (kv_event_delay); in Starlark the method cached_blocks(request)", i: func(c *evalCtx) int64 { return int64(c.cv.CachedBlocks(c.i)) }},
	{name: "cache_hit_rate", k: kFloat, unit: "fraction", doc: "recent prompt tokens served from cache / prompt tokens (EWMA over its finished requests, weight 1/16)", f: func(c *evalCtx) float64 { return c.repStats().hit }},
	{name: "recent_ttft_us", k: kFloat, unit: "µs", doc: "recent time to first token (EWMA, weight 1/16)", f: func(c *evalCtx) float64 { return c.repStats().ttft }},
	{name: "recent_tpot_us", k: kFloat, unit: "µs", doc: "recent time per output token (EWMA, weight 1/16)", f: func(c *evalCtx) float64 { return c.repStats().tpot }},
	{name: "estimated_wait_us", k: kFloat, unit: "µs", doc: "recent wait in its queue, enqueued → first scheduled (EWMA, weight 1/16)", f: func(c *evalCtx) float64 { return c.repStats().wait }},
	{name: "lora_resident", k: kBool, doc: "the request's LoRA adapter is in one of its GPU slots, as last reported (false for the base model)", b: func(c *evalCtx) bool { return c.replica().HasLoRA(c.rv.LoRA()) }},
	{name: "lora_free_slots", k: kInt, unit: "adapters", doc: "adapter slots not held by an adapter its running requests use (max_loras − running adapters; 0 without LoRA)", i: func(c *evalCtx) int64 { return int64(c.replica().LoRAFreeSlots()) }},
	{name: "lora_count", k: kInt, unit: "adapters", doc: "LoRA adapters in its GPU slots (0 without LoRA)", i: func(c *evalCtx) int64 { return int64(len(c.replica().LoRAs())) }},
	{name: "kv_lower_used_blocks", k: kInt, unit: "blocks", doc: "blocks held in its lower KV tiers, all tiers (0 without tiers); per tier in Starlark: r.kv_tiers", i: func(c *evalCtx) int64 { return lower(c).used }},
	{name: "kv_lower_total_blocks", k: kInt, unit: "blocks", doc: "capacity of its lower KV tiers, all tiers (0 without tiers)", i: func(c *evalCtx) int64 { return lower(c).total }},
	{name: "kv_lower_utilization", k: kFloat, unit: "fraction", doc: "kv_lower_used_blocks / kv_lower_total_blocks (0 without tiers)", f: func(c *evalCtx) float64 { return lower(c).util() }},
	{name: "kv_offload_rate", k: kFloat, unit: "blocks/s", doc: "blocks copied into its lower tiers per second, all tiers, over the last window of at least 1 s", f: func(c *evalCtx) float64 { return lower(c).off }},
	{name: "kv_reload_rate", k: kFloat, unit: "blocks/s", doc: "blocks loaded from its lower tiers to the GPU per second, all tiers, over the last window of at least 1 s", f: func(c *evalCtx) float64 { return lower(c).rel }},
}

// lowerSum sums a replica's lower KV tiers.
type lowerSum struct {
	used, total int64
	off, rel    float64
}

func (l lowerSum) util() float64 {
	if l.total <= 0 {
		return 0
	}
	return float64(l.used) / float64(l.total)
}

func lower(c *evalCtx) lowerSum {
	var l lowerSum
	for _, t := range c.replica().Tiers() {
		l.used, l.total, l.off, l.rel = l.used+t.Used, l.total+t.Total, l.off+t.OffloadRate, l.rel+t.ReloadRate
	}
	return l
}

// tierFields are one lower KV tier of a replica (Starlark: r.kv_tiers,
// top down).
var tierFields = []field{
	{name: "name", k: kString, doc: "the tier's name (cpu, storage, …)", s: func(c *evalCtx) string { return c.tier.Name }},
	{name: "used_blocks", k: kInt, unit: "blocks", doc: "blocks it holds", i: func(c *evalCtx) int64 { return c.tier.Used }},
	{name: "total_blocks", k: kInt, unit: "blocks", doc: "its capacity", i: func(c *evalCtx) int64 { return c.tier.Total }},
	{name: "utilization", k: kFloat, unit: "fraction", doc: "used_blocks / total_blocks", f: func(c *evalCtx) float64 {
		if c.tier.Total <= 0 {
			return 0
		}
		return float64(c.tier.Used) / float64(c.tier.Total)
	}},
	{name: "offload_rate", k: kFloat, unit: "blocks/s", doc: "blocks copied in per second over the last window of at least 1 s", f: func(c *evalCtx) float64 { return c.tier.OffloadRate }},
	{name: "reload_rate", k: kFloat, unit: "blocks/s", doc: "blocks loaded to the GPU per second over the last window of at least 1 s", f: func(c *evalCtx) float64 { return c.tier.ReloadRate }},
}

func (c *evalCtx) tenant() *tenantStats { return c.tr.tenant(c.rv.TenantID(), c.rv.NowUS()) }

// tenantFields are the router's state of the request's tenant.
var tenantFields = []field{
	{name: "id", k: kString, doc: "the tenant (the request's tenant_id)", s: func(c *evalCtx) string { return c.rv.TenantID() }},
	{name: "request_count", k: kInt, unit: "requests", doc: "arrivals of the tenant so far (not counting this one)", i: func(c *evalCtx) int64 { return c.tenant().count }},
	{name: "active", k: kInt, unit: "requests", doc: "admitted and not finished", i: func(c *evalCtx) int64 { return c.tenant().active }},
	{name: "recent_rate", k: kFloat, unit: "requests/s", doc: "arrivals per second over the last 10 s (since the first arrival when sooner, at least 1 s)", f: func(c *evalCtx) float64 { return c.tenant().rate }},
	{name: "burst_detected", k: kBool, doc: "arrivals in the current second >= 5 and >= 3 × recent_rate", b: func(c *evalCtx) bool { return c.tenant().burst }},
}

func (c *evalCtx) global() *globalStats { return c.tr.global(c.rv.NowUS()) }

// routerFields are the router's global state.
var routerFields = []field{
	{name: "in_flight", k: kInt, unit: "requests", doc: "admitted and not finished, all tenants", i: func(c *evalCtx) int64 { return c.global().active }},
	{name: "request_count", k: kInt, unit: "requests", doc: "arrivals so far", i: func(c *evalCtx) int64 { return c.global().count }},
	{name: "completed", k: kInt, unit: "requests", doc: "requests completed so far", i: func(c *evalCtx) int64 { return c.global().completed }},
	{name: "request_rate", k: kFloat, unit: "requests/s", doc: "arrivals per second over the last 10 s (since the first arrival when sooner, at least 1 s)", f: func(c *evalCtx) float64 { return c.global().rate }},
	{name: "throughput", k: kFloat, unit: "requests/s", doc: "completions per second over the last 10 s (as request_rate)", f: func(c *evalCtx) float64 { return c.global().throughput }},
}

// clusterFields are aggregates over the candidates.
var clusterFields = []field{
	{name: "size", k: kInt, unit: "replicas", doc: "number of candidates", i: func(c *evalCtx) int64 { return int64(c.cv.Len()) }},
	{name: "max_load", k: kInt, unit: "requests", doc: "largest outstanding among the candidates, at least 1", i: func(c *evalCtx) int64 { return int64(c.maxLoad()) }},
	{name: "min_load", k: kInt, unit: "requests", doc: "smallest outstanding among the candidates", i: func(c *evalCtx) int64 { return int64(c.cv.Replica(c.cv.LeastLoaded()).Load()) }},
	{name: "queued", k: kInt, unit: "requests", doc: "Σ (queue_depth + in_flight) over the candidates (what queue-limit counts)", i: func(c *evalCtx) int64 { return queued(c.cv) }},
	{name: "now_us", k: kInt, unit: "µs", doc: "time of the decision", i: func(c *evalCtx) int64 { return c.cv.NowUS() }},
	{name: "held", k: kInt, unit: "requests", doc: "the candidates' requests held at the router by the routing policy (a wait), not counting this one", i: func(c *evalCtx) int64 { return int64(c.cv.Held()) }},
	{name: "gateway_queued", k: kInt, unit: "requests", doc: "the candidates' requests queued at the gateway by flow control (router.flow_control), held ones not counted", i: func(c *evalCtx) int64 { return int64(c.cv.GatewayQueued()) }},
}

func (c *evalCtx) maxLoad() int {
	if c.ml == 0 {
		c.ml = maxLoad(c.cv)
	}
	return c.ml
}

func maxLoad(cv *policy.ClusterView) int {
	m := 1
	for i := 0; i < cv.Len(); i++ {
		if l := cv.Replica(i).Load(); l > m {
			m = l
		}
	}
	return m
}

func queued(cv *policy.ClusterView) int64 {
	var n int64
	for i := 0; i < cv.Len(); i++ {
		r := cv.Replica(i)
		n += int64(r.Waiting() + r.InFlight())
	}
	return n
}

// fieldTable indexes fields by name.
type fieldTable map[string]*field

func table(lists ...[]field) fieldTable {
	t := fieldTable{}
	for _, l := range lists {
		for i := range l {
			t[l[i].name] = &l[i]
		}
	}
	return t
}

func (t fieldTable) names() []string {
	out := make([]string, 0, len(t))
	for k := range t {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	requestTable      = table(requestFields)
	schedRequestTable = table(requestFields, schedRequestFields)
	replicaTable      = table(replicaFields)
	tenantTable       = table(tenantFields)
	routerTable       = table(routerFields)
	clusterTable      = table(clusterFields)
	tierTable         = table(tierFields)
)

// FieldDoc describes one view field for docs and --list-policies.
type FieldDoc struct{ View, Name, Type, Unit, Doc string }

// Fields lists every view field, view by view.
func Fields() []FieldDoc {
	var out []FieldDoc
	for _, v := range []struct {
		name string
		fs   []field
	}{{"request", requestFields}, {"request (scheduler, preemption)", schedRequestFields}, {"replica", replicaFields},
		{"tenant", tenantFields}, {"router", routerFields}, {"cluster", clusterFields}, {"pool", poolFields},
		{"replica tier (Starlark r.kv_tiers)", tierFields}} {
		for _, f := range v.fs {
			out = append(out, FieldDoc{View: v.name, Name: f.name, Type: f.k.String(), Unit: f.unit, Doc: f.doc})
		}
	}
	return out
}
