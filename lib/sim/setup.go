package sim

import (
	"github.com/blis-sim/blis/lib/engine"
	"github.com/blis-sim/blis/lib/engine/bundle"
	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/trace"
)

// Setup is a cluster ready to simulate: its config with the computed
// values filled in (KV blocks, tier and transfer defaults), a latency
// model per deployment, and its policies. Every tool builds one the same
// way (New) and either runs it on a table (Run) or drives its cluster
// itself (Cluster: blis-serve).
type Setup struct {
	Cfg    config.Cluster
	Models []latency.Model // per deployment (config.Cluster.Resolved order)
	// Why explains each deployment's latency model, for stderr.
	Why []string
	// Bundle is the run's policy bundle (nil: the config's router keys);
	// Runtime its instance for this run.
	Bundle  *bundle.Bundle
	Runtime *bundle.Runtime
	// Policies are what the cluster decides with: the bundle's stages, and
	// the router keys' for the stages it does not give.
	Policies cluster.Policies
}

// New prepares cfg (a validated config, which it copies and never
// changes) with policy b; a nil b means the bundle the config's policy
// key names, if any. Errors are the user's input (exit status 2).
func New(cfg config.Cluster, b *bundle.Bundle) (*Setup, error) {
	s := &Setup{Cfg: cfg}
	// Prepare fills in kv_blocks and defaults: the caller's copy stays.
	s.Cfg.Deployments = append([]config.Deployment(nil), cfg.Deployments...)
	var err error
	if s.Models, s.Why, err = engine.Prepare(&s.Cfg); err != nil {
		return nil, err
	}
	if b == nil {
		if b, err = bundle.FromConfig(&s.Cfg, bundle.Env{}); err != nil {
			return nil, err
		}
	}
	if b != nil {
		s.Bundle = b
		if s.Runtime, err = b.Instantiate(&s.Cfg); err != nil {
			return nil, err
		}
		s.Policies = s.Runtime.Policies()
	}
	return s, nil
}

// Router names the routing policy the run decides with: the bundle's stage
// when it gives one, else the router key's template.
func (s *Setup) Router() string {
	if s.Policies.Routing != nil {
		return policy.NameOf(s.Policies.Routing)
	}
	return s.Cfg.Router.Routing
}

// LatencyNames lists the deployments' latency models.
func (s *Setup) LatencyNames() []string {
	names := make([]string, len(s.Models))
	for i, m := range s.Models {
		names[i] = m.Name()
	}
	return names
}

// Annotate records what ran on a table's metadata: the deployments, the
// latency models, the lower KV tiers, the router and the policy bundle.
func (s *Setup) Annotate(md trace.Meta) {
	Annotate(md, &s.Cfg, s.Models)
	AnnotateRouter(md, &s.Cfg, s.Policies)
	AnnotatePolicy(md, s.Bundle)
}

// AnnotateRouter records the router's stages a run decides with (p's, and
// the config's router keys' for those p leaves nil): the routing policy,
// the admission and priority policies, and what the routing policy weighs
// when it can say (the summary's advice reads them).
func AnnotateRouter(md trace.Meta, cfg *config.Cluster, p cluster.Policies) {
	adm, pri, rout, err := cfg.Router.Policies(cfg.Seed)
	if err != nil {
		return // a config that does not validate runs nothing
	}
	if p.Admission != nil {
		adm = p.Admission
	}
	if p.Priority != nil {
		pri = p.Priority
	}
	if p.Routing != nil {
		rout = p.Routing
		md.Set(trace.MetaSimRouter, policy.NameOf(rout))
	}
	md.Set(trace.MetaSimAdmission, policy.NameOf(adm))
	md.Set(trace.MetaSimPriority, policy.NameOf(pri))
	if sig, ok := policy.SignalsOf(rout); ok {
		md.Set(trace.MetaSimRouterSignals, sig.String())
	}
}

// Cluster builds the cluster itself, for a driver of its own (blis-serve
// injects requests as they arrive): the same config, models and policies
// Run would use. opts.Policies is replaced by the setup's.
func (s *Setup) Cluster(sink cluster.Sink, opts cluster.Options) (*cluster.Cluster, error) {
	opts.Policies = s.Policies
	return cluster.New(&s.Cfg, s.Models, sink, opts)
}
