package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"
)

// Pareto is a ranking of runs on two objectives (blis-report --fitness
// --html): each run at its raw metric values, the front joined, every run
// labelled where its label fits.
type Pareto struct {
	Title  string
	X, Y   ParetoAxis
	Points []ParetoPoint
	Table  *Table // the ranking, as printed
	Note   string // under the table
}

// ParetoAxis is one objective: its metric and direction.
type ParetoAxis struct {
	Metric   string
	Maximize bool
}

func (a ParetoAxis) label() string {
	unit := metricUnit(a.Metric)
	s := a.Metric
	if unit != "" {
		s += " (" + unit + ")"
	}
	if a.Maximize {
		return s + ": higher is better"
	}
	return s + ": lower is better"
}

// metricUnit guesses the unit of a report metric from its name.
func metricUnit(m string) string {
	base, _, _ := strings.Cut(m, ".")
	switch {
	case strings.HasSuffix(base, "_ms") || strings.HasPrefix(base, "ttft") || strings.HasPrefix(base, "tpot") || strings.HasPrefix(base, "e2e") || strings.HasPrefix(base, "queue"):
		return "ms"
	case strings.HasSuffix(base, "_pct") || strings.Contains(base, "attainment"):
		return "%"
	case strings.Contains(base, "per_s") || base == "goodput" || base == "throughput":
		return "requests/s"
	case strings.Contains(base, "usd") || strings.Contains(base, "cost"):
		return "$"
	case strings.Contains(base, "gpu_hours"):
		return "GPU-h"
	}
	return ""
}

// ParetoPoint is one run.
type ParetoPoint struct {
	Label      string
	X, Y       float64
	Rank       int
	Front      bool
	Feasible   bool
	Primary    float64
	Violations []string
}

// WriteHTMLFile writes the page to path via a temporary file.
func (pp *Pareto) WriteHTMLFile(path string) error { return writeFile(path, pp.WriteHTML) }

// WriteHTML writes the Pareto page: the scatter and the ranking table.
func (pp *Pareto) WriteHTML(w io.Writer) error {
	p := newPage("Pareto ranking: " + pp.Title)
	p.section("front", "The runs on "+pp.X.Metric+" and "+pp.Y.Metric)
	p.figures(pp.figure())
	if pp.Table != nil {
		p.section("ranking", "Ranking")
		p.table(pp.Table)
		if pp.Note != "" {
			p.note(pp.Note)
		}
	}
	return p.write(w, "")
}

// figure draws the runs; labels go beside their points where they overlap
// neither another label nor a point, else the point gets a number and the
// label goes in the key under the chart.
func (pp *Pareto) figure() *figure {
	var pts []ParetoPoint
	for _, q := range pp.Points {
		if !math.IsNaN(q.X) && !math.IsNaN(q.Y) && !math.IsInf(q.X, 0) && !math.IsInf(q.Y, 0) {
			pts = append(pts, q)
		}
	}
	if len(pts) == 0 {
		return nil
	}
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, q := range pts {
		x0, x1, y0, y1 = math.Min(x0, q.X), math.Max(x1, q.X), math.Min(y0, q.Y), math.Max(y1, q.Y)
	}
	padX, padY := math.Max((x1-x0)*0.1, math.Abs(x1)*1e-3+1e-9), math.Max((y1-y0)*0.1, math.Abs(y1)*1e-3+1e-9)
	p := newPlot("pareto", wideW, 460, axis{label: pp.X.label(), lo: x0 - padX, hi: x1 + padX}, axis{label: pp.Y.label(), lo: y0 - padY, hi: y1 + padY})
	// Where better lies: an arrow in the corner the front bulges towards.
	bx, by := "→", "↑"
	if !pp.X.Maximize {
		bx = "←"
	}
	if !pp.Y.Maximize {
		by = "↓"
	}
	fmt.Fprintf(&p.b, `<text class="note" x="%s" y="%s" fill="#555">better: %s %s</text>`, f2(p.l+8), f2(p.t+14), bx, by)
	// The front, joined in x order.
	var front []ParetoPoint
	for _, q := range pts {
		if q.Front {
			front = append(front, q)
		}
	}
	sort.SliceStable(front, func(i, j int) bool { return front[i].X < front[j].X })
	if len(front) > 1 {
		var xs, ys []float64
		for _, q := range front {
			xs, ys = append(xs, q.X), append(ys, q.Y)
		}
		p.line(xs, ys, colorAt(1), "series", "Pareto front", false)
	}
	// Points: front first so their labels get the best places.
	order := make([]int, len(pts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if pts[order[a]].Rank != pts[order[b]].Rank {
			return pts[order[a]].Rank < pts[order[b]].Rank
		}
		return pts[order[a]].Label < pts[order[b]].Label
	})
	type box struct{ x0, y0, x1, y1 float64 }
	var taken []box
	for _, q := range pts {
		x, y := p.px(q.X), p.py(q.Y)
		taken = append(taken, box{x - 6, y - 6, x + 6, y + 6})
	}
	overlaps := func(b box) bool {
		if b.x0 < p.l+2 || b.x1 > p.w-p.r-2 || b.y0 < p.t+2 || b.y1 > p.h-p.u-2 {
			return true
		}
		for _, t := range taken {
			if b.x0 < t.x1 && t.x0 < b.x1 && b.y0 < t.y1 && t.y0 < b.y1 {
				return true
			}
		}
		return false
	}
	var key []string
	for _, i := range order {
		q := pts[i]
		color := colorAt(0)
		if q.Front {
			color = colorAt(1)
		}
		title := fmt.Sprintf("%s: rank %d, %s %s, %s %s, primary %s", q.Label, q.Rank, pp.X.Metric, fmtVal(q.X), pp.Y.Metric, fmtVal(q.Y), fmtVal(q.Primary))
		if !q.Feasible {
			title += "; infeasible: " + strings.Join(q.Violations, "; ")
		}
		x, y := p.px(q.X), p.py(q.Y)
		fill, stroke := color, "#222"
		if !q.Feasible {
			fill, stroke = "#fff", color
		}
		fmt.Fprintf(&p.b, `<circle class="d mark" cx="%s" cy="%s" r="5.5" fill="%s" stroke="%s" stroke-width="1.5"><title>%s</title></circle>`,
			f2(x), f2(y), fill, stroke, html.EscapeString(title))
		label := truncate(q.Label, 40)
		if r := []rune(q.Label); len(r) > 40 && strings.Contains(q.Label, "/") {
			label = "…" + string(r[len(r)-39:]) // a path: its end names the run
		}
		wpx := float64(len([]rune(label)))*charW + 4
		placed := false
		for _, c := range []struct{ dx, dy float64 }{{9, 4}, {-9 - wpx, 4}, {-wpx / 2, -10}, {-wpx / 2, 18}, {9, -9}, {9, 16}, {-9 - wpx, -9}, {-9 - wpx, 16}} {
			b := box{x + c.dx, y + c.dy - 10, x + c.dx + wpx, y + c.dy + 3}
			if overlaps(b) {
				continue
			}
			taken = append(taken, b)
			fmt.Fprintf(&p.b, `<text class="lbl" x="%s" y="%s">%s</text>`, f2(b.x0+2), f2(y+c.dy), html.EscapeString(label))
			placed = true
			break
		}
		if !placed {
			n := len(key) + 1
			key = append(key, fmt.Sprintf("%d = %s", n, q.Label))
			s := fmt.Sprint(n)
			nw := float64(len(s))*charW + 2
			bx, by := x-nw/2, y-8 // above, when no place is free
			for _, c := range []struct{ dx, dy float64 }{{8, 4}, {-8 - nw, 4}, {-nw / 2, -9}, {-nw / 2, 17}, {7, -7}, {7, 14}, {-7 - nw, -7}, {-7 - nw, 14}} {
				b := box{x + c.dx, y + c.dy - 10, x + c.dx + nw, y + c.dy + 2}
				if !overlaps(b) {
					bx, by = b.x0, y+c.dy
					taken = append(taken, b)
					break
				}
			}
			fmt.Fprintf(&p.b, `<text class="lbl" x="%s" y="%s"><tspan font-weight="600">%s</tspan></text>`, f2(bx+1), f2(by), s)
		}
	}
	extra := ""
	if len(key) > 0 {
		extra = "<p class=\"note\">Points numbered where their names did not fit: " + html.EscapeString(strings.Join(key, "; ")) + ".</p>"
	}
	return &figure{id: "pareto", title: "Runs on the two objectives, the Pareto front joined", wide: true, svg: p.end(), extra: extra,
		legend: []legendItem{{name: "on the Pareto front", color: colorAt(1), kind: "dot"}, {name: "dominated", color: colorAt(0), kind: "dot"},
			{name: "infeasible (a constraint missed)", color: colorAt(0), kind: "hollow"}},
		caption: "Runs on the joined front are the ones worth keeping: moving along it trades one objective for the other; every other run is matched or beaten on both by a run on it."}
}
