package sweep

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/blis-sim/blis/lib/report"
)

// Capacity-search goals.
const (
	MinReplicas = "min-replicas" // the fewest replicas that meet the SLO
	MaxRate     = "max-rate"     // the highest rate that still meets it
)

// FindOptions configure a capacity search.
type FindOptions struct {
	Goal        string
	Constraints []Constraint
	Axis        string  // the searched axis ("" = the replicas axis, or the workload's rate or speedup)
	Tolerance   float64 // continuous axes: stop when the bracket is narrower than this fraction of its top
	Confidence  float64 // CI level of the decision with several seeds (0 = the mean)
	Exec        Options // where and how probes run (Out, Workers, Progress)
	// Log, when set, receives one line per probe.
	Log func(string)
}

// Answer is the outcome of one search: one per combination of the other axes.
type Answer struct {
	Combo   []*yaml.Node // values of the other axes (nil at the searched axis)
	Found   bool
	Value   *yaml.Node // the answer (Found), else the probe that came closest
	Note    string     // why there is no answer, or what the answer means at a range's edge
	Verdict Verdict    // at Value
	Probes  int
	GPUs    int64
	Cost    float64 // $ per hour (NaN without prices)
	Trail   []Probe // every probe of the search, in the order run
	run     *Run
}

// Probe is one probed value of a search, for the capacity page.
type Probe struct {
	Value      *yaml.Node
	Verdict    Verdict
	Attainment float64 // slo_all_met_pct, mean over the seeds that ran (NaN if none)
	GPUs       int64
	Cost       float64 // $ per hour (NaN without prices)
}

// FindResult is a whole capacity search.
type FindResult struct {
	Spec    *Spec
	Axis    *Axis
	AxisIdx int
	Goal    string
	Cons    []Constraint
	Answers []*Answer
	Runs    int // distinct runs simulated or reused
	// RequestSLO is the per-request SLO the runs were reported with (for
	// attainment), derived from the latency constraints when the spec had none.
	RequestSLO []string
}

// domain is the searched axis's values as positions.
type domain interface {
	first() float64
	last() float64
	mid(lo, hi float64) (float64, bool) // a position strictly between, or false when the bracket is tight
	node(x float64) *yaml.Node
}

type listDomain struct{ vals []*yaml.Node } // sorted ascending; positions are indices

func (d listDomain) first() float64 { return 0 }
func (d listDomain) last() float64  { return float64(len(d.vals) - 1) }
func (d listDomain) mid(lo, hi float64) (float64, bool) {
	if hi-lo <= 1 {
		return 0, false
	}
	return math.Floor((lo + hi) / 2), true
}
func (d listDomain) node(x float64) *yaml.Node { return d.vals[int(x)] }

type rangeDomain struct {
	r     *Range
	isInt bool
	tol   float64
}

func (d rangeDomain) first() float64 { return d.r.From }
func (d rangeDomain) last() float64  { return d.r.To }
func (d rangeDomain) mid(lo, hi float64) (float64, bool) {
	if d.isInt {
		if hi-lo <= 1 {
			return 0, false
		}
		return math.Floor((lo + hi) / 2), true
	}
	if hi-lo <= d.tol*math.Max(math.Abs(hi), math.Abs(lo)) {
		return 0, false
	}
	m, _ := strconv.ParseFloat(d.r.node((lo+hi)/2, false).Value, 64)
	if m <= lo || m >= hi {
		return 0, false
	}
	return m, true
}
func (d rangeDomain) node(x float64) *yaml.Node { return d.r.node(x, d.isInt) }

// searchAxis picks the axis to search.
func searchAxis(s *Spec, goal, name string) (int, error) {
	if name != "" {
		for i, a := range s.Axes {
			if a.Name == name {
				return i, nil
			}
		}
		var names []string
		for _, a := range s.Axes {
			names = append(names, a.Name)
		}
		return 0, fmt.Errorf("--search-axis %s: not an axis of the spec (axes: %s)", name, strings.Join(names, ", "))
	}
	var found []int
	for i, a := range s.Axes {
		last := a.path[len(a.path)-1]
		switch {
		case goal == MinReplicas && a.target == tgtCluster && last.key == "replicas":
			found = append(found, i)
		case goal == MaxRate && a.target == tgtWorkload && len(a.path) == 1 && (last.key == "aggregate_rate" || last.key == "speedup"):
			found = append(found, i)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		var names []string
		for _, i := range found {
			names = append(names, s.Axes[i].Name)
		}
		return 0, fmt.Errorf("several axes could be searched (%s): choose one with --search-axis; the others are searched at each of their values", strings.Join(names, ", "))
	case goal == MinReplicas:
		return 0, errors.New("--find min-replicas needs a replicas axis to search, e.g. axes: {replicas: {from: 1, to: 32}} (or deployments[0].pools[0].replicas)")
	}
	return 0, errors.New("--find max-rate needs a rate axis to search: workload.aggregate_rate (a blis-synth workload) or workload.speedup (a trace), e.g. {from: 1, to: 100}")
}

func newDomain(a *Axis, tol float64) (domain, error) {
	if a.Range != nil && a.Range.Step == 0 && a.Range.Steps == 0 {
		if a.Range.From == a.Range.To {
			return nil, fmt.Errorf("axis %s: the range %g..%g has one value: nothing to search", a.Name, a.Range.From, a.Range.To)
		}
		return rangeDomain{r: a.Range, isInt: a.Int, tol: tol}, nil
	}
	type kv struct {
		x float64
		n *yaml.Node
	}
	var vs []kv
	for _, v := range a.Values {
		x, err := strconv.ParseFloat(v.Value, 64)
		if v.Kind != yaml.ScalarNode || err != nil {
			return nil, fmt.Errorf("axis %s: searching needs numbers, found %s", a.Name, flowString(v))
		}
		vs = append(vs, kv{x, v})
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].x < vs[j].x })
	vs = slices.CompactFunc(vs, func(a, b kv) bool { return a.x == b.x })
	if len(vs) < 2 {
		return nil, fmt.Errorf("axis %s: one value: nothing to search", a.Name)
	}
	d := listDomain{}
	for _, v := range vs {
		d.vals = append(d.vals, v.n)
	}
	return d, nil
}

// search is one bisection.
type search struct {
	ans      *Answer
	dom      domain
	highIsOK bool    // min-replicas: feasibility grows with the axis
	lo, hi   float64 // bracket positions: one side passes, the other fails
	started  bool
	done     bool
	pending  []float64
	verdicts map[float64]*Verdict
	runsAt   map[float64]*Run
}

// Find runs a capacity search: for each combination of the axes other than
// the searched one, a bisection over the searched axis, each probe run with
// every seed of the spec. Probes are ordinary runs of the sweep (same ids,
// same output directory), so a search reuses what a sweep ran and the
// other way round.
func Find(s *Spec, o FindOptions) (*FindResult, error) {
	if s.Sampling.Method != "grid" {
		return nil, errors.New("--find searches a grid: remove sampling from the spec")
	}
	if len(o.Constraints) == 0 {
		return nil, errors.New("--find needs --slo constraints, e.g. --slo 'p99_ttft<=500ms,attainment>=0.99'")
	}
	idx, err := searchAxis(s, o.Goal, o.Axis)
	if err != nil {
		return nil, err
	}
	if o.Tolerance <= 0 {
		o.Tolerance = 0.02
	}
	sp := *s // the request SLO may be filled in: work on a copy
	res := &FindResult{Spec: &sp, Axis: sp.Axes[idx], AxisIdx: idx, Goal: o.Goal, Cons: o.Constraints}
	for _, c := range o.Constraints {
		if c.needsRequestSLO() && len(sp.Report.SLO) == 0 {
			rs := requestSLO(o.Constraints)
			if rs == "" {
				return nil, fmt.Errorf("--slo %s needs per-request targets: give report.slo in the spec (e.g. ttft=500ms) or a latency constraint such as p99_ttft<=500ms", c.Text)
			}
			sp.Report.SLO = []string{rs}
			if err := checkReport(&sp.Report); err != nil {
				return nil, err
			}
		}
	}
	res.RequestSLO = sp.Report.SLO
	dom, err := newDomain(res.Axis, o.Tolerance)
	if err != nil {
		return nil, err
	}
	// The other axes' combinations, each searched on its own.
	others := make([]*Axis, 0, len(sp.Axes))
	for i, a := range sp.Axes {
		if i != idx {
			if len(a.Values) == 0 {
				return nil, fmt.Errorf("axis %s is a continuous range: give steps or step (only the searched axis may be continuous)", a.Name)
			}
			others = append(others, a)
		}
	}
	var searches []*search
	for _, pt := range gridPoints(others) {
		combo := make([]*yaml.Node, len(sp.Axes))
		k := 0
		for i := range sp.Axes {
			if i != idx {
				combo[i] = pt.Values[k]
				k++
			}
		}
		ans := &Answer{Combo: combo, Cost: math.NaN()}
		res.Answers = append(res.Answers, ans)
		searches = append(searches, &search{ans: ans, dom: dom, highIsOK: o.Goal == MinReplicas,
			verdicts: map[float64]*Verdict{}, runsAt: map[float64]*Run{}})
	}
	r := &resolver{spec: &sp, build: Build(), clusters: map[string]*cluster{}, workloads: map[string]*resolvedWorkload{}, wkeys: map[*resolvedWorkload]string{}}
	seeds := sp.Seeds
	reps := max(1, len(seeds))
	seen := map[string]bool{}
	for {
		// Every active search proposes its next probes; all run together.
		type probe struct {
			s    *search
			pos  float64
			runs []*Run
		}
		var probes []probe
		plan := &Plan{Spec: &sp}
		for _, se := range searches {
			for _, pos := range se.next() {
				pt := &Point{Index: len(plan.Points), Values: slices.Clone(se.ans.Combo)}
				pt.Values[idx] = dom.node(pos)
				plan.Points = append(plan.Points, pt)
				pr := probe{s: se, pos: pos}
				for i := 0; i < reps; i++ {
					run := &Run{Point: pt, Replication: i}
					if len(seeds) > 0 {
						run.Seed, run.HasSeed = seeds[i], true
					}
					if err := r.resolve(run, nil); err != nil {
						return nil, err
					}
					plan.Runs = append(plan.Runs, run)
					pr.runs = append(pr.runs, run)
					if !seen[run.ID] {
						seen[run.ID] = true
						res.Runs++
					}
				}
				probes = append(probes, pr)
			}
		}
		if len(probes) == 0 {
			break
		}
		st, err := Execute(plan, o.Exec)
		if err != nil {
			return nil, err
		}
		if len(st.Errors) > 0 {
			return nil, fmt.Errorf("%d runs could not run: first: %w", len(st.Errors), st.Errors[0])
		}
		for _, pr := range probes {
			var recs []*Record
			for _, run := range pr.runs {
				rec, err := readRecord(o.Exec.Out, run.ID)
				if err != nil {
					return nil, err
				}
				if rec == nil {
					return nil, fmt.Errorf("run %s has no record after running", run.ID[:12])
				}
				recs = append(recs, rec)
			}
			v := judge(o.Constraints, recs, o.Confidence)
			pr.s.record(pr.pos, &v, pr.runs[0])
			gpus, cost := runCost(&sp, pr.runs[0])
			pr.s.ans.Trail = append(pr.s.ans.Trail, Probe{Value: dom.node(pr.pos), Verdict: v, Attainment: meanMetric(recs, "slo_all_met_pct"), GPUs: gpus, Cost: cost})
			if o.Log != nil {
				o.Log(res.probeLine(pr.s.ans, dom.node(pr.pos), &v))
			}
		}
	}
	for _, se := range searches {
		se.finish(&sp)
	}
	return res, nil
}

// next returns the positions to probe now (none when done).
func (se *search) next() []float64 {
	if se.done {
		return nil
	}
	if !se.started {
		se.started = true
		se.pending = []float64{se.dom.first(), se.dom.last()}
		return se.pending
	}
	if len(se.pending) > 0 {
		return nil // waiting for results (cannot happen: rounds are synchronous)
	}
	m, ok := se.dom.mid(se.lo, se.hi)
	if !ok {
		se.done = true
		return nil
	}
	se.pending = []float64{m}
	return se.pending
}

// record takes a probe's verdict and moves the bracket.
func (se *search) record(pos float64, v *Verdict, run *Run) {
	se.verdicts[pos] = v
	se.runsAt[pos] = run
	se.ans.Probes++
	se.pending = slices.DeleteFunc(se.pending, func(x float64) bool { return x == pos })
	if len(se.pending) > 0 {
		return
	}
	first, last := se.dom.first(), se.dom.last()
	if _, ok := se.verdicts[first]; ok && se.ans.Probes == 2 {
		fv, lv := se.verdicts[first], se.verdicts[last]
		ok, bad := lv, fv // min-replicas: the top must pass, the bottom fail
		okPos, badPos := last, first
		if !se.highIsOK {
			ok, bad, okPos, badPos = fv, lv, first, last
		}
		switch {
		case !ok.Pass:
			se.done = true
			se.setAnswer(okPos, false, "")
		case bad.Pass:
			se.done = true
			se.setAnswer(badPos, true, "")
		default:
			se.lo, se.hi = first, last
		}
		return
	}
	pass := v.Pass
	if se.highIsOK == pass {
		se.hi = pos
	} else {
		se.lo = pos
	}
}

func (se *search) setAnswer(pos float64, found bool, note string) {
	se.ans.Found = found
	se.ans.Value = se.dom.node(pos)
	se.ans.Verdict = *se.verdicts[pos]
	se.ans.run = se.runsAt[pos]
	se.ans.Note = note
}

// finish fills the answer from the final bracket, with notes at the edges.
func (se *search) finish(sp *Spec) {
	a := se.ans
	if a.Value == nil {
		if se.highIsOK {
			se.setAnswer(se.hi, true, "")
		} else {
			se.setAnswer(se.lo, true, "")
		}
	}
	first, last := se.dom.first(), se.dom.last()
	switch {
	case !a.Found && se.highIsOK:
		a.Note = fmt.Sprintf("unreachable: even the largest value of the range misses the SLO (%s)", strings.Join(a.Verdict.Failing, "; "))
	case !a.Found:
		a.Note = fmt.Sprintf("unreachable: even the smallest value of the range misses the SLO (%s)", strings.Join(a.Verdict.Failing, "; "))
	case se.highIsOK && flowString(a.Value) == flowString(se.dom.node(first)):
		a.Note = "the smallest value of the range already meets the SLO"
		if x, err := strconv.ParseFloat(a.Value.Value, 64); err != nil || x > 1 {
			a.Note += ": the minimum may be lower"
		}
	case !se.highIsOK && flowString(a.Value) == flowString(se.dom.node(last)):
		a.Note = "the largest value of the range still meets the SLO: the maximum may be higher"
	}
	if a.Verdict.Error != "" {
		a.Note += "; runs failed: " + a.Verdict.Error
	}
	if a.run != nil {
		a.GPUs, a.Cost = runCost(sp, a.run)
	}
}

// runCost is a run's GPUs and its price per hour (NaN unless every GPU
// kind of it is priced in the spec's cost).
func runCost(sp *Spec, run *Run) (int64, float64) {
	if run == nil || run.cluster == nil {
		return 0, math.NaN()
	}
	g := run.cluster.gpus()
	priced := sp.Cost != nil
	var n int64
	cost := 0.0
	for _, name := range gpuNames(g) {
		n += int64(g[name])
		p, ok := sp.Cost[name]
		priced = priced && ok
		cost += p * float64(g[name])
	}
	if !priced {
		return n, math.NaN()
	}
	return n, cost
}

// meanMetric is the mean of a metric over the records that have it (the
// report group "all", the first), NaN when none does.
func meanMetric(recs []*Record, name string) float64 {
	sum, n := 0.0, 0
	for _, r := range recs {
		if r.Error != "" || len(r.Groups) == 0 {
			continue
		}
		if p := r.Groups[0].Metrics[name]; p != nil && !math.IsNaN(*p) {
			sum += *p
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

func (res *FindResult) comboString(a *Answer) string {
	var parts []string
	for i, v := range a.Combo {
		if i != res.AxisIdx && v != nil {
			parts = append(parts, res.Spec.Axes[i].Name+"="+flowString(v))
		}
	}
	return strings.Join(parts, " ")
}

func (res *FindResult) probeLine(a *Answer, v *yaml.Node, vd *Verdict) string {
	mark := "meets"
	if !vd.Pass {
		mark = "misses"
	}
	var terms []string
	for i, c := range res.Cons {
		s := c.Metric + " " + fmtNum(vd.Mean[i])
		if vd.Half[i] > 0 {
			s += " ± " + fmtNum(vd.Half[i])
		}
		terms = append(terms, s)
	}
	if vd.Error != "" {
		terms = append(terms, "failed: "+vd.Error)
	}
	c := res.comboString(a)
	if c != "" {
		c += " "
	}
	seeds := "1 seed"
	if vd.N != 1 {
		seeds = fmt.Sprintf("%d seeds", vd.N)
	}
	return fmt.Sprintf("%s%s=%s: %s (%s; %s)", c, res.Axis.Name, flowString(v), mark, strings.Join(terms, ", "), seeds)
}

// Cheapest returns the index of the answer with the lowest cost per hour
// (or, without prices, the fewest GPUs) among those found; -1 if none.
func (res *FindResult) Cheapest() int {
	best := -1
	for i, a := range res.Answers {
		if !a.Found {
			continue
		}
		if best < 0 {
			best = i
			continue
		}
		b := res.Answers[best]
		if !math.IsNaN(a.Cost) && !math.IsNaN(b.Cost) {
			if a.Cost < b.Cost {
				best = i
			}
		} else if a.GPUs < b.GPUs {
			best = i
		}
	}
	return best
}

// ComboString names an answer's combination of the other axes ("" when the
// search axis is the only one).
func (res *FindResult) ComboString(a *Answer) string { return res.comboString(a) }

// Capacity is the search as the capacity page draws it (report.Capacity),
// with t the table of answers.
func (res *FindResult) Capacity(conf float64, t *report.Table) *report.Capacity {
	c := &report.Capacity{Name: res.Spec.Name, Goal: res.Goal, Axis: res.Axis.Name, AxisInt: true,
		Priced: res.Spec.Cost != nil, Confidence: conf, Seeds: max(1, len(res.Spec.Seeds)), Table: t}
	for _, k := range res.Cons {
		unit := ""
		for _, m := range Metrics {
			if m.Name == k.Metric {
				unit = m.Unit
			}
		}
		c.Constraints = append(c.Constraints, report.CapConstraint{Text: k.Text, Metric: k.Metric, Op: k.Op, Unit: unit, Value: k.Value})
	}
	num := func(n *yaml.Node) float64 {
		x, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			return math.NaN()
		}
		return x
	}
	for _, a := range res.Answers {
		cb := report.CapCombo{Label: res.comboString(a), Found: a.Found, Note: a.Note}
		if a.Value != nil {
			cb.Answer = num(a.Value)
		}
		for _, pr := range a.Trail {
			q := report.CapProbe{X: num(pr.Value), Mean: pr.Verdict.Mean, Half: pr.Verdict.Half, Pass: pr.Verdict.Pass,
				Attainment: pr.Attainment, GPUs: pr.GPUs, Cost: pr.Cost, Failed: pr.Verdict.Error}
			if pr.Verdict.N < 2 {
				q.Half = make([]float64, len(pr.Verdict.Mean))
			}
			c.AxisInt = c.AxisInt && q.X == math.Trunc(q.X)
			cb.Probes = append(cb.Probes, q)
		}
		c.Combos = append(c.Combos, cb)
	}
	return c
}
