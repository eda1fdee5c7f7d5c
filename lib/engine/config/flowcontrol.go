package config

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FlowControl is the gateway's flow control (router.flow_control;
// docs/engine.md, "Gateway flow control"), after the flow control layer
// of llm-d's endpoint picker (the Gateway API Inference Extension): an
// admitted request waits in a queue at the gateway while the pool is
// saturated, and is routed when it is not. Absent: requests are routed on
// arrival, as before.
type FlowControl struct {
	// Saturation is the signal that gates dispatch (llm-d's saturation
	// detector and its static usage limit).
	Saturation Saturation `yaml:"saturation"`
	// Ordering orders requests within a flow: fcfs, edf (earliest
	// deadline: the client's timeout or the gateway TTL) or slo-deadline
	// (arrival + the TTFT target of the request's slo_class).
	Ordering string `yaml:"ordering"`
	// Fairness shares a priority band between its flows (tenants):
	// global-strict (one queue: the ordering across tenants) or
	// round-robin (tenants in turn).
	Fairness string `yaml:"fairness"`
	// TTL is the longest a request waits at the gateway before it is
	// rejected (0 = no limit: only its client's timeout ends the wait).
	TTL Duration `yaml:"ttl"`
	// MaxRequests and MaxTokens bound the queue (0 = unbounded); tokens
	// are prompt tokens, where llm-d bounds the payload bytes (about 4 per
	// token).
	MaxRequests int   `yaml:"max_requests"`
	MaxTokens   int64 `yaml:"max_tokens"`
	// Bands bound each priority's share of the queue; a priority without
	// a band has only the global bounds.
	Bands []Band `yaml:"bands,omitempty"`
	// SLOTTFT is slo-deadline's TTFT target per slo_class.
	SLOTTFT map[string]Duration `yaml:"slo_ttft,omitempty"`
}

// Saturation is the gateway's saturation detector. Dispatch goes on while
// the pool's saturation is below Limit.
type Saturation struct {
	// Detector is utilization (llm-d's default: queue depth and KV use
	// from the replicas' metrics) or concurrency (requests on each replica).
	Detector string `yaml:"detector"`
	// QueueDepth and KVCache are the utilization detector's thresholds
	// (llm-d: queueDepthThreshold 5, kvCacheUtilThreshold 0.8).
	QueueDepth float64 `yaml:"queue_depth"`
	KVCache    float64 `yaml:"kv_cache"`
	// MaxConcurrency is the concurrency detector's requests per replica
	// (llm-d: maxConcurrency 100).
	MaxConcurrency int `yaml:"max_concurrency"`
	// Limit is the saturation at which dispatch stops (llm-d's static
	// usage limit policy: 1.0).
	Limit float64 `yaml:"limit"`
}

// Band bounds one priority's queue.
type Band struct {
	Priority    int   `yaml:"priority"`
	MaxRequests int   `yaml:"max_requests"`
	MaxTokens   int64 `yaml:"max_tokens"`
}

// Flow-control names.
var (
	FlowOrderings  = []string{"fcfs", "edf", "slo-deadline"}
	FlowFairness   = []string{"global-strict", "round-robin"}
	FlowDetectors  = []string{"utilization", "concurrency"}
	defaultFlowCtl = FlowControl{Saturation: Saturation{Detector: "utilization", QueueDepth: 5, KVCache: 0.8, MaxConcurrency: 100, Limit: 1},
		Ordering: "fcfs", Fairness: "global-strict"}
)

// DefaultFlowControl is what an empty flow_control section means: llm-d's
// defaults (utilization detector, FCFS, global-strict fairness, no TTL,
// unbounded queue).
func DefaultFlowControl() FlowControl { return defaultFlowCtl }

// UnmarshalYAML fills absent keys with their defaults.
func (f *FlowControl) UnmarshalYAML(n *yaml.Node) error {
	*f = DefaultFlowControl()
	type plain FlowControl
	return n.Decode((*plain)(f))
}

// UnmarshalYAML fills absent keys with their defaults.
func (s *Saturation) UnmarshalYAML(n *yaml.Node) error {
	*s = defaultFlowCtl.Saturation
	type plain Saturation
	return n.Decode((*plain)(s))
}

func oneOf(c *Cluster, key, v string, names []string) error {
	for _, n := range names {
		if v == n {
			return nil
		}
	}
	msg := fmt.Sprintf("expected one of %s, found %q", strings.Join(names, ", "), v)
	if s := Suggest(v, names); s != "" {
		msg = "did you mean " + s + "? (" + msg + ")"
	}
	return errors.New(c.Where(key, msg))
}

func (c *Cluster) validateFlowControl() error {
	f := c.Router.FlowControl
	if f == nil {
		return nil
	}
	k := func(s string) string { return "router.flow_control." + s }
	s := &f.Saturation
	if err := oneOf(c, k("saturation.detector"), s.Detector, FlowDetectors); err != nil {
		return err
	}
	if err := oneOf(c, k("ordering"), f.Ordering, FlowOrderings); err != nil {
		return err
	}
	if err := oneOf(c, k("fairness"), f.Fairness, FlowFairness); err != nil {
		return err
	}
	pos := func(key string, v float64, what string) error {
		if !(v > 0) || math.IsInf(v, 1) {
			return errors.New(c.Where(k(key), fmt.Sprintf("expected %s > 0, found %g", what, v)))
		}
		return nil
	}
	if err := pos("saturation.queue_depth", s.QueueDepth, "requests"); err != nil {
		return err
	}
	if err := pos("saturation.limit", s.Limit, "a saturation"); err != nil {
		return err
	}
	switch {
	case !(s.KVCache > 0 && s.KVCache <= 1):
		return errors.New(c.Where(k("saturation.kv_cache"), fmt.Sprintf("expected a fraction in (0, 1], found %g", s.KVCache)))
	case s.MaxConcurrency < 1:
		return errors.New(c.Where(k("saturation.max_concurrency"), fmt.Sprintf("expected requests >= 1, found %d", s.MaxConcurrency)))
	case f.TTL < 0:
		return errors.New(c.Where(k("ttl"), fmt.Sprintf("expected a duration >= 0 (0 = none), found %v", f.TTL)))
	case f.MaxRequests < 0:
		return errors.New(c.Where(k("max_requests"), fmt.Sprintf("expected >= 0 (0 = unbounded), found %d", f.MaxRequests)))
	case f.MaxTokens < 0:
		return errors.New(c.Where(k("max_tokens"), fmt.Sprintf("expected >= 0 (0 = unbounded), found %d", f.MaxTokens)))
	}
	seen := map[int]int{}
	for i, b := range f.Bands {
		bk := func(s string) string { return fmt.Sprintf("router.flow_control.bands[%d].%s", i, s) }
		if j, dup := seen[b.Priority]; dup {
			return errors.New(c.Where(bk("priority"), fmt.Sprintf("duplicate band for priority %d (first at bands[%d])", b.Priority, j)))
		}
		seen[b.Priority] = i
		switch {
		case b.MaxRequests < 0:
			return errors.New(c.Where(bk("max_requests"), fmt.Sprintf("expected >= 0 (0 = only the global bound), found %d", b.MaxRequests)))
		case b.MaxTokens < 0:
			return errors.New(c.Where(bk("max_tokens"), fmt.Sprintf("expected >= 0 (0 = only the global bound), found %d", b.MaxTokens)))
		}
	}
	if f.Ordering == "slo-deadline" && len(f.SLOTTFT) == 0 {
		return errors.New(c.Where(k("ordering"), "slo-deadline needs slo_ttft: {<slo_class>: <TTFT target>, ...}"))
	}
	if f.Ordering != "slo-deadline" && len(f.SLOTTFT) > 0 {
		return errors.New(c.Where(k("slo_ttft"), fmt.Sprintf("only used by ordering: slo-deadline (ordering is %s)", f.Ordering)))
	}
	classes := make([]string, 0, len(f.SLOTTFT))
	for cl := range f.SLOTTFT {
		classes = append(classes, cl)
	}
	sort.Strings(classes)
	for _, cl := range classes {
		if f.SLOTTFT[cl] <= 0 {
			return errors.New(c.Where(k("slo_ttft."+cl), fmt.Sprintf("expected a TTFT target > 0, found %v", f.SLOTTFT[cl])))
		}
	}
	return nil
}
