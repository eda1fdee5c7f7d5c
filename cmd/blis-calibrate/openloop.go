package main

import (
	"fmt"
	"io"
	"time"

	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/fitted"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/roofline"
)

// ---- open-loop stages ----

// readOpenLoop reads open-loop stages and keeps the rows of --model,
// --gpu and --tp.
func (c *calibration) readOpenLoop(path string) ([]*fit.OpenLoopRun, int, error) {
	rows, err := measure.ReadOpenLoop(path, c.Dep.GPU)
	if err != nil {
		return nil, 0, err
	}
	var keep []measure.OpenLoopStage
	for _, r := range rows {
		if (c.Dep.Model == "" || sameModel(c.Dep.Model, r.Model)) && (c.Dep.GPU == "" || measure.MatchGPU(c.Dep.GPU, r.GPU)) && (c.Dep.TP == 0 || c.Dep.TP == r.TP) {
			keep = append(keep, r)
		}
	}
	if len(keep) == 0 {
		return nil, len(rows), &measure.InputError{Path: path, Msg: fmt.Sprintf("no stage matches --model %q --gpu %q --tp %d (%d stages read)", c.Dep.Model, c.Dep.GPU, c.Dep.TP, len(rows))}
	}
	dep := fit.Deployment{GPUMemUtil: c.Dep.GPUMemUtil, KVBlocks: c.Dep.KVBlocks, BlockSize: c.Dep.BlockSize,
		AsyncScheduling: c.Dep.AsyncScheduling, WeightDtype: c.Dep.WeightDtype, KVDtype: c.Dep.KVDtype}
	runs, err := fit.OpenLoopRuns(keep, dep)
	if err != nil {
		return nil, len(rows), usageErr("%s: %v", path, err)
	}
	return runs, len(rows), nil
}

func targetsOf(runs []*fit.OpenLoopRun) []fit.Target {
	var t []fit.Target
	for _, r := range runs {
		t = append(t, r.Targets()...)
	}
	return t
}

func (c *calibration) runOpenLoop(progress io.Writer) (*fit.Report, *fitted.Coefficients, []string, error) {
	runs, read, err := c.readOpenLoop(c.OpenLoop)
	if err != nil {
		return nil, nil, nil, err
	}
	stats := fit.OpenLoopStatNames
	if c.Evaluate {
		rep := &fit.Report{Title: fmt.Sprintf("blis-calibrate --evaluate --latency %s: simulated vs measured open-loop stages", c.Latency)}
		var all [][]fit.Pair
		for _, r := range runs {
			d := r.Setup.Dep
			res, err := resolve.Resolve(resolve.Spec{Mode: c.Latency, Model: d.Model, GPU: d.GPU, TP: d.TP, CoefficientsFile: c.Coefficients, WeightDtype: d.WeightDtype, Engine: d.Engine, Version: d.Version})
			if err != nil {
				return nil, nil, nil, usageErr("%s: %v", r.Name, err)
			}
			pairs, err := fit.EvalTargets(func() latency.Model { return res.Model }, r.Targets(), c.Workers)
			if err != nil {
				return nil, nil, nil, err
			}
			if all == nil {
				all = make([][]fit.Pair, len(pairs))
			}
			for k := range pairs {
				all[k] = append(all[k], pairs[k]...)
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %s", fit.ShortName(r.Name), res.Why))
		}
		rep.Test = fit.StatsOf(stats, all, 5)
		rep.Residuals = fit.ResidualRows(all)
		rep.Notes = append([]string{fmt.Sprintf("%s: %d stages read, %d runs kept", c.OpenLoop, read, len(runs)), openLoopNote()}, rep.Notes...)
		return rep, nil, stats, nil
	}
	d0 := runs[0].Setup.Dep
	for _, r := range runs[1:] {
		if d := r.Setup.Dep; d.Model != d0.Model || d.GPU != d0.GPU || d.TP != d0.TP {
			return nil, nil, nil, usageErr("%s: the runs are of several deployments (%s on %s tp%d and %s on %s tp%d, ...): a fit is for one; narrow with --model, --gpu, --tp", c.OpenLoop, d0.Model, d0.GPU, d0.TP, d.Model, d.GPU, d.TP)
		}
	}
	var train, test []*fit.OpenLoopRun
	switch {
	case c.Test != "":
		train = runs
		if test, _, err = c.readOpenLoop(c.Test); err != nil {
			return nil, nil, nil, err
		}
	case c.KFold > 0:
		return nil, nil, nil, usageErr("--kfold is for --step-times; use --holdout (a fraction of the runs) or --test")
	case c.Holdout > 0:
		tr, te := fit.Split(len(runs), c.Holdout, c.Seed, "holdout")
		if len(tr) == 0 || len(te) == 0 {
			return nil, nil, nil, usageErr("--holdout %g of %d runs leaves no run to train or to test on; give more runs or --test", c.Holdout, len(runs))
		}
		train, test = fit.Pick(runs, tr), fit.Pick(runs, te)
	default:
		train = runs
	}
	names, err := fit.FeatureNames(c.Features, d0.TP)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	maxIn, maxOut := 0, 0
	for _, r := range runs {
		for i := range r.Reqs {
			maxIn, maxOut = max(maxIn, int(r.Reqs[i].InputTokens)), max(maxOut, int(r.Reqs[i].OutputTokens))
		}
	}
	job := &fit.SimFitJob{Setup: train[0].Setup, Names: names, Train: targetsOf(train), Test: targetsOf(test), MaxIn: maxIn, MaxOut: maxOut,
		Method: "nelder-mead-sim", TargetID: "open_loop_stage_quantiles",
		Options: fit.SimFitOptions{MaxEvals: c.MaxEvals, Alpha: c.AlphaTerms, HoldTerms: c.HoldTerms, Progress: progress, Workers: c.Workers, Label: "fit"}}
	t0 := time.Now()
	res, err := job.Run()
	if err != nil {
		return nil, nil, nil, err
	}
	e := train[0].Setup.Engine.Engine
	res.Report.Notes = append([]string{
		fmt.Sprintf("%s: %d stages read; %d runs train, %d test; engine: max_num_seqs %d, max_num_batched_tokens %d, kv_blocks %d × %d, async scheduling %v",
			c.OpenLoop, read, len(train), len(test), e.MaxNumSeqs, e.MaxNumBatchedTokens, e.KVBlocks, e.BlockSize, e.AsyncScheduling),
		openLoopNote(), fmt.Sprintf("fit took %s", time.Since(t0).Round(time.Millisecond)),
	}, res.Report.Notes...)
	src, err := c.source(c.OpenLoop, len(targetsOf(runs)), fmt.Sprintf("model=%s gpu=%s tp=%d", d0.Model, d0.GPU, d0.TP))
	if err != nil {
		return nil, nil, nil, err
	}
	res.Coeffs.Sources = []fitted.Source{src}
	res.Coeffs.Engine = firstNonEmptyStr(d0.Engine, "vllm")
	return res.Report, res.Coeffs, stats, nil
}

func openLoopNote() string {
	return "each run's requests regenerated from its inference-perf config, stage by stage, with the client's in-flight cap and timeout; statistics per stage as inference-perf computes them (tpot_mean over the SSE stream's lines)"
}

func firstNonEmptyStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sameModel matches a --model (catalogue name, HF id or its last part)
// against a run's HF id.
func sameModel(want, have string) bool {
	if measure.MatchModel(want, have) {
		return true
	}
	a, ok1 := roofline.LookupModel(want)
	b, ok2 := roofline.LookupModel(have)
	return ok1 && ok2 && a.ShortName() == b.ShortName()
}
