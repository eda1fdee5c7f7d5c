package report

import (
	"bufio"
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// cdfPoints is how many quantiles a CDF line is drawn from: enough for a
// smooth curve, few enough that a 10M-row report stays small.
const cdfPoints = 200

// chartBins is the most time bins a time-series chart draws.
const chartBins = 120

// line is one data series of a chart.
type line struct {
	name   string
	xs, ys []float64
}

// lineFig draws lines on axes fitted to the data (x from its minimum or 0,
// y from 0); xmax > 0 cuts the x axis there.
func lineFig(id, title, caption, xlabel, ylabel string, lines []line, xmax float64, step bool) *figure {
	x0, x1, y1 := math.Inf(1), math.Inf(-1), 0.0
	var items []legendItem
	drawn := false
	for i, l := range lines {
		for j := range l.xs {
			if math.IsNaN(l.ys[j]) {
				continue
			}
			x0, x1, y1 = math.Min(x0, l.xs[j]), math.Max(x1, l.xs[j]), math.Max(y1, l.ys[j])
			drawn = true
		}
		items = append(items, legendItem{name: l.name, color: colorAt(i)})
	}
	if !drawn {
		x0, x1 = 0, 1
	}
	x0 = math.Min(x0, 0)
	if xmax > 0 && xmax < x1 {
		x1 = xmax
	}
	p := newPlot(id, narrowW, narrowH, axis{label: xlabel, lo: x0, hi: x1}, axis{label: ylabel, lo: 0, hi: y1 * 1.05})
	for i, l := range lines {
		p.line(l.xs, l.ys, colorAt(i), "series", l.name, step)
	}
	if len(lines) < 2 {
		items = nil
	}
	return &figure{id: id, title: title, caption: caption, svg: p.end(), legend: items}
}

func cdfLine(name string, d *Dist) line {
	l := line{name: name}
	if d == nil || d.Count() == 0 {
		return l
	}
	l.xs = append(l.xs, float64(d.min)/1000)
	l.ys = append(l.ys, 0)
	for i := 1; i <= cdfPoints; i++ {
		q := float64(i) / cdfPoints
		l.xs = append(l.xs, d.Quantile(q)/1000)
		l.ys = append(l.ys, q)
	}
	return l
}

// seriesLine turns a binned sum into a rate per second (or, with div, a ratio of two sums).
// The last bin is divided by the part of it inside the run (up to end µs), so
// a partial bin does not read as a drop or a spike.
func seriesLine(name string, s *series, scale float64, end int64) line {
	l := line{name: name}
	s = s.coarsen(chartBins)
	for i, v := range s.sum {
		lo := int64(i) * s.width
		w := s.width
		if end > lo && end-lo < w {
			w = end - lo
			if w < s.width/4 && i > 0 {
				break // a sliver of a bin: its rate would be noise
			}
		}
		l.xs = append(l.xs, (float64(lo)+float64(w)/2)/1e6)
		l.ys = append(l.ys, v*scale/float64(w))
	}
	return l
}

// WriteHTMLFile writes the HTML report to path via a temporary file.
func (rep *Report) WriteHTMLFile(path string) error {
	return writeFile(path, rep.WriteHTML)
}

// WriteFile writes the text report in format f to path via a temporary file.
func (rep *Report) WriteFile(path string, f Format) error {
	return writeFile(path, func(w io.Writer) error { return rep.Write(w, f) })
}

// writeFile writes through trace.CreateFile: a failed run leaves nothing
// (and an earlier file stays), the result is an ordinary 0644 file, and a
// device or symbolic link is written through, not replaced.
func writeFile(path string, write func(io.Writer) error) error {
	out, err := trace.CreateFile(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(out.File())
	err = write(bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return out.Commit(err)
}

// WriteHTML writes one self-contained page: inline CSS, SVG and script, no
// fetches. Its pictures need a report built with Options.Charts; without,
// the page has the pictures the tables alone can draw.
func (rep *Report) WriteHTML(w io.Writer) error {
	p := newPage("blis-report")
	var intro strings.Builder
	intro.WriteString("<ul class=\"inputs\">")
	for _, in := range rep.Inputs {
		// The label is the file's base name unless two inputs share one:
		// then it is run1, run2, ... and worth showing.
		if in.Label == filepath.Base(in.Path) || in.Path == "<stdin>" && in.Label == "stdin" {
			fmt.Fprintf(&intro, "<li>input <b>%s</b>: %d rows</li>", html.EscapeString(in.Path), in.Rows)
		} else {
			fmt.Fprintf(&intro, "<li>input <b>%s</b> (%s): %d rows</li>", html.EscapeString(in.Path), html.EscapeString(in.Label), in.Rows)
		}
	}
	if rep.steps != nil {
		fmt.Fprintf(&intro, "<li>steps: %s, %d rows</li>", html.EscapeString(rep.steps.path), rep.steps.rows)
	}
	if rep.scale != nil {
		fmt.Fprintf(&intro, "<li>scale events: %s, %d rows</li>", html.EscapeString(rep.scale.path), rep.scale.rows)
	}
	if rep.dec != nil {
		fmt.Fprintf(&intro, "<li>decisions: %s, %d rows</li>", html.EscapeString(rep.dec.path), rep.dec.rows)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&intro, "<li>note: %s</li>", html.EscapeString(n))
	}
	intro.WriteString("</ul>\n")

	var header []*Table
	for _, t := range rep.Tables {
		if t.Header {
			header = append(header, t)
		}
	}
	if len(header) > 0 {
		p.section("config", "Run configuration")
		for _, t := range header {
			p.table(t)
		}
	}
	rep.latencySection(p)
	rep.simRealSection(p)
	rep.timeSection(p)
	rep.replicaSection(p)
	rep.instanceSection(p)
	rep.sessionSection(p)
	rep.decisionSection(p)
	p.section("tables", "Tables")
	for _, t := range rep.Tables {
		if !t.Header {
			p.table(t)
		}
	}
	return p.write(w, intro.String())
}

// latencySection: the CDFs of every run on the same axes, each run's
// percentiles marked with their error against the reference, and QQ plots.
func (rep *Report) latencySection(p *page) {
	p.section("latency", "Latency")
	ref := rep.ref
	many := len(rep.runs) > 1
	var figs []*figure
	for _, m := range []int{mTTFT, mTPOT, mE2E, mArrival} {
		var ds []*Dist
		var names []string
		for i, r := range rep.runs {
			ds = append(ds, r.all.d[m])
			names = append(names, rep.Inputs[i].Label)
		}
		caption := "Read the median where a curve crosses 0.5 and the tail at 0.99; a long flat top is a heavy tail."
		if many {
			caption = "Curves to the right are slower; each run's p50, p90 and p99 are marked with their error against " + rep.Inputs[ref].Label + "."
		}
		figs = append(figs, cdfFig("cdf-"+metricNames[m], "CDF of "+metricNames[m]+" (completed llm requests)", caption,
			metricNames[m], ds, names, ref, many))
	}
	p.figures(figs...)
	if many {
		figs = figs[:0]
		for _, m := range []int{mTTFT, mTPOT, mE2E} {
			for i, r := range rep.runs {
				if i == ref {
					continue
				}
				figs = append(figs, qqFig(fmt.Sprintf("qq-%s-%d", metricNames[m], i), metricNames[m], r.all.d[m], rep.runs[ref].all.d[m],
					rep.Inputs[i].Label, rep.Inputs[ref].Label))
			}
		}
		p.subsection("qq", "Quantile against quantile")
		p.figures(figs...)
	}
}

// cdfFig draws one CDF per distribution; with marks, the p50/p90/p99 of
// every distribution but the reference are annotated with their error.
func cdfFig(id, title, caption, metric string, ds []*Dist, names []string, ref int, marks bool) *figure {
	var lines []line
	var items []legendItem
	xmax := 0.0
	for i, d := range ds {
		lines = append(lines, cdfLine(names[i], d))
		items = append(items, legendItem{name: names[i], color: colorAt(i)})
		if d != nil && d.Count() > 0 {
			xmax = math.Max(xmax, d.Quantile(0.99)/1000)
		}
	}
	x0 := 0.0
	if xmax <= 0 {
		xmax = 1
	}
	p := newPlot(id, narrowW, narrowH, axis{label: metric + " (ms); the axis ends at the largest p99", lo: x0, hi: xmax * 1.04},
		axis{label: "fraction of requests", lo: 0, hi: 1})
	for i, l := range lines {
		p.line(l.xs, l.ys, colorAt(i), "series", l.name, true)
	}
	if marks && ref < len(ds) && ds[ref] != nil && ds[ref].Count() > 0 {
		for i, d := range ds {
			if d == nil || d.Count() == 0 {
				continue
			}
			for k, q := range []float64{0.5, 0.9, 0.99} {
				v := d.Quantile(q) / 1000
				p.dot(v, q, 3.2, colorAt(i), fmt.Sprintf("%s p%g: %s", names[i], q*100, fmtMS(v)), i == ref)
				if i == ref {
					continue
				}
				rv := ds[ref].Quantile(q) / 1000
				e := (v - rv) / rv * 100
				// Labels of different runs stack below their marks; the p99
				// label sits left of its mark, at the axis' end.
				label := fmt.Sprintf("p%g %s", q*100, signedPct(e))
				dy, dx, anchor := 14.0+12*float64(i-btoi(i > ref)-1), 5.0, "start"
				if k == 2 || p.px(v)+dx+float64(len(label))*charW > p.w-p.r {
					dx, anchor = -6, "end" // keep it inside the frame
				}
				p.text(v, q, dx, dy, label, anchor, "lbl")
			}
		}
	}
	if len(ds) < 2 {
		items = nil
	}
	return &figure{id: id, title: title, caption: caption, svg: p.end(), legend: items}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func signedPct(e float64) string {
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return "-"
	}
	s := strconv.FormatFloat(e, 'f', 1, 64)
	if e >= 0 {
		s = "+" + s
	}
	return s + "%"
}

// qqFig plots the quantiles of d against those of ref: on the diagonal they
// agree.
func qqFig(id, metric string, d, ref *Dist, name, refName string) *figure {
	if d == nil || ref == nil || d.Count() == 0 || ref.Count() == 0 {
		return nil
	}
	var xs, ys []float64
	hi := 0.0
	for i := 1; i <= 99; i++ {
		q := float64(i) / 100
		x, y := ref.Quantile(q)/1000, d.Quantile(q)/1000
		xs, ys = append(xs, x), append(ys, y)
		hi = math.Max(hi, math.Max(x, y))
	}
	hi *= 1.05
	if hi <= 0 {
		hi = 1
	}
	p := newPlot(id, narrowW, narrowH, axis{label: refName + " " + metric + " (ms)", lo: 0, hi: hi}, axis{label: name + " " + metric + " (ms)", lo: 0, hi: hi})
	p.line([]float64{0, hi}, []float64{0, hi}, "#999", "thin", "y = x: the two agree", false)
	for i := range xs {
		p.dot(xs[i], ys[i], 2.6, colorAt(1), fmt.Sprintf("p%d: %s vs %s", i+1, fmtMS(ys[i]), fmtMS(xs[i])), i+1 != 50 && i+1 != 90 && i+1 != 99)
	}
	for _, k := range []int{50, 90, 99} {
		p.text(xs[k-1], ys[k-1], -6, -6, fmt.Sprintf("p%d", k), "end", "lbl")
	}
	return &figure{id: id, title: fmt.Sprintf("QQ of %s: %s against %s", metric, name, refName),
		caption: "Percentiles 1 to 99 (p50, p90, p99 filled): above the diagonal " + name + " is slower than " + refName + " at that percentile, below it faster.",
		svg:     p.end()}
}

// timeSection: throughput over time for every run.
func (rep *Report) timeSection(p *page) {
	p.section("time", "Over time")
	var reqs, toks []line
	for i, r := range rep.runs {
		reqs = append(reqs, seriesLine(rep.Inputs[i].Label, r.done, 1e6, r.end))
		toks = append(toks, seriesLine(rep.Inputs[i].Label, r.toks, 1e6, r.end))
	}
	p.figures(
		lineFig("throughput-req", "Completed requests per second", "A line that falls while arrivals go on means the cluster fell behind; compare with the load below.",
			"simulated time (s)", "requests/s", reqs, 0, false),
		lineFig("throughput-tok", "Output tokens per second (completed requests)", "Token throughput by finish time: dips are stalls or drained queues.",
			"simulated time (s)", "tokens/s", toks, 0, false))
}

// instanceSection: per-instance bars.
func (rep *Report) instanceSection(p *page) {
	p.section("instances", "Per-instance load")
	r0 := rep.runs[0]
	ids := r0.instanceIDs(rep.steps, true)
	var names []string
	var done, busy []float64
	for _, id := range ids {
		names = append(names, strconv.FormatInt(id, 10))
		c := 0.0
		if l := r0.inst[id]; l != nil {
			c = float64(l.completed)
		}
		done = append(done, c)
		if rep.steps != nil {
			bz := 0.0
			if s := rep.steps.inst[id]; s != nil {
				bz = float64(s.busy) / r0.span() * 100
			}
			busy = append(busy, bz)
		}
	}
	figs := []*figure{barFig("instance-completed", "Completed requests per instance ("+rep.Inputs[0].Label+")",
		"Bars of unequal height mean the router spread the work unevenly.", "instance", "requests", names, done)}
	if rep.steps != nil {
		figs = append(figs, barFig("instance-busy", "Busy time per instance (% of span)",
			"A replica near 100% is saturated; one far below its neighbours is underused.", "instance", "% of span", names, busy))
	}
	p.figures(figs...)
}

func barFig(id, title, caption, xlabel, ylabel string, names []string, vals []float64) *figure {
	y1 := 0.0
	for _, v := range vals {
		if !math.IsNaN(v) {
			y1 = math.Max(y1, v)
		}
	}
	xa := axis{label: xlabel, lo: -0.5, hi: float64(len(vals)) - 0.5, integer: true}
	if len(vals) <= 24 {
		xa.cats = names
	}
	p := newPlot(id, narrowW, narrowH, xa, axis{label: ylabel, lo: 0, hi: y1 * 1.08})
	for i, v := range vals {
		if math.IsNaN(v) {
			continue
		}
		p.rect(float64(i)-0.38, 0, float64(i)+0.38, v, colorAt(0), names[i]+": "+fmtVal(v))
	}
	return &figure{id: id, title: title, caption: caption, svg: p.end()}
}

// quantileBins splits xs (with their ys) into n groups of equal count by x
// and returns each group's median x and median y.
func quantileBins(xs, ys []float64, n int) ([]float64, []float64) {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(xs[a], xs[b]) })
	var mx, my []float64
	for k := 0; k < n; k++ {
		lo, hi := k*len(idx)/n, (k+1)*len(idx)/n
		if hi-lo < 3 {
			continue
		}
		var gx, gy []float64
		for _, i := range idx[lo:hi] {
			gx, gy = append(gx, xs[i]), append(gy, ys[i])
		}
		slices.Sort(gx)
		slices.Sort(gy)
		mx, my = append(mx, gx[len(gx)/2]), append(my, gy[len(gy)/2])
	}
	return mx, my
}
