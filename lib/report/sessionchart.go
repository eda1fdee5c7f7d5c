package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/blis-sim/blis/lib/trace"
)

// Parts of a session's critical path, in the order they stack.
const (
	pQueue   = iota // arrival to first scheduling (LLM calls)
	pPrefill        // first scheduling to first token
	pDecode         // first token to finish
	pTool           // tool calls: ready to finish
	pThink          // waits between a dependency's finish and the next arrival (delay_us)
	pBefore         // the session's start to the first request of its critical path
	nParts
)

var partNames = [nParts]string{"queueing", "prefill", "decode", "tool calls", "think / delay", "before the path"}
var partColors = [nParts]string{"#E69F00", "#0072B2", "#56B4E9", "#CC79A7", "#BBBBBB", "#E8E8E8"}

// ganttRows bounds the requests drawn in a session's timeline.
const ganttRows = 60

// sessionSection: one session's timeline and the split of every session's
// end-to-end time.
func (rep *Report) sessionSection(p *page) {
	for i, r := range rep.runs {
		s := r.sess
		if s == nil || len(s.times) != len(s.nodes) {
			continue
		}
		p.section("sessions", "Agentic sessions")
		if i > 0 || len(rep.runs) > 1 {
			p.note("Run " + rep.Inputs[i].Label + ".")
		}
		v := s.view()
		p.figures(s.ganttFigure(v, rep.session))
		p.figures(s.splitFigure(v))
		return
	}
}

// sessView indexes a run's sessions once for the pictures.
type sessView struct {
	byID    map[string]int32
	members map[int32][]int32 // session code -> node indexes, in table order
	order   []int32           // session codes in first-seen order
}

func (s *sessions) view() *sessView {
	v := &sessView{byID: make(map[string]int32, len(s.nodes)), members: map[int32][]int32{}}
	for j := range s.nodes {
		n := &s.nodes[j]
		v.byID[n.id] = int32(j)
		if _, ok := v.members[n.sess]; !ok {
			v.order = append(v.order, n.sess)
		}
		v.members[n.sess] = append(v.members[n.sess], int32(j))
	}
	return v
}

// sessSpan is a complete session's start, end and last finisher.
func (s *sessions) sessSpan(ms []int32) (first, last int64, lastIdx int32, complete bool) {
	first, firstAny := int64(math.MaxInt64), int64(math.MaxInt64)
	last, lastIdx, complete = math.MinInt64, -1, true
	for _, j := range ms {
		n := &s.nodes[j]
		complete = complete && n.completed
		if n.root && n.arr != trace.Null && n.arr < first {
			first = n.arr
		}
		if n.arr != trace.Null && n.arr < firstAny {
			firstAny = n.arr
		}
		if n.fin != trace.Null && (n.fin > last || (n.fin == last && j < lastIdx)) {
			last, lastIdx = n.fin, j
		}
	}
	if first == math.MaxInt64 {
		first = firstAny
	}
	return first, last, lastIdx, complete && lastIdx >= 0 && first != math.MaxInt64
}

// ready is when request j could start: its last dependency's finish, or its
// own arrival when it has none.
func (s *sessions) ready(j int32, byID map[string]int32) int64 {
	n := &s.nodes[j]
	r := int64(trace.Null)
	for _, d := range n.deps {
		if p, ok := byID[d]; ok && s.nodes[p].fin != trace.Null {
			r = max(r, s.nodes[p].fin)
		}
	}
	if r == trace.Null {
		return n.arr
	}
	return r
}

// parts splits one request's time from ready to finish.
func (s *sessions) parts(j int32, ready int64) [nParts]int64 {
	var out [nParts]int64
	n, t := &s.nodes[j], s.times[j]
	if n.fin == trace.Null || ready == trace.Null {
		return out
	}
	if n.tool {
		out[pTool] = n.fin - ready
		return out
	}
	arr := n.arr
	if arr == trace.Null {
		arr = ready
	}
	out[pThink] = max(arr-ready, 0)
	sched, first := t.sched, t.first
	if sched == trace.Null {
		sched = arr
	}
	if first == trace.Null {
		first = n.fin
	}
	out[pQueue] = max(sched-arr, 0)
	out[pPrefill] = max(first-sched, 0)
	out[pDecode] = max(n.fin-first, 0)
	return out
}

// ganttFigure draws one session: a row per request from ready to finish,
// split into its parts; the critical path outlined.
func (s *sessions) ganttFigure(v *sessView, want string) *figure {
	// The chosen session, else the slowest complete one.
	code, how := int32(-1), ""
	if want != "" {
		if c, ok := s.key.codes[want]; ok {
			if _, ok := v.members[c]; ok {
				code, how = c, "chosen with --session"
			}
		}
	}
	if code < 0 {
		best := int64(-1)
		for _, c := range v.order {
			first, last, _, ok := s.sessSpan(v.members[c])
			if ok && last-first > best {
				best, code = last-first, c
			}
		}
		how = "the slowest complete session (another with --session ID)"
		if want != "" {
			how = fmt.Sprintf("no session %q in the table: the slowest complete session instead", want)
		}
	}
	if code < 0 {
		return nil
	}
	ms := v.members[code]
	first, last, lastIdx, complete := s.sessSpan(ms)
	onPath := map[int32]bool{}
	if complete {
		for _, j := range s.critChain(lastIdx, v.byID) {
			onPath[j] = true
		}
	}
	rows := slices.Clone(ms)
	slices.SortStableFunc(rows, func(a, b int32) int { return cmp.Compare(s.ready(a, v.byID), s.ready(b, v.byID)) })
	note := ""
	if len(rows) > ganttRows {
		note = fmt.Sprintf(" (the first %d of its %d requests)", ganttRows, len(rows))
		rows = rows[:ganttRows]
	}
	end := last
	if end == math.MinInt64 {
		for _, j := range rows {
			end = max(end, s.ready(j, v.byID))
		}
	}
	var cats []string
	for _, j := range rows {
		n := &s.nodes[j]
		kind := "llm"
		if n.tool {
			kind = "tool"
		}
		label := kind
		if n.step != "" {
			label += " " + n.step
		}
		if n.loop > 0 {
			label += fmt.Sprintf(" #%d", n.loop)
		}
		if onPath[j] {
			label = "● " + label
		}
		cats = append(cats, truncate(label, 26))
	}
	span := float64(end-first) / 1e6
	h := float64(len(rows))*18 + 56
	p := newPlot("session-gantt", wideW, h, axis{label: "seconds since the session started", lo: 0, hi: math.Max(span, 1e-3) * 1.02}, axis{label: "request", cats: reversed(cats)})
	// Categories run bottom-up on a y axis: row k is at position len-1-k,
	// so the first request is at the top.
	pos := func(k int) float64 { return float64(len(rows) - 1 - k) }
	for k, j := range rows {
		n := &s.nodes[j]
		ready := s.ready(j, v.byID)
		if ready == trace.Null {
			continue
		}
		parts := s.parts(j, ready)
		t := float64(ready-first) / 1e6
		y := pos(k)
		order := []int{pThink, pQueue, pPrefill, pDecode, pTool}
		for _, q := range order {
			d := float64(parts[q]) / 1e6
			if d <= 0 {
				continue
			}
			p.rect(t, y-0.32, t+d, y+0.32, partColors[q], fmt.Sprintf("%s %s: %s %s", n.id, tokensNote(s.times[j], n.tool), partNames[q], fmtMS(d*1000)))
			t += d
		}
		if n.fin == trace.Null {
			p.rect(t, y-0.32, float64(end-first)/1e6, y+0.32, "#f4f4f4", n.id+": did not finish")
		}
		if onPath[j] {
			x0 := p.px(float64(ready-first) / 1e6)
			x1 := p.px(t)
			p.raw(fmt.Sprintf(`<rect class="crit" x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#000" stroke-width="1.6"/>`,
				f2(x0-1), f2(p.py(y+0.42)), f2(math.Max(x1-x0+2, 2)), f2(p.py(y-0.42)-p.py(y+0.42))))
		}
	}
	var items []legendItem
	for _, q := range []int{pThink, pQueue, pPrefill, pDecode, pTool} {
		items = append(items, legendItem{name: partNames[q], color: partColors[q], kind: "box"})
	}
	items = append(items, legendItem{name: "critical path (●, outlined)", color: "#000", kind: "hollow"})
	name := s.key.names[code]
	status := fmt.Sprintf("end to end %s", fmtMS(float64(last-first)/1000))
	if !complete {
		status = "not complete"
	}
	return &figure{id: "session-gantt", title: fmt.Sprintf("Session %s: %s, %s%s", name, how, status, note), wide: true, legend: items, svg: p.end(),
		caption: "Follow the outlined bars: they are the chain of requests that set the session's end; a long orange piece on it is time lost to queueing."}
}

func reversed(xs []string) []string {
	out := slices.Clone(xs)
	slices.Reverse(out)
	return out
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func tokensNote(t sessTimes, tool bool) string {
	if tool {
		return "(tool)"
	}
	return fmt.Sprintf("(%d prompt, %d output tokens)", t.in, t.gen)
}

// splitFigure: every complete session's end-to-end time split along its
// critical path, sessions sorted by end-to-end time and grouped into at
// most 50 bars (each the mean of its group).
func (s *sessions) splitFigure(v *sessView) *figure {
	type sp struct {
		e2e   int64
		parts [nParts]int64
	}
	var all []sp
	for _, c := range v.order {
		ms := v.members[c]
		first, last, lastIdx, ok := s.sessSpan(ms)
		if !ok {
			continue
		}
		x := sp{e2e: last - first}
		chain := s.critChain(lastIdx, v.byID)
		start := s.nodes[chain[len(chain)-1]].arr
		if start == trace.Null {
			start = first
		}
		x.parts[pBefore] = max(start-first, 0)
		for _, j := range chain {
			ps := s.parts(j, s.ready(j, v.byID))
			for q := range ps {
				x.parts[q] += ps[q]
			}
		}
		all = append(all, x)
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b sp) int { return cmp.Compare(a.e2e, b.e2e) })
	bars := min(len(all), 50)
	ymax := 0.0
	type bar struct {
		lo, hi float64 // percentiles
		mean   [nParts]float64
		e2e    float64
	}
	var bs []bar
	for k := 0; k < bars; k++ {
		lo, hi := k*len(all)/bars, (k+1)*len(all)/bars
		b := bar{lo: float64(lo) / float64(len(all)) * 100, hi: float64(hi) / float64(len(all)) * 100}
		for _, x := range all[lo:hi] {
			for q := range x.parts {
				b.mean[q] += float64(x.parts[q]) / 1000 / float64(hi-lo)
			}
			b.e2e += float64(x.e2e) / 1000 / float64(hi-lo)
		}
		tot := 0.0
		for _, m := range b.mean {
			tot += m
		}
		ymax = math.Max(ymax, math.Max(tot, b.e2e))
		bs = append(bs, b)
	}
	unit, div := "ms", 1.0
	if ymax >= 10000 {
		unit, div = "s", 1000
	}
	p := newPlot("session-split", wideW, 320, axis{label: fmt.Sprintf("complete sessions sorted by end-to-end time (percentile; %d sessions)", len(all)), lo: 0, hi: 100},
		axis{label: "mean per bar (" + unit + ")", lo: 0, hi: ymax / div * 1.06})
	for _, b := range bs {
		base := 0.0
		gap := (b.hi - b.lo) * 0.1
		var parts []string
		for q := 0; q < nParts; q++ {
			if b.mean[q] > 0 {
				parts = append(parts, fmt.Sprintf("%s %s", partNames[q], fmtMS(b.mean[q])))
			}
		}
		title := fmt.Sprintf("sessions p%.0f–p%.0f: end to end %s; %s", b.lo, b.hi, fmtMS(b.e2e), strings.Join(parts, ", "))
		for q := 0; q < nParts; q++ {
			if b.mean[q] <= 0 {
				continue
			}
			p.rect(b.lo+gap/2, base/div, b.hi-gap/2, (base+b.mean[q])/div, partColors[q], title)
			base += b.mean[q]
		}
	}
	var items []legendItem
	for q := 0; q < nParts; q++ {
		items = append(items, legendItem{name: partNames[q], color: partColors[q], kind: "box"})
	}
	return &figure{id: "session-split", title: "Session end-to-end time, split along each critical path", wide: true, legend: items, svg: p.end(),
		caption: "Each bar is the mean of a slice of the sessions, fastest left: the colour that grows to the right is what makes slow sessions slow."}
}
