package report

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/engine/autoscale"
	"github.com/blis-sim/blis/lib/trace"
)

// Scalar metrics of a run, for fitness specs (lib/fitness): the same
// numbers as the report's tables, computed by the same accumulators.
// Latencies are in ms, throughputs per second of span, rates and
// attainments fractions in [0, 1].
var MetricNames = []string{
	"throughput", "output_throughput", "goodput", "slo_attainment", "completed_fraction",
	"ttft_mean", "ttft_p50", "ttft_p90", "ttft_p95", "ttft_p99",
	"tpot_mean", "tpot_p50", "tpot_p90", "tpot_p95", "tpot_p99",
	"e2e_mean", "e2e_p50", "e2e_p90", "e2e_p95", "e2e_p99",
	"jain_fairness", "cache_hit_rate", "preemption_rate", "gpu_hours", "cost_usd",
	"rejection_rate", "scale_ups", "scale_downs", "scale_oscillations", "cache_hit_rate_<tier>",
	"router_wait_rate", "router_wait_mean",
}

// TierHitPrefix starts the per-tier hit-rate metrics: cache_hit_rate_gpu,
// cache_hit_rate_cpu, … (one per KV tier, cached_tokens_<tier>).
const TierHitPrefix = "cache_hit_rate_"

// MetricDoc describes each metric (docs/evaluator.md repeats it).
var MetricDoc = map[string]string{
	"throughput":            "completed llm requests per second of span",
	"output_throughput":     "output tokens of completed llm requests per second of span",
	"goodput":               "requests meeting every SLO target per second of span (needs SLOs)",
	"slo_attainment":        "fraction of requests under an SLO meeting every target (needs SLOs)",
	"completed_fraction":    "completed llm requests / llm requests",
	"jain_fairness":         "Jain index of output tokens per second over tenants (unscoped only)",
	"cache_hit_rate":        "prompt tokens served from the prefix cache / prompt tokens of scheduled requests",
	"preemption_rate":       "fraction of llm requests preempted at least once",
	"gpu_hours":             "GPUs paid for × hours (unscoped only): every replica's GPUs over the span, or the scale-events table's integral for an autoscaled run",
	"cost_usd":              "gpu_hours × each deployment's gpu_hour_usd (unscoped only; needs the price in the cluster config)",
	"rejection_rate":        "rejected llm requests / llm requests (admission, or no deployment serving the model)",
	"router_wait_rate":      "admitted llm requests that waited at the router, held by the routing policy (a wait) or queued at the gateway (flow control): routed after admission, or never routed / admitted llm requests (admitted_us, routed_us; a request rejected by a full gateway queue counts: it was never routed; NaN when none was admitted)",
	"router_wait_mean":      "mean ms from admission to routing over the admitted llm requests that were routed (0 for a router that never holds or queues; NaN when none was routed)",
	"scale_ups":             "autoscaler scale-up actions over every pool (unscoped; the scale-events table; 0 for a static cluster)",
	"scale_downs":           "autoscaler scale-down actions over every pool (unscoped; the scale-events table; 0 for a static cluster)",
	"scale_oscillations":    "reversals within 10 minutes (up, down, up or down, up, down) over every pool, as blis-report's autoscaling table flags them (unscoped)",
	"cache_hit_rate_<tier>": "prompt tokens served from tier <tier> (gpu, cpu, storage or a run's own tier: the cached_tokens_<tier> column) / prompt tokens of scheduled requests (unscoped)",
}

// Scope kinds of a metric.
const (
	ScopeAll    = ""
	ScopeClass  = "slo_class"
	ScopeTenant = "tenant"
)

// IsMetric reports whether name is a known metric.
func IsMetric(name string) bool {
	if t, ok := strings.CutPrefix(name, TierHitPrefix); ok {
		return tierName(t)
	}
	for _, n := range MetricNames {
		if n == name {
			return true
		}
	}
	return false
}

// tierName reports whether t can name a KV tier (lower-case letters,
// digits and _).
func tierName(t string) bool {
	if t == "" || t == "<tier>" {
		return false
	}
	for _, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// Unscoped reports whether a metric is the whole run's only (it takes no scope).
func Unscoped(name string) bool {
	switch name {
	case "gpu_hours", "cost_usd", "scale_ups", "scale_downs", "scale_oscillations":
		return true
	}
	return strings.HasPrefix(name, TierHitPrefix)
}

// NeedsDist reports whether a metric needs latency distributions (a
// scoped one then needs the report grouped by its scope).
func NeedsDist(name string) bool {
	return strings.HasPrefix(name, "ttft_") || strings.HasPrefix(name, "tpot_") || strings.HasPrefix(name, "e2e_")
}

// NumRuns is the number of runs (inputs) in the report.
func (rep *Report) NumRuns() int { return len(rep.runs) }

// ScopeValues lists the values of a scope kind seen in run i, sorted.
func (rep *Report) ScopeValues(i int, kind string) []string {
	r := rep.runs[i]
	var names []string
	switch {
	case r.groupCol != "" && r.groupCol == GroupColumns[kind]:
		names = r.names()
	case kind == ScopeClass && r.classKey != nil:
		names = r.classKey.names
	case kind == ScopeTenant && r.tenantKey != nil:
		names = r.tenantKey.names
	}
	out := append([]string(nil), names...)
	sort.Strings(out)
	return out
}

// Metric returns metric name of run i over the rows of a scope: all rows
// (kind ""), one SLO class or one tenant.
func (rep *Report) Metric(i int, name, kind, value string) (float64, error) {
	if !IsMetric(name) {
		return 0, fmt.Errorf("unknown metric %q: expected one of %s", name, strings.Join(MetricNames, ", "))
	}
	if Unscoped(name) && kind != ScopeAll {
		return 0, fmt.Errorf("%s is the whole run's: it takes no scope", name)
	}
	switch {
	case name == "gpu_hours" || name == "cost_usd":
		return rep.billed(i, name)
	case strings.HasPrefix(name, "scale_"):
		return rep.scaled(i, name)
	case strings.HasPrefix(name, TierHitPrefix):
		return rep.tierHit(i, strings.TrimPrefix(name, TierHitPrefix))
	}
	r := rep.runs[i]
	a := r.all
	if kind != ScopeAll {
		if name == "jain_fairness" {
			return 0, fmt.Errorf("jain_fairness is over tenants: it takes no scope")
		}
		a = nil
		var names []string
		var accs []*acc
		switch {
		case r.groupCol != "" && r.groupCol == GroupColumns[kind]:
			names, accs = r.names(), r.groups
		case kind == ScopeClass && r.classKey != nil:
			names, accs = r.classKey.names, r.classes
		case kind == ScopeTenant && r.tenantKey != nil:
			names, accs = r.tenantKey.names, r.tenants
		case kind != ScopeClass && kind != ScopeTenant:
			return 0, fmt.Errorf("unknown scope %q: expected slo_class or tenant", kind)
		}
		for j, n := range names {
			if n == value && j < len(accs) {
				a = accs[j]
			}
		}
		if a == nil {
			known := rep.ScopeValues(i, kind)
			if len(known) == 0 {
				return 0, fmt.Errorf("%s: no %s %q: the results have no %s values", r.path, kind, value, kind)
			}
			return 0, fmt.Errorf("%s: no %s %q: expected one of %s", r.path, kind, value, strings.Join(known, ", "))
		}
		if NeedsDist(name) && a.d[0] == nil {
			return 0, fmt.Errorf("%s by %s needs the report grouped by %s", name, kind, kind)
		}
	}
	sp := r.span() / 1e6
	switch name {
	case "throughput":
		return float64(a.completed) / sp, nil
	case "output_throughput":
		return float64(a.outTok) / sp, nil
	case "goodput", "slo_attainment":
		if a.sloN == 0 {
			return 0, fmt.Errorf("%s: no request under an SLO in scope (give SLO targets)", name)
		}
		if name == "goodput" {
			return float64(a.sloAll) / sp, nil
		}
		return float64(a.sloAll) / float64(a.sloN), nil
	case "completed_fraction":
		return ratio(float64(a.completed), float64(a.llm)), nil
	case "cache_hit_rate":
		return ratio(float64(a.cached), float64(a.schedIn)), nil
	case "preemption_rate":
		return ratio(float64(a.preempted), float64(a.llm)), nil
	case "rejection_rate":
		return ratio(float64(a.status[stRejected]), float64(a.llm)), nil
	case "router_wait_rate":
		return ratio(float64(a.waited), float64(a.admitted)), nil
	case "router_wait_mean":
		if a.waitN == 0 {
			return math.NaN(), nil
		}
		return float64(a.waitUS) / float64(a.waitN) / 1000, nil
	case "jain_fairness":
		var xs []float64
		for _, t := range r.tenants {
			xs = append(xs, float64(t.outTok)/sp)
		}
		return jain(xs), nil
	}
	m, stat, _ := strings.Cut(name, "_")
	d := a.d[map[string]int{"ttft": mTTFT, "tpot": mTPOT, "e2e": mE2E}[m]]
	if d.Count() == 0 {
		return math.NaN(), nil
	}
	return statValue(d, stat) / 1000, nil
}

// billed is run i's GPU-hours, or their cost (name cost_usd). A static
// cluster pays for every replica's GPUs over the whole span (the window
// throughput is measured over); an autoscaled one for what its
// scale-events table says, which the report has only when it was given
// for a run scored alone (blis-report --scale-events, or blis-eval).
func (rep *Report) billed(i int, name string) (float64, error) {
	r := rep.runs[i]
	cost := name == "cost_usd"
	if rep.scale != nil && len(rep.runs) == 1 {
		total := 0.0
		for _, p := range rep.scale.pools {
			u := p.usage(autoscale.DefaultOscillationWindowUS)
			if !cost {
				total += u.GPUHours
				continue
			}
			if math.IsNaN(u.CostUSD) {
				return 0, fmt.Errorf("%s: deployment %s has no price in the scale-events table: set gpu_hour_usd on it in the cluster config", name, p.deployment)
			}
			total += u.CostUSD
		}
		return total, nil
	}
	deps, err := r.meta.SimDeployments()
	if err != nil {
		return 0, fmt.Errorf("%s: %v", r.path, err)
	}
	if len(deps) == 0 {
		return 0, fmt.Errorf("%s: %s needs the deployments blis-sim records in the results' metadata (%s); this table has none", r.path, name, trace.MetaSimDeployments)
	}
	hours := r.span() / 3.6e9
	total := 0.0
	for _, d := range deps {
		if d.Autoscaled {
			return 0, fmt.Errorf("%s: deployment %s is autoscaled: its %s come from the run's scale-events table (blis-sim --scale-events; score the run alone with blis-report --scale-events FILE, or with blis-eval)", r.path, d.ID, name)
		}
		pools := d.Pools
		if len(pools) == 0 {
			pools = []trace.SimPool{{TP: d.TP, PP: d.PP, Replicas: d.Replicas, GPUHourUSD: d.GPUHourUSD}}
		}
		for _, p := range pools {
			g := float64(p.TP*max(p.PP, 1)*p.Replicas) * hours
			if cost {
				if p.GPUHourUSD <= 0 {
					return 0, fmt.Errorf("%s: cost_usd: deployment %s has no price: set gpu_hour_usd on it (or on each of its pools) in the cluster config", r.path, d.ID)
				}
				g *= p.GPUHourUSD
			}
			total += g
		}
	}
	return total, nil
}

// scaled is run i's scale actions (scale_ups, scale_downs) or oscillations
// over every pool, from the scale-events table given with it; 0 for a run
// no pool of which is autoscaled.
func (rep *Report) scaled(i int, name string) (float64, error) {
	r := rep.runs[i]
	if rep.scale != nil && len(rep.runs) == 1 {
		n := 0
		for _, p := range rep.scale.pools {
			u := p.usage(autoscale.DefaultOscillationWindowUS)
			switch name {
			case "scale_ups":
				n += u.Ups
			case "scale_downs":
				n += u.Downs
			default:
				n += len(u.Oscillations)
			}
		}
		return float64(n), nil
	}
	deps, err := r.meta.SimDeployments()
	if err != nil {
		return 0, fmt.Errorf("%s: %v", r.path, err)
	}
	for _, d := range deps {
		if d.Autoscaled {
			return 0, fmt.Errorf("%s: deployment %s is autoscaled: %s come from the run's scale-events table (blis-sim --scale-events; score the run alone with blis-report --scale-events FILE, or with blis-eval)", r.path, d.ID, name)
		}
	}
	return 0, nil // a static cluster never scales
}

// tierHit is run i's prompt tokens served from KV tier t / prompt tokens
// of its scheduled llm requests.
func (rep *Report) tierHit(i int, t string) (float64, error) {
	r := rep.runs[i]
	s := &r.kv
	a := r.all
	if s.in == 0 {
		// No tier columns (or nothing scheduled): every hit was the GPU's.
		if t == "gpu" {
			return ratio(float64(a.cached), float64(a.schedIn)), nil
		}
	}
	switch t {
	case "gpu":
		return ratio(float64(s.gpu), float64(s.in)), nil
	case "cpu":
		return ratio(float64(s.cpu), float64(s.in)), nil
	case "storage":
		return ratio(float64(s.storage), float64(s.in)), nil
	}
	if j := slices.Index(s.extraNames, t); j >= 0 {
		return ratio(float64(s.extra[j]), float64(s.in)), nil
	}
	tiers, err := r.meta.KVTiers()
	if err != nil {
		return 0, fmt.Errorf("%s: %v", r.path, err)
	}
	if slices.Contains(tiers, t) {
		return 0, nil
	}
	return 0, fmt.Errorf("%s: %s%s: the run has no KV tier %q (tiers: gpu, %s)", r.path, TierHitPrefix, t, t, strings.Join(tiers, ", "))
}
