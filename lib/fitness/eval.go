package fitness

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/trace"
)

// Value is one objective's outcome.
type Value struct {
	Metric     string  `json:"metric"`
	Value      Float   `json:"value"`
	Normalised Float   `json:"normalised"`
	Weight     float64 `json:"weight"`
	Direction  string  `json:"direction"`
}

// Check is one constraint's outcome.
type Check struct {
	Constraint string `json:"constraint"`
	Value      Float  `json:"value"`
	Holds      bool   `json:"holds"`
}

// Result is a run's fitness.
type Result struct {
	Run        string   `json:"run"`
	Feasible   bool     `json:"feasible"`
	Violations []string `json:"violations,omitempty"`
	Primary    Float    `json:"primary"`
	Objectives []Value  `json:"objectives"`
	Checks     []Check  `json:"constraints,omitempty"`
	Rank       int      `json:"pareto_rank"`
	Front      bool     `json:"front"`
}

// Metrics is a run's metric values by reference, for the objectives and
// constraints of a spec (what Evaluate reads from a report).
type Metrics map[string]float64

// Evaluate reads each results table (with the spec's SLOs, grouped as its
// scoped latency metrics need) and computes its fitness; the results are
// Pareto-ranked over the set.
//
// side holds the side tables of the one run given, when it is one:
// gpu_hours, cost_usd and the scale metrics of an autoscaled run come from
// its scale-events table, the anomaly counts from its anomalies table.
func Evaluate(paths []string, labels []string, s *Spec, side Side) ([]Result, error) {
	if len(paths) == 0 {
		return nil, errors.New("no runs to rank: give at least one results table")
	}
	ms, err := Collect(paths, s, side)
	if err != nil {
		return nil, err
	}
	out := make([]Result, len(paths))
	for i := range paths {
		out[i] = s.Score(ms[i])
		out[i].Run = labels[i]
	}
	Rank(out)
	return out, nil
}

// refs lists every metric reference of the spec, objectives first.
func (s *Spec) refs() []Ref {
	var r []Ref
	for _, o := range s.Objectives {
		r = append(r, o.Ref)
	}
	for _, c := range s.Constraints {
		r = append(r, c.Ref)
	}
	return r
}

// Side are the side tables of a single run scored: its scale-events and
// anomalies tables ("" when not given).
type Side struct {
	ScaleEvents, Anomalies string
}

// Collect computes the spec's metrics of each run with lib/report (and the
// anomaly counts from side.Anomalies).
func Collect(paths []string, s *Spec, side Side) ([]Metrics, error) {
	scaleEvents := side.ScaleEvents
	if (scaleEvents != "" || side.Anomalies != "") && len(paths) != 1 {
		return nil, fmt.Errorf("scale-events and anomalies tables belong to one run, and %d were given: score such runs one at a time", len(paths))
	}
	var anomalies map[string]int64
	for _, ref := range s.refs() {
		if ref.Metric != Anomalies || anomalies != nil {
			continue
		}
		if side.Anomalies == "" {
			return nil, fmt.Errorf("%s: the anomaly counts come from the run's anomalies table (blis-sim --anomalies FILE; give it with blis-report --anomalies FILE, or use blis-eval, which writes it)", ref)
		}
		var err error
		if anomalies, err = CountAnomalies(side.Anomalies); err != nil {
			return nil, err
		}
	}
	// One report per grouping that a scoped latency metric needs.
	byKind := map[string]*report.Report{}
	build := func(kind string) (*report.Report, error) {
		if rep := byKind[kind]; rep != nil {
			return rep, nil
		}
		by := ""
		if kind == report.ScopeClass {
			by = "slo_class"
		} else if kind == report.ScopeTenant {
			by = "tenant"
		}
		rep, err := report.Build(paths, report.Options{SLOs: s.slos, By: by, ScaleEvents: scaleEvents})
		if err != nil {
			return nil, err
		}
		byKind[kind] = rep
		return rep, nil
	}
	out := make([]Metrics, len(paths))
	for i := range out {
		out[i] = Metrics{}
	}
	for _, ref := range s.refs() {
		if ref.Metric == Anomalies {
			out[0][ref.String()] = float64(anomalies[ref.Value]) // "" counts them all
			continue
		}
		kind := report.ScopeAll
		if report.NeedsDist(ref.Metric) {
			kind = ref.Kind
		}
		rep, err := build(kind)
		if err != nil {
			return nil, err
		}
		for i := range paths {
			v, err := rep.Metric(i, ref.Metric, ref.Kind, ref.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", ref, err)
			}
			out[i][ref.String()] = v
		}
	}
	return out, nil
}

// Score computes a run's fitness from its metrics: each objective
// normalised as +value/scale (maximise) or −value/scale (minimise), the
// primary their weighted mean; a violated constraint, or an objective
// that is undefined (NaN: e.g. no request completed), makes it
// infeasible.
func (s *Spec) Score(m Metrics) Result {
	res := Result{Feasible: true}
	var sum, wsum float64
	for _, o := range s.Objectives {
		v := m[o.Ref.String()]
		n := v / o.Scale
		dir := "maximize"
		if !o.Maximize {
			n, dir = -n, "minimize"
		}
		res.Objectives = append(res.Objectives, Value{Metric: o.Ref.String(), Value: Float(v), Normalised: Float(n), Weight: o.Weight, Direction: dir})
		if math.IsNaN(v) {
			res.Feasible = false
			res.Violations = append(res.Violations, o.Ref.String()+" is undefined (no request it counts)")
			continue
		}
		sum += o.Weight * n
		wsum += o.Weight
	}
	res.Primary = Float(sum / wsum)
	if wsum == 0 {
		res.Primary = Float(math.NaN())
	}
	for _, c := range s.Constraints {
		v := m[c.Ref.String()]
		ok := c.Holds(v)
		res.Checks = append(res.Checks, Check{Constraint: c.Text, Value: Float(v), Holds: ok})
		if !ok {
			res.Feasible = false
			res.Violations = append(res.Violations, fmt.Sprintf("%s (found %.4g)", c.Text, v))
		}
	}
	return res
}

// dominates: a is at least as good on every normalised objective and
// better on one.
func dominates(a, b *Result) bool {
	better := false
	for k := range a.Objectives {
		x, y := a.Objectives[k].Normalised, b.Objectives[k].Normalised
		if x < y {
			return false
		}
		if x > y {
			better = true
		}
	}
	return better
}

// Rank sets Pareto ranks (1 = the front, by non-dominated sorting over
// the feasible runs); infeasible runs rank after every feasible one,
// all at the same rank.
func Rank(rs []Result) {
	left := []int{}
	for i := range rs {
		rs[i].Rank, rs[i].Front = 0, false
		if rs[i].Feasible {
			left = append(left, i)
		}
	}
	rank := 0
	for len(left) > 0 {
		rank++
		var front, rest []int
		for _, i := range left {
			dom := false
			for _, j := range left {
				if i != j && dominates(&rs[j], &rs[i]) {
					dom = true
					break
				}
			}
			if dom {
				rest = append(rest, i)
			} else {
				front = append(front, i)
			}
		}
		for _, i := range front {
			rs[i].Rank = rank
			rs[i].Front = rank == 1
		}
		left = rest
	}
	for i := range rs {
		if !rs[i].Feasible {
			rs[i].Rank = rank + 1
		}
	}
}

// Order returns run indices by rank, then primary (best first), then
// input order.
func Order(rs []Result) []int {
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		x, y := &rs[idx[a]], &rs[idx[b]]
		if x.Rank != y.Rank {
			return x.Rank < y.Rank
		}
		return x.Primary > y.Primary
	})
	return idx
}

// Float is a float64 written to JSON as null when it is NaN or infinite.
type Float float64

// MarshalJSON writes f, or null.
func (f Float) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// CountAnomalies counts an anomalies table's rows by type, and in all
// (under "").
func CountAnomalies(path string) (map[string]int64, error) {
	src, err := trace.Open(path, nil)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if got := src.Meta().Table(); got != trace.TableAnomalies {
		return nil, fmt.Errorf("%s: expected an anomalies table (blis.table = %s), found %q", path, trace.TableAnomalies, got)
	}
	n := map[string]int64{}
	for {
		rec, err := src.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return nil, err
		}
		col := -1
		for i, f := range rec.Schema().Fields() {
			if f.Name == "type" {
				col = i
			}
		}
		if col < 0 {
			return nil, fmt.Errorf("%s: no type column", path)
		}
		c := rec.Column(col)
		for i := 0; i < int(rec.NumRows()); i++ {
			n[trace.StringAt(c, i)]++
			n[""]++
		}
		rec.Release()
	}
}
