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

	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>blis-sweep ")
	b.WriteString(html.EscapeString(t.Name))
	b.WriteString("</title>\n<style>")
	b.WriteString(css)
	b.WriteString(".marker{stroke:none}.errbar{stroke-width:1.2}</style>\n<script>")
	b.WriteString(js)
	fmt.Fprintf(&b, "</script></head>\n<body data-errors=\"0\">\n<h1>Sweep %s</h1>\n<ul>", html.EscapeString(t.Name))
	fmt.Fprintf(&b, "<li>%s: %d rows</li>", html.EscapeString(t.Path), len(t.Rows))
	fmt.Fprintf(&b, "<li>x: <b>%s</b>", html.EscapeString(x))
	if lines != "" {
		fmt.Fprintf(&b, "; one line per <b>%s</b>", html.EscapeString(lines))
	}
	if len(facets) > 0 {
		fmt.Fprintf(&b, "; one chart per %s", html.EscapeString(strings.Join(facets, ", ")))
	}
	fmt.Fprintf(&b, "; group %s; bars: 95%% confidence interval of the mean over replications</li>", html.EscapeString(group))
	for _, n := range notes {
		fmt.Fprintf(&b, "<li>note: %s</li>", html.EscapeString(n))
	}
	b.WriteString("</ul>\n")
	// Without facets every metric's chart shares one row; with facets each
	// metric gets a section of its charts.
	if len(facetKeys) <= 1 {
		b.WriteString("<div class=\"charts\">\n")
	}
	for mi, m := range ms {
		mc, cc := t.col(m), t.col(m+"_ci95")
		if len(facetKeys) > 1 {
			fmt.Fprintf(&b, "<h2>%s</h2>\n<div class=\"charts\">\n", html.EscapeString(m))
		}
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
			b.WriteString(sweepChart(fmt.Sprintf("m%d-f%d", mi, fi), title, x, ylabel, series, cats))
			b.WriteString("\n")
		}
		if len(facetKeys) > 1 {
			b.WriteString("</div>\n")
		}
	}
	if len(facetKeys) <= 1 {
		b.WriteString("</div>\n")
	}
	rep, err := t.Report(SweepOptions{Metrics: ms})
	if err != nil {
		return err
	}
	for _, tb := range rep.Tables {
		fmt.Fprintf(&b, "<h2>%s</h2>\n<p class=\"note\">%s</p>\n<table><thead><tr>", html.EscapeString(tb.Title), html.EscapeString(tb.Note))
		for _, c := range tb.Columns {
			fmt.Fprintf(&b, "<th>%s</th>", html.EscapeString(c))
		}
		b.WriteString("</tr></thead><tbody>\n")
		for _, row := range tb.Rows {
			b.WriteString("<tr>")
			for _, c := range row {
				if c.IsNum {
					fmt.Fprintf(&b, "<td class=\"n\">%s</td>", c.String())
				} else {
					fmt.Fprintf(&b, "<td>%s</td>", html.EscapeString(c.String()))
				}
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</tbody></table>\n")
	}
	b.WriteString("</body></html>\n")
	_, err = io.WriteString(w, b.String())
	return err
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

// sweepChart draws lines with markers and CI bars; with cats, x is a
// category index labelled by cats.
func sweepChart(id, title, xlabel, ylabel string, series []*sweepSeries, cats []string) string {
	var b strings.Builder
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), 0.0, 0.0
	for _, s := range series {
		for i := range s.xs {
			hi := s.ys[i]
			if !math.IsNaN(s.ci[i]) {
				hi += s.ci[i]
			}
			x0, x1, y1 = math.Min(x0, s.xs[i]), math.Max(x1, s.xs[i]), math.Max(y1, hi)
			y0 = math.Min(y0, s.ys[i])
		}
	}
	if math.IsInf(x0, 0) {
		x0, x1 = 0, 1
	}
	if cats != nil {
		x0, x1 = -0.5, float64(len(cats))-0.5
	} else if x0 == x1 {
		x0, x1 = x0-1, x1+1
	} else {
		pad := (x1 - x0) * 0.04
		x0, x1 = x0-pad, x1+pad
	}
	px, py := svgFrame(&b, id, title, xlabel, ylabel, x0, x1, y0, y1*1.08, cats == nil)
	for i, c := range cats {
		fmt.Fprintf(&b, `<text x="%s" y="%d" class="tick" text-anchor="middle">%s</text>`, f3(px(float64(i))), ch-padB+16, html.EscapeString(c))
	}
	var ls []line
	for i, s := range series {
		color := palette[i%len(palette)]
		var d strings.Builder
		for j := range s.xs {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%s %s", cmd, f3(px(s.xs[j])), f3(py(s.ys[j])))
		}
		fmt.Fprintf(&b, `<path class="series" d="%s" stroke="%s"><title>%s</title></path>`, d.String(), color, html.EscapeString(s.name))
		for j := range s.xs {
			x, y := px(s.xs[j]), py(s.ys[j])
			label := fmt.Sprintf("%s: %s", s.name, fmtTick(s.ys[j]))
			if c := s.ci[j]; !math.IsNaN(c) && c > 0 {
				lo, hi := py(s.ys[j]-c), py(s.ys[j]+c)
				fmt.Fprintf(&b, `<path class="errbar" d="M%s %sV%sM%s %sH%sM%s %sH%s" stroke="%s"/>`,
					f3(x), f3(lo), f3(hi), f3(x-4), f3(lo), f3(x+4), f3(x-4), f3(hi), f3(x+4), color)
				label += " ± " + fmtTick(c)
			}
			fmt.Fprintf(&b, `<circle class="marker" cx="%s" cy="%s" r="3" fill="%s"><title>%s</title></circle>`, f3(x), f3(y), color, html.EscapeString(label))
		}
		ls = append(ls, line{name: s.name})
	}
	legend(&b, ls)
	b.WriteString("</svg>")
	return b.String()
}
