package bundle

import (
	"github.com/blis-sim/blis/lib/engine/autoscale"
)

// scalePolicy plugs the bundle's autoscaler stage into the engine's
// autoscaling (cluster.Policies.Autoscale) as an autoscale.Policy: the
// engine's pool views become PoolViews, and the stage's target, its
// reason and its failure (which stops the run through Policies.Err) come back.
// The engine then clamps the target to the pool's bounds and applies the
// pool's stabilisation windows.
type scalePolicy struct {
	rt    *Runtime
	s     Scaler
	views []PoolView
	ptrs  []*PoolView
}

func (p *scalePolicy) Recommend(v *autoscale.PoolView, all []autoscale.PoolView) autoscale.Recommendation {
	p.views, p.ptrs = p.views[:0], p.ptrs[:0]
	k := 0
	for i := range all {
		a := &all[i]
		if a == v {
			k = i
		}
		m := &a.Metrics
		p.views = append(p.views, PoolView{Deployment: a.Deployment, Role: a.Role, Replicas: a.Current,
			MinReplicas: a.Min, MaxReplicas: a.Max, Serving: a.Ready, Provisioning: a.Current - a.Ready,
			Waiting: a.Waiting, Running: a.Running, InFlight: a.InFlight, Pending: a.Pending,
			KVUtilization: m.KVUtilization, NowUS: a.NowUS, WindowUS: m.WindowUS, RequestRate: m.RequestRate,
			SLOAttainment: m.SLOAttainment, Utilization: m.Utilization, QueuePerReplica: m.QueueDepth,
			TTFTP50US: m.TTFTP50US, TTFTP99US: m.TTFTP99US, E2EP50US: m.E2EP50US, E2EP99US: m.E2EP99US,
			SinceLastScaleUS: a.SinceLastScaleUS})
	}
	for i := range p.views {
		p.ptrs = append(p.ptrs, &p.views[i])
	}
	n, reason, err := p.s.Scale(p.ptrs[k], p.ptrs)
	if err != nil {
		p.rt.fail(err)
		return autoscale.Recommendation{Desired: v.Current, Reason: "bundle autoscaler failed"}
	}
	return autoscale.Recommendation{Desired: n, Reason: "bundle " + reason}
}

// autoscalePolicies gives every autoscaled pool its own adapter of the
// stage (the stage itself, with its state, is shared, as for the router).
func (rt *Runtime) autoscalePolicies(string, int) autoscale.Policy {
	return &scalePolicy{rt: rt, s: rt.scaler}
}
