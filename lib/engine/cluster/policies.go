package cluster

import (
	"github.com/blis-sim/blis/lib/engine/policy"
)

// setPolicies installs the run's router stages: the caller's, and for each
// stage it leaves nil, the one the config's router keys build.
func (c *Cluster) setPolicies(p *Policies) error {
	adm, pri, rout, err := c.cfg.Router.Policies(c.cfg.Seed)
	if err != nil {
		return err
	}
	c.admission, c.priority, c.routing = adm, pri, rout
	if p.Admission != nil {
		c.admission = p.Admission
	}
	if p.Priority != nil {
		c.priority = p.Priority
	}
	if p.Routing != nil {
		c.routing = p.Routing
	}
	c.routingName = policy.NameOf(c.routing)
	// The global prefix index is kept only for routing that reads cached
	// blocks: the policy says whether it does.
	c.prefixOn = policy.ReadsPrefix(c.routing)
	return nil
}

// fork installs a fork's own copies of the caller's stateful policies.
func (d *Cluster) fork(f Policies) {
	p := &d.opts.Policies
	if f.Admission != nil {
		d.admission, p.Admission = f.Admission, f.Admission
	}
	if f.Priority != nil {
		d.priority, p.Priority = f.Priority, f.Priority
	}
	if f.Routing != nil {
		d.routing, p.Routing = f.Routing, f.Routing
	}
	p.Err, p.OnResult, p.Fork = f.Err, f.OnResult, f.Fork
	if f.Scheduling != nil {
		p.Scheduling = f.Scheduling
		for i, rep := range d.reps {
			rep.Sched.SetPolicies(f.Scheduling(int32(i)))
		}
	}
	if f.Autoscale != nil && d.sc != nil {
		d.sc.policy = f.Autoscale
		for _, sp := range d.sc.pools {
			if sp.ctrl != nil {
				if pol := f.Autoscale(sp.dep.ID, sp.idx); pol != nil {
					sp.ctrl.Policy = pol
				}
			}
		}
	}
}
