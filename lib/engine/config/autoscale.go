package config

import (
	"errors"
	"fmt"
	"math"

	"go.yaml.in/yaml/v3"
)

// Autoscaler is a pool's autoscaler (docs/engine.md, "Autoscaling"). A
// pool without one keeps its replicas for the whole run.
type Autoscaler struct {
	// Policy is hpa, queue-threshold, slo or planner (NVIDIA Dynamo's SLA
	// planner, for prefill and decode pools); a policy bundle's autoscaler
	// stage replaces it through cluster.Policies.Autoscale.
	Policy string `yaml:"policy"`
	// Interval is how often the policy is evaluated (Kubernetes' HPA sync
	// period is 15 s).
	Interval Duration `yaml:"interval"`
	// Sample is how often the pool's metrics are sampled and the event
	// triggers checked (1 s).
	Sample Duration `yaml:"sample"`
	// Window is the span the metrics are averaged over (0 = interval).
	Window Duration `yaml:"window"`
	// Metric is what hpa scales on: queue_depth, running, utilization,
	// kv_utilization or request_rate (per replica).
	Metric string `yaml:"metric"`
	// Target is the metric's target per replica (hpa), the per-replica
	// queue depth that scales up (queue-threshold), or the SLO attainment
	// to keep (slo).
	Target float64 `yaml:"target"`
	// Tolerance: hpa does nothing while |metric/target − 1| ≤ tolerance.
	Tolerance float64 `yaml:"tolerance"`
	// Low is queue-threshold's per-replica queue depth at or below which it
	// scales down, and slo's utilisation below which it scales down (after
	// the removal).
	Low float64 `yaml:"low"`
	// Step is how many replicas queue-threshold adds or removes at once.
	Step int `yaml:"step"`
	// SLO defines a met request for slo_attainment (0 = no bound).
	SLO SLOSpec `yaml:"slo"`
	// Stabilization windows, as Kubernetes' HPA behaviour defines them.
	Stabilization Stabilization `yaml:"stabilization"`
	// ScaleToZero lets the pool go down to 0 replicas (min_replicas then
	// defaults to 0).
	ScaleToZero  bool         `yaml:"scale_to_zero"`
	Provisioning Distribution `yaml:"provisioning"`
	WeightLoad   WeightLoad   `yaml:"weight_load"`
	Warmup       Warmup       `yaml:"warmup"`
	Drain        Drain        `yaml:"drain"`
	Triggers     Triggers     `yaml:"triggers"`
}

// SLOSpec bounds a request's latency for SLO attainment; ITL is also the
// planner's decode target.
type SLOSpec struct {
	TTFT Duration `yaml:"ttft"`
	E2E  Duration `yaml:"e2e"`
	ITL  Duration `yaml:"itl"` // time per output token (tpot)
}

// Stabilization windows: scale-down follows the highest recommendation of
// the down window, scale-up the lowest of the up window.
type Stabilization struct {
	Up   Duration `yaml:"up"`
	Down Duration `yaml:"down"`
}

// Distribution is a seeded delay distribution.
type Distribution struct {
	Dist   string   `yaml:"dist"`   // constant | uniform | normal | lognormal
	Value  Duration `yaml:"value"`  // constant
	Min    Duration `yaml:"min"`    // uniform
	Max    Duration `yaml:"max"`    // uniform
	Mean   Duration `yaml:"mean"`   // normal (truncated at 0)
	Stddev Duration `yaml:"stddev"` // normal
	Median Duration `yaml:"median"` // lognormal: e^mu
	Sigma  float64  `yaml:"sigma"`  // lognormal: σ of the log
}

// WeightLoad is the time a provisioned replica spends loading its weights:
// Time when set, else the model's weight bytes over BandwidthGBs.
type WeightLoad struct {
	Time         Duration `yaml:"time"`
	BandwidthGBs float64  `yaml:"bandwidth_gb_s"` // storage read bandwidth, 10^9 bytes/s
	// Bytes is the weights to load; engine.Prepare fills it from the
	// model catalogue when 0.
	Bytes float64 `yaml:"bytes"`
}

// Warmup is the performance penalty of a new replica: its step times are
// multiplied by a factor going from InitialFactor to 1 over Duration.
type Warmup struct {
	Curve         string   `yaml:"curve"` // linear | exponential | step
	Duration      Duration `yaml:"duration"`
	InitialFactor float64  `yaml:"initial_factor"`
}

// Drain is how a replica being removed finishes.
type Drain struct {
	Mode    string   `yaml:"mode"`    // immediate | wait | redirect
	Timeout Duration `yaml:"timeout"` // wait, redirect: requests left then are dropped
}

// Triggers evaluate the policy at once, between intervals, when a sampled
// metric crosses them (0 = off).
type Triggers struct {
	QueueDepthAbove float64  `yaml:"queue_depth_above"` // per replica, last sample
	SLOBelow        float64  `yaml:"slo_below"`         // attainment over the window
	UtilizationHigh float64  `yaml:"utilization_high"`  // every sample of the sustain span above
	UtilizationLow  float64  `yaml:"utilization_low"`   // every sample of the sustain span below
	Sustain         Duration `yaml:"sustain"`           // 0 = window
	RateChange      float64  `yaml:"rate_change"`       // |rate / previous window's rate − 1| above
}

// Default weight-load bandwidth: 2 GB/s, a local NVMe read (network
// storage is often slower; set weight_load for your platform).
const DefaultWeightBandwidthGBs = 2

// DefaultAutoscaler is what absent autoscaler keys mean: Kubernetes' HPA
// defaults (15 s sync, tolerance 0.1, scale-down stabilisation 300 s,
// scale-up 0 s), instant provisioning, no warm-up penalty, a wait drain
// with Kubernetes' 30 s grace period.
func DefaultAutoscaler() Autoscaler {
	return Autoscaler{Policy: "hpa", Interval: Duration(15e9), Sample: Duration(1e9), Metric: "queue_depth",
		Tolerance: 0.1, Step: 1, Stabilization: Stabilization{Down: Duration(300e9)},
		Provisioning: Distribution{Dist: "constant"}, WeightLoad: WeightLoad{BandwidthGBs: DefaultWeightBandwidthGBs},
		Warmup: Warmup{Curve: "linear", InitialFactor: 1}, Drain: Drain{Mode: "wait", Timeout: Duration(30e9)}}
}

// UnmarshalYAML fills absent keys with their defaults.
func (a *Autoscaler) UnmarshalYAML(n *yaml.Node) error {
	*a = DefaultAutoscaler()
	type plain Autoscaler
	return n.Decode((*plain)(a))
}

// Bounds returns a pool's replica bounds: min_replicas (with an autoscaler
// absent means 1, or 0 with scale_to_zero or replicas: 0; without one,
// replicas) and max_replicas (absent: replicas).
func (p *Pool) Bounds() (lo, hi int) {
	lo, hi = p.MinReplicas, p.MaxReplicas
	if lo == 0 && p.Autoscaler == nil {
		lo = p.Replicas
	} else if lo == 0 && !p.Autoscaler.ScaleToZero && p.Replicas > 0 {
		lo = 1
	}
	if hi == 0 {
		hi = p.Replicas
	}
	return lo, hi
}

// HPAMetrics are the metrics hpa scales on.
var HPAMetrics = []string{"queue_depth", "running", "utilization", "kv_utilization", "request_rate"}

func (c *Cluster) validateAutoscaler(at string, p *Pool) error {
	a := p.Autoscaler
	k := func(s string) string { return at + "." + s }
	bad := func(key, format string, args ...any) error {
		return errors.New(c.Where(key, fmt.Sprintf(format, args...)))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch a.Policy {
	case "hpa", "queue-threshold", "slo":
	case "planner":
		switch {
		case p.Role != "prefill" && p.Role != "decode":
			return bad(k("policy"), "the planner sizes prefill and decode pools (NVIDIA Dynamo's SLA planner), not a %s pool: use hpa, queue-threshold or slo", p.Role)
		case p.Role == "decode" && a.SLO.ITL <= 0:
			return bad(at, "the planner sizes a decode pool for an inter-token latency: set slo.itl (e.g. 40ms)")
		}
	default:
		msg := fmt.Sprintf("expected hpa, queue-threshold, slo or planner, found %q", a.Policy)
		if s := Suggest(a.Policy, []string{"hpa", "queue-threshold", "slo", "planner"}); s != "" {
			msg = "did you mean " + s + "? (" + msg + ")"
		}
		return errors.New(c.Where(k("policy"), msg))
	}
	switch {
	case a.Interval <= 0:
		return bad(k("interval"), "expected a duration > 0, found %s", a.Interval)
	case a.Sample <= 0:
		return bad(k("sample"), "expected a duration > 0, found %s", a.Sample)
	case a.Sample.US() > a.Interval.US():
		return bad(k("sample"), "expected <= interval (%s), found %s", a.Interval, a.Sample)
	case a.Window < 0:
		return bad(k("window"), "expected >= 0, found %s", a.Window)
	case a.Policy != "planner" && (!finite(a.Target) || a.Target <= 0):
		return bad(k("target"), "expected a number > 0, found %g", a.Target)
	case a.Policy == "slo" && a.Target > 1:
		return bad(k("target"), "expected the SLO attainment to keep, in (0, 1], found %g", a.Target)
	case !finite(a.Tolerance) || a.Tolerance < 0 || a.Tolerance >= 1:
		return bad(k("tolerance"), "expected a number in [0, 1), found %g", a.Tolerance)
	case !finite(a.Low) || a.Low < 0:
		return bad(k("low"), "expected a number >= 0, found %g", a.Low)
	case a.Policy == "queue-threshold" && a.Low >= a.Target:
		return bad(k("low"), "expected < target (%g), found %g", a.Target, a.Low)
	case a.Step < 1:
		return bad(k("step"), "expected an integer >= 1, found %d", a.Step)
	case a.Policy == "slo" && a.SLO.TTFT == 0 && a.SLO.E2E == 0 && a.SLO.ITL == 0:
		return bad(k("slo"), "the slo policy needs slo.ttft, slo.e2e or slo.itl")
	}
	if a.Policy == "hpa" {
		ok := false
		for _, m := range HPAMetrics {
			ok = ok || m == a.Metric
		}
		if !ok {
			msg := fmt.Sprintf("expected one of queue_depth, running, utilization, kv_utilization, request_rate, found %q", a.Metric)
			if s := Suggest(a.Metric, HPAMetrics); s != "" {
				msg = "did you mean " + s + "? (" + msg + ")"
			}
			return errors.New(c.Where(k("metric"), msg))
		}
		if (a.Metric == "utilization" || a.Metric == "kv_utilization") && a.Target > 1 {
			return bad(k("target"), "expected a fraction in (0, 1] for %s, found %g", a.Metric, a.Target)
		}
	}
	d := &a.Provisioning
	pk := func(s string) string { return k("provisioning." + s) }
	switch d.Dist {
	case "constant":
	case "uniform":
		if d.Max < d.Min {
			return bad(pk("max"), "expected >= min (%s), found %s", d.Min, d.Max)
		}
	case "normal":
		if d.Mean <= 0 {
			return bad(pk("mean"), "expected a duration > 0, found %s", d.Mean)
		}
	case "lognormal":
		if d.Median <= 0 {
			return bad(pk("median"), "expected a duration > 0, found %s", d.Median)
		}
		if !finite(d.Sigma) || d.Sigma < 0 || d.Sigma > 5 {
			return bad(pk("sigma"), "expected a number in [0, 5], found %g", d.Sigma)
		}
	default:
		return bad(pk("dist"), "expected constant, uniform, normal or lognormal, found %q", d.Dist)
	}
	w := &a.WeightLoad
	switch {
	case !finite(w.BandwidthGBs) || w.BandwidthGBs <= 0:
		return bad(k("weight_load.bandwidth_gb_s"), "expected a number > 0, found %g", w.BandwidthGBs)
	case !finite(w.Bytes) || w.Bytes < 0:
		return bad(k("weight_load.bytes"), "expected a number >= 0, found %g", w.Bytes)
	}
	wu := &a.Warmup
	switch {
	case wu.Curve != "linear" && wu.Curve != "exponential" && wu.Curve != "step":
		return bad(k("warmup.curve"), "expected linear, exponential or step, found %q", wu.Curve)
	case !finite(wu.InitialFactor) || wu.InitialFactor < 1 || wu.InitialFactor > 100:
		return bad(k("warmup.initial_factor"), "expected a step-time factor in [1, 100], found %g", wu.InitialFactor)
	}
	switch a.Drain.Mode {
	case "immediate", "wait", "redirect":
	default:
		return bad(k("drain.mode"), "expected immediate, wait or redirect, found %q", a.Drain.Mode)
	}
	t := &a.Triggers
	for _, f := range []struct {
		key string
		v   float64
	}{{"queue_depth_above", t.QueueDepthAbove}, {"slo_below", t.SLOBelow}, {"utilization_high", t.UtilizationHigh},
		{"utilization_low", t.UtilizationLow}, {"rate_change", t.RateChange}} {
		if !finite(f.v) || f.v < 0 {
			return bad(k("triggers."+f.key), "expected a number >= 0 (0 = off), found %g", f.v)
		}
	}
	if t.SLOBelow > 1 {
		return bad(k("triggers.slo_below"), "expected an attainment in [0, 1], found %g", t.SLOBelow)
	}
	if t.SLOBelow > 0 && a.SLO.TTFT == 0 && a.SLO.E2E == 0 && a.SLO.ITL == 0 {
		return bad(k("triggers.slo_below"), "needs slo.ttft, slo.e2e or slo.itl")
	}
	if t.UtilizationLow > 0 && t.UtilizationHigh > 0 && t.UtilizationLow >= t.UtilizationHigh {
		return bad(k("triggers.utilization_low"), "expected < utilization_high (%g), found %g", t.UtilizationHigh, t.UtilizationLow)
	}
	return nil
}

// ScaleSlots is the number of replicas the simulator keeps for a pool:
// with an autoscaler, twice max_replicas (replicas being drained still
// hold theirs while new ones start), else replicas.
func ScaleSlots(p *Pool) int {
	if p.Autoscaler == nil {
		return max(p.Replicas, p.MaxReplicas)
	}
	_, hi := p.Bounds()
	return 2 * hi
}
