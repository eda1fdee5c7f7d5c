package report

// The decisions table (blis-sim --decisions) as the page draws it: the
// distribution of counterfactual regret and the worst routing decisions
// with their candidates' scores. Memory is bounded: the sampled regrets
// (a fraction of the routing rows) and a handful of worst rows.

import (
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/blis-sim/blis/lib/trace"
)

// worstKept is how many worst routing decisions the page lists.
const worstKept = 8

type decisionStats struct {
	path          string
	rows, routing int64
	regret        []float64 // ms, rows sampled for regret
	winRegret     []float64 // ms
	worst         []worstDecision
	byRegret      bool
}

type worstDecision struct {
	seq, t       int64
	req, target  string
	reason       string
	ttft, regret int64 // µs, trace.Null when absent
	cands        []trace.Candidate
	waiting      int32
}

func readDecisions(path string, opt *Options) (*decisionStats, error) {
	src, err := trace.Open(path, opt.Stdin)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := src.Expect(trace.TableDecisions); err != nil {
		return nil, err
	}
	s := src.Schema()
	if err := need(src.Path, s, "--decisions pictures", "seq", "kind", "time_us"); err != nil {
		return nil, err
	}
	d := &decisionStats{path: src.Path}
	for {
		rec, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		col := func(name string) arrow.Array {
			if j := colIndex(s, name); j >= 0 {
				return rec.Column(j)
			}
			return nil
		}
		kind, seq, tm := col("kind"), col("seq"), col("time_us")
		req, tgt, rsn := col("request_id"), col("target"), col("reason")
		ttft, reg, wreg, wt := col("ttft_us"), col("regret_us"), col("window_regret_us"), col("waiting")
		cands, _ := col("candidates").(*array.List)
		for i := 0; i < int(rec.NumRows()); i++ {
			d.rows++
			if trace.StringAt(kind, i) != trace.DecisionRouting {
				continue
			}
			d.routing++
			w := worstDecision{seq: int64At(seq, i), t: int64At(tm, i), ttft: int64At(ttft, i), regret: int64At(reg, i)}
			if w.regret != trace.Null {
				d.regret = append(d.regret, float64(w.regret)/1000)
				if x := float64At(wreg, i); !math.IsNaN(x) {
					d.winRegret = append(d.winRegret, x/1000)
				}
				d.byRegret = true
			}
			key := w.regret
			if !d.byRegret {
				key = w.ttft
			}
			if key == trace.Null || (len(d.worst) == worstKept && !d.worse(&w, &d.worst[worstKept-1])) {
				continue
			}
			w.req, w.target, w.reason = strings.Clone(trace.StringAt(req, i)), strings.Clone(trace.StringAt(tgt, i)), strings.Clone(trace.StringAt(rsn, i))
			w.waiting = int32(int64At(wt, i))
			if cands != nil && !cands.IsNull(i) {
				w.cands = candidates(cands, i)
			}
			d.keep(w)
		}
		rec.Release()
	}
	d.keep() // re-sort under the final rule (regret once any row had it)
	return d, nil
}

// worse orders by regret (once a row was sampled) or TTFT, then seq.
func (d *decisionStats) worse(a, b *worstDecision) bool {
	ka, kb := a.ttft, b.ttft
	if d.byRegret {
		ka, kb = a.regret, b.regret
	}
	if (ka == trace.Null) != (kb == trace.Null) {
		return kb == trace.Null
	}
	if ka != kb {
		return ka > kb
	}
	return a.seq < b.seq
}

func (d *decisionStats) keep(ws ...worstDecision) {
	d.worst = append(d.worst, ws...)
	slices.SortStableFunc(d.worst, func(a, b worstDecision) int {
		if d.worse(&a, &b) {
			return -1
		}
		if d.worse(&b, &a) {
			return 1
		}
		return 0
	})
	if d.byRegret {
		d.worst = slices.DeleteFunc(d.worst, func(w worstDecision) bool { return w.regret == trace.Null })
	}
	if len(d.worst) > worstKept {
		d.worst = d.worst[:worstKept]
	}
}

func int64At(a arrow.Array, i int) int64 {
	if a == nil || a.IsNull(i) {
		return trace.Null
	}
	switch x := a.(type) {
	case *array.Int64:
		return x.Value(i)
	case *array.Int32:
		return int64(x.Value(i))
	}
	return trace.Null
}

func float64At(a arrow.Array, i int) float64 {
	if a == nil || a.IsNull(i) {
		return math.NaN()
	}
	switch x := a.(type) {
	case *array.Float64:
		return x.Value(i)
	case *array.Int64:
		return float64(x.Value(i))
	case *array.Int32:
		return float64(x.Value(i))
	}
	return math.NaN()
}

func candidates(l *array.List, i int) []trace.Candidate {
	st, ok := l.ListValues().(*array.Struct)
	if !ok {
		return nil
	}
	t := st.DataType().(*arrow.StructType)
	f := func(name string) arrow.Array {
		if k, ok := t.FieldIdx(name); ok {
			return st.Field(k)
		}
		return nil
	}
	id, sc, w, r, fl, kv, cb, cf := f("replica_id"), f("score"), f("waiting"), f("running"), f("in_flight"), f("kv_util"), f("cached_blocks"), f("cf_ttft_us")
	start, end := l.ValueOffsets(i)
	var out []trace.Candidate
	for j := int(start); j < int(end); j++ {
		out = append(out, trace.Candidate{ReplicaID: strings.Clone(trace.StringAt(id, j)), Score: float64At(sc, j),
			Waiting: int32(int64At(w, j)), Running: int32(int64At(r, j)), InFlight: int32(int64At(fl, j)),
			KVUtil: float64At(kv, j), CachedBlocks: int32(int64At(cb, j)), CFTTFTUS: int64At(cf, j)})
	}
	return out
}

// decisionSection: the regret distribution and the worst decisions.
func (rep *Report) decisionSection(p *page) {
	d := rep.dec
	if d == nil {
		return
	}
	p.section("decisions", "Routing decisions")
	p.note(fmt.Sprintf("%s: %d rows, %d routing decisions, %d replayed with each top-k alternative (--regret-sample).", d.path, d.rows, d.routing, len(d.regret)))
	if len(d.regret) > 0 {
		p.figures(histFig("regret", "Counterfactual regret of routing decisions", d.regret, d.winRegret,
			"regret = TTFT with the chosen replica − with the best alternative (ms)",
			"Mass right of zero is decisions an alternative would have served faster; a long right tail is a policy that sometimes routes badly."))
	}
	if len(d.worst) == 0 {
		return
	}
	by := "TTFT (no decision was replayed for regret)"
	if d.byRegret {
		by = "regret"
	}
	p.subsection("worst-decisions", "The worst routing decisions, by "+by)
	p.note("Each decision with the candidates the router scored, the chosen one first: score (the policy's, higher chosen), what the router saw (waiting, running, in flight, KV use, cached prompt blocks) and, when replayed, the TTFT the request would have had there.")
	var b strings.Builder
	b.WriteString("<div class=\"tw\"><table><thead><tr><th>seq</th><th>time (s)</th><th>request</th><th>reason</th><th>TTFT (ms)</th><th>regret (ms)</th>" +
		"<th>candidate</th><th>score</th><th>waiting</th><th>running</th><th>in flight</th><th>KV use (%)</th><th>cached blocks</th><th>replay TTFT (ms)</th></tr></thead><tbody>\n")
	for _, w := range d.worst {
		n := max(len(w.cands), 1)
		fmt.Fprintf(&b, "<tr><td class=\"n\" rowspan=\"%d\">%d</td><td class=\"n\" rowspan=\"%d\">%s</td><td rowspan=\"%d\">%s</td><td rowspan=\"%d\">%s</td><td class=\"n\" rowspan=\"%d\">%s</td><td class=\"n\" rowspan=\"%d\">%s</td>",
			n, w.seq, n, fixed(float64(w.t)/1e6, 3), n, html.EscapeString(w.req), n, html.EscapeString(w.reason), n, usMS(w.ttft), n, usMS(w.regret))
		if len(w.cands) == 0 {
			fmt.Fprintf(&b, "<td>%s</td><td colspan=\"7\">no candidates recorded</td></tr>\n", html.EscapeString(w.target))
			continue
		}
		for k, c := range w.cands {
			if k > 0 {
				b.WriteString("<tr>")
			}
			name := html.EscapeString(c.ReplicaID)
			if k == 0 {
				name = "<b>" + name + "</b> (chosen)"
			}
			fmt.Fprintf(&b, "<td>%s</td><td class=\"n\">%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%d</td><td class=\"n\">%s</td></tr>\n",
				name, numOrDash(c.Score, 3), c.Waiting, c.Running, c.InFlight, numOrDash(c.KVUtil*100, 1), max(c.CachedBlocks, 0), usMS(c.CFTTFTUS))
		}
	}
	b.WriteString("</tbody></table></div>\n")
	p.raw(b.String())
}

func usMS(us int64) string {
	if us == trace.Null {
		return "-"
	}
	return fixed(float64(us)/1000, 1)
}

func numOrDash(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fixed(v, prec)
}

// histFig draws a histogram of xs (and, dashed, of alt: the window regret)
// with a line at zero; the range is the 0.5th to 99.5th percentile so a few
// extremes do not flatten it (they are counted in the edge bars).
func histFig(id, title string, xs, alt []float64, xlabel, caption string) *figure {
	s := slices.Clone(xs)
	slices.Sort(s)
	lo, hi := s[len(s)*5/1000], s[len(s)-1-len(s)*5/1000]
	lo, hi = math.Min(lo, 0), math.Max(hi, 0)
	if hi <= lo {
		hi = lo + 1
	}
	const nb = 40
	step := niceStep(hi-lo, nb)
	lo = math.Floor(lo/step) * step
	hi = math.Ceil(hi/step)*step + step*1e-9
	count := func(v []float64) []float64 {
		c := make([]float64, int(math.Round((hi-lo)/step))+1)
		for _, x := range v {
			k := int((math.Min(math.Max(x, lo), hi-step*1e-6) - lo) / step)
			c[min(max(k, 0), len(c)-1)]++
		}
		return c
	}
	main, ymax := count(xs), 0.0
	for _, v := range main {
		ymax = math.Max(ymax, v)
	}
	p := newPlot(id, wideW, 300, axis{label: xlabel, lo: lo, hi: hi}, axis{label: "routing decisions", lo: 0, hi: ymax * 1.2, integer: true})
	pos, zero := 0, 0
	for _, x := range xs {
		switch {
		case x > 0:
			pos++
		case x == 0:
			zero++
		}
	}
	for k, v := range main {
		if v == 0 {
			continue
		}
		a := lo + float64(k)*step
		c := colorAt(0)
		if a >= 0 {
			c = colorAt(1)
		}
		p.rect(a, 0, a+step*0.92, v, c, fmt.Sprintf("%s to %s ms: %d decisions", fmtVal(a), fmtVal(a+step), int(v)))
	}
	var items []legendItem
	items = append(items, legendItem{name: "the choice was best or tied (≤ 0)", color: colorAt(0), kind: "box"},
		legendItem{name: "an alternative was faster (> 0)", color: colorAt(1), kind: "box"})
	if len(alt) > 0 {
		c := count(alt)
		var lx, ly []float64
		for k, v := range c {
			lx, ly = append(lx, lo+(float64(k)+0.46)*step), append(ly, v)
		}
		p.line(lx, ly, "#000", "thin", "window mean-TTFT regret", true)
		items = append(items, legendItem{name: "window mean-TTFT regret", color: "#000"})
	}
	p.vline(0, "#333", fmt.Sprintf("%d of %d (%.1f%%) had a faster alternative", pos, len(xs), 100*float64(pos)/float64(len(xs))))
	return &figure{id: id, title: title, caption: caption, svg: p.end(), legend: items, wide: true}
}
