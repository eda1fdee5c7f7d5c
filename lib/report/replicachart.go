package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// heatCols is the most time columns of a heat strip; heatRows the most
// rows, past which neighbouring replicas are averaged into bands.
const (
	heatCols = 160
	heatRows = 256
)

// replicaSection: what each replica did over time (--steps), the
// autoscaler's replicas by state under the load (--scale-events), KV hits by
// tier, and P/D transfer times.
func (rep *Report) replicaSection(p *page) {
	st, sc := rep.steps, rep.scale
	r0 := rep.runs[0]
	tiers := r0.ch != nil && r0.ch.tiers && (r0.kv.cpu+r0.kv.storage > 0 || r0.kv.reloads > 0)
	pd := r0.kv.xfers > 0
	if (st == nil || st.heat == nil) && sc == nil && !tiers && !pd {
		return
	}
	p.section("replicas", "Replicas over time")
	if st != nil && st.heat != nil && len(st.heat) > 0 {
		p.figures(st.heatFigures(max(st.end, r0.end))...)
	}
	if sc != nil {
		p.figures(rep.statesFigure())
	}
	if tiers {
		p.figures(rep.tierFigure())
	}
	if pd {
		var xfer, wait []*Dist
		var names []string
		for i, r := range rep.runs {
			if r.kv.xfers > 0 {
				xfer, wait, names = append(xfer, r.kv.xfer), append(wait, r.kv.wait), append(names, rep.Inputs[i].Label)
			}
		}
		p.figures(
			cdfFig("pd-transfer", "P/D: KV transfer time (prefill end to last byte on the decode replica)",
				"The transfer time not hidden behind the prefill: a long tail here is added to TTFT.", "kv_transfer", xfer, names, 0, false),
			cdfFig("pd-wait", "P/D: backpressure wait before the last KV piece was sent",
				"The height at zero is the share of transfers that never waited; the rest of the curve is how long decode replicas without free blocks held the others up (pd_backpressure).", "kv_transfer_wait", wait, names, 0, false))
	}
}

// heatFigures draws one strip per metric: time across, replicas down.
func (st *stepStats) heatFigures(end int64) []*figure {
	ids := make([]int64, 0, len(st.heat))
	for id := range st.heat {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	// One bin width for every replica, at most heatCols columns over the run.
	w := int64(1000)
	for _, id := range ids {
		w = max(w, st.heat[id].busy.width)
	}
	for end > w*heatCols {
		w *= 2
	}
	cols := int(max((end+w-1)/w, 1))
	band := 1
	if len(ids) > heatRows {
		band = (len(ids) + 199) / 200
	}
	rows := (len(ids) + band - 1) / band
	// The last column covers only what is left of the run.
	colW := make([]float64, cols)
	for c := range colW {
		colW[c] = float64(min(w, end-int64(c)*w))
		if colW[c] <= 0 {
			colW[c] = float64(w)
		}
	}
	type metric struct {
		id, title, unit, caption string
		num, den                 func(h *instHeat) *series // den nil: per µs of the bin
		fixedHi                  float64
	}
	ms := []metric{
		{"heat-busy", "Busy: share of each time bin a replica spent in engine steps", "%",
			"Yellow is busy the whole bin, dark is idle: a row hotter than the rest is a hot replica, a column hot across is a burst.",
			func(h *instHeat) *series { return h.busy }, nil, 100},
		{"heat-running", "Running batch: requests in the batch, time-averaged", "requests",
			"Wide rows of yellow are replicas batching many requests; compare with waiting below to see who queued.",
			func(h *instHeat) *series { return h.run }, nil, 0},
		{"heat-waiting", "Waiting queue: requests waiting, time-averaged", "requests",
			"Any colour other than dark is a queue: where it appears on some rows only, the router sent them too much.",
			func(h *instHeat) *series { return h.wait }, nil, 0},
		{"heat-kv", "KV cache in use: % of blocks while busy", "%",
			"Rows that stay yellow are near their KV limit: the next requests there wait or preempt.",
			func(h *instHeat) *series { return h.kvU }, func(h *instHeat) *series { return h.kvT }, 100},
	}
	ylabel := "instance"
	if band > 1 {
		ylabel = fmt.Sprintf("instance (%d per row)", band)
	}
	var cats []string
	if rows <= 24 {
		for _, id := range ids {
			name := st.heat[id].name
			if name == "" {
				name = strconv.FormatInt(id, 10)
			}
			cats = append(cats, name)
		}
	}
	rowH := math.Min(math.Max(240/float64(rows), 1), 16)
	h := float64(rows)*rowH + 52
	var figs []*figure
	for _, m := range ms {
		img := newHeat(rows, cols)
		hi := 0.0
		for r := 0; r < rows; r++ {
			members := ids[r*band : min((r+1)*band, len(ids))]
			num := make([]float64, cols)
			den := make([]float64, cols)
			for _, id := range members {
				for c, v := range m.num(st.heat[id]).at(w, cols) {
					num[c] += v
				}
				if m.den != nil {
					for c, v := range m.den(st.heat[id]).at(w, cols) {
						den[c] += v
					}
				}
			}
			for c := 0; c < cols; c++ {
				var v float64
				if m.den != nil {
					if den[c] == 0 {
						continue // idle all bin: no KV reading
					}
					v = num[c] / den[c] * 100
				} else {
					v = num[c] / colW[c] / float64(len(members))
					if m.unit == "%" {
						v *= 100
					}
				}
				img.set(r, c, v)
				hi = math.Max(hi, v)
			}
		}
		if m.fixedHi > 0 {
			hi = m.fixedHi
		}
		if hi <= 0 {
			hi = 1
		}
		img.lo, img.hi = 0, hi
		ya := axis{label: ylabel, lo: 0, hi: float64(len(ids)), rev: true, integer: true}
		if cats != nil {
			ya = axis{label: "replica", cats: reversed(cats)} // the first replica at the top
		}
		pl := newPlot(m.id, wideW, h, axis{label: "simulated time (s)", lo: 0, hi: float64(end) / 1e6}, ya)
		if cats != nil {
			pl.image(img, 0, float64(cols)*float64(w)/1e6, float64(rows)-0.5, -0.5)
		} else {
			pl.image(img, 0, float64(cols)*float64(w)/1e6, 0, float64(len(ids)))
		}
		figs = append(figs, &figure{id: m.id, title: m.title, caption: m.caption, svg: pl.end(), wide: true,
			colorbar: &colorbar{lo: "0", hi: fmtVal(hi) + " " + m.unit}})
	}
	return figs
}

// statesFigure: the arrival rate above the replicas by state, stacked,
// over the same time axis.
func (rep *Report) statesFigure() *figure {
	sc := rep.scale
	r0 := rep.runs[0]
	rows := sc.totalStates()
	if len(rows) == 0 {
		return nil
	}
	end := max(rows[len(rows)-1].t, r0.end)
	tEnd := float64(end) / 1e6
	arr := seriesLine("arrivals", r0.arr, 1e6, r0.end)
	amax, rmax := 0.0, 0.0
	for _, v := range arr.ys {
		amax = math.Max(amax, v)
	}
	for _, r := range rows {
		tot := int32(0)
		for _, n := range r.n {
			tot += n
		}
		rmax = math.Max(rmax, float64(tot))
	}
	const left = 64
	top := newPlotL("load", wideW, 160, axis{lo: 0, hi: tEnd}, axis{label: "requests/s", lo: 0, hi: amax * 1.08}, left)
	top.line(arr.xs, arr.ys, "#333", "series", "llm requests arriving per second", false)
	bot := newPlotL("replica-states", wideW, 280, axis{label: "simulated time (s)", lo: 0, hi: tEnd},
		axis{label: "replicas", lo: 0, hi: math.Max(rmax*1.1, 1), integer: true}, left)
	colors := [nReplicaStates]string{colorAt(0), colorAt(4), colorAt(3), colorAt(5)}
	for k := 0; k < nReplicaStates; k++ {
		var xs, lo, hi []float64
		for j, r := range rows {
			base := int32(0)
			for q := 0; q < k; q++ {
				base += r.n[q]
			}
			t1 := tEnd
			if j+1 < len(rows) {
				t1 = float64(rows[j+1].t) / 1e6
			}
			t0 := float64(r.t) / 1e6
			xs = append(xs, t0, t1)
			lo = append(lo, float64(base), float64(base))
			hi = append(hi, float64(base+r.n[k]), float64(base+r.n[k]))
		}
		stackBand(bot, xs, lo, hi, colors[k], replicaStateNames[k])
	}
	var items []legendItem
	for k := 0; k < nReplicaStates; k++ {
		items = append(items, legendItem{name: replicaStateNames[k], color: colors[k], kind: "box"})
	}
	items = append(items, legendItem{name: "arrival rate (top)", color: "#333"})
	return &figure{id: "replicas-by-state", title: "Load and replicas by state (all pools)",
		caption: "When the arrival rate (top) rises, look for the orange provisioning and sky-blue warming layers: their width is how long capacity took to arrive.",
		svg:     top.end() + bot.end(), legend: items, wide: true}
}

// stackBand fills between lo and hi at full opacity (a stacked layer).
func stackBand(p *plot, xs, lo, hi []float64, color, title string) {
	var d []byte
	for j := range xs {
		c := byte('L')
		if j == 0 {
			c = 'M'
		}
		d = append(d, c)
		d = append(d, fmt.Sprintf("%s %s", f2(p.px(xs[j])), f2(p.py(hi[j])))...)
	}
	for j := len(xs) - 1; j >= 0; j-- {
		d = append(d, fmt.Sprintf("L%s %s", f2(p.px(xs[j])), f2(p.py(lo[j])))...)
	}
	if len(xs) == 0 {
		return
	}
	p.raw(fmt.Sprintf(`<path class="d" d="%sZ" fill="%s"><title>%s</title></path>`, d, color, title))
}

// tierFigure: the share of prompt tokens served from each KV tier's cache,
// stacked, over time.
func (rep *Report) tierFigure() *figure {
	c := rep.runs[0].ch
	end := rep.runs[0].end
	in := c.tierIn.coarsen(chartBins)
	w := in.width
	get := func(s *series) []float64 { return s.at(w, len(in.sum)) }
	tiers := [][]float64{get(c.tierGPU), get(c.tierCPU), get(c.tierSto)}
	names := []string{"GPU", "CPU", "storage"}
	p := newPlot("kv-tier-hits", wideW, 300, axis{label: "simulated time (s), by first scheduling", lo: 0, hi: float64(end) / 1e6},
		axis{label: "% of prompt tokens", lo: 0, hi: 100})
	var items []legendItem
	base := make([]float64, len(in.sum))
	for k, t := range tiers {
		var xs, lo, hi []float64
		for i, tot := range in.sum {
			if tot <= 0 {
				continue
			}
			v := t[i] / tot * 100
			x0, x1 := float64(int64(i)*w)/1e6, math.Min(float64(int64(i+1)*w), float64(end))/1e6
			xs = append(xs, x0, x1)
			lo = append(lo, base[i], base[i])
			hi = append(hi, base[i]+v, base[i]+v)
			base[i] += v
		}
		stackBand(p, xs, lo, hi, colorAt([]int{0, 3, 5}[k]), names[k]+" cache hits")
		items = append(items, legendItem{name: names[k] + " hits", color: colorAt([]int{0, 3, 5}[k]), kind: "box"})
	}
	return &figure{id: "kv-tier-hits", title: "Prefix-cache hits by tier over time", wide: true, legend: items, svg: p.end(),
		caption: "The white above the layers is prompt computed afresh; a growing CPU or storage layer means the GPU cache no longer holds the working set."}
}
