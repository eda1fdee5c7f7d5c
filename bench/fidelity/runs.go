package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/trace"
)

// recordedRun is a real vLLM run replayed request by request with its own
// engine settings (LLMServingSim's runs: requests.jsonl, meta.json,
// timeseries.csv).
type recordedRun struct {
	name   string // "RTX4090/Llama-3.1-8B"
	reqs   []trace.Request
	setup  *fit.Setup
	series []measure.Sample // nil when not recorded
	sha    string           // of requests.jsonl, to recognise in-sample coefficients
}

// loadRuns finds every LLMServingSim run under data.
func loadRuns(data string) ([]*recordedRun, error) {
	dirs, err := filepath.Glob(filepath.Join(data, "measurements/llmservingsim/*/*/vllm/requests.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(dirs)
	var runs []*recordedRun
	for _, p := range dirs {
		dir := filepath.Dir(p)
		rc, err := measure.ReadRunMetaFile(filepath.Join(dir, "meta.json"))
		if err != nil {
			return nil, err
		}
		hw := filepath.Base(filepath.Dir(filepath.Dir(dir))) // RTX4090, RTXPRO6000
		gpu := ""
		if rc.Device == "" {
			gpu = hw // a meta.json without hardware: the directory names the GPU
		}
		dep, err := fit.Deployment{}.WithRun(rc, "", gpu, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		setup, err := fit.NewSetup(dep)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		reqs, err := measure.ReadRunRequests(p, "")
		if err != nil {
			return nil, err
		}
		r := &recordedRun{name: hw + "/" + filepath.Base(filepath.Dir(dir)), reqs: reqs, setup: setup, sha: sha256File(p)}
		if ts := filepath.Join(dir, "timeseries.csv"); exists(ts) {
			if r.series, err = measure.ReadTimeseriesFile(ts); err != nil {
				return nil, err
			}
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// runStats are the statistics of one run, real or simulated. Times µs.
type runStats struct {
	ttft, tpot, e2e []float64 // sorted, completed requests
	tput            float64   // completed requests / (last finish − first arrival), req/s
	tokTput         float64   // output tokens per second over the same span
	capacity        float64   // completions per second while a queue was waiting (NaN: never saturated)
	capWindow       [2]float64
	offered         float64 // arrivals per second over the arrival span
}

type reqTimes struct {
	arrival, ttft, e2e float64 // µs
	out                int32
}

func statsOf(rs []reqTimes, queued func(t float64) bool, horizon float64) runStats {
	var s runStats
	first, last, lastArr := math.Inf(1), 0.0, 0.0
	var toks float64
	for _, r := range rs {
		s.ttft = append(s.ttft, r.ttft)
		s.e2e = append(s.e2e, r.e2e)
		if r.out > 1 {
			s.tpot = append(s.tpot, (r.e2e-r.ttft)/float64(r.out-1))
		}
		first = math.Min(first, r.arrival)
		last = math.Max(last, r.arrival+r.e2e)
		lastArr = math.Max(lastArr, r.arrival)
		toks += float64(r.out)
	}
	sort.Float64s(s.ttft)
	sort.Float64s(s.tpot)
	sort.Float64s(s.e2e)
	if span := (last - first) / 1e6; span > 0 {
		s.tput = float64(len(rs)) / span
		s.tokTput = toks / span
	}
	if span := (lastArr - first) / 1e6; span > 0 {
		s.offered = float64(len(rs)-1) / span
	}
	s.capacity = math.NaN()
	if queued != nil {
		// The longest stretch of whole seconds with a waiting queue: the
		// server was saturated then, so completions came at its capacity.
		bestA, bestB, a := 0.0, 0.0, -1.0
		for t := 0.0; t <= horizon; t++ {
			if queued(t) {
				if a < 0 {
					a = t
				}
				if t-a > bestB-bestA {
					bestA, bestB = a, t
				}
			} else {
				a = -1
			}
		}
		if bestB-bestA >= 5 {
			n := 0
			for _, r := range rs {
				if f := (r.arrival + r.e2e) / 1e6; f >= bestA && f < bestB {
					n++
				}
			}
			s.capacity = float64(n) / (bestB - bestA)
			s.capWindow = [2]float64{bestA, bestB}
		}
	}
	return s
}

func realTimes(reqs []trace.Request) []reqTimes {
	out := make([]reqTimes, len(reqs))
	for i, r := range reqs {
		out[i] = reqTimes{float64(r.ArrivalUS), float64(r.RecordedTTFTUS), float64(r.RecordedE2EUS), r.OutputTokens}
	}
	return out
}

func simTimes(res []trace.Result) []reqTimes {
	out := make([]reqTimes, 0, len(res))
	for _, r := range res {
		if r.Status != trace.StatusCompleted {
			continue
		}
		out = append(out, reqTimes{float64(r.ArrivalUS), float64(r.TTFTUS), float64(r.E2EUS), r.OutputTokens})
	}
	return out
}

// pct is the nearest-rank percentile of sorted v (as benchmarks report it).
func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(q*float64(len(v)))) - 1
	return v[max(i, 0)]
}

// tick is the engine state at a whole second, as vLLM's 1 Hz logger sees it.
type tick struct{ waiting, running, kvPct float64 }

// simSeries samples the simulated engine at t = 1, 2, … s: the state after
// the last step that ended at or before t (idle engine: all zero).
func simSeries(steps []trace.Step, blocks int64, until float64) []tick {
	var out []tick
	j := -1
	for t := 1.0; t <= until; t++ {
		for j+1 < len(steps) && float64(steps[j+1].StartUS+steps[j+1].DurationUS) <= t*1e6 {
			j++
		}
		if j < 0 {
			out = append(out, tick{})
			continue
		}
		s := steps[j]
		out = append(out, tick{float64(s.Waiting), float64(s.Running), float64(s.KVBlocksUsed) / float64(blocks) * 100})
	}
	return out
}

// engineSide drops the API server's share of the first-token path (α0,
// α1): LLMServingSim records arrivals when vLLM's engine queued the request
// (after tokenisation) and TTFT from there, so the replay starts the clock
// at the same place.
type engineSide struct{ latency.Model }

func (m engineSide) Alpha() latency.Alpha {
	return latency.Alpha{PerOutputToken: m.Model.Alpha().PerOutputToken}
}

// runResult is one run simulated with one latency model.
type runResult struct {
	mode    string // --latency
	model   string // latency model label
	inSamp  bool   // the model's coefficients were fitted on this run
	real    runStats
	sim     runStats
	series  []tick // simulated, at 1 Hz
	lastRes []trace.Result
	err     error
}

func evalRun(r *recordedRun, mode string) runResult {
	res, err := resolveFor(mode, r.setup.Dep)
	if err != nil {
		return runResult{mode: mode, model: mode, err: err}
	}
	out := runResult{mode: mode, model: label(mode, res), inSamp: inSample(res, r.sha)}
	s, err := simulate(r.setup.Engine, engineSide{res.Model}, r.reqs, true)
	if err != nil {
		out.err = err
		return out
	}
	horizon := 0.0
	for _, x := range s.results {
		horizon = math.Max(horizon, float64(x.FinishedUS)/1e6)
	}
	if n := len(r.series); n > 0 {
		horizon = math.Max(horizon, r.series[n-1].T)
	}
	out.series = simSeries(s.steps, kvBlocks(r.setup), math.Ceil(horizon))
	out.sim = statsOf(simTimes(s.results), func(t float64) bool {
		i := int(t) - 1
		return i >= 0 && i < len(out.series) && out.series[i].waiting > 0
	}, horizon)
	var queued func(float64) bool
	if r.series != nil {
		queued = func(t float64) bool {
			for _, x := range r.series {
				if x.T == t {
					return x.Waiting > 0
				}
			}
			return false
		}
	}
	out.real = statsOf(realTimes(r.reqs), queued, horizon)
	out.lastRes = s.results
	return out
}

// writeRuns prints the per-run statistics, the queue over time and the capacity.
func writeRuns(w *strings.Builder, runs []*recordedRun, modes []string, acc *pool) {
	fmt.Fprintln(w, "#### Replayed runs (LLMServingSim, vLLM 0.19, each run's own engine settings)")
	fmt.Fprintln(w)
	type cell struct {
		r   *recordedRun
		res []runResult
	}
	var cells []cell
	for _, r := range runs {
		c := cell{r: r}
		for _, m := range modes {
			c.res = append(c.res, evalRun(r, m))
		}
		cells = append(cells, c)
	}
	fmt.Fprint(w, "| run | statistic | real |")
	for _, m := range modes {
		fmt.Fprintf(w, " %s |", m)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "|---|---|---:|")
	for range modes {
		fmt.Fprint(w, "---:|")
	}
	fmt.Fprintln(w)
	type row struct {
		name string
		get  func(s runStats) float64
		unit string
	}
	rows := []row{
		{"p50 TTFT", func(s runStats) float64 { return pct(s.ttft, 0.5) }, "ms"},
		{"p90 TTFT", func(s runStats) float64 { return pct(s.ttft, 0.9) }, "ms"},
		{"p50 TPOT", func(s runStats) float64 { return pct(s.tpot, 0.5) }, "ms"},
		{"p90 TPOT", func(s runStats) float64 { return pct(s.tpot, 0.9) }, "ms"},
		{"p50 E2E", func(s runStats) float64 { return pct(s.e2e, 0.5) }, "ms"},
		{"p90 E2E", func(s runStats) float64 { return pct(s.e2e, 0.9) }, "ms"},
		{"throughput", func(s runStats) float64 { return s.tput }, "req/s"},
		{"output tokens/s", func(s runStats) float64 { return s.tokTput }, "tok/s"},
		{"capacity (saturated)", func(s runStats) float64 { return s.capacity }, "req/s"},
	}
	for _, c := range cells {
		var real runStats
		for _, x := range c.res {
			if x.err == nil {
				real = x.real
				break
			}
		}
		fmt.Fprintf(w, "| %s (%d req, %.1f req/s offered) | | | ", c.r.name, len(c.r.reqs), real.offered)
		for _, x := range c.res {
			tag := x.model
			if x.inSamp {
				tag += " (fitted on this run)"
			}
			fmt.Fprintf(w, " %s |", tag)
		}
		fmt.Fprintln(w)
		for _, rw := range rows {
			rv := rw.get(real)
			scale := 1.0
			if rw.unit == "ms" {
				scale = 1e-3
			}
			fmt.Fprintf(w, "| | %s | %s |", rw.name, num(rv*scale, rw.unit))
			for _, x := range c.res {
				if x.err != nil {
					fmt.Fprint(w, " error |")
					continue
				}
				sv := rw.get(x.sim)
				fmt.Fprintf(w, " %s (%s) |", num(sv*scale, rw.unit), signed(sv, rv))
				if !x.inSamp && (x.mode == x.model || x.model != "roofline") && !math.IsNaN(sv) && !math.IsNaN(rv) && rv > 0 {
					acc.add(x.model, familyOf(c.r.setup.Dep.GPU), "saturated replay", rw.name, sv, rv)
				}
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
	for _, c := range cells {
		for _, x := range c.res {
			if x.err != nil {
				fmt.Fprintf(w, "- %s with %s: %v\n", c.r.name, x.model, x.err)
			}
		}
	}
	fmt.Fprintln(w, "Capacity is the completion rate over the longest stretch of seconds with a non-empty waiting queue (the server saturated), in the real time series and in the simulated one.")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "#### Queue over time (waiting / running requests at t seconds; real = vLLM's 1 Hz metrics)")
	fmt.Fprintln(w)
	for _, c := range cells {
		if c.r.series == nil {
			continue
		}
		n := len(c.r.series)
		step := 10.0
		fmt.Fprintf(w, "| %s | ", c.r.name)
		var ts []float64
		for t := step; t <= c.r.series[n-1].T; t += step {
			ts = append(ts, t)
			fmt.Fprintf(w, "%gs |", t)
		}
		fmt.Fprintln(w, " mean abs. error |")
		fmt.Fprint(w, "|---|")
		for range ts {
			fmt.Fprint(w, "---:|")
		}
		fmt.Fprintln(w, "---:|")
		at := func(t float64) *measure.Sample {
			for i := range c.r.series {
				if c.r.series[i].T == t {
					return &c.r.series[i]
				}
			}
			return nil
		}
		fmt.Fprint(w, "| real |")
		for _, t := range ts {
			if s := at(t); s != nil {
				fmt.Fprintf(w, " %d / %d |", s.Waiting, s.Running)
			} else {
				fmt.Fprint(w, " – |")
			}
		}
		fmt.Fprintln(w, " |")
		for _, x := range c.res {
			if x.err != nil {
				continue
			}
			fmt.Fprintf(w, "| %s |", x.model)
			for _, t := range ts {
				if i := int(t) - 1; i < len(x.series) {
					fmt.Fprintf(w, " %.0f / %.0f |", x.series[i].waiting, x.series[i].running)
				} else {
					fmt.Fprint(w, " 0 / 0 |")
				}
			}
			var dw, dr float64
			for _, s := range c.r.series {
				var sim tick
				if i := int(s.T) - 1; i >= 0 && i < len(x.series) {
					sim = x.series[i]
				}
				dw += math.Abs(sim.waiting - float64(s.Waiting))
				dr += math.Abs(sim.running - float64(s.Running))
			}
			fmt.Fprintf(w, " %.1f / %.1f |\n", dw/float64(n), dr/float64(n))
		}
		fmt.Fprintln(w)
	}
}

func num(v float64, unit string) string {
	if math.IsNaN(v) {
		return "–"
	}
	switch {
	case unit == "ms" && v >= 1000:
		return fmt.Sprintf("%.2f s", v/1000)
	case unit == "ms":
		return fmt.Sprintf("%.1f ms", v)
	case unit == "tok/s":
		return fmt.Sprintf("%.0f %s", v, unit)
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

// signed is the relative error of sim against real, "+12%".
func signed(sim, real float64) string {
	if math.IsNaN(sim) || math.IsNaN(real) || real == 0 {
		return "–"
	}
	return fmt.Sprintf("%+.0f%%", (sim/real-1)*100)
}
