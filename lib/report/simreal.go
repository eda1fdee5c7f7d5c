package report

import (
	"fmt"
	"math"
	"slices"

	"github.com/blis-sim/blis/lib/trace"
)

// pair is one request seen twice: by the simulator and for real (or by a
// run and the reference).
type pair struct {
	in          float64 // prompt tokens
	load        float64 // requests in flight at its arrival
	ttftE, e2eE float64 // error, % (NaN when either side lacks it)
}

// simRealSection draws where the simulator and the real run part ways:
// the recorded_* columns of a replayed trace (one table), else the same
// request ids in a run and the reference (blis-load's results against
// blis-sim's, with --compare or as two inputs).
func (rep *Report) simRealSection(p *page) {
	// A replayed trace: sim vs recorded in one table.
	for i, r := range rep.runs {
		if r.ch == nil || !r.hasRec || r.rec[0][0].Count()+r.rec[1][0].Count() == 0 {
			continue
		}
		at := r.ch.inflightAt()
		var ps []pair
		for _, s := range r.ch.samples.at(r.ch.samples.level) {
			ps = append(ps, newPair(s.in, at(s.arr), s.ttft, s.recT, s.e2e, s.recE))
		}
		name := rep.Inputs[i].Label
		p.section("simreal", "Simulated against recorded")
		p.note(fmt.Sprintf("%s: the simulator's latencies against the recorded_* columns of the same requests (a replayed real trace).", name))
		var figs []*figure
		for m, mn := range []string{"ttft", "e2e", "itl"} {
			sim, real := r.rec[m][0], r.rec[m][1]
			if sim.Count() == 0 {
				continue
			}
			figs = append(figs, cdfFig("simreal-cdf-"+mn, "CDF of "+mn+": simulated and recorded",
				"The gap between the curves is the simulator's error at each percentile (marked at p50, p90, p99).",
				mn, []*Dist{real, sim}, []string{"recorded", "simulated"}, 0, true))
		}
		for m, mn := range []string{"ttft", "e2e", "itl"} {
			figs = append(figs, qqFig("simreal-qq-"+mn, mn, r.rec[m][0], r.rec[m][1], "simulated", "recorded"))
		}
		p.figures(figs...)
		rep.pairFigures(p, "simreal", ps, r.ch.samples.seen, "requests in flight in the simulation at arrival")
		return
	}
	// Two runs of the same requests.
	if len(rep.runs) < 2 {
		return
	}
	ref := rep.runs[rep.ref]
	if ref.ch == nil {
		return
	}
	for i, r := range rep.runs {
		if i == rep.ref || r.ch == nil {
			continue
		}
		lvl := max(r.ch.samples.level, ref.ch.samples.level)
		a, b := r.ch.samples.at(lvl), ref.ch.samples.at(lvl)
		at := ref.ch.inflightAt()
		var ps []pair
		for j, k := 0, 0; j < len(a) && k < len(b); {
			switch {
			case a[j].h < b[k].h:
				j++
			case a[j].h > b[k].h:
				k++
			default:
				ps = append(ps, newPair(b[k].in, at(b[k].arr), a[j].ttft, b[k].ttft, a[j].e2e, b[k].e2e))
				j++
				k++
			}
		}
		if len(ps) < 20 {
			continue // not the same requests
		}
		p.section("simreal", fmt.Sprintf("Request by request: %s against %s", rep.Inputs[i].Label, rep.Inputs[rep.ref].Label))
		p.note(fmt.Sprintf("Requests with the same request_id in both runs; error = (%s − %s) / %s.", rep.Inputs[i].Label, rep.Inputs[rep.ref].Label, rep.Inputs[rep.ref].Label))
		rep.pairFigures(p, "pairs", ps, max(r.ch.samples.seen, ref.ch.samples.seen), "requests in flight in "+rep.Inputs[rep.ref].Label+" at arrival")
		return
	}
}

func newPair(in int64, load float64, simT, realT, simE, realE int64) pair {
	pr := pair{in: float64(in), load: load, ttftE: math.NaN(), e2eE: math.NaN()}
	if simT != trace.Null && realT != trace.Null && realT > 0 {
		pr.ttftE = float64(simT-realT) / float64(realT) * 100
	}
	if simE != trace.Null && realE != trace.Null && realE > 0 {
		pr.e2eE = float64(simE-realE) / float64(realE) * 100
	}
	return pr
}

// pairFigures: per-request error against prompt length and against load.
func (rep *Report) pairFigures(p *page, id string, ps []pair, seen int64, loadLabel string) {
	var figs []*figure
	for _, m := range []struct {
		name string
		err  func(pair) float64
	}{{"TTFT", func(x pair) float64 { return x.ttftE }}, {"E2E", func(x pair) float64 { return x.e2eE }}} {
		var in, load, es []float64
		for _, x := range ps {
			if e := m.err(x); !math.IsNaN(e) {
				in, load, es = append(in, x.in), append(load, x.load), append(es, e)
			}
		}
		if len(es) < 5 {
			continue
		}
		capt := fmt.Sprintf("One dot per request (%d of %d completed, sampled by id); the line is the median per tenth of the requests: a slope is an error that grows with ", len(es), seen)
		figs = append(figs,
			scatterFig(fmt.Sprintf("%s-%s-prompt", id, m.name), m.name+" error against prompt length", capt+"prompt length (the prefill model).",
				"prompt length (tokens)", m.name+" error (%)", in, es),
			scatterFig(fmt.Sprintf("%s-%s-load", id, m.name), m.name+" error against load at arrival", capt+"load (queueing and batching).",
				loadLabel, m.name+" error (%)", load, es))
	}
	p.figures(figs...)
}

// scatterFig draws points with the binned median over them and a zero line;
// the y axis spans the 1st to 99th percentile of the errors (at least
// ±10%), points beyond sit on the edge, hollow.
func scatterFig(id, title, caption, xlabel, ylabel string, xs, ys []float64) *figure {
	sorted := slices.Clone(ys)
	slices.Sort(sorted)
	lo := math.Min(sorted[len(sorted)/100], -10)
	hi := math.Max(sorted[len(sorted)-1-len(sorted)/100], 10)
	pad := (hi - lo) * 0.05
	lo, hi = lo-pad, hi+pad
	x1 := 0.0
	for _, x := range xs {
		x1 = math.Max(x1, x)
	}
	p := newPlot(id, narrowW, narrowH, axis{label: xlabel, lo: 0, hi: x1 * 1.03}, axis{label: ylabel, lo: lo, hi: hi})
	p.hline(0, "#666", "")
	var ix, iy, ox, oy []float64
	for i := range xs {
		if y := ys[i]; y < lo || y > hi {
			ox, oy = append(ox, xs[i]), append(oy, math.Min(math.Max(y, lo+pad/2), hi-pad/2))
		} else {
			ix, iy = append(ix, xs[i]), append(iy, y)
		}
	}
	p.dots(ix, iy, 2.2, colorAt(0), "one request")
	p.dots(ox, oy, 2.2, "#999", "beyond the axis: drawn at its edge")
	mx, my := quantileBins(xs, ys, 10)
	p.line(mx, my, colorAt(1), "series", "median error", false)
	return &figure{id: id, title: title, caption: caption, svg: p.end(),
		legend: []legendItem{{name: "one request", color: colorAt(0), kind: "dot"}, {name: "beyond the axis (at its edge)", color: "#999", kind: "dot"}, {name: "median per tenth", color: colorAt(1)}}}
}
