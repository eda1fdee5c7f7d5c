package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blis-sim/blis/coefficients"
	"github.com/blis-sim/blis/internal/cliutil"
	"github.com/blis-sim/blis/lib/fit"
	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/fitted"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/measure"
	"github.com/blis-sim/blis/lib/roofline"
	"github.com/blis-sim/blis/lib/trace"
)

// calibration is one blis-calibrate invocation, filled from the flags.
type calibration struct {
	StepTimes, Requests, ServingPoints string // exactly one input (or OpenLoop)
	OpenLoop                           string // open-loop stages: an inference-perf run dir, a dir of runs, or the stage CSV
	AlphaTerms                         int    // α terms fitted (fit.AlphaQueueBase | ...)
	HoldTerms                          bool   // fit the α terms only
	EngineConfig                       string // llmservingsim meta.json for --requests
	Test, TestEngineConfig             string // explicit test data (same kind as the input)
	TestModel, TestGPU                 string // deployment of a --requests test run, if it differs
	TestTP                             int

	Dep       fit.Deployment // model, gpu, tp, dtypes, engine + version, engine limits
	Precision string         // serving-points filter ("native" = the checkpoint's dtype)
	Features  string
	Holdout   float64
	KFold     int
	Seed      uint64
	PerChain  int // closed-loop requests per chain (0: max(3, ⌈24/C⌉))
	MaxEvals  int
	Workers   int

	Evaluate     bool   // no fitting: judge an existing latency model
	Latency      string // roofline | fitted | auto (with --evaluate)
	Coefficients string // coefficients file to evaluate

	Output       string // coefficients YAML ("" or "-" → stdout)
	ReportPath   string // "" → stderr
	Residuals    int    // residual rows shown (0 = all)
	Quiet        bool
	Force        bool                // -o may replace an existing (or shipped) file
	DisplayPaths func(string) string // how source paths are written into the file
}

// Run executes the command. Input errors are *measure.InputError or *fit.TooFewError.
func (c *calibration) Run(stdout, stderr io.Writer) error {
	n := 0
	for _, s := range []string{c.StepTimes, c.Requests, c.ServingPoints, c.OpenLoop} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return usageErr("expected exactly one of --step-times, --requests, --serving-points, --open-loop, found %d", n)
	}
	if c.Holdout < 0 || c.Holdout >= 1 {
		return usageErr("--holdout: expected a fraction in [0, 1), found %g", c.Holdout)
	}
	if c.KFold != 0 && (c.Holdout > 0 || c.Test != "") {
		return usageErr("--kfold cannot be combined with --holdout or --test")
	}
	if c.Workers <= 0 || c.Workers > 2 {
		c.Workers = 2
	}
	if c.DisplayPaths == nil {
		c.DisplayPaths = func(p string) string { return p }
	}
	var progress io.Writer
	if !c.Quiet {
		progress = stderr
	}
	var rep *fit.Report
	var coef *fitted.Coefficients
	var resNames []string
	var err error
	switch {
	case c.StepTimes != "":
		rep, coef, err = c.runSteps()
		resNames = []string{"step"}
	case c.ServingPoints != "":
		rep, coef, resNames, err = c.runServing(progress)
	case c.OpenLoop != "":
		rep, coef, resNames, err = c.runOpenLoop(progress)
	default:
		rep, coef, resNames, err = c.runRequests(progress)
	}
	if err != nil {
		return err
	}
	rw := stderr
	if c.ReportPath != "" {
		f, err := os.Create(c.ReportPath)
		if err != nil {
			return err
		}
		defer f.Close()
		rw = f
	}
	if err := rep.Write(rw, resNames, c.Residuals); err != nil {
		return err
	}
	if coef == nil {
		return nil
	}
	if c.Output != "" && c.Output != "-" {
		out, note, err := c.outputPath(coef.FileName())
		if err != nil {
			return err
		}
		if err := coef.Save(out); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s%s\n", out, note)
		return nil
	}
	b, err := coef.Marshal()
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

// outputPath is where -o sends a file named rel (<model>/<gpu>-tp…yaml).
// Nothing is replaced without --force, except in the user's directory: a
// fit that would land on a shipped file goes to resolve.UserDir() instead,
// where blis-sim --latency auto finds it before the shipped one.
func (c *calibration) outputPath(rel string) (out, note string, err error) {
	out = c.Output
	if strings.HasSuffix(out, "/") {
		// A directory: the canonical <model>/<gpu>-tp<N>-<engine>-<version>.yaml under it.
		out = filepath.Join(out, rel)
		if shipped, ok := coefficients.Shipped(rel); ok && !c.Force && sameBytes(out, shipped) {
			u := resolve.UserDir()
			if u == "" {
				return "", "", usageErr("%s is a shipped coefficients file and the user directory is unknown: set %s=DIR, or pass --force to replace the shipped file", out, resolve.UserEnvDir)
			}
			return filepath.Join(u, rel), fmt.Sprintf(" (%s is a shipped file, left as it is; blis-sim --latency auto uses %s before it; --force replaces the shipped file)", out, u), nil
		}
	}
	if _, err := os.Stat(out); err == nil && !c.Force {
		return "", "", usageErr("-o %s: the file exists; pass --force to replace it", out)
	}
	return out, "", nil
}

// sameBytes reports whether the file at path holds exactly b.
func sameBytes(path string, b []byte) bool {
	have, err := os.ReadFile(path)
	return err == nil && string(have) == string(b)
}

// usageErr is the user's to fix (exit 2).
func usageErr(format string, args ...any) error { return cliutil.Usage(format, args...) }

func openFile(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &measure.InputError{Path: path, Msg: err.Error()}
	}
	return f, nil
}

// splitIdx applies --holdout (seeded); with no holdout everything trains.
func (c *calibration) splitIdx(n int) (train, test []int) {
	if c.Holdout == 0 {
		train = make([]int, n)
		for i := range train {
			train[i] = i
		}
		return train, nil
	}
	return fit.Split(n, c.Holdout, c.Seed, "holdout")
}

func (c *calibration) source(path string, rows int, filter string) (fitted.Source, error) {
	return fit.FileSource(path, c.DisplayPaths(path), rows, filter)
}

// ---- step-level ----

func (c *calibration) runSteps() (*fit.Report, *fitted.Coefficients, error) {
	read := func(path string) ([]measure.StepSample, measure.StepStats, error) {
		f, err := openFile(path)
		if err != nil {
			return nil, measure.StepStats{}, err
		}
		defer f.Close()
		return measure.ReadStepTimes(path, f, measure.StepFilter{Model: c.Dep.Model, GPU: c.Dep.GPU, TP: c.Dep.TP})
	}
	all, st, err := read(c.StepTimes)
	if err != nil {
		return nil, nil, err
	}
	if len(all) == 0 {
		return nil, nil, &measure.InputError{Path: c.StepTimes, Msg: fmt.Sprintf("no rows match --model %q --gpu %q --tp %d (%d rows read)", c.Dep.Model, c.Dep.GPU, c.Dep.TP, st.Rows)}
	}
	setup, err := fit.NewSetup(c.Dep)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	names, err := fit.FeatureNames(c.Features, setup.Dep.TP)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	fs, err := setup.Features(names)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	rep := &fit.Report{Title: fmt.Sprintf("blis-calibrate: step-level NNLS fit of %s on %s tp%d", setup.Resolved.Roofline.A.Name, setup.Resolved.Roofline.G.Name, setup.Dep.TP),
		Notes: []string{fmt.Sprintf("%s: %s format, %d rows read, %d filtered out, %d kept → %d step samples", c.StepTimes, st.Format, st.Rows, st.Filtered, st.Kept, len(all))}}
	var train, test []measure.StepSample
	var testPairs []fit.Pair
	switch {
	case c.Test != "":
		train = all
		if test, _, err = read(c.Test); err != nil {
			return nil, nil, err
		}
	case c.KFold > 0:
		train = all
		folds, err := fit.Folds(len(all), c.KFold, c.Seed, "kfold")
		if err != nil {
			return nil, nil, usageErr("--kfold: %v", err)
		}
		for k, fold := range folds {
			in := make([]bool, len(all))
			for _, i := range fold {
				in[i] = true
			}
			var tr []measure.StepSample
			for i := range all {
				if !in[i] {
					tr = append(tr, all[i])
				}
			}
			f, err := fit.FitSteps(tr, fs)
			if err != nil {
				return nil, nil, fmt.Errorf("fold %d: %w", k+1, err)
			}
			testPairs = append(testPairs, fit.PredictSteps(fit.Pick(all, fold), fs, f.Values)...)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d-fold cross-validation (seed %d): test error is out-of-fold", c.KFold, c.Seed))
	default:
		tr, te := c.splitIdx(len(all))
		train, test = fit.Pick(all, tr), fit.Pick(all, te)
	}
	f, err := fit.FitSteps(train, fs)
	if err != nil {
		return nil, nil, err
	}
	if test != nil {
		testPairs = fit.PredictSteps(test, fs, f.Values)
	}
	tst := fit.Summarise("step time", testPairs, 5)
	rep.Train = []fit.Stat{f.Train}
	if tst.N > 0 {
		rep.Test = []fit.Stat{tst}
		rep.Residuals = fit.ResidualRows([][]fit.Pair{testPairs})
	} else {
		rep.Residuals = fit.ResidualRows([][]fit.Pair{f.Pairs})
	}
	rep.Warnings = f.Warnings
	for j, n := range names {
		note := ""
		if f.AtBound[j] {
			note = "at bound 0"
		}
		rep.Coef = append(rep.Coef, fit.CoefRow{Name: n, Value: f.Values[j], Unit: fit.Unit(n), Note: note})
	}
	coef := setup.Coefficients(names, f.Values, latency.Alpha{})
	coef.Fit = fitted.FitInfo{Method: "nnls", Target: "step_us", TrainRows: len(train), TestRows: tst.N,
		TrainMAPE: fit.Round2(f.Train.MAPE), TestMAPE: fit.Round2(tst.MAPE)}
	coef.Notes = fmt.Sprintf("Exact NNLS on relative step-time error. train MAPE %.1f%% (%d steps)", f.Train.MAPE, len(train))
	if tst.N > 0 {
		coef.Notes += fmt.Sprintf(", test MAPE %.1f%% (%d steps)", tst.MAPE, tst.N)
	}
	coef.Notes += ". Alpha not fitted: step timings carry no per-request overhead."
	filter := fmt.Sprintf("model=%s gpu=%s tp=%d", c.Dep.Model, c.Dep.GPU, c.Dep.TP)
	src, err := c.source(c.StepTimes, st.Kept, filter)
	if err != nil {
		return nil, nil, err
	}
	coef.Sources = []fitted.Source{src}
	return rep, coef, nil
}

// ---- serving points ----

func (c *calibration) readServing(path string) ([]measure.ServingPoint, measure.ServingStats, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, measure.ServingStats{}, err
	}
	defer f.Close()
	return measure.ReadServingPoints(path, f, measure.ServingFilter{Model: c.Dep.Model, GPU: c.Dep.GPU, Engine: c.Dep.Engine,
		Version: c.Dep.Version, Precision: c.Precision, TP: c.Dep.TP})
}

func (c *calibration) servingSetup(p measure.ServingPoint) (*fit.Setup, error) {
	s, err := fit.ServingSetup(c.Dep, p)
	if err == nil {
		s.PerChain = c.PerChain
	}
	return s, err
}

func (c *calibration) runServing(progress io.Writer) (*fit.Report, *fitted.Coefficients, []string, error) {
	pts, st, err := c.readServing(c.ServingPoints)
	if err != nil {
		return nil, nil, nil, err
	}
	statNames := []string{"mean TTFT", "mean TPOT"}
	if c.Evaluate {
		rep, err := c.evaluateServing(pts, st, progress)
		return rep, nil, statNames, err
	}
	if err := measure.SingleGroup(c.ServingPoints, pts, st); err != nil {
		return nil, nil, nil, err
	}
	setup, err := c.servingSetup(pts[0])
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	names, err := fit.FeatureNames(c.Features, setup.Dep.TP)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	var train, test []measure.ServingPoint
	if c.Test != "" {
		train = pts
		var tst measure.ServingStats
		if test, tst, err = c.readServing(c.Test); err != nil {
			return nil, nil, nil, err
		}
		// Test points are simulated with the trained deployment's setup, so
		// points of another deployment would give a meaningless error.
		if err := measure.SingleGroup(c.Test, test, tst); err != nil {
			return nil, nil, nil, err
		}
		if g, want := test[0].Group(), pts[0].Group(); g != want {
			return nil, nil, nil, &measure.InputError{Path: c.Test, Msg: fmt.Sprintf("expected test points of the trained deployment %s, found %s (narrow --test with the same flags, or fit that deployment separately)", want, g)}
		}
	} else if c.KFold > 0 {
		return nil, nil, nil, usageErr("--kfold is for --step-times (a simulator-in-the-loop fit per fold is too slow); use --holdout or --test")
	} else {
		tr, te := c.splitIdx(len(pts))
		train, test = fit.Pick(pts, tr), fit.Pick(pts, te)
	}
	in, out := fit.MaxLengths(pts)
	job := &fit.SimFitJob{Setup: setup, Names: names, Train: setup.ServingTargets(train), Test: setup.ServingTargets(test),
		MaxIn: in, MaxOut: out, Method: "nelder-mead-sim", TargetID: "mean_ttft_tpot",
		Options: fit.SimFitOptions{MaxEvals: c.MaxEvals, Alpha: c.AlphaTerms, HoldTerms: c.HoldTerms, Progress: progress, Workers: c.Workers, Label: "fit"}}
	t0 := time.Now()
	res, err := job.Run()
	if err != nil {
		return nil, nil, nil, err
	}
	g := pts[0].Group()
	res.Report.Notes = append([]string{
		fmt.Sprintf("%s: %d rows read, %d kept (%s); %d filtered out, %d not aggregated, %d without tp_size, %d exact duplicates of kept rows", c.ServingPoints, st.Rows, st.Kept, g, st.Filtered, st.NotAgg, st.MissingTP, st.Duplicates),
		fmt.Sprintf("split: %d train, %d test (holdout %.2g, seed %d); engine: max_num_seqs %d, max_num_batched_tokens %d, kv_blocks %d × %d tokens",
			len(train), len(test), c.Holdout, c.Seed, setup.Engine.Engine.MaxNumSeqs, setup.Engine.Engine.MaxNumBatchedTokens, setup.Engine.Engine.KVBlocks, setup.Engine.Engine.BlockSize),
		fmt.Sprintf("closed loop: C chains × %s requests each; fit took %s", chainDesc(c.PerChain), time.Since(t0).Round(time.Millisecond)),
	}, res.Report.Notes...)
	src, err := c.source(c.ServingPoints, len(pts), "group="+g)
	if err != nil {
		return nil, nil, nil, err
	}
	res.Coeffs.Sources = []fitted.Source{src}
	return res.Report, res.Coeffs, statNames, nil
}

// evaluateServing judges an existing latency model on every deployment group
// of the points (no fitting).
func (c *calibration) evaluateServing(pts []measure.ServingPoint, st measure.ServingStats, progress io.Writer) (*fit.Report, error) {
	if len(pts) == 0 {
		return nil, measure.SingleGroup(c.ServingPoints, pts, st)
	}
	groups, skipped, err := fit.EvaluateServing(pts, st, fit.EvalOptions{Base: c.Dep, Latency: c.Latency, Coefficients: c.Coefficients,
		Holdout: c.Holdout, Seed: c.Seed, PerChain: c.PerChain, Workers: c.Workers, Progress: progress})
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return nil, usageErr("no deployment group could be evaluated:\n  %s", strings.Join(skipped, "\n  "))
	}
	rep := fit.EvaluationReport(fmt.Sprintf("blis-calibrate --evaluate --latency %s: simulated vs measured closed-loop serving points", c.Latency), groups, nil)
	notes := []string{fmt.Sprintf("%s: %d rows read, %d kept, %d filtered out, %d not aggregated, %d without tp_size, %d exact duplicates of kept rows", c.ServingPoints, st.Rows, st.Kept, st.Filtered, st.NotAgg, st.MissingTP, st.Duplicates)}
	if c.Holdout > 0 {
		notes = append(notes, fmt.Sprintf("only the points a fit with --holdout %g --seed %d held out of each deployment are evaluated", c.Holdout, c.Seed))
	}
	for _, s := range skipped {
		if strings.Contains(s, "none held out") {
			notes = append(notes, s)
		} else {
			rep.Warnings = append(rep.Warnings, "skipped "+s)
		}
	}
	rep.Notes = append(notes, rep.Notes...)
	return rep, nil
}

// ---- replayed runs ----

type run struct {
	path  string
	reqs  []trace.Request
	cfg   measure.RunConfig
	setup *fit.Setup
}

func (c *calibration) loadRun(path, metaPath, model, gpu string, tp int) (*run, error) {
	r := &run{path: path}
	if metaPath != "" {
		var err error
		if r.cfg, err = measure.ReadRunMetaFile(metaPath); err != nil {
			return nil, err
		}
	}
	var err error
	if r.reqs, err = measure.ReadRunRequests(path, ""); err != nil {
		return nil, err
	}
	dep, err := c.Dep.WithRun(r.cfg, model, gpu, tp)
	if err != nil {
		if dep.GPU == "" && r.cfg.Device != "" {
			return nil, usageErr("%s: %v (%s); pass --gpu NAME or --gpu FILE.yaml", metaPath, err, strings.Join(roofline.GPUNames(), ", "))
		}
		return nil, usageErr("%s: %v (pass --model and --gpu)", path, err)
	}
	if r.setup, err = fit.NewSetup(dep); err != nil {
		return nil, usageErr("%s: %v", path, err)
	}
	return r, nil
}

func (c *calibration) runRequests(progress io.Writer) (*fit.Report, *fitted.Coefficients, []string, error) {
	tr, err := c.loadRun(c.Requests, c.EngineConfig, c.Dep.Model, c.Dep.GPU, c.Dep.TP)
	if err != nil {
		return nil, nil, nil, err
	}
	trainT, err := fit.NewRunTarget(c.Requests, tr.reqs, fit.EngineRunner(tr.setup.Engine))
	if err != nil {
		return nil, nil, nil, err
	}
	var te *run
	if c.Test != "" {
		if te, err = c.loadRun(c.Test, c.TestEngineConfig, c.TestModel, c.TestGPU, c.TestTP); err != nil {
			return nil, nil, nil, err
		}
	}
	if c.Holdout > 0 || c.KFold > 0 {
		return nil, nil, nil, usageErr("--holdout and --kfold do not apply to a replayed run (its requests queue behind each other); give a second run with --test")
	}
	maxIn, maxOut := 0, 0
	for _, r := range tr.reqs {
		maxIn, maxOut = max(maxIn, int(r.InputTokens)), max(maxOut, int(r.OutputTokens))
	}
	if c.Evaluate {
		spec := resolve.Spec{Mode: c.Latency, Model: tr.setup.Dep.Model, GPU: tr.setup.Dep.GPU, TP: tr.setup.Dep.TP, CoefficientsFile: c.Coefficients,
			WeightDtype: tr.setup.Dep.WeightDtype, Engine: tr.setup.Dep.Engine, Version: tr.setup.Dep.Version}
		r, err := resolve.Resolve(spec)
		if err != nil {
			return nil, nil, nil, usageErr("%v", err)
		}
		pairs, err := fit.EvalTargets(func() latency.Model { return r.Model }, []fit.Target{trainT}, 1)
		if err != nil {
			return nil, nil, nil, err
		}
		rep := &fit.Report{Title: "blis-calibrate --evaluate: replay of " + c.Requests, Notes: []string{r.Why, runNote(tr)}}
		rep.Test = fit.StatsOf(fit.RunStatNames, pairs, 0)
		return rep, nil, []string{"stat"}, nil
	}
	names, err := fit.FeatureNames(c.Features, tr.setup.Dep.TP)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	job := &fit.SimFitJob{Setup: tr.setup, Names: names, Train: []fit.Target{trainT}, MaxIn: maxIn, MaxOut: maxOut,
		Method: "nelder-mead-sim", TargetID: "run_ttft_tpot_e2e",
		Options: fit.SimFitOptions{MaxEvals: c.MaxEvals, Alpha: c.AlphaTerms, HoldTerms: c.HoldTerms, Progress: progress, Workers: 1, Label: "fit"}}
	t0 := time.Now()
	res, err := job.Run()
	if err != nil {
		return nil, nil, nil, err
	}
	res.Report.Notes = append([]string{runNote(tr), fmt.Sprintf("fit took %s", time.Since(t0).Round(time.Millisecond))}, res.Report.Notes...)
	res.Report.Residuals = perStatRows(res.TrainPairs, "train")
	if te != nil {
		// The coefficients carried to another deployment: roofline features
		// rescale with its model and GPU, token features do not.
		coef := *res.Coeffs
		coef.Model, coef.GPU, coef.TP = te.setup.Resolved.Roofline.A.Name, te.setup.Resolved.Roofline.G.Name, te.setup.Dep.TP
		if coef.GPU != res.Coeffs.GPU {
			coef.RooflineEfficiency = nil // the test GPU's own profile, not the trained one's
		}
		testT, err := fit.NewRunTarget(c.Test, te.reqs, fit.EngineRunner(te.setup.Engine))
		if err != nil {
			return nil, nil, nil, err
		}
		newModel := func() latency.Model {
			m, err := fitted.NewModel(&coef, te.setup.Resolved.Roofline, c.Test)
			if err != nil {
				panic(err) // same features as the fitted file, which validated
			}
			return m
		}
		pairs, err := fit.EvalTargets(newModel, []fit.Target{testT}, 1)
		if err != nil {
			return nil, nil, nil, err
		}
		res.Report.Test = fit.StatsOf(fit.RunStatNames, pairs, 0)
		res.Report.Notes = append(res.Report.Notes, "test: "+runNote(te))
		res.Report.Residuals = append(res.Report.Residuals, perStatRows(pairs, "test")...)
		res.Coeffs.Fit.TestRows = len(te.reqs)
		res.Coeffs.Fit.TestMAPE = fit.Round2(fit.MeanMAPE(res.Report.Test))
		res.Coeffs.Notes += " " + fit.StatNote("test on "+c.DisplayPaths(c.Test), res.Report.Test)
	}
	res.Coeffs.Fit.TrainRows = len(tr.reqs)
	src, err := c.source(c.Requests, len(tr.reqs), "")
	if err != nil {
		return nil, nil, nil, err
	}
	res.Coeffs.Sources = []fitted.Source{src}
	if c.EngineConfig != "" {
		s2, err := c.source(c.EngineConfig, 0, "engine config")
		if err != nil {
			return nil, nil, nil, err
		}
		res.Coeffs.Sources = append(res.Coeffs.Sources, s2)
	}
	return res.Report, res.Coeffs, []string{"stat"}, nil
}

func runNote(r *run) string {
	e := r.setup.Engine.Engine
	return fmt.Sprintf("%s: %d requests; %s on %s tp%d, max_num_seqs %d, max_num_batched_tokens %d, kv_blocks %d × %d",
		r.path, len(r.reqs), r.setup.Dep.Model, r.setup.Dep.GPU, r.setup.Dep.TP, e.MaxNumSeqs, e.MaxNumBatchedTokens, e.KVBlocks, e.BlockSize)
}

// perStatRows shows one residual row per statistic of a run.
func perStatRows(pairs [][]fit.Pair, what string) []fit.Residual {
	var out []fit.Residual
	for k := range pairs {
		for _, p := range pairs[k] {
			out = append(out, fit.Residual{Label: what + " " + fit.RunStatNames[k], Cols: []fit.Pair{p}})
		}
	}
	return out
}

func chainDesc(n int) string {
	if n > 0 {
		return fmt.Sprint(n)
	}
	return "max(10, ⌈24/C⌉)"
}
