// Package autoscale decides how many replicas a pool should have: the
// policies (Kubernetes' HPA algorithm, a queue-depth threshold, an
// SLO-driven rule), the stabilisation windows applied to any policy's
// recommendation, the provisioning-delay distributions and warm-up curves
// of new replicas, and the scale-oscillation detector. It does no
// simulation: the cluster (lib/engine/cluster) samples the metrics,
// evaluates a Controller and actuates its decisions.
//
// A policy sees a read-only PoolView and returns a Recommendation with its
// reason; users plug their own (a policy bundle's autoscaler stage) by
// implementing Policy and passing it in cluster.Policies.Autoscale.
package autoscale

import (
	"fmt"
	"math"

	"github.com/blis-sim/blis/lib/engine/config"
)

// Metrics are a pool's metrics averaged over the recent window. Per-replica
// values divide by the replicas able to serve (serving or warming) during
// the samples, as Kubernetes divides by ready pods.
type Metrics struct {
	WindowUS int64 // span averaged over
	// QueueDepth is waiting + in flight per replica (requests held at the
	// router count toward the pool).
	QueueDepth float64
	// Running is the running batch per replica.
	Running float64
	// Utilization is the fraction of replica time spent in steps.
	Utilization float64
	// KVUtilization is the fraction of KV blocks in use.
	KVUtilization float64
	// RequestRate is requests per second arriving for the pool's model
	// (the whole pool, not per replica).
	RequestRate float64
	// SLOAttainment is the fraction of the requests finished in the window
	// (on the pool's replicas) that met the autoscaler's slo; NaN when
	// none finished or no slo is set.
	SLOAttainment float64
	// Latency percentiles of the requests completed in the window (0 when
	// none).
	TTFTP50US, TTFTP99US, E2EP50US, E2EP99US int64
	// Finished counts the requests that reached a final state on the pool
	// in the window.
	Finished int
	// Means for the planner (planner.go): the prompt and output tokens of
	// the requests arriving for the pool's model in the window, and the
	// TTFT, inter-token latency (TPOT) and duration (E2E) of the requests
	// completed on the pool (0 when none).
	InputTokensMean, OutputTokensMean     float64
	TTFTMeanUS, ITLMeanUS, DurationMeanUS float64
}

// PoolView is what a policy sees of one pool at an evaluation.
type PoolView struct {
	Deployment string
	Pool       int    // index in the deployment's pools
	Role       string // the pool's role (monolithic)
	NowUS      int64  // simulated time
	// Current is the pool's replica count: provisioning, warming and
	// serving replicas (draining ones are leaving and do not count).
	Current int
	// Ready is the replicas routing can choose (serving or warming).
	Ready    int
	Min, Max int
	Metrics  Metrics
	// Pending is the requests waiting for the pool now: in its replicas'
	// queues, in their alpha delay, or held at the router.
	Pending int
	// Waiting, Running and InFlight are sums over the pool's replicas now
	// (not stopped): queued, in the running batch, in the alpha delay.
	Waiting, Running, InFlight int
	// SinceLastScaleUS is the time since the pool's last scale action
	// (-1 before the first).
	SinceLastScaleUS int64
	// Perf is the pool's engine as a performance model (its latency model
	// and limits): what NVIDIA Dynamo's planner reads from its
	// pre-deployment profile. Nil when the cluster gives none.
	Perf Perf
}

// Recommendation is a policy's answer: the replica count it wants and why.
type Recommendation struct {
	Desired int
	Reason  string
}

// Policy recommends a pool's replica count. all holds every autoscaled
// pool of the cluster (p is one of them), for policies that look across
// pools. Desired is clamped to [Min, Max] and stabilised by the
// Controller; a policy must be deterministic.
type Policy interface {
	Recommend(p *PoolView, all []PoolView) Recommendation
}

// New returns the built-in policy a pool's config names.
func New(a *config.Autoscaler) (Policy, error) {
	switch a.Policy {
	case "hpa":
		return &HPA{Metric: a.Metric, Target: a.Target, Tolerance: a.Tolerance}, nil
	case "queue-threshold":
		return &QueueThreshold{High: a.Target, Low: a.Low, Step: a.Step}, nil
	case "slo":
		low := a.Low
		if low == 0 {
			low = 0.5
		}
		return &SLO{Target: a.Target, LowUtilization: low}, nil
	case "planner":
		return &Planner{ITLUS: float64(a.SLO.ITL.US())}, nil
	}
	return nil, fmt.Errorf("unknown autoscaler policy %q", a.Policy)
}

// MetricValue is a named hpa metric per ready replica (the average
// Kubernetes computes over ready pods); request_rate is the pool's rate
// over its ready replicas.
func MetricValue(p *PoolView, metric string) float64 {
	m := &p.Metrics
	switch metric {
	case "queue_depth":
		return m.QueueDepth
	case "running":
		return m.Running
	case "utilization":
		return m.Utilization
	case "kv_utilization":
		return m.KVUtilization
	case "request_rate":
		return m.RequestRate / float64(max(p.Ready, 1))
	}
	return math.NaN()
}

// HPA is Kubernetes' horizontal pod autoscaler algorithm on one per-pod
// metric (its replica calculator for Pods and Resource metrics): with r =
// metric per ready replica / target,
//
//	desired = ceil(r × ready), unchanged while |r − 1| <= tolerance;
//
// and when replicas are not ready yet (provisioning) and r > 1, they count
// as using 0: r' = r × ready / current, desired = ceil(r' × current),
// unchanged when |r' − 1| <= tolerance or r' < 1 (a scale-down would
// reverse the direction).
type HPA struct {
	Metric    string
	Target    float64
	Tolerance float64
}

func (h *HPA) Recommend(p *PoolView, _ []PoolView) Recommendation {
	cur, ready := p.Current, p.Ready
	if cur == 0 {
		// Scale from zero: Kubernetes' HPA cannot; like KEDA, one replica
		// is started as soon as anything waits.
		if p.Pending > 0 {
			return Recommendation{1, fmt.Sprintf("hpa: %d pending at 0 replicas", p.Pending)}
		}
		return Recommendation{0, "hpa: idle at 0 replicas"}
	}
	if ready == 0 {
		return Recommendation{cur, "hpa: no replica ready: no metric"}
	}
	v := MetricValue(p, h.Metric)
	r := v / h.Target
	if unready := cur - ready; unready == 0 || r <= 1 {
		if math.Abs(r-1) <= h.Tolerance {
			return Recommendation{cur, fmt.Sprintf("hpa: %s %.3g / target %g within tolerance %g", h.Metric, v, h.Target, h.Tolerance)}
		}
		d := int(math.Ceil(r * float64(ready)))
		return Recommendation{d, fmt.Sprintf("hpa: ceil(%d ready × %s %.3g / target %g) = %d", ready, h.Metric, v, h.Target, d)}
	}
	r2 := r * float64(ready) / float64(cur)
	if math.Abs(r2-1) <= h.Tolerance || r2 < 1 {
		return Recommendation{cur, fmt.Sprintf("hpa: %s %.3g on %d ready of %d (not ready count as 0): ratio %.3g, unchanged", h.Metric, v, ready, cur, r2)}
	}
	d := max(cur, int(math.Ceil(r2*float64(cur))))
	return Recommendation{d, fmt.Sprintf("hpa: ceil(%d × %s %.3g × %d ready / %d / target %g) = %d (not ready count as 0)", cur, h.Metric, v, ready, cur, h.Target, d)}
}

// QueueThreshold adds Step replicas while the queue per replica is at or
// above High and removes Step while it is at or below Low (KEDA's
// threshold scalers).
type QueueThreshold struct {
	High, Low float64
	Step      int
}

func (q *QueueThreshold) Recommend(p *PoolView, _ []PoolView) Recommendation {
	v := p.Metrics.QueueDepth
	switch {
	case p.Current == 0 && p.Pending > 0:
		return Recommendation{q.Step, fmt.Sprintf("queue-threshold: %d pending at 0 replicas", p.Pending)}
	case v >= q.High:
		return Recommendation{p.Current + q.Step, fmt.Sprintf("queue-threshold: queue %.3g per replica >= %g", v, q.High)}
	case v <= q.Low && p.Current > 0:
		return Recommendation{p.Current - q.Step, fmt.Sprintf("queue-threshold: queue %.3g per replica <= %g", v, q.Low)}
	}
	return Recommendation{p.Current, fmt.Sprintf("queue-threshold: queue %.3g per replica between %g and %g", v, q.Low, q.High)}
}

// SLO keeps the pool's SLO attainment at Target, after NVIDIA Dynamo's
// SLA planner, which sizes pools so that the observed latency meets its
// targets: below the target it adds replicas in proportion to the
// shortfall, ceil(current × (1 + (target − attainment) / target)), at
// least one more; at or above it, it removes one replica when the others
// would run below LowUtilization (utilisation × current / (current − 1)).
type SLO struct {
	Target         float64
	LowUtilization float64
}

func (s *SLO) Recommend(p *PoolView, _ []PoolView) Recommendation {
	m := &p.Metrics
	cur := p.Current
	if cur == 0 {
		if p.Pending > 0 {
			return Recommendation{1, fmt.Sprintf("slo: %d pending at 0 replicas", p.Pending)}
		}
		return Recommendation{0, "slo: idle at 0 replicas"}
	}
	a := m.SLOAttainment
	if math.IsNaN(a) {
		// Nothing finished: scale down only when idle.
		if p.Pending == 0 && m.Utilization == 0 {
			return Recommendation{cur - 1, "slo: no request finished or waiting in the window"}
		}
		return Recommendation{cur, "slo: no request finished in the window"}
	}
	if a < s.Target {
		d := max(cur+1, int(math.Ceil(float64(cur)*(1+(s.Target-a)/s.Target))))
		return Recommendation{d, fmt.Sprintf("slo: attainment %.3f < target %g: ceil(%d × (1 + %.3f)) = %d", a, s.Target, cur, (s.Target-a)/s.Target, d)}
	}
	if cur > 1 {
		if u := m.Utilization * float64(cur) / float64(cur-1); u < s.LowUtilization {
			return Recommendation{cur - 1, fmt.Sprintf("slo: attainment %.3f >= %g, utilisation %.3f on %d replicas < %g", a, s.Target, u, cur-1, s.LowUtilization)}
		}
	}
	return Recommendation{cur, fmt.Sprintf("slo: attainment %.3f >= target %g", a, s.Target)}
}
