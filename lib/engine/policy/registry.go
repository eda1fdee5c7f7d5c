package policy

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Stage is a decision point.
type Stage string

// Stages of the router pipeline.
const (
	StageAdmission Stage = "admission"
	StagePriority  Stage = "priority"
	StageRouting   Stage = "routing"
)

// Param is one numeric parameter of a template.
type Param struct {
	Name     string
	Default  float64
	Min, Max float64 // inclusive
	Integer  bool
	Doc      string
}

// Env is what a policy may draw on when it is built.
type Env struct {
	// Seed is the run's master seed; a policy that needs randomness derives
	// its own stream from it (lib/rng), named "policy:<stage>".
	Seed uint64
}

// Params are a template's parameter values by name.
type Params map[string]float64

// Template is a built-in policy: a name, its parameters and a constructor.
type Template struct {
	Stage  Stage
	Name   string
	Doc    string
	Params []Param
	// Sparse: the parameters are weights, and when any is given the others
	// are 0 instead of their defaults.
	Sparse bool
	// Check, if set, validates the parameters together (after defaults and
	// ranges).
	Check func(p Params) error
	build func(p Params, env Env) any
}

// Templates lists every built-in policy, stage by stage.
func Templates() []*Template { return templates }

// Find returns the template of a stage by name.
func Find(stage Stage, name string) (*Template, error) {
	var names []string
	for _, t := range templates {
		if t.Stage != stage {
			continue
		}
		if t.Name == name {
			return t, nil
		}
		names = append(names, t.Name)
	}
	return nil, fmt.Errorf("unknown %s policy %q (expected one of %s)", stage, name, strings.Join(names, ", "))
}

// Names lists the template names of a stage.
func Names(stage Stage) []string {
	var out []string
	for _, t := range templates {
		if t.Stage == stage {
			out = append(out, t.Name)
		}
	}
	return out
}

// Resolve fills defaults and checks p: unknown names, ranges, integrality.
func (t *Template) Resolve(p Params) (Params, error) {
	out := Params{}
	known := map[string]*Param{}
	for i := range t.Params {
		pp := &t.Params[i]
		known[pp.Name] = pp
		out[pp.Name] = pp.Default
		if t.Sparse && len(p) > 0 {
			out[pp.Name] = 0
		}
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := t.checkParam(known, k, p[k]); err != nil {
			return nil, err
		}
		out[k] = p[k]
	}
	if t.Check != nil {
		if err := t.Check(out); err != nil {
			return nil, fmt.Errorf("%s policy %s: %w", t.Stage, t.Name, err)
		}
	}
	return out, nil
}

// CheckParam checks one parameter alone: its name and range (Resolve also
// checks the parameters together).
func (t *Template) CheckParam(name string, v float64) error {
	known := map[string]*Param{}
	for i := range t.Params {
		known[t.Params[i].Name] = &t.Params[i]
	}
	return t.checkParam(known, name, v)
}

func (t *Template) checkParam(known map[string]*Param, k string, v float64) error {
	pp, ok := known[k]
	if !ok {
		if len(t.Params) == 0 {
			return fmt.Errorf("%s policy %s takes no parameters, found %q", t.Stage, t.Name, k)
		}
		names := make([]string, len(t.Params))
		for i := range t.Params {
			names[i] = t.Params[i].Name
		}
		return fmt.Errorf("%s policy %s: unknown parameter %q (expected %s)", t.Stage, t.Name, k, strings.Join(names, ", "))
	}
	if math.IsNaN(v) || v < pp.Min || v > pp.Max {
		return fmt.Errorf("%s policy %s: parameter %s: expected %s, found %g", t.Stage, t.Name, k, pp.Range(), v)
	}
	if pp.Integer && v != math.Trunc(v) {
		return fmt.Errorf("%s policy %s: parameter %s: expected an integer, found %g", t.Stage, t.Name, k, v)
	}
	return nil
}

// Range describes the parameter's valid values.
func (p *Param) Range() string {
	kind := "a number"
	if p.Integer {
		kind = "an integer"
	}
	switch {
	case math.IsInf(p.Max, 1):
		return fmt.Sprintf("%s >= %g", kind, p.Min)
	default:
		return fmt.Sprintf("%s in [%g, %g]", kind, p.Min, p.Max)
	}
}

func build[T any](stage Stage, name string, p Params, env Env) (T, error) {
	var zero T
	t, err := Find(stage, name)
	if err != nil {
		return zero, err
	}
	rp, err := t.Resolve(p)
	if err != nil {
		return zero, err
	}
	return t.build(rp, env).(T), nil
}

// Build makes the built-in policy a template names, with parameters p
// (resolved: defaults, ranges); it is an Admission, Priority or Routing as
// the stage says.
func Build(stage Stage, name string, p Params, env Env) (any, error) {
	return build[any](stage, name, p, env)
}

// NewAdmission builds a built-in admission policy.
func NewAdmission(name string, p Params, env Env) (Admission, error) {
	return build[Admission](StageAdmission, name, p, env)
}

// NewPriority builds a built-in priority policy.
func NewPriority(name string, p Params, env Env) (Priority, error) {
	return build[Priority](StagePriority, name, p, env)
}

// NewRouting builds a built-in routing policy.
func NewRouting(name string, p Params, env Env) (Routing, error) {
	return build[Routing](StageRouting, name, p, env)
}

// Cloner is implemented by policies that keep state between decisions, so
// that a cloned cluster gets its own copy (stateless policies are shared).
type Cloner interface {
	Clone() any
}

// Clone returns an independent copy of a policy (itself when stateless).
func Clone[T any](p T) T {
	if c, ok := any(p).(Cloner); ok {
		return c.Clone().(T)
	}
	return p
}

// Blinder is implemented by policies that never read the cluster view
// (round-robin, random, fcfs): when every stage is blind the cluster does
// not keep the view up to date, which costs nothing then.
type Blinder interface {
	Blind()
}

// Blind reports whether p never reads the cluster view.
func Blind(p any) bool {
	_, ok := p.(Blinder)
	return ok
}
