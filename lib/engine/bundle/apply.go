package bundle

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"go.starlark.net/starlark"

	"github.com/blis-sim/blis/lib/engine/cluster"
	"github.com/blis-sim/blis/lib/engine/config"
	"github.com/blis-sim/blis/lib/engine/policy"
	"github.com/blis-sim/blis/lib/engine/request"
	"github.com/blis-sim/blis/lib/engine/row"
	"github.com/blis-sim/blis/lib/engine/sched"
)

// Runtime is one run's instance of a bundle: fresh state dicts, random
// streams and router state.
type Runtime struct {
	b      *Bundle
	g      *guard // the run's budgets, shared with its forks
	tr     *Tracker
	ob     *observer
	err    error
	scaler Scaler
	stars  map[string]*starRT
	// What Instantiate made: the policies, and the scheduling stages the
	// Scheduling function hands out (for Fork).
	pol    cluster.Policies
	order  sched.Order
	victim sched.Victim
}

// State is a Starlark stage's state dict now, in Starlark syntax (keys in
// insertion order), for decision traces; "" when the stage is not
// Starlark.
func (rt *Runtime) State(stage string) string {
	if r := rt.stars[stage]; r != nil {
		return r.state.String()
	}
	return ""
}

// Err is the first policy failure of the run (a *RunError), or its
// interruption (Interrupt), or nil.
func (rt *Runtime) Err() error {
	if rt.err == nil {
		if e := rt.g.err(); e != nil {
			rt.err = e
		}
	}
	return rt.err
}

func (rt *Runtime) fail(err error) {
	if rt.err == nil {
		rt.err = err
	}
}

// Scaler is the autoscaler stage (nil when the bundle has none).
func (rt *Runtime) Scaler() Scaler { return rt.scaler }

// Instantiate makes the bundle's policies for one run of cfg, which it
// reads and never writes: parameterised stages are the built-in templates
// with the bundle's parameters, trees and Starlark their own policies, and
// a stage the bundle does not give is left nil (the cluster builds it from
// the config's router keys). Router state hears finished requests through
// Policies.OnResult, forks of the cluster get their own copy of everything
// through Policies.Fork, and Policies.Err stops the run at a policy failure.
func (b *Bundle) Instantiate(cfg *config.Cluster) (*Runtime, error) {
	rt := &Runtime{b: b, g: newGuard(b.Sandbox.MaxRunSteps), stars: map[string]*starRT{}, ob: newObserver(b, cfg.Seed)}
	env := policy.Env{Seed: cfg.Seed}
	needTracker := false
	for _, name := range []string{StageAdmission, StagePriority, StageRouting} {
		st := b.stages[name]
		if st == nil {
			continue
		}
		if st.Kind == KindStarlark {
			needTracker = true
		}
		if st.Kind == KindTree && st.info.used["tracker"] {
			needTracker = true
		}
	}
	if needTracker {
		rt.tr = NewTracker(cfg.SnapshotInterval.US())
	}
	star := func(st *Stage) (*starRT, error) {
		r, err := st.star.instantiate(rt, cfg.Seed)
		if err != nil {
			return nil, err
		}
		r.ctx.tr = rt.tr
		rt.stars[st.Name] = r
		return r, nil
	}
	template := func(st *Stage) (any, error) {
		return policy.Build(policy.Stage(st.Name), st.Template, policy.Params(st.Params), env)
	}
	p := &rt.pol

	if st := b.stages[StageAdmission]; st != nil {
		switch st.Kind {
		case KindParameterized:
			a, err := template(st)
			if err != nil {
				return nil, err
			}
			p.Admission = a.(policy.Admission)
		case KindTree:
			p.Admission = &treeAdmission{st: st, tr: rt.tr, ob: rt.ob}
			p.ReadsTiers = true
		case KindStarlark:
			r, err := star(st)
			if err != nil {
				return nil, err
			}
			p.Admission = &starAdmission{r: r}
			p.ReadsTiers = true
		}
	}
	if needTracker {
		inner := p.Admission
		if inner == nil {
			var err error
			if inner, _, _, err = cfg.Router.Policies(cfg.Seed); err != nil {
				return nil, err
			}
		}
		p.Admission = &trackedAdmission{inner: inner, tr: rt.tr}
	}
	if st := b.stages[StagePriority]; st != nil {
		switch st.Kind {
		case KindParameterized:
			pr, err := template(st)
			if err != nil {
				return nil, err
			}
			p.Priority = pr.(policy.Priority)
		case KindTree:
			p.Priority = &treePriority{st: st, tr: rt.tr, ob: rt.ob}
			p.ReadsTiers = true
		case KindStarlark:
			r, err := star(st)
			if err != nil {
				return nil, err
			}
			p.Priority = &starPriority{r: r}
			p.ReadsTiers = true
		}
	}
	if st := b.stages[StageRouting]; st != nil {
		switch st.Kind {
		case KindParameterized:
			ro, err := template(st)
			if err != nil {
				return nil, err
			}
			p.Routing = ro.(policy.Routing)
		case KindTree:
			tr := &treeRouting{st: st, tr: rt.tr, ob: rt.ob}
			for _, leaf := range st.info.routes {
				l, err := policy.NewRouting(leaf.route, leaf.params, env)
				if err != nil {
					return nil, err
				}
				tr.leaves = append(tr.leaves, l)
			}
			p.Routing = tr
			p.ReadsTiers = true // replica.kv_offload_rate and the like
		case KindStarlark:
			r, err := star(st)
			if err != nil {
				return nil, err
			}
			p.Routing = &starRouting{r: r}
			p.ReadsTiers = true
		}
	}
	var order sched.Order
	var victim sched.Victim
	if st := b.stages[StageScheduler]; st != nil {
		switch st.Kind {
		case KindParameterized:
			order, _ = schedTemplate(st)
		case KindTree:
			order = &treeOrder{st: st, ob: rt.ob}
		case KindStarlark:
			r, err := star(st)
			if err != nil {
				return nil, err
			}
			order = &starOrder{r: r}
		}
	}
	if st := b.stages[StagePreemption]; st != nil {
		switch st.Kind {
		case KindParameterized:
			_, victim = schedTemplate(st)
		case KindTree:
			victim = &treeVictim{st: st, ob: rt.ob}
		case KindStarlark:
			r, err := star(st)
			if err != nil {
				return nil, err
			}
			victim = &starVictim{r: r}
		}
	}
	if order != nil || victim != nil {
		p.Scheduling = scheduling(order, victim)
	}
	if st := b.stages[StageAutoscaler]; st != nil {
		switch st.Kind {
		case KindParameterized:
			rt.scaler = targetLoad{target: st.Params["target"]}
		case KindTree:
			rt.scaler = treeScaler{st: st}
		case KindStarlark:
			r, err := star(st)
			if err != nil {
				return nil, err
			}
			rt.scaler = &starScaler{r: r}
		}
		// Every pool with an autoscaler in the cluster config scales by it.
		p.Autoscale = rt.autoscalePolicies
	}
	p.Err = rt.Err
	p.OnResult = rt.onResult()
	rt.order, rt.victim = order, victim
	p.Fork = rt.Fork
	return rt, nil
}

// onResult is what hears the run's results: the router state and the
// class predictor, when there are.
func (rt *Runtime) onResult() func(*row.Result) {
	tr, ob := rt.tr, rt.ob
	switch {
	case tr != nil && ob.learns():
		return func(r *row.Result) { tr.finished(r); ob.finished(r) }
	case tr != nil:
		return tr.finished
	case ob.learns():
		return ob.finished
	}
	return nil
}

// Policies are the run's policies, for cluster.Options.Policies.
func (rt *Runtime) Policies() cluster.Policies { return rt.pol }

// scheduling gives each replica the scheduler and preemption stages, a
// Starlark stage with the replica's index.
func scheduling(order sched.Order, victim sched.Victim) func(int32) (sched.Order, sched.Victim) {
	return func(idx int32) (sched.Order, sched.Victim) {
		o, v := order, victim
		if so, ok := o.(*starOrder); ok {
			o = &starOrder{r: so.r, idx: idx}
		}
		if sv, ok := v.(*starVictim); ok {
			v = &starVictim{r: sv.r, idx: idx}
		}
		return o, v
	}
}

// Names, as a run's metadata and messages give them (policy.NameOf).
func (a *trackedAdmission) Name() string { return policy.NameOf(a.inner) }
func (*treeAdmission) Name() string      { return "decision tree" }
func (*treePriority) Name() string       { return "decision tree" }
func (*treeRouting) Name() string        { return "decision tree" }
func (a *starAdmission) Name() string    { return a.r.name() }
func (p *starPriority) Name() string     { return p.r.name() }
func (p *starRouting) Name() string      { return p.r.name() }

// name is "starlark <file>", as Describe gives a Starlark stage.
func (r *starRT) name() string { return "starlark " + filepath.Base(r.st.File) }

// trackedAdmission tells the tracker of arrivals and verdicts around the
// admission policy.
type trackedAdmission struct {
	inner policy.Admission
	tr    *Tracker
}

func (a *trackedAdmission) Admit(r policy.RequestView, c *policy.ClusterView) policy.AdmitDecision {
	a.tr.advance(r.NowUS())
	d := a.inner.Admit(r, c)
	a.tr.arrived(r.ID(), r.TenantID(), r.NowUS())
	a.tr.decided(r.ID(), r.TenantID(), d.Verdict == policy.Admit, d.Verdict == policy.Delay)
	return d
}

// ---- decision trees

type treeAdmission struct {
	st  *Stage
	tr  *Tracker
	ob  *observer
	ctx evalCtx
}

func (t *treeAdmission) Admit(r policy.RequestView, c *policy.ClusterView) policy.AdmitDecision {
	t.ctx = evalCtx{rv: r, cv: c, tr: t.tr, ob: t.ob}
	n := t.st.tree.eval(&t.ctx)
	return policy.AdmitDecision{Verdict: n.verdict, Reason: n.reason, DelayUS: n.delayUS}
}

type treePriority struct {
	st  *Stage
	tr  *Tracker
	ob  *observer
	ctx evalCtx
}

func (t *treePriority) Priority(r policy.RequestView, c *policy.ClusterView) float64 {
	t.ctx = evalCtx{rv: r, cv: c, tr: t.tr, ob: t.ob}
	p := t.st.tree.eval(&t.ctx).score.f(&t.ctx)
	if p != p {
		return math.Inf(-1) // NaN (0/0): the lowest, as a NaN comparison is false
	}
	return p
}

type treeRouting struct {
	st     *Stage
	tr     *Tracker
	ob     *observer
	leaves []policy.Routing
	ctx    evalCtx
}

func (t *treeRouting) Route(r policy.RequestView, c *policy.ClusterView) policy.RouteDecision {
	t.ctx = evalCtx{rv: r, cv: c, tr: t.tr, ob: t.ob}
	ctx := &t.ctx
	if !t.st.info.perCandidate {
		n := t.st.tree.eval(ctx)
		if n.waitUS > 0 {
			return policy.RouteDecision{Wait: true, WaitUS: n.waitUS, Reason: n.reason}
		}
		return t.leaves[n.routeIdx].Route(r, c)
	}
	best, bs := 0, 0.0
	for i := 0; i < c.Len(); i++ {
		ctx.i = i
		s := t.st.tree.eval(ctx).score.f(ctx)
		c.Score(i, s)
		if i == 0 || s > bs {
			best, bs = i, s
		}
	}
	return policy.RouteDecision{Target: best, Reason: "decision tree: highest score"}
}

func (t *treeRouting) Clone() any {
	d := *t
	d.leaves = make([]policy.Routing, len(t.leaves))
	for i, l := range t.leaves {
		d.leaves[i] = policy.Clone(l)
	}
	return &d
}

// treeOrder sorts the waiting requests by the tree's score, highest first,
// vLLM's order among equals.
type treeOrder struct {
	st  *Stage
	ob  *observer
	buf []scored
	ctx evalCtx
}

type scored struct {
	r *request.State
	s float64
}

func (t *treeOrder) Sort(now int64, w []*request.State) {
	t.buf = t.buf[:0]
	c := &t.ctx
	for _, r := range w {
		*c = evalCtx{rv: policy.NewRequestView(&r.Req, now, nil), st: r, ob: t.ob}
		t.buf = append(t.buf, scored{r, t.st.tree.eval(c).score.f(c)})
	}
	sortScored(t.buf)
	for i := range t.buf {
		w[i] = t.buf[i].r
	}
}

// treeVictim preempts the running request with the highest score, the
// newest among equals.
type treeVictim struct {
	st  *Stage
	ob  *observer
	ctx evalCtx
}

func (t *treeVictim) Choose(running []*request.State) *request.State {
	var best *request.State
	bs := 0.0
	c := &t.ctx
	for i := len(running) - 1; i >= 0; i-- {
		r := running[i]
		*c = evalCtx{rv: policy.NewRequestView(&r.Req, 0, nil), st: r, ob: t.ob}
		s := t.st.tree.eval(c).score.f(c)
		if best == nil || s > bs {
			best, bs = r, s
		}
	}
	return best
}

// ---- Starlark

type starAdmission struct{ r *starRT }

func (a *starAdmission) Admit(rv policy.RequestView, c *policy.ClusterView) policy.AdmitDecision {
	r := a.r
	if r.rt.err != nil {
		return policy.AdmitDecision{Verdict: policy.Reject, Reason: "policy failed"}
	}
	r.ctx = evalCtx{rv: rv, cv: c, tr: r.ctx.tr, ob: r.rt.ob}
	v, err := r.call(&r.reqv, &r.clv, rv.ID())
	if err != nil {
		r.rt.fail(err)
		return policy.AdmitDecision{Verdict: policy.Reject, Reason: "policy failed"}
	}
	d, err := parseAdmit(v)
	if err != nil {
		r.rt.fail(r.badReturn("%v", err))
		return policy.AdmitDecision{Verdict: policy.Reject, Reason: "policy failed"}
	}
	return d
}

func parseAdmit(v starlark.Value) (policy.AdmitDecision, error) {
	const want = `"admit", ("reject", reason) or ("delay", microseconds)`
	if s, ok := v.(starlark.String); ok {
		if s == "admit" {
			return policy.AdmitDecision{}, nil
		}
		return policy.AdmitDecision{}, fmt.Errorf("%s, expected %s", v.String(), want)
	}
	t, ok := v.(starlark.Tuple)
	if !ok || len(t) != 2 {
		return policy.AdmitDecision{}, fmt.Errorf("a %s, expected %s", v.Type(), want)
	}
	switch t[0] {
	case starlark.String("reject"):
		reason, ok := t[1].(starlark.String)
		if !ok || reason == "" {
			return policy.AdmitDecision{}, fmt.Errorf("(\"reject\", %s), expected a non-empty reason string", t[1].String())
		}
		return policy.AdmitDecision{Verdict: policy.Reject, Reason: string(reason)}, nil
	case starlark.String("delay"):
		d, ok := t[1].(starlark.Int)
		n, ok2 := d.Int64()
		if !ok || !ok2 || n <= 0 || n > 1<<50 {
			return policy.AdmitDecision{}, fmt.Errorf("(\"delay\", %s), expected an integer number of microseconds > 0", t[1].String())
		}
		return policy.AdmitDecision{Verdict: policy.Delay, DelayUS: n, Reason: "starlark: delay"}, nil
	}
	return policy.AdmitDecision{}, fmt.Errorf("%s, expected %s", v.String(), want)
}

type starPriority struct{ r *starRT }

func (p *starPriority) Priority(rv policy.RequestView, c *policy.ClusterView) float64 {
	r := p.r
	if r.rt.err != nil {
		return 0
	}
	r.ctx = evalCtx{rv: rv, cv: c, tr: r.ctx.tr, ob: r.rt.ob}
	v, err := r.call(&r.reqv, &r.clv, rv.ID())
	if err != nil {
		r.rt.fail(err)
		return 0
	}
	if d, ok := v.(*starlark.Dict); ok {
		// {"priority": x}: hints the engine would not honour are refused,
		// not silently dropped.
		for _, kv := range d.Items() {
			switch kv[0] {
			case starlark.String("priority"):
			case starlark.String("hints"):
				if h, ok := kv[1].(*starlark.Dict); ok && h.Len() == 0 {
					continue
				}
				r.rt.fail(r.badReturn(`"hints": %s: priority hints are not supported (the waiting queue orders by the priority score alone; return a number, or {"priority": x})`, kv[1].String()))
				return 0
			default:
				r.rt.fail(r.badReturn(`a dict with key %s, expected {"priority": x}`, kv[0].String()))
				return 0
			}
		}
		x, found, _ := d.Get(starlark.String("priority"))
		if !found {
			r.rt.fail(r.badReturn(`a dict without "priority"`))
			return 0
		}
		v = x
	}
	var f float64
	switch x := v.(type) {
	case starlark.Int:
		f, _ = starlark.AsFloat(x)
	case starlark.Float:
		f = float64(x)
	default:
		r.rt.fail(r.badReturn(`%s, expected a number (a score: larger runs first) or {"priority": x}`, v.String()))
		return 0
	}
	if math.IsNaN(f) {
		r.rt.fail(r.badReturn(`nan, expected a number (a score: larger runs first)`))
		return 0
	}
	return f
}

type starRouting struct{ r *starRT }

func (p *starRouting) Route(rv policy.RequestView, c *policy.ClusterView) policy.RouteDecision {
	r := p.r
	if r.rt.err != nil {
		return policy.RouteDecision{}
	}
	r.ctx = evalCtx{rv: rv, cv: c, tr: r.ctx.tr, ob: r.rt.ob}
	v, err := r.call(&r.reqv, &r.clv, rv.ID())
	if err != nil {
		r.rt.fail(err)
		return policy.RouteDecision{}
	}
	d, err := parseRoute(v, r.board(c), c)
	if err != nil {
		r.rt.fail(r.badReturn("%v", err))
		return policy.RouteDecision{}
	}
	return d
}

const routeWant = `a replica id, ("wait", microseconds[, reason]), {"target": id, "scores": {id: score}, "filtered": {id: reason}} or {"wait": microseconds, "reason": reason, "scores": …, "filtered": …}`

// parseRoute reads a route's answer: a target, or a hold (wait).
func parseRoute(v starlark.Value, bv *boardVals, c *policy.ClusterView) (policy.RouteDecision, error) {
	if t, ok := v.(starlark.Tuple); ok && len(t) > 0 && t[0] == starlark.String("wait") {
		if len(t) < 2 || len(t) > 3 {
			return policy.RouteDecision{}, fmt.Errorf("%s, expected (\"wait\", microseconds) or (\"wait\", microseconds, reason)", v.String())
		}
		d := policy.RouteDecision{Wait: true, Reason: "starlark: wait"}
		var err error
		if d.WaitUS, err = waitUS(t[1]); err != nil {
			return d, fmt.Errorf("%s: %v", v.String(), err)
		}
		if len(t) == 3 {
			s, ok := t[2].(starlark.String)
			if !ok || s == "" {
				return d, fmt.Errorf("%s: the reason is a %s, expected a non-empty string", v.String(), t[2].Type())
			}
			d.Reason = string(s)
		}
		return d, nil
	}
	target := v
	var wait starlark.Value
	reason := ""
	if dict, ok := v.(*starlark.Dict); ok {
		t, hasTarget, _ := dict.Get(starlark.String("target"))
		w, hasWait, _ := dict.Get(starlark.String("wait"))
		switch {
		case hasTarget && hasWait:
			return policy.RouteDecision{}, errors.New(`a dict with both "target" and "wait": route it or hold it, not both`)
		case !hasTarget && !hasWait:
			return policy.RouteDecision{}, errors.New(`a dict without "target" (or "wait")`)
		}
		target = t
		if hasWait {
			target, wait = nil, w
		}
		if s, found, _ := dict.Get(starlark.String("scores")); found {
			sd, ok := s.(*starlark.Dict)
			if !ok {
				return policy.RouteDecision{}, fmt.Errorf(`"scores": a %s, expected a dict {replica id: score}`, s.Type())
			}
			for _, kv := range sd.Items() {
				id, ok := kv[0].(starlark.String)
				i, found := bv.ids[string(id)]
				if !ok || !found {
					return policy.RouteDecision{}, fmt.Errorf(`"scores": key %s is not a candidate replica id`, kv[0].String())
				}
				f, ok := starlark.AsFloat(kv[1])
				if !ok {
					return policy.RouteDecision{}, fmt.Errorf(`"scores": %s: a %s, expected a number`, kv[0].String(), kv[1].Type())
				}
				c.Score(i, f)
			}
		}
		if f, found, _ := dict.Get(starlark.String("filtered")); found {
			if err := starFiltered(f, bv, c, target); err != nil {
				return policy.RouteDecision{}, fmt.Errorf(`"filtered": %v`, err)
			}
		}
		for _, kv := range dict.Items() {
			k, _ := kv[0].(starlark.String)
			switch k {
			case "target", "scores", "filtered":
			case "wait", "reason":
				if !hasWait {
					return policy.RouteDecision{}, fmt.Errorf(`a dict with key %s and no "wait"`, kv[0].String())
				}
				if k == "reason" {
					s, ok := kv[1].(starlark.String)
					if !ok || s == "" {
						return policy.RouteDecision{}, fmt.Errorf(`"reason": a %s, expected a non-empty string`, kv[1].Type())
					}
					reason = string(s)
				}
			default:
				return policy.RouteDecision{}, fmt.Errorf(`a dict with key %s, expected %s`, kv[0].String(), routeWant)
			}
		}
	}
	if wait != nil {
		d := policy.RouteDecision{Wait: true, Reason: "starlark: wait"}
		if reason != "" {
			d.Reason = reason
		}
		var err error
		if d.WaitUS, err = waitUS(wait); err != nil {
			return d, fmt.Errorf(`"wait": %v`, err)
		}
		return d, nil
	}
	id, ok := target.(starlark.String)
	if !ok {
		return policy.RouteDecision{}, fmt.Errorf(`a %s, expected %s`, target.Type(), routeWant)
	}
	i, found := bv.ids[string(id)]
	if !found {
		return policy.RouteDecision{}, fmt.Errorf("%s, which is not a candidate replica id", id.String())
	}
	return policy.RouteDecision{Target: i, Reason: "starlark route"}, nil
}

// waitUS reads a hold's wait: an integer number of microseconds > 0.
func waitUS(v starlark.Value) (int64, error) {
	d, ok := v.(starlark.Int)
	n, ok2 := d.Int64()
	if !ok || !ok2 || n <= 0 || n > 1<<50 {
		return 0, fmt.Errorf("%s, expected an integer number of microseconds > 0 (the time to route the request again)", v.String())
	}
	return n, nil
}

// starFiltered records a route's "filtered" candidates: a dict {id: reason}
// or a list of ids. The target may not be among them.
func starFiltered(f starlark.Value, bv *boardVals, c *policy.ClusterView, target starlark.Value) error {
	add := func(k, why starlark.Value) error {
		id, ok := k.(starlark.String)
		i, found := bv.ids[string(id)]
		if !ok || !found {
			return fmt.Errorf("%s is not a candidate replica id", k.String())
		}
		if k == target {
			return fmt.Errorf("%s is the target: a filtered candidate cannot be chosen", k.String())
		}
		reason := "filtered"
		if why != nil {
			s, ok := why.(starlark.String)
			if !ok {
				return fmt.Errorf("%s: a %s, expected a reason string", k.String(), why.Type())
			}
			reason = string(s)
		}
		c.Filter(i, reason)
		return nil
	}
	switch f := f.(type) {
	case *starlark.Dict:
		for _, kv := range f.Items() {
			if err := add(kv[0], kv[1]); err != nil {
				return err
			}
		}
	case *starlark.List:
		for i := 0; i < f.Len(); i++ {
			if err := add(f.Index(i), nil); err != nil {
				return err
			}
		}
	case starlark.Tuple:
		for _, x := range f {
			if err := add(x, nil); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("a %s, expected {replica id: reason} or a list of replica ids", f.Type())
	}
	return nil
}

type starOrder struct {
	r     *starRT
	idx   int32
	vals  []reqValue
	queue starlark.Tuple
}

func (o *starOrder) Sort(now int64, w []*request.State) {
	r := o.r
	if r.rt.err != nil {
		return
	}
	if cap(o.vals) < len(w) {
		o.vals = make([]reqValue, len(w), 2*len(w))
		o.queue = make(starlark.Tuple, len(w), 2*len(w))
	}
	vals, queue := o.vals[:len(w)], o.queue[:len(w)]
	for i, s := range w {
		vals[i] = reqValue{r: r, st: s, now: now}
		queue[i] = &vals[i]
	}
	rep := &attrsValue{typ: "replica", names: []string{"index", "queue_depth", "now_us"},
		vals: []starlark.Value{starlark.MakeInt(int(o.idx)), starlark.MakeInt(len(w)), starlark.MakeInt64(now)}}
	r.ctx = evalCtx{tr: r.ctx.tr, ob: r.rt.ob}
	v, err := r.call(queue, rep, "")
	if err != nil {
		r.rt.fail(err)
		return
	}
	seq, ok := v.(starlark.Indexable)
	if !ok {
		r.rt.fail(r.badReturn("a %s, expected a list of request ids or queue indices", v.Type()))
		return
	}
	seen := make([]bool, len(w))
	out := make([]*request.State, 0, len(w))
	for k := 0; k < seq.Len(); k++ {
		i, err := pick(seq.Index(k), w)
		if err != nil {
			r.rt.fail(r.badReturn("element %d: %v", k, err))
			return
		}
		if seen[i] {
			r.rt.fail(r.badReturn("element %d: request %s listed twice", k, w[i].Req.ID))
			return
		}
		seen[i] = true
		out = append(out, w[i])
	}
	for i, s := range w {
		if !seen[i] {
			out = append(out, s)
		}
	}
	copy(w, out)
}

// pick finds a returned request (id or index) among rs.
func pick(v starlark.Value, rs []*request.State) (int, error) {
	switch v := v.(type) {
	case starlark.String:
		for i, s := range rs {
			if s.Req.ID == string(v) {
				return i, nil
			}
		}
		return 0, fmt.Errorf("%s is not among the requests given", v.String())
	case starlark.Int:
		i, ok := v.Int64()
		if !ok || i < 0 || i >= int64(len(rs)) {
			return 0, fmt.Errorf("index %s out of range [0, %d)", v.String(), len(rs))
		}
		return int(i), nil
	}
	return 0, fmt.Errorf("a %s, expected a request id or an index", v.Type())
}

type starVictim struct {
	r   *starRT
	idx int32
}

func (p *starVictim) Choose(running []*request.State) *request.State {
	r := p.r
	last := running[len(running)-1]
	if r.rt.err != nil {
		return last
	}
	list := make(starlark.Tuple, len(running))
	vals := make([]reqValue, len(running))
	for i, s := range running {
		vals[i] = reqValue{r: r, st: s}
		list[i] = &vals[i]
	}
	rep := &attrsValue{typ: "replica", names: []string{"index", "batch_size"},
		vals: []starlark.Value{starlark.MakeInt(int(p.idx)), starlark.MakeInt(len(running))}}
	r.ctx = evalCtx{tr: r.ctx.tr, ob: r.rt.ob}
	v, err := r.call(list, rep, "")
	if err != nil {
		r.rt.fail(err)
		return last
	}
	i, err := pick(v, running)
	if err != nil {
		r.rt.fail(r.badReturn("%v", err))
		return last
	}
	return running[i]
}

type starScaler struct{ r *starRT }

func (s *starScaler) Scale(pool *PoolView, pools []*PoolView) (int, string, error) {
	r := s.r
	pv := func(p *PoolView) starlark.Value {
		return &viewValue{r: r, typ: "pool", t: poolTable, c: &evalCtx{pool: p}}
	}
	list := make(starlark.Tuple, len(pools))
	for i, p := range pools {
		list[i] = pv(p)
	}
	cl := &attrsValue{typ: "cluster", names: []string{"pools", "now_us"}, vals: []starlark.Value{list, starlark.MakeInt64(pool.NowUS)}}
	v, err := r.call(pv(pool), cl, "")
	if err != nil {
		return 0, "", err
	}
	reason := "starlark scale"
	if t, ok := v.(starlark.Tuple); ok && len(t) == 2 {
		rs, ok := t[1].(starlark.String)
		if !ok {
			return 0, "", r.badReturn("(n, %s), expected a reason string", t[1].String())
		}
		v, reason = t[0], string(rs)
	}
	i, ok := v.(starlark.Int)
	n, ok2 := i.Int64()
	if !ok || !ok2 || n < 0 || n > 1<<20 {
		return 0, "", r.badReturn("%s, expected a replica count >= 0 or (count, reason)", v.String())
	}
	return int(n), reason, nil
}

// FromConfig loads the bundle a cluster YAML names in its policy key
// (relative to the cluster file), or returns nil when it names none.
func FromConfig(cfg *config.Cluster, env Env) (*Bundle, error) {
	p := cfg.Policy
	if p == "" {
		return nil, nil
	}
	if !filepath.IsAbs(p) && cfg.Name != "" {
		p = filepath.Join(filepath.Dir(cfg.Name), p)
	}
	return Load(p, env)
}
