package report

// Sweep summary tables (written by blis-sweep, lib/sweep): reading them,
// printing them and plotting a metric against one or two axes.

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/blis-sim/blis/lib/trace"
)

// The table kinds and schema metadata keys of sweep summaries.
const (
	TableSweepRuns   = "sweep_runs"   // one row per run × report group
	TableSweepPoints = "sweep_points" // one row per point × group: means and 95% CIs

	MetaSweepName         = "blis.sweep.name"
	MetaSweepAxes         = "blis.sweep.axes"         // JSON list of the axis columns, in spec order
	MetaSweepReplications = "blis.sweep.replications" // seeds per point
	MetaSweepBy           = "blis.sweep.by"           // the report --by key of the runs ("" = all)
	MetaSweepSLO          = "blis.sweep.slo"          // JSON list of the report --slo specs
)

// SweepTable is a sweep summary read into memory (one row per run or point
// and group: small).
type SweepTable struct {
	Path    string
	Kind    string // TableSweepRuns or TableSweepPoints
	Name    string
	Axes    []string
	Columns []string
	Units   []string // per column ("" for text and ids)
	Rows    [][]Cell
	numeric []bool
}

// IsSweepTable reports whether the table at path is a sweep summary. It
// reads only the schema.
func IsSweepTable(path string) bool {
	if path == "" || path == "-" {
		return false
	}
	src, err := trace.Open(path, nil)
	if err != nil {
		return false
	}
	defer src.Close()
	k := src.Meta().Table()
	return k == TableSweepRuns || k == TableSweepPoints
}

// ReadSweep reads a sweep summary table.
func ReadSweep(path string) (*SweepTable, error) {
	src, err := trace.Open(path, nil)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	md := src.Meta()
	t := &SweepTable{Path: src.Path, Kind: md.Table(), Name: md.Get(MetaSweepName)}
	if t.Kind != TableSweepRuns && t.Kind != TableSweepPoints {
		return nil, fmt.Errorf("%s: not a sweep summary (blis.table is %q)", src.Path, t.Kind)
	}
	if err := json.Unmarshal([]byte(md.Get(MetaSweepAxes)), &t.Axes); err != nil {
		return nil, fmt.Errorf("%s: schema metadata %s: expected a JSON list of column names: %v", src.Path, MetaSweepAxes, err)
	}
	s := src.Schema()
	for _, f := range s.Fields() {
		t.Columns = append(t.Columns, f.Name)
		u, _ := f.Metadata.GetValue("unit")
		t.Units = append(t.Units, u)
		switch f.Type.ID() {
		case arrow.INT64, arrow.UINT64, arrow.FLOAT64, arrow.INT32, arrow.FLOAT32:
			t.numeric = append(t.numeric, true)
		case arrow.STRING, arrow.LARGE_STRING:
			t.numeric = append(t.numeric, false)
		default:
			return nil, fmt.Errorf("%s: column %s: expected a number or a string, found %s", src.Path, f.Name, f.Type)
		}
	}
	for _, a := range t.Axes {
		if !slices.Contains(t.Columns, a) {
			return nil, fmt.Errorf("%s: axis %s has no column", src.Path, a)
		}
	}
	for {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]Cell, rec.NumCols())
			for j := range row {
				row[j] = sweepCell(rec.Column(j), i, t.Units[j])
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t, nil
}

func sweepCell(a arrow.Array, i int, unit string) Cell {
	if a.IsNull(i) {
		if _, ok := a.(*array.String); ok {
			return txt("")
		}
		return num(math.NaN(), 0)
	}
	switch c := a.(type) {
	case *array.Int64:
		return integer(c.Value(i))
	case *array.Uint64:
		return Cell{Text: strconv.FormatUint(c.Value(i), 10), Num: float64(c.Value(i)), IsNum: true}
	case *array.Int32:
		return integer(int64(c.Value(i)))
	case *array.Float64:
		return num(c.Value(i), unitPrec(unit, c.Value(i)))
	case *array.Float32:
		return num(float64(c.Value(i)), unitPrec(unit, float64(c.Value(i))))
	case *array.String:
		return txt(c.Value(i))
	case *array.LargeString:
		return txt(c.Value(i))
	}
	return txt(a.ValueStr(i))
}

// unitPrec is the printed precision of a value: as blis-report prints it.
func unitPrec(unit string, v float64) int {
	switch unit {
	case "ms", "1/s", "s":
		return 3
	case "%", "$/h":
		return 2
	case "tokens/s":
		return 1
	case "count":
		if v == math.Trunc(v) {
			return 0
		}
		return 1
	}
	return 4
}

func (t *SweepTable) col(name string) int { return slices.Index(t.Columns, name) }

// SweepOptions choose what is printed and plotted.
type SweepOptions struct {
	Metrics []string // metric columns (default: a handful of the usual ones)
	X       string   // HTML: the x axis (default: the first numeric axis that varies)
	Lines   string   // HTML: one line per value of this axis (default: the next axis that varies)
	Group   string   // HTML: the report group plotted (default "all")
	// ShortCI heads the CI columns "±95%" (terminal tables stay narrow)
	// instead of "<metric>_ci95".
	ShortCI bool
}

var defaultSweepMetrics = []string{"completed", "req_per_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p99_ms", "e2e_p99_ms",
	"slo_all_met_pct", "goodput_req_per_s", "cost_per_hour"}

func (t *SweepTable) metrics(opt *SweepOptions) ([]string, error) {
	if len(opt.Metrics) == 0 {
		var ms []string
		for _, m := range defaultSweepMetrics {
			if t.col(m) >= 0 {
				ms = append(ms, m)
			}
		}
		return ms, nil
	}
	for _, m := range opt.Metrics {
		j := t.col(m)
		if j < 0 || !t.numeric[j] {
			var cands []string
			for k, c := range t.Columns {
				if t.numeric[k] && !slices.Contains(t.Axes, c) && !strings.HasSuffix(c, "_ci95") {
					cands = append(cands, c)
				}
			}
			return nil, fmt.Errorf("--metric %s: not a metric of %s; metrics: %s", m, t.Path, strings.Join(cands, ", "))
		}
	}
	return opt.Metrics, nil
}

// varying lists the axes that take more than one value, in spec order.
func (t *SweepTable) varying() []string {
	var out []string
	for _, a := range t.Axes {
		j := t.col(a)
		seen := map[string]bool{}
		for _, r := range t.Rows {
			seen[r[j].String()] = true
		}
		if len(seen) > 1 {
			out = append(out, a)
		}
	}
	return out
}

// Report renders the table for the text formats: the axes, the group (when
// the runs were grouped), the chosen metrics and their CIs.
func (t *SweepTable) Report(opt SweepOptions) (*Report, error) {
	ms, err := t.metrics(&opt)
	if err != nil {
		return nil, err
	}
	var cols []int
	if t.Kind == TableSweepRuns {
		cols = append(cols, t.col("point"), t.col("replication"))
		if j := t.col("seed"); j >= 0 {
			cols = append(cols, j)
		}
	}
	for _, a := range t.Axes {
		cols = append(cols, t.col(a))
	}
	if j := t.col("group"); j >= 0 && t.grouped() {
		cols = append(cols, j)
	}
	if t.Kind == TableSweepPoints {
		cols = append(cols, t.col("replications"))
		if t.anyNonZero("failed") {
			cols = append(cols, t.col("failed"))
		}
	} else if t.anyText("error") {
		cols = append(cols, t.col("status"))
	}
	for _, m := range ms {
		cols = append(cols, t.col(m))
		if j := t.col(m + "_ci95"); j >= 0 && t.anyNum(j) {
			cols = append(cols, j)
		}
	}
	if t.Kind == TableSweepRuns && t.anyText("error") {
		cols = append(cols, t.col("error"))
	}
	title := "Sweep " + t.Name
	note := "one row per point: the mean over its replications; <metric>_ci95 = half-width of the 95% confidence interval of the mean (Student's t)"
	name := "sweep_points"
	if t.Kind == TableSweepRuns {
		title += " (runs)"
		note = "one row per run"
		name = "sweep_runs"
	}
	tb := &Table{Name: name, Title: title, Note: note}
	for _, j := range cols {
		name := t.Columns[j]
		if opt.ShortCI && strings.HasSuffix(name, "_ci95") {
			name = "±95%"
		}
		tb.Columns = append(tb.Columns, name)
	}
	for _, r := range t.Rows {
		row := make([]Cell, len(cols))
		for k, j := range cols {
			row[k] = r[j]
		}
		tb.Rows = append(tb.Rows, row)
	}
	rep := &Report{Inputs: []Input{{Label: t.Name, Path: t.Path, Rows: int64(len(t.Rows))}}, Tables: []*Table{tb}}
	return rep, nil
}

func (t *SweepTable) grouped() bool {
	j := t.col("group")
	for _, r := range t.Rows {
		if r[j].String() != "all" {
			return true
		}
	}
	return false
}

func (t *SweepTable) anyNonZero(name string) bool {
	j := t.col(name)
	if j < 0 {
		return false
	}
	for _, r := range t.Rows {
		if r[j].IsNum && r[j].Num != 0 && !math.IsNaN(r[j].Num) {
			return true
		}
	}
	return false
}

func (t *SweepTable) anyNum(j int) bool {
	for _, r := range t.Rows {
		if r[j].IsNum && !math.IsNaN(r[j].Num) {
			return true
		}
	}
	return false
}

func (t *SweepTable) anyText(name string) bool {
	j := t.col(name)
	if j < 0 {
		return false
	}
	for _, r := range t.Rows {
		if r[j].Text != "" {
			return true
		}
	}
	return false
}

// WriteCSV writes the whole table as one wide CSV: a header of column names,
// one line per row, quoted where a value needs it (RFC 4180); an undefined
// number is an empty field. Numbers keep every digit.
func (t *SweepTable) WriteCSV(w io.Writer) error { return wideCSV(w, t.Columns, t.Rows, true) }

// WriteWideCSV writes one table as a wide CSV (a header, then a line per
// row), numbers with the table's precision.
func (t *Table) WriteWideCSV(w io.Writer) error { return wideCSV(w, t.Columns, t.Rows, false) }

func wideCSV(w io.Writer, cols []string, rows [][]Cell, full bool) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(cols); err != nil {
		return err
	}
	rec := make([]string, len(cols))
	for _, r := range rows {
		for j, c := range r {
			switch {
			case !c.IsNum:
				rec[j] = c.Text
			case math.IsNaN(c.Num) || math.IsInf(c.Num, 0):
				rec[j] = ""
			case c.Text != "":
				rec[j] = c.Text // uint64 seeds print exactly
			case full:
				rec[j] = strconv.FormatFloat(c.Num, 'g', -1, 64)
			default:
				rec[j] = c.String()
			}
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// sweepSeries is one line of a sweep chart: a value of the lines axis.
type sweepSeries struct {
	name       string
	xs, ys, ci []float64
}

// WriteHTML writes one self-contained page: per metric, the metric against
// the x axis with one line per value of the lines axis and 95% CI bars, one
// chart per combination of the other varying axes; then the table.
func (t *SweepTable) WriteHTML(w io.Writer, opt SweepOptions) error {
	ms, err := t.metrics(&opt)
	if err != nil {
		return err
	}
	vary := t.varying()
	x, lines := opt.X, opt.Lines
	for _, a := range []string{x, lines} {
		if a != "" && !slices.Contains(t.Axes, a) {
			return fmt.Errorf("%s is not an axis of %s (axes: %s)", a, t.Path, strings.Join(t.Axes, ", "))
		}
	}
	if x == "" {
		for _, a := range vary {
			if t.numeric[t.col(a)] && a != lines {
				x = a
				break
			}
		}
		if x == "" {
			for _, a := range vary {
				if a != lines {
					x = a
					break
				}
			}
		}
		if x == "" && len(t.Axes) > 0 {
			x = t.Axes[0]
		}
	}
	if lines == "" {
		for _, a := range vary {
			if a != x {
				lines = a
				break
			}
		}
	}
	var facets []string
	for _, a := range vary {
		if a != x && a != lines {
			facets = append(facets, a)
		}
	}
	group := opt.Group
	if group == "" {
		group = "all"
	}
	gc := t.col("group")
	var rows [][]Cell
	for _, r := range t.Rows {
		if gc < 0 || r[gc].String() == group {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s has no rows of group %q", t.Path, group)
	}
	xc := t.col(x)
	categorical := !t.numeric[xc]
	var cats []string
	if categorical {
		for _, r := range rows {
			if !slices.Contains(cats, r[xc].String()) {
				cats = append(cats, r[xc].String())
			}
		}
	}
	xval := func(r []Cell) float64 {
		if categorical {
			return float64(slices.Index(cats, r[xc].String()))
		}
		return r[xc].Num
	}
	key := func(r []Cell, cols []string) string {
		var parts []string
		for _, c := range cols {
			parts = append(parts, c+"="+r[t.col(c)].String())
		}
		return strings.Join(parts, ", ")
	}
	var facetKeys []string
	for _, r := range rows {
		if k := key(r, facets); !slices.Contains(facetKeys, k) {
			facetKeys = append(facetKeys, k)
		}
	}
	const maxFacets = 24
	var notes []string
	if len(facetKeys) > maxFacets {
		notes = append(notes, fmt.Sprintf("%d combinations of %s: the first %d are drawn", len(facetKeys), strings.Join(facets, ", "), maxFacets))
		facetKeys = facetKeys[:maxFacets]
	}

	pg := newPage("Sweep " + t.Name)
	var intro strings.Builder
	fmt.Fprintf(&intro, "<ul class=\"inputs\"><li>%s: %d rows</li>", html.EscapeString(t.Path), len(t.Rows))
	fmt.Fprintf(&intro, "<li>x: <b>%s</b>", html.EscapeString(x))
	if lines != "" {
		fmt.Fprintf(&intro, "; one line per <b>%s</b>", html.EscapeString(lines))
	}
	if len(facets) > 0 {
		fmt.Fprintf(&intro, "; one chart per %s", html.EscapeString(strings.Join(facets, ", ")))
	}
	fmt.Fprintf(&intro, "; group %s; shaded bands and bars: 95%% confidence interval of the mean over replications</li>", html.EscapeString(group))
	for _, n := range notes {
		fmt.Fprintf(&intro, "<li>note: %s</li>", html.EscapeString(n))
	}
	intro.WriteString("</ul>\n")
	xInt := !categorical
	for _, r := range rows {
		if v := r[xc].Num; r[xc].IsNum && v != math.Trunc(v) {
			xInt = false
		}
	}
	if len(facetKeys) <= 1 {
		pg.section("metrics", "Metrics against "+x)
	}
	var all []*figure // without facets, every metric's chart in one row
	for mi, m := range ms {
		mc, cc := t.col(m), t.col(m+"_ci95")
		if len(facetKeys) > 1 {
			pg.section(fmt.Sprintf("m%d", mi), m)
		}
		var figs []*figure
		for fi, fk := range facetKeys {
			var series []*sweepSeries
			byName := map[string]*sweepSeries{}
			// cells: (line, x) -> values (several rows when reading runs)
			type cellKey struct {
				line string
				x    float64
			}
			vals := map[cellKey][]float64{}
			cis := map[cellKey]float64{}
			var order []cellKey
			for _, r := range rows {
				if key(r, facets) != fk || !r[mc].IsNum || math.IsNaN(r[mc].Num) {
					continue
				}
				ln := ""
				if lines != "" {
					ln = r[t.col(lines)].String()
				}
				ck := cellKey{ln, xval(r)}
				if _, ok := vals[ck]; !ok {
					order = append(order, ck)
				}
				vals[ck] = append(vals[ck], r[mc].Num)
				if cc >= 0 && r[cc].IsNum {
					cis[ck] = r[cc].Num
				}
				if byName[ln] == nil {
					byName[ln] = &sweepSeries{name: ln}
					series = append(series, byName[ln])
				}
			}
			for _, ck := range order {
				s := byName[ck.line]
				mean, ci := MeanCI95(vals[ck])
				if len(vals[ck]) == 1 {
					if c, ok := cis[ck]; ok {
						ci = c
					}
				}
				s.xs, s.ys, s.ci = append(s.xs, ck.x), append(s.ys, mean), append(s.ci, ci)
			}
			for _, s := range series {
				sortSeries(s)
			}
			title := m
			if fk != "" {
				title += " (" + fk + ")"
			}
			unit := t.Units[mc]
			ylabel := m
			if unit != "" {
				ylabel += " (" + unit + ")"
			}
			figs = append(figs, sweepChart(fmt.Sprintf("m%d-f%d", mi, fi), title, x, ylabel, lines, series, cats, xInt))
		}
		if len(facetKeys) > 1 {
			pg.figures(figs...)
		} else {
			all = append(all, figs...)
		}
	}
	pg.figures(all...)
	if hm := t.heatmapFigure(rows, x, lines, facets, cats, xval); hm != nil {
		pg.section("heatmap", "SLO attainment over "+x+" and "+lines)
		pg.figures(hm)
	}
	rep, err := t.Report(SweepOptions{Metrics: ms})
	if err != nil {
		return err
	}
	pg.section("points", "Points")
	for _, tb := range rep.Tables {
		pg.table(tb)
	}
	return pg.write(w, intro.String())
}

// WriteHTMLFile writes the sweep page to path via a temporary file.
func (t *SweepTable) WriteHTMLFile(path string, opt SweepOptions) error {
	return writeFile(path, func(w io.Writer) error { return t.WriteHTML(w, opt) })
}

func sortSeries(s *sweepSeries) {
	idx := make([]int, len(s.xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return s.xs[idx[a]] < s.xs[idx[b]] })
	xs, ys, ci := make([]float64, len(idx)), make([]float64, len(idx)), make([]float64, len(idx))
	for k, i := range idx {
		xs[k], ys[k], ci[k] = s.xs[i], s.ys[i], s.ci[i]
	}
	s.xs, s.ys, s.ci = xs, ys, ci
}

// MeanCI95 is the mean and the half-width of its 95% CI (Student's t; NaN
// for fewer than two values).
func MeanCI95(xs []float64) (float64, float64) {
	n := len(xs)
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= float64(n)
	if n < 2 {
		return m, math.NaN()
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	tq := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}.Quantile(0.975)
	return m, tq * math.Sqrt(ss/float64(n-1)) / math.Sqrt(float64(n))
}

// sweepChart draws one line per series with its 95% CI: a shaded band
// over a numeric x, bars over categories. Intervals are cut at zero (every
// sweep metric is a count, rate, latency, share or price) and at the top
// of the frame, which a wide interval does not stretch: the axis follows the
// means, and an interval beyond it ends in an arrowhead at the edge.
func sweepChart(id, title, xlabel, ylabel, linesAxis string, series []*sweepSeries, cats []string, xInt bool) *figure {
	x0, x1, ymax, cimax := math.Inf(1), math.Inf(-1), 0.0, 0.0
	for _, s := range series {
		for i := range s.xs {
			x0, x1 = math.Min(x0, s.xs[i]), math.Max(x1, s.xs[i])
			ymax = math.Max(ymax, s.ys[i])
			if c := s.ci[i]; !math.IsNaN(c) {
				cimax = math.Max(cimax, s.ys[i]+c)
			}
		}
	}
	if math.IsInf(x0, 0) {
		x0, x1 = 0, 1
	}
	xa := axis{label: xlabel, integer: xInt}
	switch {
	case cats != nil:
		xa.cats = cats
	case x0 == x1:
		xa.lo, xa.hi = x0-1, x1+1
	default:
		pad := (x1 - x0) * 0.04
		xa.lo, xa.hi = x0-pad, x1+pad
	}
	top := ymax * 1.1
	if cimax <= ymax*1.6 {
		top = math.Max(top, cimax*1.04)
	}
	if top <= 0 {
		top = 1
	}
	p := newPlot(id, narrowW, narrowH, xa, axis{label: ylabel, lo: 0, hi: top})
	var items []legendItem
	for i, s := range series {
		color := colorAt(i)
		lo, hi := make([]float64, len(s.xs)), make([]float64, len(s.xs))
		for j := range s.xs {
			c := s.ci[j]
			if math.IsNaN(c) {
				c = 0
			}
			lo[j], hi[j] = math.Max(s.ys[j]-c, 0), s.ys[j]+c
		}
		if cats == nil && len(series) <= 2 { // more bands would muddy each other
			p.band(s.xs, lo, hi, color, s.name+": 95% CI")
		}
		p.line(s.xs, s.ys, color, "series", s.name, false)
		for j := range s.xs {
			label := fmt.Sprintf("%s %s: %s", linesAxis, s.name, fmtVal(s.ys[j]))
			if c := s.ci[j]; !math.IsNaN(c) && c > 0 {
				p.errbar(s.xs[j], lo[j], hi[j], color)
				label += " ± " + fmtVal(c)
			}
			if s.name == "" {
				label = fmtVal(s.ys[j])
				if c := s.ci[j]; !math.IsNaN(c) && c > 0 {
					label += " ± " + fmtVal(c)
				}
			}
			p.dot(s.xs[j], s.ys[j], 3, color, label, false)
		}
		if s.name != "" {
			items = append(items, legendItem{name: linesAxis + " " + s.name, color: color})
		}
	}
	caption := "Read the line for the mean; where the shaded 95% interval is wide, more seeds would change the answer."
	if len(series) > 1 {
		caption = "Lines that cross are where the better " + linesAxis + " changes; where intervals overlap, the difference is within the noise of the seeds."
	}
	return &figure{id: id, title: title, caption: caption, svg: p.end(), legend: items}
}

// heatmapFigure: with two varying axes and an attainment column, the mean
// attainment over x and the lines axis, the cells meeting 99% outlined.
func (t *SweepTable) heatmapFigure(rows [][]Cell, x, lines string, facets []string, cats []string, xval func([]Cell) float64) *figure {
	mc := t.col("slo_all_met_pct")
	if mc < 0 || lines == "" || len(facets) > 0 {
		return nil
	}
	xc, lc := t.col(x), t.col(lines)
	var xs []float64
	var xl, ll []string
	for _, r := range rows {
		if v := xval(r); !slices.Contains(xs, v) {
			xs = append(xs, v)
		}
		if l := r[lc].String(); !slices.Contains(ll, l) {
			ll = append(ll, l)
		}
	}
	slices.Sort(xs)
	for _, v := range xs {
		if cats != nil {
			xl = append(xl, cats[int(v)])
			continue
		}
		for _, r := range rows {
			if xval(r) == v {
				xl = append(xl, r[xc].String())
				break
			}
		}
	}
	if len(xs) < 2 || len(ll) < 2 {
		return nil
	}
	g := make([][]float64, len(ll))
	n := make([][]int, len(ll))
	for i := range g {
		g[i], n[i] = make([]float64, len(xs)), make([]int, len(xs))
	}
	for _, r := range rows {
		if !r[mc].IsNum || math.IsNaN(r[mc].Num) {
			continue
		}
		i, j := slices.Index(ll, r[lc].String()), slices.Index(xs, xval(r))
		g[i][j] += r[mc].Num
		n[i][j]++
	}
	for i := range g {
		for j := range g[i] {
			if n[i][j] == 0 {
				g[i][j] = math.NaN()
			} else {
				g[i][j] /= float64(n[i][j])
			}
		}
	}
	return gridFig("heat-attainment", "SLO attainment (%, mean over seeds) by "+x+" and "+lines,
		"Outlined cells meet 99% attainment: the cheapest outlined cell in a row is that row's answer.",
		x, lines, xl, ll, g, func(i, j int) bool { return g[i][j] >= 99 }, "%")
}
