// Package report turns results tables (and optionally a steps table) into the
// summary tables, comparisons and HTML charts of blis-report.
package report

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/slo"
	"github.com/blis-sim/blis/lib/trace"
)

// Options configures a report.
type Options struct {
	By      string   // group key: one of GroupNames, or ""
	SLOs    *slo.Set // nil or empty: no SLO table
	Compare string   // a reference results table (--compare)
	Steps   string   // a steps table for the time-series charts
	// ScaleEvents is a scale-events table (blis-sim --scale-events): GPU-hours,
	// cost, scale oscillations, replicas over time.
	ScaleEvents string
	// Charts collects what the HTML pictures need beyond the tables
	// (per-request samples, per-replica time series, session timelines):
	// set it when a page will be written; off, nothing of it is read or kept.
	Charts bool
	// Decisions is a decisions table (blis-sim --decisions) of the first
	// run, for the page's regret and worst-decision pictures.
	Decisions string
	// Session names the session drawn as a timeline (default: the slowest
	// complete session).
	Session    string
	ExactLimit int // values kept exactly per distribution (0: ExactLimit)
	RunBudget  int // exact values kept per run over all distributions (0: RunBudget)
	Stdin      io.Reader
}

// Input describes one table read.
type Input struct {
	Label string
	Path  string
	Rows  int64
}

// Report is the computed report: tables for every format, chart data for HTML.
type Report struct {
	Inputs []Input
	Notes  []string
	Tables []*Table
	runs   []*run
	ref    int
	steps  *stepStats
	scale  *scaleStats
	dec    *decisionStats // Options.Decisions
	// session is the session drawn as a timeline (Options.Session).
	session string
}

var quantiles = []struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}}

// Build reads every input (and opt.Compare, opt.Steps) and computes the report.
func Build(paths []string, opt Options) (*Report, error) {
	if opt.ExactLimit <= 0 {
		opt.ExactLimit = ExactLimit
	}
	if opt.RunBudget <= 0 {
		opt.RunBudget = RunBudget
	}
	if len(paths) == 0 {
		paths = []string{"-"}
	}
	all := append([]string(nil), paths...)
	rep := &Report{}
	if opt.Compare != "" {
		all = append(all, opt.Compare)
		rep.ref = len(all) - 1
	}
	stdinUsed := 0
	for _, p := range all {
		if p == "-" || p == "" {
			stdinUsed++
		}
	}
	if opt.Steps == "-" {
		stdinUsed++
	}
	if opt.ScaleEvents == "-" {
		stdinUsed++
	}
	if opt.Decisions == "-" {
		stdinUsed++
	}
	if stdinUsed > 1 {
		return nil, fmt.Errorf("stdin (-) can be read only once, found it %d times among the inputs", stdinUsed)
	}
	labels := runLabels(all)
	for i, p := range all {
		r, err := readRun(p, &opt)
		if err != nil {
			return nil, err
		}
		rep.runs = append(rep.runs, r)
		rep.Inputs = append(rep.Inputs, Input{Label: labels[i], Path: r.path, Rows: r.rows})
	}
	if opt.Steps != "" {
		st, err := readSteps(opt.Steps, &opt)
		if err != nil {
			return nil, err
		}
		rep.steps = st
	}
	if opt.ScaleEvents != "" {
		st, err := readScaleEvents(opt.ScaleEvents, &opt)
		if err != nil {
			return nil, err
		}
		rep.scale = st
	}
	if opt.Decisions != "" {
		d, err := readDecisions(opt.Decisions, &opt)
		if err != nil {
			return nil, err
		}
		rep.dec = d
	}
	rep.session = opt.Session
	rep.build(&opt)
	return rep, nil
}

// runLabels names runs by file base name, falling back to run1..N when two
// inputs share a name.
func runLabels(paths []string) []string {
	out := make([]string, len(paths))
	seen := map[string]bool{}
	dup := false
	for i, p := range paths {
		out[i] = filepath.Base(p)
		if p == "-" || p == "" {
			out[i] = "stdin"
		}
		dup = dup || seen[out[i]]
		seen[out[i]] = true
	}
	if dup {
		for i := range out {
			out[i] = "run" + strconv.Itoa(i+1)
		}
	}
	return out
}

// groupRow is one row group of the per-group tables.
type groupRow struct {
	run  string
	name string
	a    *acc
	r    *run
}

func (rep *Report) groupRows(opt *Options) []groupRow {
	var rows []groupRow
	for i, r := range rep.runs {
		label := rep.Inputs[i].Label
		rows = append(rows, groupRow{label, "all", r.all, r})
		if opt.By == "" {
			continue
		}
		names := r.names()
		order := make([]int, len(r.groups))
		for j := range order {
			order[j] = j
		}
		sort.Slice(order, func(x, y int) bool { return lessName(names[order[x]], names[order[y]], r.groupInt != nil) })
		for _, j := range order {
			rows = append(rows, groupRow{label, names[j], r.groups[j], r})
		}
		if r.noGroup != nil {
			rows = append(rows, groupRow{label, "(none)", r.noGroup, r})
		}
	}
	return rows
}

func lessName(a, b string, numeric bool) bool {
	if numeric {
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return x < y
	}
	return a < b
}

// keyCells are the leading identifying cells of a per-group row.
func (rep *Report) keyCols(opt *Options) []string {
	var k []string
	if len(rep.runs) > 1 {
		k = append(k, "run")
	}
	if opt.By != "" {
		k = append(k, opt.By)
	} else {
		k = append(k, "group")
	}
	return k
}

// runCol and runCell add a leading run column only when several runs are shown.
func (rep *Report) runCol(cols ...string) []string {
	if len(rep.runs) > 1 {
		return append([]string{"run"}, cols...)
	}
	return cols
}

func (rep *Report) runCell(i int, cells ...Cell) []Cell {
	if len(rep.runs) > 1 {
		return append([]Cell{txt(rep.Inputs[i].Label)}, cells...)
	}
	return cells
}

func (rep *Report) keyCells(g groupRow) []Cell {
	var k []Cell
	if len(rep.runs) > 1 {
		k = append(k, txt(g.run))
	}
	return append(k, txt(g.name))
}

func (rep *Report) build(opt *Options) {
	rows := rep.groupRows(opt)
	kc := rep.keyCols(opt)
	for _, r := range rep.runs {
		if r.inexact() {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: too many values to keep exactly: some percentiles come from an HDR histogram (3 significant digits, relative error <= 0.1%%); counts, means and maxima stay exact", r.path))
			break
		}
	}

	rep.noMatchNotes(opt)
	rep.configTables()

	t := &Table{Name: "requests", Title: "Requests by status",
		Note:    "every row of the results table; tool = tool calls (timers), llm = model requests",
		Columns: append(append([]string{}, kc...), "total", "llm", "tool")}
	// failed (blis-load's) gets a column only when some run has one, so
	// a simulator's report keeps its shape.
	nst := stFailed
	for _, r := range rep.runs {
		if r.all.status[stFailed] > 0 {
			nst = nStatus
		}
	}
	t.Columns = append(t.Columns, statusNames[:nst]...)
	for _, g := range rows {
		c := append(rep.keyCells(g), integer(g.a.total()), integer(g.a.llm), integer(g.a.tool))
		for _, n := range g.a.status[:nst] {
			c = append(c, integer(n))
		}
		t.add(c...)
	}
	rep.Tables = append(rep.Tables, t)
	rep.reasonTable()

	t = &Table{Name: "throughput", Title: "Throughput",
		Note:    "completed llm requests and their tokens per second of simulated span (first arrival to last event of the run)",
		Columns: append(append([]string{}, kc...), "completed", "span_s", "req_per_s", "input_tok_per_s", "output_tok_per_s")}
	for _, g := range rows {
		sp := g.r.span() / 1e6
		t.add(append(rep.keyCells(g), integer(g.a.completed), num(sp, 3), num(float64(g.a.completed)/sp, 3),
			num(float64(g.a.inTok)/sp, 1), num(float64(g.a.outTok)/sp, 1))...)
	}
	rep.Tables = append(rep.Tables, t)

	t = &Table{Name: "latency", Title: "Latency (ms)",
		Note:    "completed llm requests; ttft, tpot, e2e from the results columns; queue_enqueued = first_scheduled - enqueued; queue_arrival = first_scheduled - arrival",
		Columns: append(append([]string{}, kc...), "metric", "count", "mean", "p50", "p90", "p95", "p99", "max")}
	for _, g := range rows {
		for m := 0; m < nMetric; m++ {
			t.add(append(append(rep.keyCells(g), txt(metricNames[m])), distCells(g.a.d[m], true)...)...)
		}
	}
	rep.Tables = append(rep.Tables, t)

	t = &Table{Name: "cache", Title: "Prefix cache and preemptions",
		Note:    "llm requests that were scheduled at least once; hit_rate = cached_tokens / input_tokens",
		Columns: append(append([]string{}, kc...), "input_tokens", "cached_tokens", "hit_rate_pct", "preemptions", "preempted_requests", "preempted_pct")}
	for _, g := range rows {
		t.add(append(rep.keyCells(g), integer(g.a.schedIn), integer(g.a.cached), pct(float64(g.a.cached), float64(g.a.schedIn)),
			integer(g.a.preempt), integer(g.a.preempted), pct(float64(g.a.preempted), float64(g.a.llm)))...)
	}
	rep.Tables = append(rep.Tables, t)

	rep.kvTables()
	if !opt.SLOs.Empty() {
		rep.sloTable(opt, rows, kc)
	}
	rep.fairnessTable(opt)
	rep.instanceTable()
	rep.sessionTable()
	rep.simRealTable()
	rep.scaleTable()
	if len(rep.runs) > 1 {
		rep.compareTable()
	}
}

func (r *run) inexact() bool {
	accs := append([]*acc{r.all, r.noGroup}, r.groups...)
	for _, a := range accs {
		if a == nil {
			continue
		}
		for _, d := range a.d {
			if d != nil && !d.Exact() {
				return true
			}
		}
	}
	for _, p := range r.rec {
		for _, d := range p {
			if d != nil && !d.Exact() {
				return true
			}
		}
	}
	return false
}

// distCells: count, mean, p50..p99, max; in ms when time is set.
func distCells(d *Dist, time bool) []Cell {
	f := func(v float64) Cell {
		if time {
			return ms(v)
		}
		return num(v, 0)
	}
	c := []Cell{integer(d.Count())}
	if time {
		c = append(c, ms(d.Mean()))
	} else {
		c = append(c, num(d.Mean(), 2))
	}
	for _, q := range quantiles {
		c = append(c, f(d.Quantile(q.q)))
	}
	return append(c, f(d.Max()))
}

func (rep *Report) sloTable(opt *Options, rows []groupRow, kc []string) {
	t := &Table{Name: "slo", Title: "SLO attainment",
		Note: "llm requests under an SLO, except source_failed; a request that did not complete misses every target; " +
			"tpot is met when undefined (one output token); goodput = requests meeting all targets per second of span",
		Columns: append(append([]string{}, kc...), "slo", "requests")}
	for _, n := range slo.Names {
		t.Columns = append(t.Columns, n+"_met_pct")
	}
	t.Columns = append(t.Columns, "all_met_pct", "goodput_req_per_s")
	// A metric's attainment is over the rows whose SLO targets it; "-" when none does.
	line := func(key []Cell, scope string, a *acc, span float64) {
		c := append(key, txt(scope), integer(a.sloN))
		for m := range slo.Names {
			if a.sloHas[m] == 0 {
				c = append(c, num(math.NaN(), 2)) // "-" in text, null in JSON
				continue
			}
			c = append(c, pct(float64(a.sloMet[m]), float64(a.sloHas[m])))
		}
		t.add(append(c, pct(float64(a.sloAll), float64(a.sloN)), num(float64(a.sloAll)/(span/1e6), 3))...)
	}
	for _, g := range rows {
		line(rep.keyCells(g), sloScope(opt, g.a), g.a, g.r.span())
		// Without --by, per-class SLOs get one row per class.
		if opt.By != "" || len(opt.SLOs.ByClass) == 0 || g.name != "all" || g.r.classKey == nil {
			continue
		}
		names := g.r.classKey.names
		order := make([]int, len(g.r.classes))
		for j := range order {
			order[j] = j
		}
		sort.Slice(order, func(x, y int) bool { return names[order[x]] < names[order[y]] })
		for _, j := range order {
			tg := opt.SLOs.For(names[j])
			if tg == nil {
				continue
			}
			key := rep.keyCells(groupRow{run: g.run, name: "slo_class=" + names[j]})
			line(key, tg.String(), g.r.classes[j], g.r.span())
		}
	}
	rep.Tables = append(rep.Tables, t)
}

// sloScope names the SLO a group's rows were judged by: "mixed" when
// different rows fall under different SLOs, "-" when no row is subject.
func sloScope(opt *Options, a *acc) string {
	switch {
	case a.sloMixed:
		return "mixed"
	case a.sloScope != nil:
		return a.sloScope.String()
	case len(opt.SLOs.ByClass) == 0:
		return opt.SLOs.Global.String()
	}
	return "-"
}

// jain is Jain's fairness index (Σx)² / (n·Σx²): 1 when all equal, 1/n when one takes all.
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if len(xs) == 0 || s2 == 0 {
		return math.NaN()
	}
	return s * s / (float64(len(xs)) * s2)
}

func (rep *Report) fairnessTable(opt *Options) {
	var t *Table
	for i, r := range rep.runs {
		if r.tenantKey == nil || len(r.tenants) == 0 {
			continue
		}
		if t == nil {
			t = &Table{Name: "fairness", Title: "Fairness across tenants (Jain index)",
				Note:    "Jain index (sum x)^2 / (n * sum x^2) over tenants: 1 = equal, 1/n = one tenant takes all; rows without tenant_id are left out",
				Columns: rep.runCol("basis", "tenants", "jain_index", "min", "max")}
		}
		add := func(basis string, xs []float64, prec int) {
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, x := range xs {
				lo, hi = math.Min(lo, x), math.Max(hi, x)
			}
			t.add(rep.runCell(i, txt(basis), integer(int64(len(xs))), num(jain(xs), 4), num(lo, prec), num(hi, prec))...)
		}
		sp := r.span() / 1e6
		var thr, served, att []float64
		for _, a := range r.tenants {
			thr = append(thr, float64(a.outTok)/sp)
			served = append(served, ratio(float64(a.completed), float64(a.llm)))
			if a.sloN > 0 {
				att = append(att, float64(a.sloAll)/float64(a.sloN))
			}
		}
		add("output_tok_per_s", thr, 1)
		add("completed_fraction", served, 4)
		if !opt.SLOs.Empty() {
			add("slo_attainment", att, 4)
		}
	}
	if t != nil {
		rep.Tables = append(rep.Tables, t)
	}
}

// noMatchNotes says when an --slo class or a --by key matches no row of a
// run: the tables would otherwise show zeros or one "(none)" group without
// saying why.
func (rep *Report) noMatchNotes(opt *Options) {
	for _, r := range rep.runs {
		if opt.By != "" && len(r.names()) == 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: --by %s: column %s is null in every row: all rows are in the group (none)", r.path, opt.By, r.groupCol))
		}
		if opt.SLOs.Empty() {
			continue
		}
		var present []string
		if r.classKey != nil {
			for c, name := range r.classKey.names {
				if c < len(r.classes) && r.classes[c].total() > 0 {
					present = append(present, name)
				}
			}
		}
		sort.Strings(present)
		have := "the slo_class column is null in every row"
		if len(present) > 0 {
			have = "its classes are " + strings.Join(present, ", ")
		}
		for _, class := range opt.SLOs.Classes() {
			if i := sort.SearchStrings(present, class); i < len(present) && present[i] == class {
				continue
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: --slo %s:...: no row has slo_class %s (%s): nothing measured for it", r.path, class, class, have))
		}
		if r.all.sloN == 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: --slo: no llm row is under any of the SLOs given: the SLO table measures nothing", r.path))
		}
	}
}

// reasonTable counts the requests that did not complete by their
// drop_reason, grouped by kind (trace.ReasonClass: the numbers and ids that
// make each request's reason its own removed), with the first reason of
// each kind as an example. Shown only when some row has a reason.
func (rep *Report) reasonTable() {
	t := &Table{Name: "reasons", Title: "Requests not completed, by reason",
		Note:    "the drop_reason column by status and kind of reason (numbers and ids removed); example = the first such reason in the table; pct of all rows",
		Columns: rep.runCol("status", "reason", "requests", "pct", "example")}
	order := statusNames[stRejected:]
	for i, r := range rep.runs {
		var tally trace.ReasonTally
		for c, byStatus := range r.reasons {
			for st, n := range byStatus {
				tally.AddN(statusNames[st], r.reasonKey.names[c], n)
			}
		}
		for _, c := range tally.Counts(order...) {
			t.add(rep.runCell(i, txt(c.Status), txt(c.Class), integer(c.N), pct(float64(c.N), float64(r.rows)), txt(c.Example))...)
		}
	}
	if len(t.Rows) > 0 {
		rep.Tables = append(rep.Tables, t)
	}
}

func (rep *Report) instanceTable() {
	t := &Table{Name: "instances", Title: "Per-instance load",
		Note:    "completed llm requests by instance_id; busy/steps/batch/waiting from the steps table (--steps) when given",
		Columns: rep.runCol("instance", "completed", "share_pct", "input_tokens", "output_tokens")}
	if rep.steps != nil {
		t.Columns = append(t.Columns, "steps", "busy_pct", "mean_batch", "mean_waiting", "max_waiting")
	}
	for i, r := range rep.runs {
		ids := r.instanceIDs(rep.steps, i == 0)
		for _, id := range ids {
			l := r.inst[id]
			if l == nil {
				l = &instLoad{}
			}
			c := rep.runCell(i, integer(id), integer(l.completed), pct(float64(l.completed), float64(r.all.completed)),
				integer(l.inTok), integer(l.outTok))
			if rep.steps != nil {
				s := rep.steps.inst[id]
				if s == nil || i != 0 {
					s = &instSteps{}
				}
				c = append(c, integer(s.steps), pct(float64(s.busy), r.span()), num(ratio(float64(s.batch), float64(s.steps)), 2),
					num(ratio(float64(s.waitDur), float64(s.busy)), 2), integer(s.maxWaiting))
			}
			t.add(c...)
		}
	}
	if len(t.Rows) > 0 {
		rep.Tables = append(rep.Tables, t)
	}
}

// instanceIDs lists instances seen in results (and in the steps table, which
// belongs to the first run), ascending.
func (r *run) instanceIDs(st *stepStats, first bool) []int64 {
	seen := map[int64]bool{}
	var ids []int64
	for id := range r.inst {
		seen[id] = true
		ids = append(ids, id)
	}
	if st != nil && first {
		for id := range st.inst {
			if !seen[id] {
				ids = append(ids, id)
			}
		}
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	return ids
}

func (rep *Report) sessionTable() {
	var t *Table
	for i, r := range rep.runs {
		if r.sess == nil {
			continue
		}
		st := r.sess.summarize()
		if t == nil {
			t = &Table{Name: "sessions", Title: "Agentic sessions",
				Note: "one value per complete session (all its requests completed); session_e2e = last finish - first root arrival; " +
					"tool_wait = sum of tool-call durations; critical_path = last finish - start of the chain of latest-finishing dependencies (times in ms)",
				Columns: rep.runCol("statistic", "count", "mean", "p50", "p90", "p95", "p99", "max")}
		}
		na := num(math.NaN(), 0)
		t.add(rep.runCell(i, txt("sessions"), integer(st.total), na, na, na, na, na, na)...)
		t.add(rep.runCell(i, txt("complete_sessions"), integer(st.complete), na, na, na, na, na, na)...)
		for k := 0; k < nSess; k++ {
			t.add(rep.runCell(i, append([]Cell{txt(sessNames[k])}, distCells(st.d[k], sessIsTime[k])...)...)...)
		}
		// Issue 19's agentic rows appear when they say something, so tables
		// of runs without cuts or fan-outs keep their shape.
		if (st.cut > 0 || st.fanSpawned > 0) && !strings.Contains(t.Note, "cut_sessions") {
			t.Note += "; cut_sessions: a request unfinished at the horizon; steps_reached: requests that arrived, cut sessions included (steps_reached_cut: cut ones only); " +
				"fanout: requests of a session sharing step_id and loop_iteration, utilisation = finished before the horizon / spawned (arrived)"
		}
		if st.cut > 0 {
			t.add(rep.runCell(i, txt("cut_sessions"), integer(st.cut), na, na, na, na, na, na)...)
			t.add(rep.runCell(i, append([]Cell{txt("steps_reached")}, distCells(st.reached, false)...)...)...)
			t.add(rep.runCell(i, append([]Cell{txt("steps_reached_cut")}, distCells(st.reachedCut, false)...)...)...)
		}
		if st.fanSpawned > 0 {
			t.add(rep.runCell(i, txt("fanout_spawned"), integer(st.fanSpawned), na, na, na, na, na, na)...)
			t.add(rep.runCell(i, txt("fanout_finished"), integer(st.fanFinished), na, na, na, na, na, na)...)
			t.add(rep.runCell(i, txt("fanout_utilisation"), integer(st.fanSpawned), num(float64(st.fanFinished)/float64(st.fanSpawned), 3), na, na, na, na, na)...)
		}
		if st.dangling > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d depends_on entries name requests that are not in the table; critical paths stop there", r.path, st.dangling))
		}
	}
	if t != nil {
		rep.Tables = append(rep.Tables, t)
	}
}

var recNames = [3]string{"ttft", "e2e", "itl"}

func statValue(d *Dist, stat string) float64 {
	switch stat {
	case "mean":
		return d.Mean()
	case "max":
		return d.Max()
	}
	for _, q := range quantiles {
		if q.name == stat {
			return d.Quantile(q.q)
		}
	}
	return math.NaN()
}

var statNames = []string{"mean", "p50", "p90", "p95", "p99", "max"}

func errCells(v, ref float64) []Cell {
	e := (v - ref) / ref * 100
	if ref == 0 {
		e = math.NaN()
	}
	return []Cell{num(e, 2), num(math.Abs(e), 2)}
}

func (rep *Report) simRealTable() {
	var t *Table
	for i, r := range rep.runs {
		if !r.hasRec || (r.rec[0][0].Count()+r.rec[1][0].Count()+r.rec[2][0].Count()) == 0 {
			continue
		}
		// A measured run (blis-load) records its own measurements in
		// recorded_*, for a replay to compare against: against itself
		// every error would be 0.
		if p := producer(r.meta.Provenance); p != nil && p.Tool == "blis-load" {
			continue
		}
		if t == nil {
			t = &Table{Name: "sim_vs_real", Title: "Simulated vs recorded (ms)",
				Note: "completed llm requests whose recorded_* value is present, paired row by row; itl: simulated tpot vs recorded_itl_us (mean inter-token latency); " +
					"err_pct = (sim - real) / real * 100",
				Columns: rep.runCol("metric", "stat", "count", "sim", "real", "err_pct", "abs_err_pct")}
		}
		for m, name := range recNames {
			sim, real := r.rec[m][0], r.rec[m][1]
			if sim.Count() == 0 {
				continue
			}
			for _, s := range statNames {
				a, b := statValue(sim, s), statValue(real, s)
				t.add(rep.runCell(i, append([]Cell{txt(name), txt(s), integer(sim.Count()), ms(a), ms(b)}, errCells(a, b)...)...)...)
			}
		}
	}
	if t != nil {
		rep.Tables = append(rep.Tables, t)
	}
}

func (rep *Report) compareTable() {
	ref := rep.ref
	t := &Table{Name: "compare", Title: "Runs compared (reference: " + rep.Inputs[ref].Label + ")",
		Note:    "completed llm requests of each run; err_pct = (run - reference) / reference * 100",
		Columns: []string{"metric", "stat"}}
	for _, in := range rep.Inputs {
		t.Columns = append(t.Columns, in.Label)
	}
	for i, in := range rep.Inputs {
		if i != ref {
			t.Columns = append(t.Columns, "err_pct "+in.Label, "abs_err_pct "+in.Label)
		}
	}
	row := func(metric, stat string, f func(r *run) float64, cell func(float64) Cell) {
		c := []Cell{txt(metric), txt(stat)}
		for _, r := range rep.runs {
			c = append(c, cell(f(r)))
		}
		for i, r := range rep.runs {
			if i != ref {
				c = append(c, errCells(f(r), f(rep.runs[ref]))...)
			}
		}
		t.add(c...)
	}
	row("throughput", "req_per_s", func(r *run) float64 { return float64(r.all.completed) / (r.span() / 1e6) }, func(v float64) Cell { return num(v, 3) })
	row("throughput", "output_tok_per_s", func(r *run) float64 { return float64(r.all.outTok) / (r.span() / 1e6) }, func(v float64) Cell { return num(v, 1) })
	for _, m := range []int{mTTFT, mTPOT, mE2E, mQueue} {
		for _, s := range statNames {
			row(metricNames[m]+"_ms", s, func(r *run) float64 { return statValue(r.all.d[m], s) }, ms)
		}
	}
	rep.Tables = append(rep.Tables, t)
}
