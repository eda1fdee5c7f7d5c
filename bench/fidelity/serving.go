package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/roofline"
)

// groupEval is one deployment of the serving points judged by one latency model.
type groupEval struct {
	model   string
	why     string
	pred    [][]float64 // per point: mean TTFT, mean TPOT (µs)
	inSamp  []bool      // point was in the model's training set
	err     error
	heldOut int
}

type servingGroup struct {
	key   string
	pts   []measure.ServingPoint
	setup *fit.Setup
	evals []groupEval
}

// evalServing simulates every catalogued deployment group of
// silicon_sample.csv with each latency mode on the closed-loop harness of
// lib/fit (C clients × 10 requests each, vLLM server defaults).
func evalServing(data string, modes []string, workers int, progress io.Writer) ([]*servingGroup, map[string]int, error) {
	path := filepath.Join(data, "measurements/aiconfigurator/silicon_sample.csv")
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	pts, st, err := measure.ReadServingPoints(path, f, measure.ServingFilter{})
	f.Close()
	if err != nil {
		return nil, nil, err
	}
	sha := sha256File(path)
	skipped := map[string]int{}
	if n := st.NotAgg + st.MissingTP; n > 0 {
		skipped["disaggregated or without tp_size"] += n
	}
	if st.Duplicates > 0 {
		skipped["exact duplicates of another row (one measurement published twice)"] += st.Duplicates
	}
	byGroup := map[string][]measure.ServingPoint{}
	for _, p := range pts {
		byGroup[p.Group()] = append(byGroup[p.Group()], p)
	}
	var groups []*servingGroup
	for _, g := range st.Groups() {
		gp := byGroup[g]
		p := gp[0]
		if _, ok := roofline.LookupModel(p.Model); !ok {
			skipped["model not in the catalogue: "+p.Model] += len(gp)
			continue
		}
		if _, ok := roofline.LookupGPU(p.GPU); !ok {
			skipped["GPU not in the catalogue: "+p.GPU] += len(gp)
			continue
		}
		setup, err := fit.ServingSetup(fit.Deployment{}, p)
		if err != nil {
			skipped[fmt.Sprintf("cannot be set up (%v)", firstLine(err))] += len(gp)
			continue
		}
		groups = append(groups, &servingGroup{key: g, pts: gp, setup: setup})
	}
	sort.SliceStable(groups, func(i, j int) bool { return groupOrder(groups[i].pts[0]) < groupOrder(groups[j].pts[0]) })
	for _, g := range groups {
		targets := make([]fit.Target, len(g.pts))
		for i, p := range g.pts {
			targets[i] = &fit.ServingTarget{P: p, Run: runner(g.setup.PointEngine(p))}
		}
		for _, mode := range modes {
			ev := groupEval{model: mode, inSamp: make([]bool, len(g.pts))}
			res, err := resolveFor(mode, g.setup.Dep)
			if err != nil {
				ev.err = err
				g.evals = append(g.evals, ev)
				continue
			}
			ev.model, ev.why = label(mode, res), res.Why
			if inSample(res, sha) && res.Coeffs.Sources[0].Filter == "group="+g.key {
				// The points its fit trained on (the seeded split of
				// scripts/regen-coefficients.sh, seed 42) are not a test.
				c := res.Coeffs
				all := c.Fit.TrainRows + c.Fit.TestRows
				for i := range ev.inSamp {
					ev.inSamp[i] = true
				}
				if c.Fit.TestRows > 0 && all == len(g.pts) {
					_, te := fit.Split(len(g.pts), float64(c.Fit.TestRows)/float64(all), 42, "holdout")
					for _, i := range te {
						ev.inSamp[i] = false
					}
					ev.heldOut = len(te)
				}
			}
			spec := res
			newModel := func() latency.Model {
				r, err := resolveFor(mode, fit.Deployment{Model: g.setup.Dep.Model, GPU: g.setup.Dep.GPU, TP: g.setup.Dep.TP, WeightDtype: g.setup.Dep.WeightDtype})
				if err != nil {
					return spec.Model
				}
				return r.Model
			}
			if progress != nil {
				fmt.Fprintf(progress, "fidelity: %s, %d points, %s\n", g.key, len(g.pts), ev.model)
			}
			ev.pred, ev.err = fit.PredictAllWith(newModel, targets, workers)
			g.evals = append(g.evals, ev)
		}
	}
	return groups, skipped, nil
}

// groupOrder sorts deployments by engine, GPU, model, TP, version, precision.
func groupOrder(p measure.ServingPoint) string {
	return fmt.Sprintf("%s|%s|%s|%03d|%s|%s", p.Engine, p.GPU, p.Model, p.TP, p.Version, p.Precision)
}

func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func writeServing(w *strings.Builder, groups []*servingGroup, skipped map[string]int, modes []string, acc *pool, csv io.Writer) {
	fmt.Fprintln(w, "#### Closed-loop serving points (aiconfigurator silicon_sample.csv), every deployment with a catalogued model and GPU")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Mean TTFT and mean TPOT, median absolute error (median signed error; + = simulator slow). The engine is vLLM's in every case: SGLang and TensorRT-LLM rows show how far a vLLM model is from those engines, not a fidelity target.")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| engine | GPU | model | TP | precision | points | C |")
	for _, m := range modes {
		fmt.Fprintf(w, " %s TTFT | %s TPOT |", m, m)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---|---|---:|---|---:|---|")
	for range modes {
		fmt.Fprint(w, "---:|---:|")
	}
	fmt.Fprintln(w)
	if csv != nil {
		fmt.Fprintln(csv, "group,source,isl,osl,concurrency,latency,in_sample,meas_ttft_ms,pred_ttft_ms,meas_tpot_ms,pred_tpot_ms")
	}
	for _, g := range groups {
		p := g.pts[0]
		cs := map[int]bool{}
		for _, q := range g.pts {
			cs[q.Concurrency] = true
		}
		lo, hi := math.MaxInt, 0
		for c := range cs {
			lo, hi = min(lo, c), max(hi, c)
		}
		ver := p.Version
		if ver == "" {
			ver = "?"
		}
		prec := p.Precision
		if prec == "" {
			prec = "native"
		}
		fmt.Fprintf(w, "| %s %s | %s | %s | %d | %s | %d | %d–%d |", p.Engine, ver, p.GPU, p.Model, p.TP, prec, len(g.pts), lo, hi)
		for k, ev := range g.evals {
			if ev.err != nil {
				fmt.Fprint(w, " error | error |")
				continue
			}
			pooled := modes[k] == ev.model || ev.model != "roofline" // auto → roofline is pooled once
			var tt, tp []pair
			for i, q := range g.pts {
				if ev.inSamp[i] {
					continue
				}
				tt = append(tt, pair{ev.pred[i][0], q.TTFTus})
				tp = append(tp, pair{ev.pred[i][1], q.TPOTus})
				if p.Engine == "vllm" && pooled {
					acc.add(ev.model, familyOf(p.GPU), regimeOf(q.Concurrency), "mean TTFT", ev.pred[i][0], q.TTFTus)
					acc.add(ev.model, familyOf(p.GPU), regimeOf(q.Concurrency), "mean TPOT", ev.pred[i][1], q.TPOTus)
				}
			}
			note := ""
			if ev.model != modes[0] && ev.model != "roofline" {
				note = fmt.Sprintf(" [%s, %d held out]", ev.model, len(tt))
			}
			a, b := errStats(tt)
			c, d := errStats(tp)
			fmt.Fprintf(w, " %s | %s%s |", errCell(a, b), errCell(c, d), note)
			if csv != nil {
				for i, q := range g.pts {
					fmt.Fprintf(csv, "%q,%s,%d,%d,%d,%s,%t,%.3f,%.3f,%.3f,%.3f\n", g.key, q.Source, q.InputTokens, q.OutputTokens, q.Concurrency, ev.model, ev.inSamp[i],
						q.TTFTus/1e3, ev.pred[i][0]/1e3, q.TPOTus/1e3, ev.pred[i][1]/1e3)
				}
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	var reasons []string
	for r := range skipped {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		fmt.Fprintf(w, "- skipped %d points: %s\n", skipped[r], r)
	}
	for _, g := range groups {
		for _, ev := range g.evals {
			if ev.err != nil {
				fmt.Fprintf(w, "- %s with %s: %v\n", g.key, ev.model, firstLine(ev.err))
			}
		}
	}
	fmt.Fprintln(w)
}
