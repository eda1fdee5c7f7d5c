package report

// One self-contained HTML page: inline CSS, inline SVG, a few lines of
// script that only check the page, a table of contents, and figures that
// each carry a title, a legend and a one-line caption saying what to look at.

import (
	"fmt"
	"html"
	"io"
	"strings"
)

type page struct {
	title string
	toc   []tocItem
	body  strings.Builder
	figs  int
}

type tocItem struct {
	id, title string
	sub       bool
}

func newPage(title string) *page { return &page{title: title} }

// section starts a titled part of the page, listed in the contents.
func (p *page) section(id, title string) {
	p.toc = append(p.toc, tocItem{id: id, title: title})
	fmt.Fprintf(&p.body, "<h2 id=\"%s\">%s</h2>\n", id, html.EscapeString(title))
}

// subsection starts a part within a section, listed indented.
func (p *page) subsection(id, title string) {
	p.toc = append(p.toc, tocItem{id: id, title: title, sub: true})
	fmt.Fprintf(&p.body, "<h3 id=\"%s\">%s</h3>\n", id, html.EscapeString(title))
}

func (p *page) note(s string) {
	fmt.Fprintf(&p.body, "<p class=\"note\">%s</p>\n", html.EscapeString(s))
}

func (p *page) raw(s string) { p.body.WriteString(s) }

// figures writes a row of figures that wraps on narrow windows.
func (p *page) figures(fs ...*figure) {
	var drawn []*figure
	for _, f := range fs {
		if f != nil {
			drawn = append(drawn, f)
		}
	}
	if len(drawn) == 0 {
		return
	}
	p.body.WriteString("<div class=\"charts\">\n")
	for _, f := range drawn {
		p.figs++
		p.body.WriteString(f.html())
	}
	p.body.WriteString("</div>\n")
}

// table writes a report table with its title as a subsection.
func (p *page) table(t *Table) {
	id := "t-" + t.Name
	p.subsection(id, t.Title)
	if t.Note != "" {
		p.note(t.Note)
	}
	writeTable(&p.body, t)
}

func writeTable(b *strings.Builder, t *Table) {
	b.WriteString("<div class=\"tw\"><table><thead><tr>")
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
	b.WriteString("</tbody></table></div>\n")
}

// write writes the whole page: head, title, inputs, contents, body.
func (p *page) write(w io.Writer, intro string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>%s</title>\n<style>",
		html.EscapeString(p.title))
	b.WriteString(css)
	b.WriteString("</style>\n<script>")
	b.WriteString(js)
	fmt.Fprintf(&b, "</script></head>\n<body data-errors=\"0\">\n<h1>%s</h1>\n", html.EscapeString(p.title))
	b.WriteString(intro)
	if len(p.toc) > 0 {
		b.WriteString("<nav class=\"toc\"><b>Contents</b><ul>")
		for i, t := range p.toc {
			if t.sub && (i == 0 || !p.toc[i-1].sub) {
				b.WriteString("<ul>")
			}
			fmt.Fprintf(&b, "<li><a href=\"#%s\">%s</a></li>", t.id, html.EscapeString(t.title))
			if t.sub && (i+1 == len(p.toc) || !p.toc[i+1].sub) {
				b.WriteString("</ul>")
			}
		}
		b.WriteString("</ul></nav>\n")
	}
	b.WriteString(p.body.String())
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// figure is one chart with its title, legend and caption.
type figure struct {
	id, title string
	caption   string // one line: what to look at
	svg       string
	legend    []legendItem
	colorbar  *colorbar
	wide      bool
	extra     string // HTML under the caption (a key of labels)
}

type legendItem struct {
	name, color string
	kind        string // "line" (default), "box", "dash", "dot", "hollow"
}

type colorbar struct{ lo, hi string }

func (f *figure) html() string {
	var b strings.Builder
	cls := "fig"
	if f.wide {
		cls += " wide"
	}
	fmt.Fprintf(&b, "<figure class=\"%s\" id=\"fig-%s\"><div class=\"ft\">%s</div>", cls, f.id, html.EscapeString(f.title))
	if len(f.legend) > 0 || f.colorbar != nil {
		b.WriteString("<div class=\"lg\">")
		for _, l := range f.legend {
			k := l.kind
			if k == "" {
				k = "line"
			}
			fmt.Fprintf(&b, "<span><i class=\"k-%s\" style=\"--c:%s\"></i>%s</span>", k, l.color, html.EscapeString(l.name))
		}
		if c := f.colorbar; c != nil {
			fmt.Fprintf(&b, "<span>%s <i class=\"cbar\" style=\"background:%s\"></i> %s</span>", html.EscapeString(c.lo), viridisCSS(), html.EscapeString(c.hi))
		}
		b.WriteString("</div>")
	}
	b.WriteString(f.svg)
	if f.caption != "" {
		fmt.Fprintf(&b, "<figcaption>%s</figcaption>", html.EscapeString(f.caption))
	}
	b.WriteString(f.extra)
	b.WriteString("</figure>\n")
	return b.String()
}

// The fonts are ones a Debian machine with Chromium has (DejaVu with
// fontconfig, Liberation with chromium), so the page, and the screenshots
// the tests compare, look the same there; elsewhere the system's sans.
const css = `body{font:14px/1.45 "DejaVu Sans","Liberation Sans",Arial,sans-serif;margin:20px 24px;color:#222;max-width:1232px}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:30px 0 8px;border-bottom:1px solid #ccc;padding-bottom:2px}h3{font-size:15px;margin:18px 0 4px}
.charts{display:flex;flex-wrap:wrap;gap:12px;margin:6px 0}
figure.fig{margin:0;padding:8px 10px;border:1px solid #ddd;background:#fff;width:580px;box-sizing:content-box;max-width:100%;overflow:hidden}
figure.fig.wide{width:1172px}
figure svg{display:block;width:100%;height:auto}
.ft{font-weight:600;font-size:14px;margin-bottom:2px}
.lg{font-size:12px;color:#333;display:flex;flex-wrap:wrap;gap:2px 14px;margin:2px 0 4px}
.lg i{display:inline-block;vertical-align:middle;margin-right:5px}
.k-line{width:18px;height:3px;background:var(--c)}.k-dash{width:18px;height:0;border-top:2px dashed var(--c)}
.k-box{width:12px;height:12px;background:var(--c)}.k-dot{width:9px;height:9px;border-radius:50%;background:var(--c)}
.k-hollow{width:8px;height:8px;border-radius:50%;border:1.5px solid var(--c);background:#fff}
.cbar{width:120px;height:10px}
figcaption{font-size:12.5px;color:#444;margin-top:4px}
.plot{fill:#fbfbfb;stroke:#bbb}.grid{stroke:#e9e9e9}.tick{font-size:11px;fill:#555}.axis{font-size:12px;fill:#333}
.note{font-size:11px}.lbl{font-size:11px;fill:#222}
path.series{fill:none;stroke-width:1.8}path.thin{fill:none;stroke-width:1.2}path.band{opacity:.18;stroke:none}
.errbar{fill:none;stroke-width:1.3}.ref{stroke-width:1.4;stroke-dasharray:6 4}
.heat{image-rendering:pixelated}
.tw{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:6px 0 4px;font-size:13px}th,td{border:1px solid #ddd;padding:3px 8px}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
p.note{color:#555;font-size:12.5px;margin:2px 0 6px;max-width:1172px}
nav.toc{font-size:13px;border:1px solid #ddd;background:#fafafa;padding:6px 12px;margin:10px 0;columns:2;max-width:1172px}
nav.toc ul{margin:2px 0;padding-left:18px}nav.toc b{display:block}
ul.inputs{margin:4px 0;padding-left:20px}`

// The script only checks the page: it records script errors and marks how
// many charts hold drawn data, which the browser tests read back.
const js = `window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message));document.body.setAttribute('data-errors',window.__errors.length)});
document.addEventListener('DOMContentLoaded',function(){var n=0;document.querySelectorAll('svg.chart').forEach(function(s){if(s.querySelector('.d'))n++;});
document.body.setAttribute('data-charts',String(n));document.body.setAttribute('data-rendered','ok');});`
