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
// implementing Policy and passing it in cluster.Options.Autoscale.
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
}

// PoolView is what a policy sees of one pool at an evaluation.
type PoolView struct {
	Deployment string
	Pool       int   // index in the deployment's pools
	NowUS      int64 // simulated time
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
	// SinceLastScaleUS is the time since the pool's last scale action
	// (-1 before the first).
	SinceLastScaleUS int64
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
	}
	return nil, fmt.Errorf("unknown autoscaler policy %q", a.Policy)
}

// MetricValue is a named hpa metric per replica of the pool's Current
// count: the Ready replicas' average scaled by Ready/Current, so that
// replicas not yet ready count as 0 (Kubernetes' rule for pods not ready
// when scaling up; for an AverageValue target it is the metric's total over
// the current replicas), and request_rate is the pool's rate over Current.
func MetricValue(p *PoolView, metric string) float64 {
	m := &p.Metrics
	f := float64(p.Ready) / float64(max(p.Current, 1))
	switch metric {
	case "queue_depth":
		if p.Ready == 0 {
			return m.QueueDepth / float64(max(p.Current, 1)) // the router's queue
		}
		return m.QueueDepth * f
	case "running":
		return m.Running * f
	case "utilization":
		return m.Utilization * f
	case "kv_utilization":
		return m.KVUtilization * f
	case "request_rate":
		return m.RequestRate / float64(max(p.Current, 1))
	}
	return math.NaN()
}

// HPA is Kubernetes' horizontal pod autoscaler algorithm on one metric:
// desired = ceil(current × metric / target), unchanged while the ratio is
// within the tolerance of 1.
type HPA struct {
	Metric    string
	Target    float64
	Tolerance float64
}

func (h *HPA) Recommend(p *PoolView, _ []PoolView) Recommendation {
	v := MetricValue(p, h.Metric)
	cur := p.Current
	if cur == 0 {
		// Scale from zero: Kubernetes' HPA cannot; like KEDA, one replica
		// is started as soon as anything waits.
		if p.Pending > 0 || v > 0 {
			return Recommendation{1, fmt.Sprintf("hpa: %d pending at 0 replicas", p.Pending)}
		}
		return Recommendation{0, "hpa: idle at 0 replicas"}
	}
	ratio := v / h.Target
	if math.Abs(ratio-1) <= h.Tolerance {
		return Recommendation{cur, fmt.Sprintf("hpa: %s %.3g / target %g within tolerance %g", h.Metric, v, h.Target, h.Tolerance)}
	}
	d := int(math.Ceil(float64(cur) * ratio))
	return Recommendation{d, fmt.Sprintf("hpa: ceil(%d × %s %.3g / target %g) = %d", cur, h.Metric, v, h.Target, d)}
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
