// Package summary writes the reflective summary of a run: a deterministic
// page of Markdown (500–1,500 tokens) an LLM proposing the next policy
// can act on — outcome vs targets, the top issues (anomalies clustered by
// type and replica), counterfactual regret, the worst decisions with
// their context and best alternative, and where to focus. Every number
// comes from the results, decisions and anomalies tables, and names the
// table (and row seq) it comes from.
package summary

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/fitness"
	"github.com/blis-sim/blis/lib/report"
	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// Strategies.
const (
	IssueFocused  = "issue_focused"
	DecisionAudit = "decision_audit"
	Counterfact   = "counterfactual"
	// PatternMining leads with the recurring decision patterns behind the
	// worst outcomes (patterns.go).
	PatternMining = "pattern_mining"
)

// Strategies lists them.
var Strategies = []string{IssueFocused, DecisionAudit, Counterfact, PatternMining}

// Options are the summary's inputs.
type Options struct {
	Results   string // results table (required)
	Decisions string // decisions table (optional)
	Anomalies string // anomalies table (optional)
	// ScaleEvents is the run's scale-events table (optional; the GPU-hours
	// and cost of an autoscaled run need it).
	ScaleEvents string
	SLOs        *slo.Set
	Fitness     *fitness.Spec // targets as constraints (optional)
	Strategy    string
}

// Write writes the summary.
func Write(w io.Writer, o Options) error {
	switch o.Strategy {
	case "":
		o.Strategy = IssueFocused
	case IssueFocused, DecisionAudit, Counterfact, PatternMining:
	default:
		return fmt.Errorf("unknown summary strategy %q: expected %s", o.Strategy, strings.Join(Strategies, ", "))
	}
	slos := o.SLOs
	if o.Fitness != nil && slos.Empty() {
		slos = o.Fitness.SLOs()
	}
	rep, err := report.Build([]string{o.Results}, report.Options{SLOs: slos, By: "slo_class"})
	if err != nil {
		// Without a slo_class column: no per-class rows.
		var err2 error
		if rep, err2 = report.Build([]string{o.Results}, report.Options{SLOs: slos}); err2 != nil {
			return err
		}
	}
	var dec *Decisions
	if o.Decisions != "" {
		if dec, err = readDecisions(o.Decisions, o.Strategy == PatternMining); err != nil {
			return err
		}
	}
	var an *Anomalies
	if o.Anomalies != "" {
		if an, err = ReadAnomalies(o.Anomalies); err != nil {
			return err
		}
	}
	s := &writer{rep: rep, dec: dec, an: an, o: o, slos: slos, ri: readRunInfo(o.Results)}
	var fr *fitness.Result
	if o.Fitness != nil {
		ms, err := fitness.Collect([]string{o.Results}, o.Fitness, fitness.Side{ScaleEvents: o.ScaleEvents, Anomalies: o.Anomalies})
		if err != nil {
			return err
		}
		r := o.Fitness.Score(ms[0])
		fr = &r
	}
	s.fit = fr
	s.write()
	_, err = io.WriteString(w, s.b.String())
	return err
}

type writer struct {
	b    strings.Builder
	rep  *report.Report
	dec  *Decisions
	an   *Anomalies
	o    Options
	slos *slo.Set
	fit  *fitness.Result
	ri   runInfo
}

func (s *writer) p(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

func (s *writer) metric(name, kind, value string) float64 {
	v, err := s.rep.Metric(0, name, kind, value)
	if err != nil {
		return math.NaN()
	}
	return v
}

func f(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func secs(us int64) string { return fmt.Sprintf("%.1f s", float64(us)/1e6) }

func (s *writer) write() {
	s.p("# Run summary (%s)\n\n", s.o.Strategy)
	in := s.rep.Inputs[0]
	s.p("Results: `%s` (%d rows). Throughput %s req/s, TTFT p50 %s ms / p99 %s ms, TPOT p99 %s ms, E2E p99 %s ms, cache hit rate %s%%, preempted %s%% of requests.\n\n",
		in.Label, in.Rows, f(s.metric("throughput", "", ""), 2), f(s.metric("ttft_p50", "", ""), 1), f(s.metric("ttft_p99", "", ""), 1),
		f(s.metric("tpot_p99", "", ""), 1), f(s.metric("e2e_p99", "", ""), 1), f(100*s.metric("cache_hit_rate", "", ""), 1), f(100*s.metric("preemption_rate", "", ""), 2))
	s.outcome()
	switch s.o.Strategy {
	case IssueFocused:
		s.issues(5)
		s.regret(false)
		s.worst(3)
		s.focus()
	case DecisionAudit:
		s.audit()
		s.worst(3)
		s.issues(3)
		s.focus()
	case Counterfact:
		s.regret(true)
		s.worst(3)
		s.issues(3)
		s.focus()
	case PatternMining:
		s.patterns()
		s.worst(3)
		s.issues(3)
		s.focus()
	}
}

// patterns: the recurring features of the worst routing decisions.
func (s *writer) patterns() {
	s.p("## Recurring patterns behind the worst decisions\n\n")
	if s.dec == nil || s.dec.mine == nil {
		s.p("No decisions table given.\n\n")
		return
	}
	pats, w, cut, inc := s.dec.mine.mine(6)
	n := len(s.dec.mine.rows)
	if w == 0 {
		s.p("Too few routing decisions to mine (`%s`: %d, at least 20 needed).\n\n", base(s.dec.Path), n)
		return
	}
	bound := ""
	switch {
	case cut != trace.Null && inc > 0:
		bound = fmt.Sprintf("%d that did not complete, and TTFT ≥ %s ms", inc, ms(cut))
	case cut != trace.Null:
		bound = fmt.Sprintf("TTFT ≥ %s ms", ms(cut))
	default:
		bound = "requests that did not complete"
	}
	s.p("The worst %d of %d routing decisions (`%s`; %s) against all of them: features at least 1.5 times as frequent among the worst, by the worst decisions they account for beyond chance.\n\n",
		w, n, base(s.dec.Path), bound)
	if len(pats) == 0 {
		s.p("No feature recurs among the worst decisions more than among all: their cause is not in what the router saw or chose (look at capacity, or at the issues below).\n\n")
		return
	}
	for i, p := range pats {
		ex := make([]string, len(p.Examples))
		for k, e := range p.Examples {
			ex[k] = strconv.FormatInt(e, 10)
		}
		s.p("%d. **%s**: %d of the worst %d (%s%%) against %d of all %d (%s%%), %s× as frequent; e.g. seq %s.\n",
			i+1, p.Name, p.Worst, p.WorstN, f(100*float64(p.Worst)/float64(p.WorstN), 0), p.All, p.AllN,
			f(100*float64(p.All)/float64(p.AllN), 0), f(p.Lift, 1), strings.Join(ex, ", "))
	}
	s.p("\n")
}

// outcome: fitness objectives and constraints, else SLO targets per class.
func (s *writer) outcome() {
	s.p("## Outcome vs targets\n\n")
	if s.fit != nil {
		s.p("| target | value | |\n|---|---|---|\n")
		for _, c := range s.fit.Checks {
			s.p("| %s | %s | %s |\n", c.Constraint, f(float64(c.Value), 4), mark(c.Holds))
		}
		for _, o := range s.fit.Objectives {
			s.p("| %s %s (weight %g) | %s | |\n", o.Direction, o.Metric, o.Weight, f(float64(o.Value), 4))
		}
		s.p("\nFitness: primary %s, %s (from the results table with the fitness spec).\n\n", f(float64(s.fit.Primary), 4), map[bool]string{true: "feasible", false: "infeasible: " + strings.Join(s.fit.Violations, "; ")}[s.fit.Feasible])
		return
	}
	if s.slos.Empty() {
		s.p("No targets given (--slo or --fitness).\n\n")
		return
	}
	s.p("| class | target | p99 | attainment | |\n|---|---|---|---|---|\n")
	classes := s.slos.Classes()
	if s.slos.Global != nil {
		classes = append([]string{""}, classes...)
	}
	for _, c := range classes {
		slo := s.slos.For(c)
		if c == "" {
			slo = s.slos.Global
		}
		kind, name := report.ScopeClass, c
		if c == "" {
			kind, name = "", "all"
		}
		att := s.metric("slo_attainment", kind, c)
		for m, metric := range []string{"ttft", "tpot", "e2e"} {
			t := slo.Target[m]
			if t <= 0 {
				continue
			}
			p99 := s.metric(metric+"_p99", kind, c)
			s.p("| %s | %s <= %s ms | %s ms | %s%% | %s |\n", name, metric, f(float64(t)/1000, 0), f(p99, 1), f(100*att, 1), mark(p99 <= float64(t)/1000))
		}
	}
	s.p("\n")
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func (s *writer) issues(n int) {
	s.p("## Top issues\n\n")
	if s.an == nil {
		s.p("No anomalies table given.\n\n")
		return
	}
	if s.an.Rows == 0 {
		s.p("No anomaly detected (`%s`: 0 rows).\n\n", base(s.an.Path))
		return
	}
	types := make([]string, 0, len(s.an.ByType))
	for t := range s.an.ByType {
		types = append(types, t)
	}
	sort.Strings(types)
	var parts []string
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%s %d", t, s.an.ByType[t]))
	}
	s.p("`%s`: %d anomalies (%s). Heaviest clusters (type × replica, weighted by severity):\n\n", base(s.an.Path), s.an.Rows, strings.Join(parts, ", "))
	for i, c := range s.an.Top(n) {
		where := c.Replica
		if where == "" {
			where = "cluster-wide"
		}
		s.p("%d. **%s** on %s: %d rows (high %d, medium %d, low %d), %s–%s", i+1, c.Type, where, c.Count,
			c.Severity["high"], c.Severity["medium"], c.Severity["low"], secs(c.First), secs(c.Last))
		if c.MagnitudeCount > 0 {
			s.p(", mean magnitude %s", f(c.MagnitudeSum/float64(c.MagnitudeCount), 2))
		}
		s.p(". E.g. %s\n", c.Example)
	}
	s.p("\n")
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	c := append([]float64(nil), xs...)
	sort.Float64s(c)
	return c[int(math.Ceil(q*float64(len(c))))-1]
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

func (s *writer) regret(detail bool) {
	s.p("## Counterfactual regret\n\n")
	if s.dec != nil && len(s.dec.Regret) == 0 && s.dec.Sample > 0 {
		// Asked for and not obtained: telling the user to ask would
		// mislead (issue 32, item 2).
		s.p("No routing decision was replayed, although `%s` was written with --regret-sample %g: regret compares a decision's replica with the other candidates, so it needs two or more replicas serving the request's model (or a larger sample); blis-sim's warning on stderr said which.\n\n", base(s.dec.Path), s.dec.Sample)
		return
	}
	if s.dec == nil || len(s.dec.Regret) == 0 {
		s.p("No routing decision was replayed (run blis-sim with --decisions and --regret-sample).\n\n")
		return
	}
	r := s.dec.Regret
	pos := 0
	for _, x := range r {
		if x > 0 {
			pos++
		}
	}
	s.p("%d routing decisions replayed with each top-k alternative (`%s`, rows with regret_us). Regret = the request's TTFT with the chosen replica − with the best alternative: mean %s ms, p50 %s, p90 %s, max %s ms; an alternative was better in %d (%s%%). Window mean-TTFT regret: mean %s ms.\n\n",
		len(r), base(s.dec.Path), f(mean(r), 1), f(quantile(r, 0.5), 1), f(quantile(r, 0.9), 1), f(quantile(r, 1), 1), pos, f(100*float64(pos)/float64(len(r)), 1), f(mean(s.dec.WinRegret), 1))
	if detail {
		// Regret by chosen reason.
		s.p("Negative regret means the chosen replica beat every alternative.\n\n")
	}
}

func (s *writer) audit() {
	s.p("## Decisions\n\n")
	if s.dec == nil {
		s.p("No decisions table given.\n\n")
		return
	}
	kinds := make([]string, 0, len(s.dec.ByKind))
	for k := range s.dec.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var parts []string
	for _, k := range kinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.dec.ByKind[k]))
	}
	s.p("`%s`: %d rows (%s).\n\n", base(s.dec.Path), s.dec.Rows, strings.Join(parts, ", "))
	s.p("Routing reasons: %s.\n\n", topCounts(s.dec.Reasons, 4))
	if s.dec.Holds > 0 {
		s.p("Routing holds (requests held at the router, action wait): %d; reasons: %s.\n\n", s.dec.Holds, topCounts(s.dec.HoldReasons, 4))
	}
	s.p("Routing targets: %s.\n\n", topCounts(s.dec.Targets, 8))
	if s.dec.Compared > 0 {
		s.p("Shadow KV: expected and actual cache hit differ in %d of %d routing rows (%s%%).\n\n", s.dec.Divergent, s.dec.Compared, f(100*float64(s.dec.Divergent)/float64(s.dec.Compared), 2))
	}
}

func topCounts(m map[string]int64, n int) string {
	keys := make([]string, 0, len(m))
	var total int64
	for k, v := range m {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(a, b int) bool {
		if m[keys[a]] != m[keys[b]] {
			return m[keys[a]] > m[keys[b]]
		}
		return keys[a] < keys[b]
	})
	var parts []string
	for i, k := range keys {
		if i == n {
			parts = append(parts, fmt.Sprintf("%d more", len(keys)-n))
			break
		}
		parts = append(parts, fmt.Sprintf("%q %d (%s%%)", k, m[k], f(100*float64(m[k])/float64(total), 1)))
	}
	return strings.Join(parts, ", ")
}

func (s *writer) worst(n int) {
	if s.dec == nil || len(s.dec.Worst) == 0 {
		return
	}
	by := "TTFT"
	if s.dec.ByRegret {
		by = "regret"
	}
	s.p("## Worst decisions (by %s)\n\n", by)
	for i, d := range s.dec.Worst {
		if i == n {
			break
		}
		s.p("%d. seq %d at %s: %s (tenant %s, class %s) → %s, %q; saw waiting %d, running %d, in flight %d, KV %s%%; TTFT %s ms",
			i+1, d.Seq, secs(d.TimeUS), d.RequestID, orDash(d.Tenant), orDash(d.Class), d.Target, d.Reason,
			d.Waiting, d.Running, d.InFlight, f(100*d.KVUtil, 0), ms(d.TTFTUS))
		if d.ExpectedHit != trace.NullI32 && d.CacheHit != trace.NullI32 {
			s.p(", cache hit %d tokens (shadow expected %d)", d.CacheHit, d.ExpectedHit)
		}
		s.p(".\n")
		if len(d.Candidates) > 1 {
			var cs []string
			for _, c := range d.Candidates {
				x := fmt.Sprintf("%s (score %s, load %d, KV %s%%, cached %d blocks", c.ReplicaID, f(c.Score, 3), c.Waiting+c.Running+c.InFlight, f(100*c.KVUtil, 0), c.CachedBlocks)
				if c.CFTTFTUS != trace.Null {
					x += ", replay TTFT " + s.cf(c.CFTTFTUS) + " ms"
				}
				cs = append(cs, x+")")
			}
			s.p("   Candidates: %s.\n", strings.Join(cs, "; "))
		}
		if d.RegretUS != trace.Null {
			best := bestAlt(d.Candidates)
			s.p("   Best alternative %s: TTFT %s ms instead of %s ms in the replay (regret %s ms).\n", best.ReplicaID, s.cf(best.CFTTFTUS), s.cf(d.Candidates[0].CFTTFTUS), ms(d.RegretUS))
		}
	}
	s.p("\n")
}

// cf formats a replayed TTFT; "≥" marks one censored at the replay's end
// (no first token within 4 windows).
func (s *writer) cf(us int64) string {
	if w := s.dec.WindowUS; w > 0 && us >= 4*w {
		return "≥ " + ms(us)
	}
	return ms(us)
}

func bestAlt(cs []trace.Candidate) trace.Candidate {
	b := cs[1]
	for _, c := range cs[2:] {
		if c.CFTTFTUS < b.CFTTFTUS {
			b = c
		}
	}
	return b
}

func ms(us int64) string {
	if us == trace.Null {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", float64(us)/1000)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func base(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// focus turns the heaviest findings into suggestions, computed from the
// run (its anomalies, regret, fitness) and from what ran (the results'
// metadata: scheduling policies, the router and what it weighs, the
// bundle's stages), so that none tells the run to do what it already does.
func (s *writer) focus() {
	s.p("## Suggested focus\n\n")
	var out []string
	if s.ri.oracle {
		out = append(out, "The policies read the true output lengths (oracle: true): a deployed router has predictions at best; evaluate the bundle with predictor: class or noisy before trusting its gains.")
	}
	if s.an != nil {
		// The shadow divergences by kind, over the whole table: predicted
		// hits that were gone (high, medium), hits not yet heard of (low).
		var shadow [2]int64
		for _, c := range s.an.Clusters {
			if c.Type == trace.AnomalyShadowDivergence {
				shadow[0] += c.Severity["high"] + c.Severity["medium"]
				shadow[1] += c.Severity["low"]
			}
		}
		// One suggestion per type of the heaviest clusters, over all the
		// replicas it appears on (they share the cause).
		seen := map[string]bool{}
		for _, c := range s.an.Top(3) {
			if seen[c.Type] {
				continue
			}
			seen[c.Type] = true
			agg := &Cluster{Type: c.Type}
			var reps []string
			for _, x := range s.an.Top(len(s.an.Clusters)) {
				if x.Type == c.Type {
					agg.Count += x.Count
					if x.Replica != "" {
						reps = append(reps, x.Replica)
					}
				}
			}
			switch {
			case len(reps) > 3:
				agg.Replica = fmt.Sprintf("%s and %d more replicas", strings.Join(reps[:3], ", "), len(reps)-3)
			default:
				agg.Replica = strings.Join(reps, ", ")
			}
			out = append(out, s.advise(agg, shadow))
		}
	}
	if s.dec != nil && s.dec.mine != nil {
		if pats, _, _, _ := s.dec.mine.mine(1); len(pats) > 0 {
			p := pats[0]
			out = append(out, fmt.Sprintf("The worst decisions recur on one pattern: %s (%d of the worst %d, %s× as often as overall); a policy that treats that case apart has the most to gain.", p.Name, p.Worst, p.WorstN, f(p.Lift, 1)))
		}
	}
	if s.dec != nil && len(s.dec.Regret) > 0 {
		if m := mean(s.dec.Regret); m > 0 {
			out = append(out, fmt.Sprintf("Routing left %s ms of TTFT per sampled decision on the table on average: the alternatives' load and cache columns in the worst decisions show what the policy underweighted.", f(m, 1)))
		}
	}
	if s.fit != nil && !s.fit.Feasible {
		out = append(out, "Infeasible: fix the violated constraints first ("+strings.Join(s.fit.Violations, "; ")+").")
	}
	if len(out) == 0 {
		out = append(out, "No dominant issue: tune the objective with the largest weight.")
	}
	for i, x := range out {
		s.p("%d. %s\n", i+1, x)
	}
}
