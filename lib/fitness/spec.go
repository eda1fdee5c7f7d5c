// Package fitness ranks simulation runs for policy search: a YAML spec of
// objectives (report metrics with a direction and a weight) and hard
// constraints; a scalar primary (the weighted mean of the normalised
// objectives) plus the vector; Pareto ranks over a set of runs. The
// metrics are lib/report's (Report.Metric): nothing is recomputed here.
package fitness

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
	"github.com/blis-sim/blis/lib/yamlcheck"

	"github.com/blis-sim/blis/lib/report"
)

// Spec is a parsed fitness spec (docs/evaluator.md).
type Spec struct {
	Name        string
	SLO         []string // blis-report --slo values
	Objectives  []Objective
	Constraints []Constraint
	slos        *slo.Set
}

// Ref names a metric over a scope: ttft_p99, ttft_p99.interactive (an SLO
// class), ttft_p99.tenant:acme.
type Ref struct {
	Metric, Kind, Value string
}

func (r Ref) String() string {
	switch r.Kind {
	case report.ScopeClass, ScopeAnomaly:
		return r.Metric + "." + r.Value
	case report.ScopeTenant:
		return r.Metric + ".tenant:" + r.Value
	}
	return r.Metric
}

// Anomalies is the metric of the anomaly counts: anomalies (every row of the
// run's anomalies table) or anomalies.TYPE (one type: slo_violation,
// cache_thrashing, …), the names blis-eval reports them under.
const Anomalies = "anomalies"

// ScopeAnomaly is the kind of an anomalies.TYPE reference.
const ScopeAnomaly = "anomaly_type"

// Objective is one metric to optimise.
type Objective struct {
	Ref
	Maximize bool
	Weight   float64
	Scale    float64 // normalised value = ±metric / scale
}

// Constraint is a hard bound: a run violating one is infeasible.
type Constraint struct {
	Ref
	Op    string // >=, <=, >, <
	Bound float64
	Text  string
}

// Holds reports whether v satisfies the constraint (NaN never does).
func (c *Constraint) Holds(v float64) bool {
	switch c.Op {
	case ">=":
		return v >= c.Bound
	case "<=":
		return v <= c.Bound
	case ">":
		return v > c.Bound
	case "<":
		return v < c.Bound
	}
	return false
}

type rawSpec struct {
	Name       string   `yaml:"name"`
	SLO        []string `yaml:"slo"`
	Objectives []struct {
		Metric    string   `yaml:"metric"`
		Direction string   `yaml:"direction"`
		Weight    *float64 `yaml:"weight"`
		Scale     *float64 `yaml:"scale"`
	} `yaml:"objectives"`
	Constraints []string `yaml:"constraints"`
}

// Load reads a fitness spec file; its errors name the file, the line and
// the key ("f.yaml:4: objectives[0].metric: unknown metric …").
func Load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parse(path, b)
}

// Parse reads a fitness spec (errors are named "fitness spec:LINE: …").
func Parse(b []byte) (*Spec, error) { return parse("fitness spec", b) }

func parse(name string, b []byte) (*Spec, error) {
	var raw rawSpec
	if err := yamlcheck.Decode(name, b, &raw); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%s: empty fitness spec: expected objectives", name)
		}
		return nil, err
	}
	// Lines of the keys, for the checks below (the document parsed once more).
	var doc yaml.Node
	_ = yaml.Unmarshal(b, &doc)
	lines, _ := yamlcheck.Check(name, &doc, reflect.TypeOf(raw))
	at := func(key string) error {
		for k := key; ; {
			if l, ok := lines[k]; ok {
				return fmt.Errorf("%s:%d: %s", name, l, key)
			}
			i := strings.LastIndexAny(k, ".[")
			if i < 0 {
				return fmt.Errorf("%s: %s", name, key)
			}
			k = k[:i]
		}
	}
	fail := func(key string, format string, args ...any) error {
		return fmt.Errorf("%v: %s", at(key), fmt.Sprintf(format, args...))
	}
	s := &Spec{Name: raw.Name, SLO: raw.SLO}
	var err error
	if s.slos, err = slo.Parse(raw.SLO); err != nil {
		return nil, fail("slo", "%v", err)
	}
	if len(raw.Objectives) == 0 {
		return nil, fail("objectives", "expected at least one objective")
	}
	total := 0.0
	for i, o := range raw.Objectives {
		where := fmt.Sprintf("objectives[%d]", i)
		ref, err := ParseRef(o.Metric)
		if err != nil {
			return nil, fail(where+".metric", "%v", err)
		}
		ob := Objective{Ref: ref, Weight: 1, Scale: 1}
		switch strings.ToLower(o.Direction) {
		case "maximize", "maximise", "max":
			ob.Maximize = true
		case "minimize", "minimise", "min":
		case "":
			return nil, fail(where+".direction", "expected maximize or minimize")
		default:
			return nil, fail(where+".direction", "expected maximize or minimize, found %q", o.Direction)
		}
		if o.Weight != nil {
			ob.Weight = *o.Weight
		}
		if ob.Weight < 0 || math.IsNaN(ob.Weight) || math.IsInf(ob.Weight, 0) {
			return nil, fail(where+".weight", "expected a number >= 0, found %v", ob.Weight)
		}
		if o.Scale != nil {
			ob.Scale = *o.Scale
		}
		if !(ob.Scale > 0) || math.IsInf(ob.Scale, 0) {
			return nil, fail(where+".scale", "expected a number > 0, found %v", ob.Scale)
		}
		if err := s.needsSLO(ref); err != nil {
			return nil, fail(where+".metric", "%v", err)
		}
		total += ob.Weight
		s.Objectives = append(s.Objectives, ob)
	}
	if total == 0 {
		return nil, fail("objectives", "every weight is 0: expected at least one weight > 0 (the primary would be undefined)")
	}
	for i, text := range raw.Constraints {
		c, err := ParseConstraint(text)
		if err != nil {
			return nil, fail(fmt.Sprintf("constraints[%d]", i), "%v", err)
		}
		if err := s.needsSLO(c.Ref); err != nil {
			return nil, fail(fmt.Sprintf("constraints[%d]", i), "%v", err)
		}
		s.Constraints = append(s.Constraints, c)
	}
	return s, nil
}

func (s *Spec) needsSLO(r Ref) error {
	if (r.Metric == "goodput" || r.Metric == "slo_attainment") && s.slos.Empty() {
		return fmt.Errorf("%s needs SLO targets: add slo: [\"interactive:ttft=200ms\", …]", r.Metric)
	}
	return nil
}

// SLOs are the spec's SLO targets.
func (s *Spec) SLOs() *slo.Set { return s.slos }

// ParseRef reads metric[.class] or metric.tenant:NAME (or .class:NAME).
func ParseRef(text string) (Ref, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return Ref{}, errors.New("expected a metric name")
	}
	name, scope, scoped := strings.Cut(text, ".")
	r := Ref{Metric: name}
	if name == Anomalies {
		if scoped {
			if !slices.Contains(trace.AnomalyTypes, scope) {
				return r, fmt.Errorf("%q: unknown anomaly type %q: expected one of %s", text, scope, strings.Join(trace.AnomalyTypes, ", "))
			}
			r.Kind, r.Value = ScopeAnomaly, scope
		}
		return r, nil
	}
	if !report.IsMetric(name) {
		return r, fmt.Errorf("unknown metric %q: expected one of %s, %s, %s.TYPE", name, strings.Join(report.MetricNames, ", "), Anomalies, Anomalies)
	}
	if scoped {
		switch k, v, ok := strings.Cut(scope, ":"); {
		case ok && k == "tenant":
			r.Kind, r.Value = report.ScopeTenant, v
		case ok && (k == "class" || k == "slo_class"):
			r.Kind, r.Value = report.ScopeClass, v
		case ok:
			return r, fmt.Errorf("%q: unknown scope %q: expected CLASS, class:CLASS or tenant:NAME", text, k)
		default:
			r.Kind, r.Value = report.ScopeClass, scope
		}
		if r.Value == "" {
			return r, fmt.Errorf("%q: empty scope name", text)
		}
		if name == "jain_fairness" {
			return r, fmt.Errorf("%q: jain_fairness is over tenants and takes no scope", text)
		}
		if report.Unscoped(name) {
			return r, fmt.Errorf("%q: %s is the whole run's and takes no scope", text, name)
		}
	}
	return r, nil
}

// ParseConstraint reads "metric[.scope] OP number" (OP: >=, <=, >, <).
func ParseConstraint(text string) (Constraint, error) {
	for _, op := range []string{">=", "<=", ">", "<"} {
		l, rt, ok := strings.Cut(text, op)
		if !ok {
			continue
		}
		ref, err := ParseRef(l)
		if err != nil {
			return Constraint{}, err
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rt), 64)
		if err != nil || math.IsNaN(v) {
			return Constraint{}, fmt.Errorf("%q: expected a number after %s, found %q", text, op, strings.TrimSpace(rt))
		}
		return Constraint{Ref: ref, Op: op, Bound: v, Text: strings.TrimSpace(text)}, nil
	}
	return Constraint{}, fmt.Errorf("%q: expected METRIC >= NUMBER (or <=, >, <)", text)
}
