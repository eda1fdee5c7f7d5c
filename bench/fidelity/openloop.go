package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/measure"
)

// openLoopEval is one open-loop run simulated with one latency model.
type openLoopEval struct {
	mode, model string
	sim         []fit.StageStats
	err         error
}

// loadOpenLoop reads the derived open-loop table and prepares its runs.
func loadOpenLoop(path string, dep fit.Deployment) ([]*fit.OpenLoopRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := measure.ReadOpenLoopStages(path, f)
	if err != nil {
		return nil, err
	}
	return fit.OpenLoopRuns(rows, dep)
}

// evalOpenLoop simulates every run with every mode on workers goroutines.
func evalOpenLoop(runs []*fit.OpenLoopRun, modes []string, workers int, progress io.Writer) [][]openLoopEval {
	out := make([][]openLoopEval, len(runs))
	for i := range out {
		out[i] = make([]openLoopEval, len(modes))
	}
	type job struct{ i, j int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	for w := 0; w < max(workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for jb := range jobs {
				r, mode := runs[jb.i], modes[jb.j]
				e := openLoopEval{mode: mode, model: mode}
				res, err := resolveFor(mode, r.Setup.Dep)
				if err != nil {
					e.err = err
				} else {
					e.model = label(mode, res)
					e.sim, e.err = r.Simulate(res.Model)
				}
				out[jb.i][jb.j] = e
				mu.Lock()
				done++
				if progress != nil {
					fmt.Fprintf(progress, "open loop: %d/%d %s %s\n", done, len(runs)*len(modes), fit.ShortName(r.Name), mode)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range runs {
		for j := range modes {
			jobs <- job{i, j}
		}
	}
	close(jobs)
	wg.Wait()
	return out
}

// openLoopStat is one statistic of the per-stage table.
type openLoopStat struct {
	name string
	get  func(s fit.StageStats) float64
	unit string
}

var openLoopStats = []openLoopStat{
	{"p50 TTFT", func(s fit.StageStats) float64 { return s.TTFT.P50 }, "ms"},
	{"p90 TTFT", func(s fit.StageStats) float64 { return s.TTFT.P90 }, "ms"},
	{"mean TPOT", func(s fit.StageStats) float64 { return s.TPOT.Mean }, "ms"},
	{"p50 E2E", func(s fit.StageStats) float64 { return s.E2E.P50 }, "s"},
	{"p90 E2E", func(s fit.StageStats) float64 { return s.E2E.P90 }, "s"},
	{"throughput", func(s fit.StageStats) float64 { return s.RequestsPerSec }, "req/s"},
}

// writeOpenLoop prints the per-experiment, per-stage table and adds the
// pairs to the pool.
func writeOpenLoop(w *strings.Builder, runs []*fit.OpenLoopRun, modes []string, evals [][]openLoopEval, acc *pool) {
	fmt.Fprintln(w, "#### Open-loop runs (inference-perf against vLLM on H100: inference-sim/training), per stage")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each experiment's requests regenerated from the config inference-perf ran (blis-synth's reader), stage by stage, with the client's cap on requests in flight and its 300 s timeout; the deployment's own max_num_seqs and max_num_batched_tokens, prefix caching, KV from memory at 0.9. Simulated (error against real); statistics as inference-perf computes them (TPOT over the SSE stream's lines: about half the time per token; mean ITL equals it).")
	fmt.Fprintln(w)
	fmt.Fprint(w, "| experiment | stage | rate | statistic | real |")
	for _, m := range modes {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---:|---:|---|---:|")
	for range modes {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	for i, r := range runs {
		for si, st := range r.Stages {
			real := fit.Measured(st)
			for k, s := range openLoopStats {
				name, rate, exp := "", "", ""
				if k == 0 {
					rate = fmt.Sprintf("%g/s", st.RequestedRate)
					name = fmt.Sprint(st.Stage)
					if si == 0 {
						exp = fit.ShortName(r.Name)
						if r.Overloaded() {
							exp += " (overload)"
						}
					}
				}
				rv := s.get(real)
				fmt.Fprintf(w, "| %s | %s | %s | %s | %s |", exp, name, rate, s.name, olNum(rv, s.unit))
				for _, e := range evals[i] {
					if e.err != nil {
						fmt.Fprint(w, " error |")
						continue
					}
					sv := s.get(e.sim[si])
					fmt.Fprintf(w, " %s (%s) |", olNum(sv, s.unit), signed(sv, rv))
				}
				fmt.Fprintln(w)
			}
		}
	}
	fmt.Fprintln(w)
	for i, r := range runs {
		for _, e := range evals[i] {
			if e.err != nil {
				fmt.Fprintf(w, "- %s with %s: %v\n", fit.ShortName(r.Name), e.mode, e.err)
			}
		}
	}
	for _, r := range runs {
		if r.Setup.Dep.Version == "" {
			fmt.Fprintf(w, "The runs' vLLM version is not recorded: they are simulated with async scheduling (it became vLLM's default in 0.14, before they ran; synchronous, their TP2 decode is 8–15%% slow). ")
			break
		}
	}
	fmt.Fprintln(w, "Prompts are scaled to each run's measured mean prompt length (the inference-perf that ran re-tokenised its random prompts 2–7% longer than configured). Overload: the run failed more than a tenth of its requests (its client's 300 s timeout).")
	fmt.Fprintln(w)
}

func olNum(v float64, unit string) string {
	if math.IsNaN(v) {
		return "–"
	}
	switch unit {
	case "ms":
		if v >= 1 {
			return fmt.Sprintf("%.2f s", v)
		}
		return fmt.Sprintf("%.1f ms", v*1e3)
	case "s":
		return fmt.Sprintf("%.2f s", v)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// openLoopAsync is the scheduler the inference-sim/training runs are
// simulated with. Their vLLM version is not recorded; they ran in February
// 2026, after vLLM 0.14 made async scheduling the default, and their TP2
// decode says so: synchronous, the 1.7 ms per-step host time lands on the
// step and CodeLlama-34B / Mixtral TPOT come out 8–15% slow, async 0–3%.
const openLoopAsync = "on"

// olSel picks stages: the 13 non-overload experiments' or the overloaded.
func olPairs(runs []*fit.OpenLoopRun, sims [][]fit.StageStats, keep func(*fit.OpenLoopRun) bool, get func(fit.StageStats) float64) []float64 {
	var out []float64
	for i, r := range runs {
		if !keep(r) || sims[i] == nil {
			continue
		}
		for si, st := range r.Stages {
			rv, sv := get(fit.Measured(st)), get(sims[i][si])
			if rv > 0 && !math.IsNaN(sv) {
				out = append(out, sv/rv-1)
			}
		}
	}
	return out
}

// medAbs is the median absolute value of v in %, and the median signed.
func medAbs(v []float64) (float64, float64) {
	a := make([]float64, len(v))
	b := make([]float64, len(v))
	for i, x := range v {
		a[i], b[i] = math.Abs(x)*100, x*100
	}
	return median(a), median(b)
}

func cellOf(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	m, b := medAbs(v)
	return fmt.Sprintf("%.1f%% (%+.1f%%)", m, b)
}

// modelOf is a run's model, as the leave-one-model-out folds group runs.
func modelOf(r *fit.OpenLoopRun) string { return r.Setup.Resolved.Roofline.A.Name }

// alphaModel is m with its α0 replaced.
func alphaModel(m latency.Model, a0 float64) latency.Model {
	a := m.Alpha()
	a.QueueBase = a0
	return latency.WithAlpha(m, a)
}

// simulateAll simulates each selected run with the roofline and α0 on
// workers goroutines (nil for runs not selected).
func simulateAll(runs []*fit.OpenLoopRun, sel func(int) bool, a0 float64, workers int) ([][]fit.StageStats, error) {
	out := make([][]fit.StageStats, len(runs))
	errs := make([]error, len(runs))
	jobs := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < max(workers, 1); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				res, err := resolveFor("roofline", runs[i].Setup.Dep)
				if err != nil {
					errs[i] = err
					continue
				}
				out[i], errs[i] = runs[i].Simulate(alphaModel(res.Model, a0))
			}
		}()
	}
	for i := range runs {
		if sel(i) {
			jobs <- i
		}
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// alphaGridUS are the α0 values the leave-one-model-out fits search (µs),
// refined by a parabola through the best and its neighbours.
var alphaGridUS = []float64{0, 1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000, 11000, 12000, 14000, 16000}

// gridMin refines the grid's best point xs[best] by the vertex of the
// parabola through it and its neighbours (to 10 µs); the point itself at an
// end of the grid or when the three are not convex.
func gridMin(xs, ys []float64, best int) float64 {
	if best == 0 || best == len(xs)-1 {
		return xs[best]
	}
	x0, x1, x2 := xs[best-1], xs[best], xs[best+1]
	y0, y1, y2 := ys[best-1], ys[best], ys[best+1]
	den := (x0 - x1) * (x0 - x2) * (x1 - x2)
	A := (x2*(y1-y0) + x1*(y0-y2) + x0*(y2-y1)) / den
	B := (x2*x2*(y0-y1) + x1*x1*(y2-y0) + x0*x0*(y1-y2)) / den
	if !(A > 0) {
		return x1
	}
	return math.Round(-B/(2*A)/10) * 10
}

// ttftLoss is the mean squared log error of p50 and p90 TTFT over the
// non-overload stages of the runs selected (the statistics α0 moves).
func ttftLoss(runs []*fit.OpenLoopRun, sims [][]fit.StageStats, sel func(*fit.OpenLoopRun) bool) float64 {
	sum, n := 0.0, 0
	for i, r := range runs {
		if !sel(r) || r.Overloaded() || sims[i] == nil {
			continue
		}
		for si, st := range r.Stages {
			m := fit.Measured(st)
			for _, p := range [][2]float64{{sims[i][si].TTFT.P50, m.TTFT.P50}, {sims[i][si].TTFT.P90, m.TTFT.P90}} {
				l := math.Log(p[0] / p[1])
				sum += l * l
				n++
			}
		}
	}
	return sum / float64(n)
}

// lomo is one leave-one-model-out fold.
type lomo struct {
	model   string
	alpha0  float64 // fitted on the other models, µs
	sim     [][]fit.StageStats
	shipped [][]fit.StageStats // the shipped default's simulation
}

// leaveOneModelOut fits α0 on three models' non-overload stages and judges
// the fourth with it (and with the shipped default, already simulated).
func leaveOneModelOut(runs []*fit.OpenLoopRun, shipped [][]fit.StageStats, workers int, progress io.Writer) ([]lomo, error) {
	grid := make([][][]fit.StageStats, len(alphaGridUS))
	for g, a := range alphaGridUS {
		var err error
		grid[g], err = simulateAll(runs, func(i int) bool { return !runs[i].Overloaded() }, a, workers)
		if err != nil {
			return nil, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "open loop: α0 grid %d/%d\n", g+1, len(alphaGridUS))
		}
	}
	var models []string
	seen := map[string]bool{}
	for _, r := range runs {
		if m := modelOf(r); !seen[m] {
			seen[m] = true
			models = append(models, m)
		}
	}
	var out []lomo
	for _, held := range models {
		train := func(r *fit.OpenLoopRun) bool { return modelOf(r) != held }
		best := 0
		loss := make([]float64, len(alphaGridUS))
		for g := range alphaGridUS {
			loss[g] = ttftLoss(runs, grid[g], train)
			if loss[g] < loss[best] {
				best = g
			}
		}
		a := gridMin(alphaGridUS, loss, best)
		sim, err := simulateAll(runs, func(i int) bool { return modelOf(runs[i]) == held }, a, workers)
		if err != nil {
			return nil, err
		}
		out = append(out, lomo{model: held, alpha0: a, sim: sim, shipped: shipped})
		if progress != nil {
			fmt.Fprintf(progress, "open loop: held out %s, α0 %.0f µs\n", held, a)
		}
	}
	return out, nil
}

// writeOpenLoopLOMO prints the leave-one-model-out table and the goals.
func writeOpenLoopLOMO(w *strings.Builder, runs []*fit.OpenLoopRun, folds []lomo, shipped [][]fit.StageStats) {
	notOver := func(r *fit.OpenLoopRun) bool { return !r.Overloaded() }
	over := func(r *fit.OpenLoopRun) bool { return r.Overloaded() }
	fmt.Fprintln(w, "#### Open-loop runs: leave one model out")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "α0, the request path outside the GPU step, fitted (p50 and p90 TTFT, mean squared log error) on the non-overload stages of three models and judged on the fourth; beside it the shipped default (%d µs, roofline). Median absolute error over the held-out model's non-overload stages (median signed in brackets); overload runs: completion rate and p50 TTFT.\n", latency.VLLMQueueBaseUS)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| held-out model | α0 fitted on the others | stages | p50 TTFT | p90 TTFT | mean TPOT | p50 E2E | p90 E2E | p50 TTFT, shipped α0 | p90 TTFT, shipped α0 | overload: throughput | overload: p50 TTFT |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	held := make([][]fit.StageStats, len(runs)) // every run under the fold that held its model out
	for _, f := range folds {
		in := func(r *fit.OpenLoopRun) bool { return modelOf(r) == f.model && !r.Overloaded() }
		inO := func(r *fit.OpenLoopRun) bool { return modelOf(r) == f.model && r.Overloaded() }
		n := len(olPairs(runs, f.sim, in, func(s fit.StageStats) float64 { return s.TTFT.P50 }))
		get := func(sims [][]fit.StageStats, sel func(*fit.OpenLoopRun) bool, g func(fit.StageStats) float64) string {
			return cellOf(olPairs(runs, sims, sel, g))
		}
		fmt.Fprintf(w, "| %s | %.1f ms | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f.model, f.alpha0/1e3, n,
			get(f.sim, in, openLoopStats[0].get), get(f.sim, in, openLoopStats[1].get), get(f.sim, in, openLoopStats[2].get),
			get(f.sim, in, openLoopStats[3].get), get(f.sim, in, openLoopStats[4].get),
			get(shipped, in, openLoopStats[0].get), get(shipped, in, openLoopStats[1].get),
			get(f.sim, inO, openLoopStats[5].get), get(f.sim, inO, openLoopStats[0].get))
		for i, r := range runs {
			if modelOf(r) == f.model {
				held[i] = f.sim[i]
			}
		}
	}
	fmt.Fprintln(w)
	ratio := func(sims [][]fit.StageStats) []float64 {
		var out []float64
		for i, r := range runs {
			if len(r.Stages) != 2 || r.Overloaded() || sims[i] == nil {
				continue
			}
			real := r.Stages[1].TTFT.P50 / r.Stages[0].TTFT.P50
			sim := sims[i][1].TTFT.P50 / sims[i][0].TTFT.P50
			out = append(out, sim/real-1)
		}
		return out
	}
	overTTFT := func(sims [][]fit.StageStats) string {
		var lo, hi float64 = math.Inf(1), 0
		for i, r := range runs {
			if !r.Overloaded() || sims[i] == nil {
				continue
			}
			q := sims[i][0].TTFT.P50 / r.Stages[0].TTFT.P50
			lo, hi = math.Min(lo, q), math.Max(hi, q)
		}
		return fmt.Sprintf("%.2f–%.2f×", lo, hi)
	}
	fmt.Fprintln(w, "Against issue 27's goals (13 non-overload experiments, median over stages; overload: the three runs that failed more than a tenth of their requests):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| statistic | goal | held out (α0 fitted on the other models) | shipped default |")
	fmt.Fprintln(w, "|---|---|---:|---:|")
	for _, g := range []struct {
		name, goal string
		k          int
	}{{"p50 TTFT", "≤ 10%", 0}, {"p90 TTFT", "≤ 15%", 1}, {"mean TPOT / ITL", "≤ 5%", 2}, {"p50 E2E", "≤ 5%", 3}} {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", g.name, g.goal, cellOf(olPairs(runs, held, notOver, openLoopStats[g.k].get)), cellOf(olPairs(runs, shipped, notOver, openLoopStats[g.k].get)))
	}
	fmt.Fprintf(w, "| overload: throughput | ≤ 10%% | %s | %s |\n", cellOf(olPairs(runs, held, over, openLoopStats[5].get)), cellOf(olPairs(runs, shipped, over, openLoopStats[5].get)))
	fmt.Fprintf(w, "| overload: p50 TTFT, simulated / real | within 2× | %s | %s |\n", overTTFT(held), overTTFT(shipped))
	fmt.Fprintf(w, "| load response: stage 1 / stage 0 p50 TTFT against the real ratio (two-stage runs) | ≤ 25%% | %s | %s |\n", cellOf(ratio(held)), cellOf(ratio(shipped)))
	fmt.Fprintln(w)
}

// poolOpenLoop adds the shipped model's stages to the pooled table: the
// non-overload stages as one regime, the overloaded runs' completion rates
// as their capacity.
func poolOpenLoop(acc *pool, runs []*fit.OpenLoopRun, modes []string, evals [][]openLoopEval) {
	for j := range modes {
		for i, r := range runs {
			e := evals[i][j]
			if e.err != nil || (e.mode != e.model && e.model == "roofline") {
				continue // an auto that fell back to the roofline: already in its row
			}
			fam := familyOf(r.Setup.Dep.GPU)
			for si, st := range r.Stages {
				real := fit.Measured(st)
				sim := e.sim[si]
				if r.Overloaded() {
					acc.add(e.model, fam, "open loop, overloaded", "p50 TTFT", sim.TTFT.P50, real.TTFT.P50)
					acc.add(e.model, fam, "open loop, overloaded", "mean TPOT", sim.TPOT.Mean, real.TPOT.Mean)
					acc.add(e.model, fam, "open loop, overloaded", "capacity (completion rate)", sim.RequestsPerSec, real.RequestsPerSec)
					continue
				}
				acc.add(e.model, fam, "open loop, below overload", "p50 TTFT", sim.TTFT.P50, real.TTFT.P50)
				acc.add(e.model, fam, "open loop, below overload", "mean TPOT", sim.TPOT.Mean, real.TPOT.Mean)
			}
		}
	}
}

func runOpenLoopOnly(path string, modes []string, async string, workers int, quiet bool) error {
	var progress io.Writer
	if !quiet {
		progress = os.Stderr
	}
	var w strings.Builder
	if err := openLoopSection(&w, path, modes, async, workers, progress, &pool{}); err != nil {
		return err
	}
	_, err := io.WriteString(os.Stdout, w.String())
	return err
}

// openLoopSection writes the open-loop tables (per stage, leave one model
// out, goals) and pools the errors.
func openLoopSection(w *strings.Builder, path string, modes []string, async string, workers int, progress io.Writer, acc *pool) error {
	if async == "" {
		async = openLoopAsync
	}
	runs, err := loadOpenLoop(path, fit.Deployment{AsyncScheduling: async})
	if err != nil {
		return err
	}
	evals := evalOpenLoop(runs, modes, workers, progress)
	writeOpenLoop(w, runs, modes, evals, acc)
	poolOpenLoop(acc, runs, modes, evals)
	shipped, err := simulateAll(runs, func(int) bool { return true }, latency.VLLMQueueBaseUS, workers)
	if err != nil {
		return err
	}
	folds, err := leaveOneModelOut(runs, shipped, workers, progress)
	if err != nil {
		return err
	}
	writeOpenLoopLOMO(w, runs, folds, shipped)
	return nil
}

// writeOpenLoopBeforeAfter compares the roofline without a first-token
// path (α0 = 0, the simulator before issue 27) with the shipped default,
// per experiment and stage (go run ./bench/fidelity -only open-loop-before-after).
func writeOpenLoopBeforeAfter(w *strings.Builder, path string, workers int) error {
	runs, err := loadOpenLoop(path, fit.Deployment{AsyncScheduling: openLoopAsync})
	if err != nil {
		return err
	}
	all := func(int) bool { return true }
	before, err := simulateAll(runs, all, 0, workers)
	if err != nil {
		return err
	}
	after, err := simulateAll(runs, all, latency.VLLMQueueBaseUS, workers)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "| experiment | stage | p50 TTFT real | before | after | p90 TTFT real | before | after | mean TPOT | p50 E2E | p90 E2E | throughput |\n")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for i, r := range runs {
		for si, st := range r.Stages {
			m := fit.Measured(st)
			b, a := before[i][si], after[i][si]
			name := fit.ShortName(r.Name)
			if r.Overloaded() {
				name += " (overload)"
			}
			fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, st.Stage,
				olNum(m.TTFT.P50, "ms"), signed(b.TTFT.P50, m.TTFT.P50), signed(a.TTFT.P50, m.TTFT.P50),
				olNum(m.TTFT.P90, "ms"), signed(b.TTFT.P90, m.TTFT.P90), signed(a.TTFT.P90, m.TTFT.P90),
				signed(a.TPOT.Mean, m.TPOT.Mean), signed(a.E2E.P50, m.E2E.P50), signed(a.E2E.P90, m.E2E.P90), signed(a.RequestsPerSec, m.RequestsPerSec))
		}
	}
	notOver := func(r *fit.OpenLoopRun) bool { return !r.Overloaded() }
	fmt.Fprintf(w, "\nMedian over the 13 non-overload experiments' stages: p50 TTFT %s → %s, p90 TTFT %s → %s, mean TPOT %s → %s, p50 E2E %s → %s.\n",
		cellOf(olPairs(runs, before, notOver, openLoopStats[0].get)), cellOf(olPairs(runs, after, notOver, openLoopStats[0].get)),
		cellOf(olPairs(runs, before, notOver, openLoopStats[1].get)), cellOf(olPairs(runs, after, notOver, openLoopStats[1].get)),
		cellOf(olPairs(runs, before, notOver, openLoopStats[2].get)), cellOf(olPairs(runs, after, notOver, openLoopStats[2].get)),
		cellOf(olPairs(runs, before, notOver, openLoopStats[3].get)), cellOf(olPairs(runs, after, notOver, openLoopStats[3].get)))
	return nil
}
