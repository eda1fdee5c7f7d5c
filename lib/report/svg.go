package report

// The drawing kit of the HTML pages: one plot is an inline SVG with its
// axes, grid and a clipped data layer; titles, legends and captions are
// HTML around it (page.go), so they wrap instead of overflowing. Written
// by hand rather than with gonum/plot: these pages want a hover title on
// every mark, CSS classes a test can count, text the browser lays out in
// the page's own font, and a heat map that is one image instead of one
// polygon per cell.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"strconv"
	"strings"
)

// palette is Okabe and Ito's colour-blind-safe set (blue, vermillion,
// bluish green, orange, sky blue, reddish purple, black; yellow, the
// faintest on white, last).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#E69F00", "#56B4E9", "#CC79A7", "#000000", "#F0E442"}

func colorAt(i int) string { return palette[i%len(palette)] }

// Chart sizes: two narrow charts side by side, or one wide, fit a
// 1,280-pixel window with the page's margins.
const (
	narrowW, narrowH = 580, 320
	wideW            = 1172
)

// axis is one axis of a plot: a numeric range, or categories at 0..n-1.
type axis struct {
	label   string // with its unit
	lo, hi  float64
	integer bool     // ticks at whole numbers only
	cats    []string // categorical
	log     bool     // base-10 log scale (lo, hi > 0)
	rev     bool     // lo at the top (a y axis of rows)
}

func (a *axis) fix() {
	if a.cats != nil {
		a.lo, a.hi = -0.5, float64(len(a.cats))-0.5
		return
	}
	if math.IsNaN(a.lo) || math.IsInf(a.lo, 0) {
		a.lo = 0
	}
	if math.IsNaN(a.hi) || math.IsInf(a.hi, 0) || a.hi <= a.lo {
		a.hi = a.lo + 1
	}
	if a.log && (a.lo <= 0 || a.hi <= a.lo) {
		a.log = false
	}
}

// ticks returns tick positions: about n on a 1-2-5 step, whole numbers on an
// integer axis, powers of ten on a log axis.
func (a *axis) ticks(n int) []float64 {
	if a.cats != nil {
		out := make([]float64, len(a.cats))
		for i := range out {
			out[i] = float64(i)
		}
		return out
	}
	if a.log {
		var out []float64
		for e := math.Floor(math.Log10(a.lo)); e <= math.Ceil(math.Log10(a.hi)); e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if v >= a.lo*(1-1e-9) && v <= a.hi*(1+1e-9) {
					out = append(out, v)
				}
			}
		}
		return out
	}
	step := niceStep(a.hi-a.lo, n)
	if a.integer && step < 1 {
		step = 1
	}
	var out []float64
	for k := math.Ceil(a.lo/step - 1e-9); ; k++ {
		v := k * step
		if v > a.hi+step*1e-9 {
			break
		}
		out = append(out, v)
	}
	return out
}

// tickLabel formats a tick with as many decimals as its step needs.
func (a *axis) tickLabel(v float64, ticks []float64) string {
	if a.cats != nil {
		return a.cats[int(v)]
	}
	step := 1.0
	if len(ticks) > 1 {
		step = ticks[1] - ticks[0]
	}
	if a.log {
		step = v
	}
	return fmtNum(v, step)
}

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

// fmtNum formats v for a reader: k and M for large values, and only the
// decimals that a resolution of step shows.
func fmtNum(v, step float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e6 && step >= 1e5:
		return trimZeros(strconv.FormatFloat(v/1e6, 'f', decimals(step/1e6), 64)) + "M"
	case a >= 1e4 && step >= 1e3:
		return trimZeros(strconv.FormatFloat(v/1e3, 'f', decimals(step/1e3), 64)) + "k"
	}
	return fixed(v, decimals(step))
}

func decimals(step float64) int {
	if step <= 0 || math.IsNaN(step) || math.IsInf(step, 0) {
		return 3
	}
	d := int(math.Ceil(-math.Log10(step) - 1e-9))
	return min(max(d, 0), 6)
}

func trimZeros(s string) string {
	suffix := ""
	if n := len(s); n > 0 && (s[n-1] == 'k' || s[n-1] == 'M') {
		s, suffix = s[:n-1], s[n-1:]
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + suffix
}

// fmtVal formats a data value (a hover title, an annotation) with three
// significant digits.
func fmtVal(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	a := math.Abs(v)
	if a == 0 {
		return "0"
	}
	step := math.Pow(10, math.Floor(math.Log10(a))-2)
	return trimZeros(fmtNum(v, step))
}

// fmtMS formats a duration given in ms with its unit.
func fmtMS(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 10000:
		return fmtVal(v/1000) + " s"
	}
	return fmtVal(v) + " ms"
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// plot is one chart being drawn.
type plot struct {
	b          strings.Builder
	id         string
	w, h       float64
	l, r, t, u float64 // margins: left, right, top, bottom
	x, y       axis
	xt, yt     []float64
}

const charW = 6.4 // a conservative width per character of the 11 px tick font

// newPlot writes the frame: the plot area, grid, ticks and axis labels.
// Drawing calls that follow are clipped to the plot area until end.
func newPlot(id string, w, h float64, x, y axis) *plot { return newPlotL(id, w, h, x, y, 0) }

// newPlotL is newPlot with the left margin given (> 0), so that panels
// stacked in one figure share their x positions.
func newPlotL(id string, w, h float64, x, y axis, left float64) *plot {
	x.fix()
	y.fix()
	p := &plot{id: id, w: w, h: h, x: x, y: y, r: 14, t: 10, u: 42}
	p.yt = y.ticks(max(3, int(h/60)))
	p.xt = x.ticks(max(3, int(w/95)))
	widest := 0
	for _, v := range p.yt {
		widest = max(widest, len([]rune(y.tickLabel(v, p.yt))))
	}
	p.l = 26 + float64(widest)*charW
	if left > 0 {
		p.l = left
	}
	if len(x.cats) > 0 {
		// Category labels that do not fit side by side are rotated.
		room := (w - p.l - p.r) / float64(len(x.cats))
		longest := 0
		for _, c := range x.cats {
			longest = max(longest, len([]rune(c)))
		}
		if float64(longest)*charW > room {
			p.u = 30 + math.Min(float64(longest)*charW*0.72, 120)
		}
	}
	fmt.Fprintf(&p.b, `<svg class="chart" id="%s" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %s %s" width="%s" height="%s" role="img">`,
		id, f2(w), f2(h), f2(w), f2(h))
	pw, ph := w-p.l-p.r, h-p.t-p.u
	fmt.Fprintf(&p.b, `<defs><clipPath id="%s-c"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath></defs>`, id, f2(p.l), f2(p.t), f2(pw), f2(ph))
	fmt.Fprintf(&p.b, `<rect x="%s" y="%s" width="%s" height="%s" class="plot"/>`, f2(p.l), f2(p.t), f2(pw), f2(ph))
	for _, v := range p.yt {
		yy := p.py(v)
		fmt.Fprintf(&p.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" class="grid"/><text x="%s" y="%s" class="tick" text-anchor="end">%s</text>`,
			f2(p.l), f2(yy), f2(p.l+pw), f2(yy), f2(p.l-5), f2(yy+4), html.EscapeString(y.tickLabel(v, p.yt)))
	}
	rot := len(x.cats) > 0 && p.u > 42
	for _, v := range p.xt {
		xx := p.px(v)
		fmt.Fprintf(&p.b, `<line x1="%s" y1="%s" x2="%s" y2="%s" class="grid"/>`, f2(xx), f2(p.t), f2(xx), f2(p.t+ph))
		lab := html.EscapeString(x.tickLabel(v, p.xt))
		if rot {
			fmt.Fprintf(&p.b, `<text transform="translate(%s,%s) rotate(-40)" class="tick" text-anchor="end">%s</text>`, f2(xx+3), f2(p.t+ph+12), lab)
		} else {
			fmt.Fprintf(&p.b, `<text x="%s" y="%s" class="tick" text-anchor="middle">%s</text>`, f2(xx), f2(p.t+ph+15), lab)
		}
	}
	fmt.Fprintf(&p.b, `<text x="%s" y="%s" class="axis" text-anchor="middle">%s</text>`, f2(p.l+pw/2), f2(h-7), html.EscapeString(x.label))
	// A y label longer than a short plot is cut rather than drawn outside it.
	ylab := truncate(y.label, max(int(ph/7.4), 6))
	fmt.Fprintf(&p.b, `<text transform="translate(13,%s) rotate(-90)" class="axis" text-anchor="middle">%s</text>`, f2(p.t+ph/2), html.EscapeString(ylab))
	fmt.Fprintf(&p.b, `<g clip-path="url(#%s-c)">`, id)
	return p
}

func scale(a *axis, v, lo, hi float64) float64 {
	if a.log {
		if v <= 0 {
			return lo
		}
		return lo + (math.Log10(v)-math.Log10(a.lo))/(math.Log10(a.hi)-math.Log10(a.lo))*(hi-lo)
	}
	return lo + (v-a.lo)/(a.hi-a.lo)*(hi-lo)
}

func (p *plot) px(x float64) float64 { return scale(&p.x, x, p.l, p.w-p.r) }
func (p *plot) py(y float64) float64 {
	if p.y.rev {
		return scale(&p.y, y, p.t, p.h-p.u)
	}
	return scale(&p.y, y, p.h-p.u, p.t)
}

// clampY keeps a pixel y a little outside the plot at most, so a clipped
// mark's path stays short.
func (p *plot) clampY(y float64) float64 { return math.Min(math.Max(y, p.t-20), p.h-p.u+20) }
func (p *plot) clampX(x float64) float64 { return math.Min(math.Max(x, p.l-20), p.w-p.r+20) }

// path appends a data path; step draws horizontal then vertical moves.
func (p *plot) line(xs, ys []float64, color, class, title string, step bool) {
	var d strings.Builder
	n := 0
	for j := range xs {
		if math.IsNaN(ys[j]) || math.IsNaN(xs[j]) {
			continue
		}
		x, y := p.clampX(p.px(xs[j])), p.clampY(p.py(ys[j]))
		switch {
		case n == 0:
			fmt.Fprintf(&d, "M%s %s", f2(x), f2(y))
		case step:
			fmt.Fprintf(&d, "H%sV%s", f2(x), f2(y))
		default:
			fmt.Fprintf(&d, "L%s %s", f2(x), f2(y))
		}
		n++
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<path class="d %s" d="%s" stroke="%s"><title>%s</title></path>`, class, d.String(), color, html.EscapeString(title))
}

// band fills between lo and hi over xs.
func (p *plot) band(xs, lo, hi []float64, color, title string) {
	var d strings.Builder
	n := 0
	for j := range xs {
		if math.IsNaN(lo[j]) || math.IsNaN(hi[j]) {
			continue
		}
		c := "L"
		if n == 0 {
			c = "M"
		}
		fmt.Fprintf(&d, "%s%s %s", c, f2(p.px(xs[j])), f2(p.clampY(p.py(hi[j]))))
		n++
	}
	for j := len(xs) - 1; j >= 0; j-- {
		if math.IsNaN(lo[j]) || math.IsNaN(hi[j]) {
			continue
		}
		fmt.Fprintf(&d, "L%s %s", f2(p.px(xs[j])), f2(p.clampY(p.py(lo[j]))))
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<path class="d band" d="%sZ" fill="%s"><title>%s</title></path>`, d.String(), color, html.EscapeString(title))
}

// dot draws one marker with a hover title; hollow draws its outline only.
func (p *plot) dot(x, y, r float64, color, title string, hollow bool) {
	if math.IsNaN(x) || math.IsNaN(y) {
		return
	}
	fill, stroke := color, "none"
	if hollow {
		fill, stroke = "#fff", color
	}
	fmt.Fprintf(&p.b, `<circle class="d mark" cx="%s" cy="%s" r="%s" fill="%s" stroke="%s"><title>%s</title></circle>`,
		f2(p.px(x)), f2(p.py(y)), f2(r), fill, stroke, html.EscapeString(title))
}

// dots draws many unlabelled points as one path of round zero-length
// strokes: a few bytes a point, one element for the browser.
func (p *plot) dots(xs, ys []float64, r float64, color, title string) {
	var d strings.Builder
	for i := range xs {
		if math.IsNaN(xs[i]) || math.IsNaN(ys[i]) {
			continue
		}
		fmt.Fprintf(&d, "M%s %sh0", f2(p.px(xs[i])), f2(p.py(ys[i])))
	}
	if d.Len() == 0 {
		return
	}
	fmt.Fprintf(&p.b, `<path class="d" d="%s" stroke="%s" stroke-width="%s" stroke-linecap="round" fill="none"><title>%s</title></path>`,
		d.String(), color, f2(2*r), html.EscapeString(title))
}

// errbar draws a vertical interval at x; an end beyond the plot gets an
// arrowhead at the edge instead of a cap, so a clipped interval says so.
func (p *plot) errbar(x, lo, hi float64, color string) {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return
	}
	xx := p.px(x)
	top, bot := p.py(hi), p.py(lo)
	ptop, pbot := p.t, p.h-p.u
	var d strings.Builder
	fmt.Fprintf(&d, "M%s %sV%s", f2(xx), f2(math.Max(top, ptop)), f2(math.Min(bot, pbot)))
	if top >= ptop {
		fmt.Fprintf(&d, "M%s %sH%s", f2(xx-4), f2(top), f2(xx+4))
	} else {
		fmt.Fprintf(&d, "M%s %sL%s %sL%s %s", f2(xx-4), f2(ptop+6), f2(xx), f2(ptop), f2(xx+4), f2(ptop+6))
	}
	if bot <= pbot {
		fmt.Fprintf(&d, "M%s %sH%s", f2(xx-4), f2(bot), f2(xx+4))
	}
	fmt.Fprintf(&p.b, `<path class="errbar" d="%s" stroke="%s"/>`, d.String(), color)
}

// hline draws a horizontal reference line with a label at its right end.
func (p *plot) hline(y float64, color, label string) {
	if math.IsNaN(y) {
		return
	}
	yy := p.py(y)
	fmt.Fprintf(&p.b, `<line class="ref" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`, f2(p.l), f2(yy), f2(p.w-p.r), f2(yy), color)
	if label != "" {
		ty := yy - 4
		if ty < p.t+12 {
			ty = yy + 13
		}
		fmt.Fprintf(&p.b, `<text class="note" x="%s" y="%s" text-anchor="end" fill="%s">%s</text>`, f2(p.w-p.r-4), f2(ty), color, html.EscapeString(label))
	}
}

// vline draws a vertical reference line with a label at its top.
func (p *plot) vline(x float64, color, label string) {
	if math.IsNaN(x) {
		return
	}
	xx := p.px(x)
	fmt.Fprintf(&p.b, `<line class="ref" x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s"/>`, f2(xx), f2(p.t), f2(xx), f2(p.h-p.u), color)
	if label != "" {
		anchor, tx := "start", xx+4
		if float64(len([]rune(label)))*charW > p.w-p.r-tx {
			anchor, tx = "end", xx-4
		}
		fmt.Fprintf(&p.b, `<text class="note" x="%s" y="%s" text-anchor="%s" fill="%s">%s</text>`, f2(tx), f2(p.t+13), anchor, color, html.EscapeString(label))
	}
}

// rect draws a data rectangle between two corners in data units.
func (p *plot) rect(x0, y0, x1, y1 float64, fill, title string) {
	a, b := p.px(x0), p.px(x1)
	c, d := p.clampY(p.py(y0)), p.clampY(p.py(y1))
	if a > b {
		a, b = b, a
	}
	if c > d {
		c, d = d, c
	}
	fmt.Fprintf(&p.b, `<rect class="d" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`,
		f2(a), f2(c), f2(math.Max(b-a, 0.5)), f2(math.Max(d-c, 0.5)), fill, html.EscapeString(title))
}

// text writes a label at a data position, shifted by dx, dy pixels.
func (p *plot) text(x, y, dx, dy float64, s, anchor, class string) {
	fmt.Fprintf(&p.b, `<text class="%s" x="%s" y="%s" text-anchor="%s">%s</text>`, class, f2(p.px(x)+dx), f2(p.py(y)+dy), anchor, html.EscapeString(s))
}

// rect is a pixel box.
type rect struct{ x0, y0, x1, y1 float64 }

// label writes s beside the point (x, y) where it overlaps none of the
// boxes already taken and stays inside the plot (else at the first place
// tried), and returns the boxes with its own added.
func (p *plot) label(x, y float64, s string, taken []rect) []rect {
	px, py := p.px(x), p.py(y)
	w := float64(len([]rune(s)))*charW + 2
	type place struct {
		dx, dy float64
		end    bool
	}
	places := []place{{11, -8, false}, {11, 15, false}, {-11, -8, true}, {-11, 15, true}, {-w / 2, -14, false}, {-w / 2, 22, false}}
	pick := places[0]
	for _, c := range places {
		x0 := px + c.dx
		if c.end {
			x0 = px + c.dx - w
		}
		b := rect{x0, py + c.dy - 10, x0 + w, py + c.dy + 2}
		free := b.x0 >= p.l && b.x1 <= p.w-p.r && b.y0 >= p.t && b.y1 <= p.h-p.u
		for _, t := range taken {
			free = free && !(b.x0 < t.x1 && t.x0 < b.x1 && b.y0 < t.y1 && t.y0 < b.y1)
		}
		if free {
			pick = c
			break
		}
	}
	x0 := px + pick.dx
	if pick.end {
		x0 -= w
	}
	fmt.Fprintf(&p.b, `<text class="lbl" x="%s" y="%s">%s</text>`, f2(x0+1), f2(py+pick.dy), html.EscapeString(s))
	return append(taken, rect{x0, py + pick.dy - 10, x0 + w, py + pick.dy + 2})
}

// raw appends SVG drawn by the caller in pixel units.
func (p *plot) raw(s string) { p.b.WriteString(s) }

// end closes the data layer and the SVG.
func (p *plot) end() string {
	p.b.WriteString("</g></svg>")
	return p.b.String()
}

// heatImage is a grid of values drawn as one PNG, a pixel per cell,
// stretched over the plot area with crisp edges. NaN cells are light grey.
type heatImage struct {
	rows, cols int
	v          []float64 // row-major
	lo, hi     float64
}

func newHeat(rows, cols int) *heatImage {
	h := &heatImage{rows: rows, cols: cols, v: make([]float64, rows*cols)}
	for i := range h.v {
		h.v[i] = math.NaN()
	}
	return h
}

func (h *heatImage) set(r, c int, v float64) { h.v[r*h.cols+c] = v }

// dataURI encodes the grid as a PNG coloured by viridis over [lo, hi].
func (h *heatImage) dataURI() string {
	img := image.NewNRGBA(image.Rect(0, 0, h.cols, h.rows))
	for r := 0; r < h.rows; r++ {
		for c := 0; c < h.cols; c++ {
			v := h.v[r*h.cols+c]
			if math.IsNaN(v) {
				img.SetNRGBA(c, r, color.NRGBA{0xee, 0xee, 0xee, 0xff})
				continue
			}
			img.SetNRGBA(c, r, viridis((v-h.lo)/(h.hi-h.lo)))
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, img); err != nil {
		panic(err) // an in-memory image always encodes
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// image draws the grid over the plot area between data x0..x1, y0..y1
// (row 0 at y0's side, the top).
func (p *plot) image(h *heatImage, x0, x1, ytop, ybot float64) {
	a, b := p.px(x0), p.px(x1)
	c, d := p.py(ytop), p.py(ybot)
	fmt.Fprintf(&p.b, `<image class="d heat" x="%s" y="%s" width="%s" height="%s" preserveAspectRatio="none" href="%s"/>`,
		f2(a), f2(c), f2(b-a), f2(d-c), h.dataURI())
}

// viridisStops are matplotlib's viridis at 0, 1/8, ..., 1: perceptually
// uniform and readable with every common colour-vision deficiency.
var viridisStops = [9][3]uint8{{68, 1, 84}, {71, 44, 122}, {59, 81, 139}, {44, 113, 142}, {33, 144, 141},
	{39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37}}

func viridis(t float64) color.NRGBA {
	if math.IsNaN(t) {
		t = 0
	}
	t = math.Min(math.Max(t, 0), 1) * 8
	i := min(int(t), 7)
	f := t - float64(i)
	a, b := viridisStops[i], viridisStops[i+1]
	mix := func(x, y uint8) uint8 { return uint8(math.Round(float64(x) + (float64(y)-float64(x))*f)) }
	return color.NRGBA{mix(a[0], b[0]), mix(a[1], b[1]), mix(a[2], b[2]), 0xff}
}

func viridisHex(t float64) string {
	c := viridis(t)
	return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
}

// viridisCSS is a CSS gradient of the scale, for a colour bar.
func viridisCSS() string {
	var s []string
	for i := 0; i <= 8; i++ {
		s = append(s, viridisHex(float64(i)/8))
	}
	return "linear-gradient(to right," + strings.Join(s, ",") + ")"
}

// gridFig draws a small grid of values (rows × columns of categories) as
// coloured cells with their values, and outlines the cells where ok holds.
// NaN cells (not measured) are left light grey.
func gridFig(id, title, caption, xlabel, ylabel string, xcats, ycats []string, g [][]float64, ok func(i, j int) bool, unit string) *figure {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, row := range g {
		for _, v := range row {
			if !math.IsNaN(v) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1
	}
	if unit == "%" {
		lo, hi = math.Min(lo, 0), 100
	}
	if hi <= lo {
		hi = lo + 1
	}
	h := math.Min(math.Max(float64(len(ycats))*34+70, 180), 640)
	p := newPlot(id, wideW, h, axis{label: xlabel, cats: xcats}, axis{label: ylabel, cats: reversed(ycats)})
	ny := len(ycats)
	row := func(i int) float64 { return float64(ny - 1 - i) }
	cellW := (p.w - p.l - p.r) / float64(len(xcats))
	cellH := (p.h - p.t - p.u) / float64(ny)
	for i := range g {
		for j, v := range g[i] {
			x0, y0 := float64(j)-0.5, row(i)-0.5
			if math.IsNaN(v) {
				p.rect(x0, y0, x0+1, y0+1, "#eeeeee", fmt.Sprintf("%s %s, %s %s: not measured", ylabel, ycats[i], xlabel, xcats[j]))
				continue
			}
			tv := (v - lo) / (hi - lo)
			p.rect(x0, y0, x0+1, y0+1, viridisHex(tv), fmt.Sprintf("%s %s, %s %s: %s %s", ylabel, ycats[i], xlabel, xcats[j], fmtVal(v), unit))
			if cellW >= 34 && cellH >= 14 {
				fill := "#fff"
				if tv > 0.6 {
					fill = "#000"
				}
				fmt.Fprintf(&p.b, `<text class="lbl" x="%s" y="%s" text-anchor="middle" style="fill:%s">%s</text>`, f2(p.px(float64(j))), f2(p.py(row(i))+4), fill, fmtVal(v))
			}
		}
	}
	// The outline: every edge between a cell that holds and one that does not
	// (or the border).
	in := func(i, j int) bool {
		return i >= 0 && i < len(g) && j >= 0 && j < len(g[i]) && !math.IsNaN(g[i][j]) && ok(i, j)
	}
	var d strings.Builder
	for i := range g {
		for j := range g[i] {
			if !in(i, j) {
				continue
			}
			xl, xr := p.px(float64(j)-0.5), p.px(float64(j)+0.5)
			yt, yb := p.py(row(i)+0.5), p.py(row(i)-0.5)
			if !in(i-1, j) {
				fmt.Fprintf(&d, "M%s %sH%s", f2(xl), f2(yt), f2(xr))
			}
			if !in(i+1, j) {
				fmt.Fprintf(&d, "M%s %sH%s", f2(xl), f2(yb), f2(xr))
			}
			if !in(i, j-1) {
				fmt.Fprintf(&d, "M%s %sV%s", f2(xl), f2(yt), f2(yb))
			}
			if !in(i, j+1) {
				fmt.Fprintf(&d, "M%s %sV%s", f2(xr), f2(yt), f2(yb))
			}
		}
	}
	if d.Len() > 0 {
		fmt.Fprintf(&p.b, `<path class="outline" d="%s" fill="none" stroke="#D55E00" stroke-width="3" stroke-linecap="square"/>`, d.String())
	}
	return &figure{id: id, title: title, caption: caption, svg: p.end(), wide: true,
		colorbar: &colorbar{lo: fmtVal(lo) + " " + unit, hi: fmtVal(hi) + " " + unit},
		legend:   []legendItem{{name: "meets the target (outlined)", color: "#D55E00", kind: "hollow"}}}
}
