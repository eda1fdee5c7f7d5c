package fitness

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Ranking is blis-report --fitness's output: the spec and each run's
// fitness, best first.
type Ranking struct {
	Spec  string   `json:"spec"`
	Front []string `json:"front"`
	Runs  []Result `json:"runs"`
}

// NewRanking orders rs best first.
func NewRanking(spec string, rs []Result) *Ranking {
	rk := &Ranking{Spec: spec, Front: []string{}}
	for _, i := range Order(rs) {
		rk.Runs = append(rk.Runs, rs[i])
		if rs[i].Front {
			rk.Front = append(rk.Front, rs[i].Run)
		}
	}
	return rk
}

func fmtF(v Float) string {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	return strconv.FormatFloat(f, 'f', 4, 64)
}

// WriteJSON writes the ranking as one JSON object.
func (rk *Ranking) WriteJSON(w io.Writer) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(rk)
}

// WriteText writes the ranking as an aligned table (markdown: a Markdown
// table).
func (rk *Ranking) WriteText(w io.Writer, markdown bool) error {
	cols := []string{"rank", "run", "feasible", "primary"}
	if len(rk.Runs) > 0 {
		for _, o := range rk.Runs[0].Objectives {
			cols = append(cols, o.Metric)
		}
		for _, c := range rk.Runs[0].Checks {
			cols = append(cols, c.Constraint)
		}
	}
	var rows [][]string
	for _, r := range rk.Runs {
		row := []string{strconv.Itoa(r.Rank), r.Run, map[bool]string{true: "yes", false: "no"}[r.Feasible], fmtF(r.Primary)}
		if r.Front {
			row[0] += " (front)"
		}
		for _, o := range r.Objectives {
			row = append(row, fmtF(o.Value))
		}
		for _, c := range r.Checks {
			mark := "✓"
			if !c.Holds {
				mark = "✗"
			}
			row = append(row, mark+" "+fmtF(c.Value))
		}
		rows = append(rows, row)
	}
	if markdown {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(cols, "\t"))
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "\nprimary = weighted mean of the objectives normalised as ±value/scale (higher is better); Pareto front: %s\n", strings.Join(rk.Front, ", "))
	return nil
}

// WriteHTML writes a self-contained page: the table and a scatter of the
// runs on the first two objectives (normalised, higher is better), the
// Pareto front joined, infeasible runs hollow.
func (rk *Ranking) WriteHTML(w io.Writer) error {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><meta charset=\"utf-8\"><title>Pareto ranking</title>" +
		"<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}</style></head><body>\n")
	fmt.Fprintf(&b, "<h1>Pareto ranking: %s</h1>\n", html.EscapeString(rk.Spec))
	if len(rk.Runs) > 0 && len(rk.Runs[0].Objectives) >= 1 {
		b.WriteString(rk.scatter())
	}
	var t strings.Builder
	rk.WriteText(&t, true)
	b.WriteString("<table>\n")
	for i, line := range strings.Split(strings.TrimSpace(strings.SplitN(t.String(), "\n\n", 2)[0]), "\n") {
		if i == 1 {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		tag := "td"
		if i == 0 {
			tag = "th"
		}
		b.WriteString("<tr>")
		for _, c := range cells {
			fmt.Fprintf(&b, "<%s>%s</%s>", tag, html.EscapeString(c), tag)
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</table>\n<p>primary = weighted mean of the objectives normalised as ±value/scale (higher is better).</p></body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (rk *Ranking) scatter() string {
	const W, H, pad = 560.0, 400.0, 50.0
	xi, yi := 0, 0
	if len(rk.Runs[0].Objectives) > 1 {
		yi = 1
	}
	x0, x1, y0, y1 := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, r := range rk.Runs {
		x, y := float64(r.Objectives[xi].Normalised), float64(r.Objectives[yi].Normalised)
		if math.IsNaN(x) || math.IsNaN(y) {
			continue
		}
		x0, x1, y0, y1 = math.Min(x0, x), math.Max(x1, x), math.Min(y0, y), math.Max(y1, y)
	}
	if math.IsInf(x0, 0) {
		return ""
	}
	if x1 == x0 {
		x0, x1 = x0-1, x1+1
	}
	if y1 == y0 {
		y0, y1 = y0-1, y1+1
	}
	px := func(v float64) float64 { return pad + (v-x0)/(x1-x0)*(W-2*pad) }
	py := func(v float64) float64 { return H - pad - (v-y0)/(y1-y0)*(H-2*pad) }
	var b strings.Builder
	fmt.Fprintf(&b, "<svg width=\"%g\" height=\"%g\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\">\n", W, H)
	fmt.Fprintf(&b, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"#999\"/>\n", pad, pad, W-2*pad, H-2*pad)
	xl := html.EscapeString(rk.Runs[0].Objectives[xi].Direction + " " + rk.Runs[0].Objectives[xi].Metric)
	yl := html.EscapeString(rk.Runs[0].Objectives[yi].Direction + " " + rk.Runs[0].Objectives[yi].Metric)
	fmt.Fprintf(&b, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s (normalised, → better) [%.3g, %.3g]</text>\n", W/2, H-pad/3, xl, x0, x1)
	fmt.Fprintf(&b, "<text x=\"14\" y=\"%g\" transform=\"rotate(-90 14 %g)\" text-anchor=\"middle\">%s (↑ better) [%.3g, %.3g]</text>\n", H/2, H/2, yl, y0, y1)
	// The front, joined in x order.
	var pts []string
	for _, r := range rk.Runs {
		if r.Front {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(float64(r.Objectives[xi].Normalised)), py(float64(r.Objectives[yi].Normalised))))
		}
	}
	if len(pts) > 1 {
		sortPts(pts)
		fmt.Fprintf(&b, "<polyline points=\"%s\" fill=\"none\" stroke=\"#c33\"/>\n", strings.Join(pts, " "))
	}
	for _, r := range rk.Runs {
		x, y := float64(r.Objectives[xi].Normalised), float64(r.Objectives[yi].Normalised)
		if math.IsNaN(x) || math.IsNaN(y) {
			continue
		}
		fill := "#36c"
		if r.Front {
			fill = "#c33"
		}
		if !r.Feasible {
			fill = "none"
		}
		fmt.Fprintf(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\" stroke=\"#333\"><title>%s rank %d primary %s</title></circle>\n",
			px(x), py(y), fill, html.EscapeString(r.Run), r.Rank, fmtF(r.Primary))
		fmt.Fprintf(&b, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", px(x)+7, py(y)-7, html.EscapeString(r.Run))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func sortPts(p []string) {
	x := func(s string) float64 { v, _ := strconv.ParseFloat(strings.SplitN(s, ",", 2)[0], 64); return v }
	for i := 1; i < len(p); i++ {
		for j := i; j > 0 && x(p[j]) < x(p[j-1]); j-- {
			p[j], p[j-1] = p[j-1], p[j]
		}
	}
}
