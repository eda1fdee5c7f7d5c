package config

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/engine/policy"
)

// Upper bounds of the config: far above real deployments (vLLM's largest
// block sizes are in the low thousands), low enough to stay in memory.
const (
	MaxReplicas  = 100000
	MaxBlockSize = 4096
)

// Validate checks values that decoding cannot; errors name the file, line
// and key when the config came from a file. It first sets the batch limits
// left unset (0) to vllm serve's defaults for each engine's GPU
// (ServeLimits), so it is called once the GPU is final (flags applied).
func (c *Cluster) Validate() error {
	c.fillEngineLimits()
	if c.IsFlat() {
		switch {
		case c.Replicas < 1:
			return errors.New(c.Where("replicas", fmt.Sprintf("expected >= 1, found %d", c.Replicas)))
		case c.Replicas > MaxReplicas:
			// About 1 KB each before any work: 10^8 replicas exhausted memory.
			return errors.New(c.Where("replicas", fmt.Sprintf("expected <= %d, found %d", MaxReplicas, c.Replicas)))
		case c.TP < 1:
			return errors.New(c.Where("tp", fmt.Sprintf("expected >= 1, found %d", c.TP)))
		}
		if err := c.validateEngine("engine", &c.Engine); err != nil {
			return err
		}
		if err := c.validateLatency("latency", &c.Latency); err != nil {
			return err
		}
		if c.Parallel != nil || c.Speculative != nil || c.LoRA != nil {
			d := c.Resolved()[0]
			if err := c.validateParallel(0, &d); err != nil {
				return err
			}
			if err := c.validateSpeculative(0, &d); err != nil {
				return err
			}
			if err := c.validateLoRA(0, &d); err != nil {
				return err
			}
		}
	} else if err := c.validateDeployments(); err != nil {
		return err
	}
	if err := c.validateNetwork(); err != nil {
		return err
	}
	return c.validateRouter()
}

func (c *Cluster) validateDeployments() error {
	seen := map[string]int{}
	total := 0
	for i := range c.Deployments {
		d := &c.Deployments[i]
		key := func(k string) string { return fmt.Sprintf("deployments[%d].%s", i, k) }
		switch {
		case d.ID == "":
			return errors.New(c.Where(fmt.Sprintf("deployments[%d]", i), "expected an id (a name for the deployment, e.g. llama8b-h100)"))
		case strings.ContainsAny(d.ID, "/ \t"):
			return errors.New(c.Where(key("id"), fmt.Sprintf("expected a name without '/' or spaces (replica ids are <id>/<n>), found %q", d.ID)))
		case d.Model == "":
			return errors.New(c.Where(fmt.Sprintf("deployments[%d]", i), "expected a model (catalogue name, HuggingFace id or config.json path)"))
		case d.GPU == "":
			return errors.New(c.Where(fmt.Sprintf("deployments[%d]", i), "expected a gpu (catalogue name or GPU YAML file)"))
		case d.TP < 1:
			return errors.New(c.Where(key("tp"), fmt.Sprintf("expected >= 1, found %d", d.TP)))
		case len(d.Pools) == 0:
			return errors.New(c.Where(fmt.Sprintf("deployments[%d]", i), "expected pools: [{role: monolithic, replicas: N}]"))
		}
		if !(d.GPUHourUSD >= 0) || math.IsInf(d.GPUHourUSD, 1) {
			return errors.New(c.Where(key("gpu_hour_usd"), fmt.Sprintf("expected a price >= 0, found %g", d.GPUHourUSD)))
		}
		if j, dup := seen[d.ID]; dup {
			return errors.New(c.Where(key("id"), fmt.Sprintf("duplicate deployment id %q (first at deployments[%d])", d.ID, j)))
		}
		seen[d.ID] = i
		if err := c.validateEngine(key("engine"), &d.Engine); err != nil {
			return err
		}
		if err := c.validateLatency(key("latency"), &d.Latency); err != nil {
			return err
		}
		if err := c.validatePools(i, d); err != nil {
			return err
		}
		if err := c.validateParallel(i, d); err != nil {
			return err
		}
		if err := c.validateSpeculative(i, d); err != nil {
			return err
		}
		if err := c.validateLoRA(i, d); err != nil {
			return err
		}
		if d.KV != nil {
			if err := c.validateKV(key("kv"), d.KV); err != nil {
				return err
			}
		}
		if err := c.validatePD(i, d); err != nil {
			return err
		}
		if d.KVTransfer != nil {
			if !d.IsPD() {
				return errors.New(c.Where(key("kv_transfer"), "only used by a deployment with prefill and decode pools"))
			}
			if err := c.validateKVTransfer(key("kv_transfer"), d.KVTransfer); err != nil {
				return err
			}
		}
		for j := range d.Pools {
			p := &d.Pools[j]
			pk := func(k string) string { return fmt.Sprintf("deployments[%d].pools[%d].%s", i, j, k) }
			switch {
			case p.Replicas < 1 && (p.Autoscaler == nil || p.Replicas < 0):
				return errors.New(c.Where(pk("replicas"), fmt.Sprintf("expected >= 1, found %d", p.Replicas)))
			case p.Replicas == 0 && p.MaxReplicas < 1:
				return errors.New(c.Where(pk("max_replicas"), fmt.Sprintf("expected >= 1 for a pool starting at 0 replicas, found %d", p.MaxReplicas)))
			case p.MinReplicas > 0 && p.MaxReplicas > 0 && p.MinReplicas > p.MaxReplicas:
				return errors.New(c.Where(pk("min_replicas"), fmt.Sprintf("expected <= max_replicas (%d), found %d", p.MaxReplicas, p.MinReplicas)))
			case p.MinReplicas < 0:
				return errors.New(c.Where(pk("min_replicas"), fmt.Sprintf("expected >= 0, found %d", p.MinReplicas)))
			case p.MaxReplicas < 0:
				return errors.New(c.Where(pk("max_replicas"), fmt.Sprintf("expected >= 0, found %d", p.MaxReplicas)))
			case p.MinReplicas > 0 && p.MinReplicas > p.Replicas:
				return errors.New(c.Where(pk("min_replicas"), fmt.Sprintf("expected <= replicas (%d), found %d", p.Replicas, p.MinReplicas)))
			case p.MaxReplicas > 0 && p.MaxReplicas < p.Replicas:
				return errors.New(c.Where(pk("max_replicas"), fmt.Sprintf("expected >= replicas (%d), found %d", p.Replicas, p.MaxReplicas)))
			}
			if p.Autoscaler != nil {
				if err := c.validateAutoscaler(pk("autoscaler"), p); err != nil {
					return err
				}
			}
			if err := c.validatePoolHardware(i, j, d); err != nil {
				return err
			}
			total += ScaleSlots(p)
			if total > MaxReplicas {
				return errors.New(c.Where(pk("replicas"), fmt.Sprintf("the cluster would have more than %d replicas", MaxReplicas)))
			}
		}
	}
	return nil
}

func (c *Cluster) validateEngine(at string, e *Engine) error {
	k := func(s string) string { return at + "." + s }
	switch {
	case e.BlockSize < 1:
		return errors.New(c.Where(k("block_size"), fmt.Sprintf("expected >= 1, found %d", e.BlockSize)))
	case e.BlockSize > MaxBlockSize:
		// Each replica keeps one decode bucket per block offset.
		return errors.New(c.Where(k("block_size"), fmt.Sprintf("expected <= %d, found %d", MaxBlockSize, e.BlockSize)))
	case e.MaxNumSeqs > math.MaxInt32:
		return errors.New(c.Where(k("max_num_seqs"), fmt.Sprintf("expected <= %d, found %d", math.MaxInt32, e.MaxNumSeqs)))
	case e.MaxNumBatchedTokens > math.MaxInt32:
		// Token counts are int32 in the scheduler: larger values wrapped.
		return errors.New(c.Where(k("max_num_batched_tokens"), fmt.Sprintf("expected <= %d, found %d", math.MaxInt32, e.MaxNumBatchedTokens)))
	case e.LongPrefillThreshold > math.MaxInt32:
		return errors.New(c.Where(k("long_prefill_token_threshold"), fmt.Sprintf("expected <= %d, found %d", math.MaxInt32, e.LongPrefillThreshold)))
	case e.MaxNumSeqs < 0:
		return errors.New(c.Where(k("max_num_seqs"), fmt.Sprintf("expected >= 1 (or 0: vllm serve's default for the GPU), found %d", e.MaxNumSeqs)))
	case e.MaxNumBatchedTokens < 0:
		return errors.New(c.Where(k("max_num_batched_tokens"), fmt.Sprintf("expected >= 1 (or 0: vllm serve's default for the GPU), found %d", e.MaxNumBatchedTokens)))
	case e.budgetOf != "" && e.MaxNumBatchedTokens < e.MaxNumSeqs:
		return errors.New(c.Where(k("max_num_seqs"), fmt.Sprintf("%d is more than the token budget, vllm serve's default on %s (%d): every running request takes a token of each step; set %s too", e.MaxNumSeqs, e.budgetOf, e.MaxNumBatchedTokens, k("max_num_batched_tokens"))))
	case e.MaxNumBatchedTokens != 0 && e.MaxNumBatchedTokens < e.MaxNumSeqs:
		// vLLM refuses this too: every running request must be able to decode each step.
		return errors.New(c.Where(k("max_num_batched_tokens"), fmt.Sprintf("%s (%d) must be >= %s (%d)", k("max_num_batched_tokens"), e.MaxNumBatchedTokens, k("max_num_seqs"), e.MaxNumSeqs)))
	case e.LongPrefillThreshold < 0:
		return errors.New(c.Where(k("long_prefill_token_threshold"), fmt.Sprintf("expected >= 0, found %d", e.LongPrefillThreshold)))
	case e.KVBlocks < 0:
		return errors.New(c.Where(k("kv_blocks"), fmt.Sprintf("expected >= 0, found %d", e.KVBlocks)))
	case e.KVBlocks > 1<<31-1:
		return errors.New(c.Where(k("kv_blocks"), fmt.Sprintf("expected < 2^31, found %d", e.KVBlocks)))
	case e.GPUMemoryUtilization <= 0 || e.GPUMemoryUtilization > 1:
		return errors.New(c.Where(k("gpu_memory_utilization"), fmt.Sprintf("expected in (0, 1], found %g", e.GPUMemoryUtilization)))
	case e.SchedulingPolicy != "fcfs" && e.SchedulingPolicy != "priority":
		return errors.New(c.Where(k("scheduling_policy"), fmt.Sprintf("expected fcfs or priority, found %q", e.SchedulingPolicy)))
	}
	return nil
}

func (c *Cluster) validateLatency(at string, l *Latency) error {
	k := func(s string) string { return at + "." + s }
	switch l.Mode {
	case "auto", "roofline", "fitted", "linear":
	default:
		return errors.New(c.Where(k("mode"), fmt.Sprintf("expected auto, roofline, fitted or linear, found %q", l.Mode)))
	}
	if len(l.Beta) != 0 && len(l.Beta) != 3 {
		return errors.New(c.Where(k("beta"), fmt.Sprintf("expected 3 coefficients [β0, β1, β2], found %d", len(l.Beta))))
	}
	if len(l.Alpha) != 0 && len(l.Alpha) != 3 {
		return errors.New(c.Where(k("alpha"), fmt.Sprintf("expected 3 coefficients [α0, α1, α2], found %d", len(l.Alpha))))
	}
	for _, v := range append(append([]float64(nil), l.Beta...), l.Alpha...) {
		if !(v >= 0) || math.IsInf(v, 1) {
			return errors.New(c.Where(at, fmt.Sprintf("coefficients must be >= 0 and finite, found %g", v)))
		}
	}
	if !(l.ImageEncodeUS >= 0) || math.IsInf(l.ImageEncodeUS, 1) {
		return errors.New(c.Where(k("image_encode_us"), fmt.Sprintf("expected µs per image >= 0 and finite, found %g", l.ImageEncodeUS)))
	}
	if len(l.Beta) != 0 && (l.Mode == "roofline" || l.Mode == "fitted") {
		return errors.New(c.Where(k("beta"), fmt.Sprintf("β makes a linear model, but %s is %s: set %s to linear (or auto), or remove %s", k("mode"), l.Mode, k("mode"), k("beta"))))
	}
	if len(l.Beta) != 0 && l.Coefficients != "" {
		return errors.New(c.Where(k("beta"), fmt.Sprintf("%s and %s are two step-time models: give one", k("beta"), k("coefficients"))))
	}
	if l.Mode == "linear" && len(l.Beta) == 0 {
		return errors.New(c.Where(k("mode"), fmt.Sprintf("linear needs %s", k("beta"))))
	}
	return nil
}

// RoutingParams are the routing template's parameters, from the router's
// weights key (any template's: today only weighted takes them).
func (r *Router) RoutingParams() policy.Params {
	if len(r.Weights) == 0 {
		return nil
	}
	p := policy.Params{}
	for k, v := range r.Weights {
		p[k] = v
	}
	return p
}

// AdmissionParams are the admission template's parameters: queue_limit is
// its limit, when given.
func (r *Router) AdmissionTemplateParams() policy.Params {
	if r.QueueLimit == 0 && len(r.AdmissionParams) == 0 {
		return nil
	}
	p := policy.Params{}
	for k, v := range r.AdmissionParams {
		p[k] = v
	}
	if r.QueueLimit != 0 {
		p["limit"] = float64(r.QueueLimit)
	}
	return p
}

// Policies builds the router's stages from its keys (the built-in
// templates they name, with their parameters); seed is the run's.
func (r *Router) Policies(seed uint64) (policy.Admission, policy.Priority, policy.Routing, error) {
	env := policy.Env{Seed: seed}
	a, err := policy.NewAdmission(r.Admission, r.AdmissionTemplateParams(), env)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := policy.NewPriority(r.Priority, nil, env)
	if err != nil {
		return nil, nil, nil, err
	}
	rt, err := policy.NewRouting(r.Routing, r.RoutingParams(), env)
	if err != nil {
		return nil, nil, nil, err
	}
	return a, p, rt, nil
}

// validateRouter checks the router keys against the templates they name:
// the templates exist, and their parameters (weights, queue_limit) are
// theirs and in range.
func (c *Cluster) validateRouter() error {
	r := &c.Router
	unknown := func(key string, stage policy.Stage, name string) error {
		names := policy.Names(stage)
		msg := fmt.Sprintf("expected one of %s, found %q", strings.Join(names, ", "), name)
		if s := Suggest(name, names); s != "" {
			msg = fmt.Sprintf("did you mean %s? (%s)", s, msg)
		}
		return errors.New(c.Where(key, msg))
	}
	t, err := policy.Find(policy.StageAdmission, r.Admission)
	if err != nil {
		return unknown("router.admission", policy.StageAdmission, r.Admission)
	}
	akeys := make([]string, 0, len(r.AdmissionParams))
	for k := range r.AdmissionParams {
		akeys = append(akeys, k)
	}
	sort.Strings(akeys)
	for _, k := range akeys {
		if err := t.CheckParam(k, r.AdmissionParams[k]); err != nil {
			return errors.New(c.Where("router.admission_params."+k, err.Error()))
		}
	}
	if _, err := t.Resolve(r.AdmissionTemplateParams()); err != nil {
		key := "router.queue_limit"
		if r.QueueLimit == 0 && len(r.AdmissionParams) > 0 {
			key = "router.admission_params"
		}
		return errors.New(c.Where(key, err.Error()))
	}
	if _, err := policy.Find(policy.StagePriority, r.Priority); err != nil {
		return unknown("router.priority", policy.StagePriority, r.Priority)
	}
	if t, err = policy.Find(policy.StageRouting, r.Routing); err != nil {
		return unknown("router.routing", policy.StageRouting, r.Routing)
	}
	keys := make([]string, 0, len(r.Weights))
	for k := range r.Weights {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := t.CheckParam(k, r.Weights[k]); err != nil {
			return errors.New(c.Where("router.weights."+k, err.Error()))
		}
	}
	if _, err := t.Resolve(r.RoutingParams()); err != nil {
		return errors.New(c.Where("router.weights", err.Error()))
	}
	return c.validateFlowControl()
}
