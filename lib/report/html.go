package report

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// cdfPoints is how many quantiles a CDF line is drawn from: enough for a
// smooth curve, few enough that a 10M-row report stays small.
const cdfPoints = 200

// chartBins is the most time bins a time-series chart draws.
const chartBins = 120

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

type line struct {
	name   string
	xs, ys []float64
}

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// niceStep picks a 1-2-5 tick step for a range split in about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fmtTick(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

const (
	cw, ch           = 560, 300
	padL, padR, padT = 62, 16, 34
	padB             = 46
)

// svgFrame writes the chart frame (title, axes, ticks) and returns the data→pixel maps.
func svgFrame(b *strings.Builder, id, title, xlabel, ylabel string, x0, x1, y0, y1 float64, xticks bool) (func(float64) float64, func(float64) float64) {
	if !(x1 > x0) {
		x1 = x0 + 1
	}
	if !(y1 > y0) {
		y1 = y0 + 1
	}
	pw, ph := float64(cw-padL-padR), float64(ch-padT-padB)
	px := func(x float64) float64 { return padL + (x-x0)/(x1-x0)*pw }
	py := func(y float64) float64 { return padT + ph - (y-y0)/(y1-y0)*ph }
	fmt.Fprintf(b, `<svg class="chart" id="%s" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`,
		id, cw, ch, cw, ch, html.EscapeString(title))
	fmt.Fprintf(b, `<text x="%d" y="16" class="title">%s</text>`, padL, html.EscapeString(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%s" height="%s" class="plot"/>`, padL, padT, f3(pw), f3(ph))
	sx := niceStep(x1-x0, 6)
	for v := math.Ceil(x0/sx) * sx; xticks && v <= x1+sx*1e-9; v += sx {
		x := px(v)
		fmt.Fprintf(b, `<line x1="%s" y1="%d" x2="%s" y2="%s" class="grid"/><text x="%s" y="%s" class="tick" text-anchor="middle">%s</text>`,
			f3(x), padT, f3(x), f3(padT+ph), f3(x), f3(padT+ph+16), fmtTick(v))
	}
	sy := niceStep(y1-y0, 5)
	for v := math.Ceil(y0/sy) * sy; v <= y1+sy*1e-9; v += sy {
		y := py(v)
		fmt.Fprintf(b, `<line x1="%d" y1="%s" x2="%s" y2="%s" class="grid"/><text x="%d" y="%s" class="tick" text-anchor="end">%s</text>`,
			padL, f3(y), f3(padL+pw), f3(y), padL-6, f3(y+4), fmtTick(v))
	}
	fmt.Fprintf(b, `<text x="%s" y="%d" class="axis" text-anchor="middle">%s</text>`, f3(padL+pw/2), ch-8, html.EscapeString(xlabel))
	fmt.Fprintf(b, `<text transform="translate(14,%s) rotate(-90)" class="axis" text-anchor="middle">%s</text>`, f3(padT+ph/2), html.EscapeString(ylabel))
	return px, py
}

func legend(b *strings.Builder, lines []line) {
	if len(lines) < 2 {
		return
	}
	// Above the plot, right-aligned, one entry after another.
	x := cw - padR
	for i := len(lines) - 1; i >= 0; i-- {
		name := lines[i].name
		if len(name) > 24 {
			name = name[:23] + "…"
		}
		x -= 7*len([]rune(name)) + 22
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d" class="legend">%s</text>`,
			x, padT-9, palette[i%len(palette)], x+16, padT-5, html.EscapeString(name))
	}
}

func lineChart(id, title, xlabel, ylabel string, lines []line, xmax float64, step bool) string {
	var b strings.Builder
	x0, x1, y1 := math.Inf(1), math.Inf(-1), 0.0
	for _, l := range lines {
		for i := range l.xs {
			x0, x1, y1 = math.Min(x0, l.xs[i]), math.Max(x1, l.xs[i]), math.Max(y1, l.ys[i])
		}
	}
	if x0 > 0 {
		x0 = 0
	}
	if xmax > 0 && xmax < x1 {
		x1 = xmax
	}
	if math.IsInf(x0, 0) {
		x0, x1 = 0, 1
	}
	px, py := svgFrame(&b, id, title, xlabel, ylabel, x0, x1, 0, y1*1.05, true)
	fmt.Fprintf(&b, `<clipPath id="%s-clip"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>`, id, padL, padT, cw-padL-padR, ch-padT-padB)
	for i, l := range lines {
		var d strings.Builder
		for j := range l.xs {
			cmd := "L"
			if j == 0 {
				cmd = "M"
			} else if step {
				fmt.Fprintf(&d, "H%s", f3(px(l.xs[j])))
			}
			fmt.Fprintf(&d, "%s%s %s", cmd, f3(px(l.xs[j])), f3(py(l.ys[j])))
		}
		fmt.Fprintf(&b, `<path class="series" clip-path="url(#%s-clip)" d="%s" stroke="%s"><title>%s</title></path>`,
			id, d.String(), palette[i%len(palette)], html.EscapeString(l.name))
	}
	legend(&b, lines)
	b.WriteString("</svg>")
	return b.String()
}

func barChart(id, title, xlabel, ylabel string, names []string, vals []float64) string {
	var b strings.Builder
	y1 := 0.0
	for _, v := range vals {
		if !math.IsNaN(v) {
			y1 = math.Max(y1, v)
		}
	}
	_, py := svgFrame(&b, id, title, xlabel, ylabel, 0, 0, 0, y1*1.1, false)
	pw := float64(cw - padL - padR)
	n := float64(len(vals))
	bw := pw / math.Max(n, 1)
	for i, v := range vals {
		if math.IsNaN(v) {
			v = 0
		}
		x := padL + bw*float64(i) + bw*0.15
		fmt.Fprintf(&b, `<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s: %s</title></rect>`,
			f3(x), f3(py(v)), f3(bw*0.7), f3(py(0)-py(v)), palette[0], html.EscapeString(names[i]), fmtTick(v))
		if len(vals) <= 32 {
			fmt.Fprintf(&b, `<text x="%s" y="%d" class="tick" text-anchor="middle">%s</text>`, f3(x+bw*0.35), ch-padB+30, html.EscapeString(names[i]))
		}
	}
	b.WriteString("</svg>")
	return b.String()
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

const css = `body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{background:#fff;border:1px solid #e4e4e4}
.plot{fill:#fafafa;stroke:#bbb}.grid{stroke:#e8e8e8}.tick{font-size:11px;fill:#555}.axis{font-size:12px;fill:#333}
.title{font-size:14px;font-weight:600;fill:#222}.legend{font-size:11px;fill:#333}
.series{fill:none;stroke-width:1.8}
table{border-collapse:collapse;margin:8px 0 4px;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
p.note{color:#666;font-size:12px;margin:2px 0}`

// The script only checks the page: it records script errors and marks how
// many charts hold drawn data, which the browser test reads back.
const js = `window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message));document.body.setAttribute('data-errors',window.__errors.length)});
document.addEventListener('DOMContentLoaded',function(){var n=0;document.querySelectorAll('svg.chart').forEach(function(s){if(s.querySelector('path.series[d^="M"],rect.bar'))n++;});
document.body.setAttribute('data-charts',String(n));document.body.setAttribute('data-rendered','ok');});`

// WriteHTML writes one self-contained page: inline CSS, SVG and script, no fetches.
func (rep *Report) WriteHTML(w io.Writer) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>blis-report</title>\n<style>")
	b.WriteString(css)
	b.WriteString("</style>\n<script>")
	b.WriteString(js)
	b.WriteString("</script></head>\n<body data-errors=\"0\">\n<h1>blis-report</h1>\n<ul>")
	for _, in := range rep.Inputs {
		// The label is the file's base name unless two inputs share one:
		// then it is run1, run2, ... and worth showing.
		if in.Label == filepath.Base(in.Path) || in.Path == "<stdin>" && in.Label == "stdin" {
			fmt.Fprintf(&b, "<li>input <b>%s</b>: %d rows</li>", html.EscapeString(in.Path), in.Rows)
		} else {
			fmt.Fprintf(&b, "<li>input <b>%s</b> (%s): %d rows</li>", html.EscapeString(in.Path), html.EscapeString(in.Label), in.Rows)
		}
	}
	if rep.steps != nil {
		fmt.Fprintf(&b, "<li>steps: %s, %d rows</li>", html.EscapeString(rep.steps.path), rep.steps.rows)
	}
	if rep.scale != nil {
		fmt.Fprintf(&b, "<li>scale events: %s, %d rows</li>", html.EscapeString(rep.scale.path), rep.scale.rows)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "<li>note: %s</li>", html.EscapeString(n))
	}
	b.WriteString("</ul>\n")
	for _, t := range rep.Tables {
		if t.Header {
			htmlTable(&b, t)
		}
	}
	b.WriteString("<h2>Latency distributions</h2>\n<div class=\"charts\">\n")
	for _, m := range []int{mTTFT, mTPOT, mE2E, mArrival} {
		var lines []line
		xmax := 0.0
		for i, r := range rep.runs {
			l := cdfLine(rep.Inputs[i].Label, r.all.d[m])
			if len(l.xs) == 0 {
				continue
			}
			lines = append(lines, l)
			xmax = math.Max(xmax, r.all.d[m].Quantile(0.99)/1000)
		}
		title := "CDF of " + metricNames[m] + " (completed llm requests)"
		b.WriteString(lineChart("cdf-"+metricNames[m], title, metricNames[m]+" (ms), axis ends at the largest p99", "fraction of requests", lines, xmax, true))
		b.WriteString("\n")
	}
	b.WriteString("</div>\n<h2>Over time</h2>\n<div class=\"charts\">\n")
	var reqs, toks []line
	for i, r := range rep.runs {
		reqs = append(reqs, seriesLine(rep.Inputs[i].Label, r.done, 1e6, r.end))
		toks = append(toks, seriesLine(rep.Inputs[i].Label, r.toks, 1e6, r.end))
	}
	b.WriteString(lineChart("throughput-req", "Completed requests per second", "simulated time (s)", "requests/s", reqs, 0, false))
	b.WriteString(lineChart("throughput-tok", "Output tokens per second (completed requests)", "simulated time (s)", "tokens/s", toks, 0, false))
	if sc := rep.scale; sc != nil {
		// Replicas against load: the replica steps beside the arrival rate.
		b.WriteString(lineChart("replicas", "Replicas (billed, and ready to serve)", "simulated time (s)", "replicas", sc.lines(), 0, true))
		var arr []line
		for i, r := range rep.runs {
			arr = append(arr, seriesLine(rep.Inputs[i].Label, r.arr, 1e6, r.end))
		}
		b.WriteString(lineChart("load", "Load: arriving llm requests per second", "simulated time (s)", "requests/s", arr, 0, false))
	}
	if st := rep.steps; st != nil {
		b.WriteString(lineChart("queue-depth", "Queue depth (time-averaged, all instances)", "simulated time (s)", "requests",
			[]line{seriesLine("waiting", st.waiting, 1, st.end), seriesLine("running", st.running, 1, st.end)}, 0, false))
		kv := line{name: "kv used"}
		cu, ct := st.kvU.coarsen(chartBins), st.kvT.coarsen(chartBins)
		u, t := cu.rebin(ct.width), ct.rebin(cu.width)
		wd := max(cu.width, ct.width)
		for i := 0; i < len(u) && i < len(t); i++ {
			if t[i] > 0 {
				kv.xs = append(kv.xs, (float64(i)+0.5)*float64(wd)/1e6)
				kv.ys = append(kv.ys, u[i]/t[i]*100)
			}
		}
		b.WriteString(lineChart("kv-usage", "KV cache blocks in use (% of total, while busy)", "simulated time (s)", "%", []line{kv}, 0, false))
	}
	b.WriteString("\n</div>\n<h2>Per-instance load</h2>\n<div class=\"charts\">\n")
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
	b.WriteString(barChart("instance-completed", "Completed requests per instance ("+rep.Inputs[0].Label+")", "instance", "requests", names, done))
	if rep.steps != nil {
		b.WriteString(barChart("instance-busy", "Busy time per instance (% of span)", "instance", "%", names, busy))
	}
	b.WriteString("\n</div>\n")
	for _, t := range rep.Tables {
		if !t.Header {
			htmlTable(&b, t)
		}
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func htmlTable(b *strings.Builder, t *Table) {
	fmt.Fprintf(b, "<h2>%s</h2>\n", html.EscapeString(t.Title))
	if t.Note != "" {
		fmt.Fprintf(b, "<p class=\"note\">%s</p>\n", html.EscapeString(t.Note))
	}
	b.WriteString("<table><thead><tr>")
	for _, c := range t.Columns {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(c))
	}
	b.WriteString("</tr></thead><tbody>\n")
	for _, row := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range row {
			if c.IsNum {
				fmt.Fprintf(b, "<td class=\"n\">%s</td>", c.String())
			} else {
				fmt.Fprintf(b, "<td>%s</td>", html.EscapeString(c.String()))
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table>\n")
}
