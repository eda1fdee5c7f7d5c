package report

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"
)

// Capacity is a capacity search (blis-sweep --find) as its page draws it:
// every probe of every search, with the constraints it was judged by.
type Capacity struct {
	Name        string // the sweep's name
	Goal        string // min-replicas or max-rate
	Axis        string // the searched axis
	AxisInt     bool   // an integer axis (replicas)
	Constraints []CapConstraint
	Combos      []CapCombo // one search per combination of the other axes
	Priced      bool       // costs are $ per hour (else GPUs)
	Confidence  float64    // CI level of the verdicts (0: judged on the mean)
	Seeds       int
	Table       *Table // the answers, as blis-sweep prints them
}

// CapConstraint is one --slo term.
type CapConstraint struct {
	Text, Metric, Op, Unit string
	Value                  float64
}

// CapCombo is one search: its probes and answer.
type CapCombo struct {
	Label  string // "router.routing=round-robin" ("" when the axis is the only one)
	Found  bool
	Answer float64 // the answer, or the probe that came closest
	Note   string
	Probes []CapProbe
}

// CapProbe is one probed value of the searched axis.
type CapProbe struct {
	X          float64
	Mean, Half []float64 // per constraint; Half 0 or NaN without an interval
	Pass       bool
	Attainment float64 // slo_all_met_pct, mean over seeds (NaN if none)
	GPUs       int64
	Cost       float64 // $ per hour (NaN when not priced)
	Failed     string  // the runs failed
}

// byX is the search's probes in the order of the searched axis.
func (cb *CapCombo) byX() []CapProbe {
	pr := slices.Clone(cb.Probes)
	slices.SortFunc(pr, func(a, b CapProbe) int { return cmp.Compare(a.X, b.X) })
	return pr
}

// WriteHTMLFile writes the page to path via a temporary file.
func (c *Capacity) WriteHTMLFile(path string) error { return writeFile(path, c.WriteHTML) }

// WriteHTML writes the capacity page: per constraint, the metric against
// the searched axis with its interval, the target and each answer; the cost
// of each probe; with several searches, a map of attainment.
func (c *Capacity) WriteHTML(w io.Writer) error {
	p := newPage("Capacity search: " + c.Name)
	var intro strings.Builder
	var terms []string
	for _, k := range c.Constraints {
		terms = append(terms, k.Text)
	}
	how := "judged on the mean over seeds"
	if c.Confidence > 0 && c.Seeds > 1 {
		how = fmt.Sprintf("judged on the %g%% confidence interval of the mean over %d seeds (the pessimistic end must meet the target)", c.Confidence*100, c.Seeds)
	}
	fmt.Fprintf(&intro, "<ul class=\"inputs\"><li>%s over <b>%s</b>: %s; %s</li>", html.EscapeString(c.Goal), html.EscapeString(c.Axis),
		html.EscapeString(strings.Join(terms, ", ")), html.EscapeString(how))
	for _, cb := range c.Combos {
		label := cb.Label
		if label == "" {
			label = "answer"
		}
		if cb.Found {
			fmt.Fprintf(&intro, "<li>%s: <b>%s = %s</b>", html.EscapeString(label), html.EscapeString(c.Axis), fmtVal(cb.Answer))
		} else {
			fmt.Fprintf(&intro, "<li>%s: <b>not found</b> (closest probe %s = %s)", html.EscapeString(label), html.EscapeString(c.Axis), fmtVal(cb.Answer))
		}
		if cb.Note != "" {
			fmt.Fprintf(&intro, "; %s", html.EscapeString(cb.Note))
		}
		intro.WriteString("</li>")
	}
	intro.WriteString("</ul>\n")

	p.section("answer", "The answer against "+c.Axis)
	var figs []*figure
	for i := range c.Constraints {
		figs = append(figs, c.constraintFig(i))
	}
	figs = append(figs, c.costFig())
	p.figures(figs...)
	if len(c.Combos) > 1 {
		p.section("map", "Attainment over "+c.Axis+" and the other axes")
		p.figures(c.mapFig())
	}
	if c.Table != nil {
		p.section("answers", "Answers")
		p.table(c.Table)
	}
	return p.write(w, intro.String())
}

// constraintFig: constraint i's metric at each probe with its interval,
// the target as a line, each search's answer marked.
func (c *Capacity) constraintFig(i int) *figure {
	k := c.Constraints[i]
	x0, x1, ymax, ymin := math.Inf(1), math.Inf(-1), 0.0, math.Inf(1)
	for _, cb := range c.Combos {
		for _, pr := range cb.Probes {
			x0, x1 = math.Min(x0, pr.X), math.Max(x1, pr.X)
			if m := pr.Mean[i]; !math.IsNaN(m) {
				ymax = math.Max(ymax, m)
				if m > 0 {
					ymin = math.Min(ymin, m)
				}
			}
		}
	}
	if math.IsInf(x0, 0) {
		return nil
	}
	pad := math.Max((x1-x0)*0.04, 0.5)
	top := math.Max(ymax, k.Value) * 1.15
	if k.Unit == "%" {
		top = math.Max(top, 100)
		top = math.Min(top, 105)
	}
	ylabel := k.Metric
	if k.Unit != "" {
		ylabel += " (" + k.Unit + ")"
	}
	ya := axis{label: ylabel, lo: 0, hi: top}
	// A probe far from the target (one replica: minutes of queueing) would
	// flatten the others against the axis: a log scale keeps the target's
	// neighbourhood readable.
	logY := k.Unit != "%" && k.Value > 0 && ymax > 10*k.Value
	if logY {
		ya = axis{label: ylabel + ", log scale", lo: math.Min(ymin, k.Value) / 1.5, hi: ymax * 1.5, log: true}
	}
	p := newPlot(fmt.Sprintf("cap-%d", i), narrowW, narrowH, axis{label: c.Axis, lo: x0 - pad, hi: x1 + pad, integer: c.AxisInt}, ya)
	p.hline(k.Value, "#000", "target "+k.Op+" "+fmtVal(k.Value)+" "+k.Unit)
	var items []legendItem
	for ci, cb := range c.Combos {
		color := colorAt(ci)
		pr := cb.byX()
		var xs, ys, lo, hi []float64
		for _, q := range pr {
			h := q.Half[i]
			if math.IsNaN(h) {
				h = 0
			}
			xs, ys = append(xs, q.X), append(ys, q.Mean[i])
			l := math.Max(q.Mean[i]-h, 0)
			if logY {
				l = math.Max(l, ya.lo)
			}
			lo, hi = append(lo, l), append(hi, q.Mean[i]+h)
		}
		p.band(xs, lo, hi, color, cb.Label+": interval")
		p.line(xs, ys, color, "series", cb.Label, false)
		for j, q := range pr {
			if hi[j] > lo[j] {
				p.errbar(q.X, lo[j], hi[j], color)
			}
			verdict := "meets"
			if !q.Pass {
				verdict = "misses"
			}
			p.dot(q.X, q.Mean[i], 3.4, color, fmt.Sprintf("%s %s = %s: %s %s ± %s (%s)", cb.Label, c.Axis, fmtVal(q.X), k.Metric, fmtVal(q.Mean[i]), fmtVal(q.Half[i]), verdict), !q.Pass)
		}
		if cb.Found {
			for _, q := range pr {
				if q.X == cb.Answer {
					p.raw(star(p.px(q.X), p.py(q.Mean[i]), color))
				}
			}
			if len(c.Combos) == 1 {
				p.vline(cb.Answer, color, "answer: "+c.Axis+" = "+fmtVal(cb.Answer))
			}
		}
		name := cb.Label
		if name == "" {
			name = k.Metric
		}
		items = append(items, legendItem{name: name, color: color})
	}
	items = append(items, legendItem{name: "target", color: "#000", kind: "dash"}, legendItem{name: "missed the target", color: "#555", kind: "hollow"})
	caption := "Filled probes met every target, hollow ones missed; the star is the answer: the first probe whose interval stays on the right side of the dashed target."
	return &figure{id: fmt.Sprintf("cap-%d", i), title: fmt.Sprintf("%s against %s, with its interval", k.Metric, c.Axis), caption: caption, svg: p.end(), legend: items}
}

// star is a five-pointed marker at a pixel position.
func star(x, y float64, color string) string {
	var pts []string
	for k := 0; k < 10; k++ {
		r := 9.0
		if k%2 == 1 {
			r = 4
		}
		a := -math.Pi/2 + float64(k)*math.Pi/5
		pts = append(pts, f2(x+r*math.Cos(a))+","+f2(y+r*math.Sin(a)))
	}
	return fmt.Sprintf(`<polygon class="d answer" points="%s" fill="%s" stroke="#000" stroke-width="1"><title>answer</title></polygon>`, strings.Join(pts, " "), color)
}

// costFig: the cost of every probe (or its GPUs when nothing is priced).
func (c *Capacity) costFig() *figure {
	ylabel, title := "GPUs", "GPUs at each probe"
	val := func(q CapProbe) float64 { return float64(q.GPUs) }
	if c.Priced {
		ylabel, title = "$ per hour", "Cost at each probe"
		val = func(q CapProbe) float64 { return q.Cost }
	}
	x0, x1, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, cb := range c.Combos {
		for _, q := range cb.Probes {
			x0, x1 = math.Min(x0, q.X), math.Max(x1, q.X)
			if v := val(q); !math.IsNaN(v) {
				ymax = math.Max(ymax, v)
			}
		}
	}
	if math.IsInf(x0, 0) || ymax <= 0 {
		return nil
	}
	pad := math.Max((x1-x0)*0.04, 0.5)
	p := newPlot("cap-cost", narrowW, narrowH, axis{label: c.Axis, lo: x0 - pad, hi: x1 + pad, integer: c.AxisInt},
		axis{label: ylabel, lo: 0, hi: ymax * 1.15, integer: !c.Priced})
	// The cheapest answer is the one to buy: its label says so.
	cheapest, best := -1, math.Inf(1)
	for ci, cb := range c.Combos {
		for _, q := range cb.Probes {
			if v := val(q); cb.Found && q.X == cb.Answer && !math.IsNaN(v) && v < best {
				cheapest, best = ci, v
			}
		}
	}
	var items []legendItem
	var labels []rect
	for ci, cb := range c.Combos {
		color := colorAt(ci)
		pr := cb.byX()
		var xs, ys []float64
		for _, q := range pr {
			xs, ys = append(xs, q.X), append(ys, val(q))
		}
		p.line(xs, ys, color, "thin", cb.Label, false)
		for _, q := range pr {
			p.dot(q.X, val(q), 3.2, color, fmt.Sprintf("%s %s = %s: %s %s", cb.Label, c.Axis, fmtVal(q.X), fmtVal(val(q)), ylabel), !q.Pass)
			if cb.Found && q.X == cb.Answer {
				p.raw(star(p.px(q.X), p.py(val(q)), color))
				label := fmtVal(val(q)) + " GPUs"
				if c.Priced {
					label = "$" + fmtVal(val(q)) + "/h"
				}
				if ci == cheapest && len(c.Combos) > 1 {
					label = "cheapest: " + label
				}
				labels = p.label(q.X, val(q), label, labels)
			}
		}
		if cb.Label != "" {
			items = append(items, legendItem{name: cb.Label, color: color})
		}
	}
	return &figure{id: "cap-cost", title: title, svg: p.end(), legend: items,
		caption: "The starred probes are the answers: the cheapest star is the configuration to buy; hollow probes missed the SLO."}
}

// mapFig: one row per search, one column per probed value, coloured by
// attainment (or, without it, by whether the probe met the SLO); the
// probes that met every target outlined. Values the search never probed
// are grey: the bisection assumes the verdict does not flip back.
func (c *Capacity) mapFig() *figure {
	var xs []float64
	for _, cb := range c.Combos {
		for _, q := range cb.Probes {
			if !slices.Contains(xs, q.X) {
				xs = append(xs, q.X)
			}
		}
	}
	slices.Sort(xs)
	if len(xs) == 0 {
		return nil // no probe ran
	}
	haveAtt := false
	for _, cb := range c.Combos {
		for _, q := range cb.Probes {
			haveAtt = haveAtt || !math.IsNaN(q.Attainment)
		}
	}
	g := make([][]float64, len(c.Combos))
	pass := map[[2]int]bool{}
	var rows, cols []string
	for i, cb := range c.Combos {
		g[i] = make([]float64, len(xs))
		for j := range g[i] {
			g[i][j] = math.NaN()
		}
		for _, q := range cb.Probes {
			j := slices.Index(xs, q.X)
			v := q.Attainment
			if !haveAtt {
				v = 0
				if q.Pass {
					v = 100
				}
			}
			g[i][j] = v
			pass[[2]int{i, j}] = q.Pass
		}
		rows = append(rows, cb.Label)
	}
	for _, x := range xs {
		cols = append(cols, fmtVal(x))
	}
	title := "SLO attainment (% of requests meeting every target) at each probe"
	if !haveAtt {
		title = "Probes meeting every target (100) or not (0)"
	}
	return gridFig("cap-map", title,
		"Outlined probes met every target: the leftmost outlined cell of a row is its answer; grey cells were never probed.",
		c.Axis, "search", cols, rows, g, func(i, j int) bool { return pass[[2]int{i, j}] }, "%")
}
