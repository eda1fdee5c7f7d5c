package bundle

import (
	"fmt"
	"sort"

	"go.starlark.net/starlark"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/sched"
)

// Fork gives a clone of the cluster (a counterfactual replay) its own copy
// of the run's policies as they are now (cluster.Policies.Fork): the router
// state, and every Starlark stage re-instantiated over the same compiled
// program with a deep copy of its state dict and of its random stream.
// Compiled programs, frozen globals and tree stages' definitions are
// shared: nothing in them changes. The fork's failures are its own.
func (rt *Runtime) Fork() cluster.Policies {
	n := &Runtime{b: rt.b, g: rt.g, err: rt.err, stars: map[string]*starRT{}, ob: rt.ob.clone()}
	if rt.tr != nil {
		n.tr = rt.tr.clone()
	}
	stars := map[*starRT]*starRT{}
	names := make([]string, 0, len(rt.stars))
	for name := range rt.stars {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		r := rt.stars[name]
		c, err := r.fork(n)
		if err != nil {
			n.fail(err) // the fork stops at once with it (Policies.Err)
			c = r
		}
		n.stars[name], stars[r] = c, c
	}
	f := cluster.Policies{Err: n.Err, Fork: n.Fork, OnResult: n.onResult()}
	n.pol.Admission, _ = n.forkStage(rt.pol.Admission, stars).(policy.Admission)
	n.pol.Priority, _ = n.forkStage(rt.pol.Priority, stars).(policy.Priority)
	n.pol.Routing, _ = n.forkStage(rt.pol.Routing, stars).(policy.Routing)
	n.order, _ = n.forkStage(rt.order, stars).(sched.Order)
	n.victim, _ = n.forkStage(rt.victim, stars).(sched.Victim)
	f.Admission, f.Priority, f.Routing = n.pol.Admission, n.pol.Priority, n.pol.Routing
	if n.order != nil || n.victim != nil {
		f.Scheduling = scheduling(n.order, n.victim)
	}
	if rt.scaler != nil {
		n.scaler, _ = n.forkStage(rt.scaler, stars).(Scaler)
		f.Autoscale = n.autoscalePolicies
	}
	n.pol = f
	return f
}

// forkStage returns the fork's copy of an installed stage (nil for nil).
func (n *Runtime) forkStage(p any, stars map[*starRT]*starRT) any {
	switch x := p.(type) {
	case nil:
		return nil
	case *trackedAdmission:
		inner, _ := n.forkStage(x.inner, stars).(policy.Admission)
		return &trackedAdmission{inner: inner, tr: n.tr}
	case *treeAdmission:
		return &treeAdmission{st: x.st, tr: n.tr, ob: n.ob}
	case *treePriority:
		return &treePriority{st: x.st, tr: n.tr, ob: n.ob}
	case *treeRouting:
		c := x.Clone().(*treeRouting)
		c.tr, c.ob, c.ctx = n.tr, n.ob, evalCtx{}
		return c
	case *treeOrder:
		return &treeOrder{st: x.st, ob: n.ob}
	case *treeVictim:
		return &treeVictim{st: x.st, ob: n.ob}
	case *starAdmission:
		return &starAdmission{r: stars[x.r]}
	case *starPriority:
		return &starPriority{r: stars[x.r]}
	case *starRouting:
		return &starRouting{r: stars[x.r]}
	case *starOrder:
		return &starOrder{r: stars[x.r], idx: x.idx}
	case *starVictim:
		return &starVictim{r: stars[x.r], idx: x.idx}
	case *starScaler:
		return &starScaler{r: stars[x.r]}
	}
	// Templates and built-in policies: their own copy when they keep state
	// (policy.Cloner), else shared.
	return policy.Clone(p)
}

// fork re-instantiates the stage for the runtime n with a copy of this
// one's state and random stream.
func (r *starRT) fork(n *Runtime) (*starRT, error) {
	c, err := r.st.star.instantiate(n, 0)
	if err != nil {
		return nil, err
	}
	c.ctx.tr, c.gen = n.tr, r.gen
	if err := c.state.Clear(); err != nil {
		return nil, fmt.Errorf("%s: forking the %s stage's state: %v", r.st.File, r.st.Name, err)
	}
	for _, kv := range r.state.Items() {
		if err := c.state.SetKey(copyValue(kv[0]), copyValue(kv[1])); err != nil {
			return nil, fmt.Errorf("%s: forking the %s stage's state: %v", r.st.File, r.st.Name, err)
		}
	}
	if r.random != nil {
		*c.random.src = *r.random.src
	}
	return c, nil
}

// copyValue deep-copies a state value (checkState allows only None, bool,
// int, float, string, list, tuple and dict; the first five are immutable).
func copyValue(v starlark.Value) starlark.Value {
	switch v := v.(type) {
	case *starlark.List:
		xs := make([]starlark.Value, v.Len())
		for i := range xs {
			xs[i] = copyValue(v.Index(i))
		}
		return starlark.NewList(xs)
	case starlark.Tuple:
		t := make(starlark.Tuple, len(v))
		for i, e := range v {
			t[i] = copyValue(e)
		}
		return t
	case *starlark.Dict:
		d := starlark.NewDict(v.Len())
		for _, kv := range v.Items() {
			d.SetKey(copyValue(kv[0]), copyValue(kv[1])) // a fresh dict: cannot fail
		}
		return d
	}
	return v
}
