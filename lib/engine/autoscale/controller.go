package autoscale

import (
	"fmt"
	"math"
)

// Controller applies a policy to one pool: the recommendation is clamped
// to [Min, Max] and stabilised as Kubernetes' HPA does
// (stabilizeRecommendationWithBehaviors): with recommendations kept with
// their times, the result is the current count raised to the lowest
// recommendation of the last UpUS and lowered to the highest of the last
// DownUS. A scale-down therefore waits until every recommendation of the
// down window agrees, and a scale-up until every one of the up window does.
type Controller struct {
	Policy     Policy
	UpUS       int64
	DownUS     int64
	recs       []timedRec // oldest first
	LastAction int64      // time of the last scale action, math.MinInt64 before any
}

type timedRec struct {
	t int64
	n int
}

// NewController returns a controller for policy with the stabilisation
// windows up and down (µs).
func NewController(p Policy, upUS, downUS int64) *Controller {
	return &Controller{Policy: p, UpUS: upUS, DownUS: downUS, LastAction: math.MinInt64}
}

// Decision is one evaluation's outcome.
type Decision struct {
	Recommended int    // the policy's answer, clamped to the bounds
	Target      int    // after stabilisation: the replica count to reach
	Reason      string // the policy's reason, and the stabilisation's when it changed the answer
}

// Evaluate asks the policy and stabilises its answer at p.NowUS.
func (c *Controller) Evaluate(p *PoolView, all []PoolView) Decision {
	r := c.Policy.Recommend(p, all)
	d := r.Desired
	reason := r.Reason
	if d > p.Max {
		d = p.Max
		reason += fmt.Sprintf("; capped at max_replicas %d", p.Max)
	}
	if d < p.Min {
		d = p.Min
		reason += fmt.Sprintf("; held at min_replicas %d", p.Min)
	}
	now := p.NowUS
	up, down := d, d
	upCut, downCut := now-c.UpUS, now-c.DownUS
	keep := c.recs[:0]
	for _, x := range c.recs {
		if x.t > upCut {
			up = min(up, x.n)
		}
		if x.t > downCut {
			down = max(down, x.n)
		}
		if x.t > upCut || x.t > downCut {
			keep = append(keep, x)
		}
	}
	c.recs = append(keep, timedRec{now, d})
	t := max(p.Current, up)
	t = min(t, down)
	if t != d {
		switch {
		case t < d:
			reason += fmt.Sprintf("; scale-up stabilisation (%s): lowest recommendation %d", usString(c.UpUS), up)
		default:
			reason += fmt.Sprintf("; scale-down stabilisation (%s): highest recommendation %d", usString(c.DownUS), down)
		}
	}
	return Decision{Recommended: d, Target: t, Reason: reason}
}

// Clone copies the controller (its policy too when it is a Cloner).
func (c *Controller) Clone() *Controller {
	d := *c
	d.recs = append([]timedRec(nil), c.recs...)
	if cl, ok := c.Policy.(interface{ Clone() Policy }); ok {
		d.Policy = cl.Clone()
	}
	return &d
}

func usString(us int64) string {
	if us%1e6 == 0 {
		return fmt.Sprintf("%ds", us/1e6)
	}
	return fmt.Sprintf("%gs", float64(us)/1e6)
}
