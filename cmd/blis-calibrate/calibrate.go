package fit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/fitted"
	"github.com/blis-sim/blis/lib/latency/resolve"
	"github.com/blis-sim/blis/lib/roofline"
	"github.com/blis-sim/blis/lib/trace"
)

// Command is one blis-calibrate invocation; cmd/blis-calibrate fills it from flags.
type Command struct {
	StepTimes, Requests, ServingPoints string // exactly one input
	EngineConfig                       string // llmservingsim meta.json for --requests
	Test, TestEngineConfig             string // explicit test data (same kind as the input)
	TestModel, TestGPU                 string // deployment of a --requests test run, if it differs
	TestTP                             int

	Dep       Deployment // model, gpu, tp, dtypes, engine + version, engine limits
	Precision string     // serving-points filter ("native" = the checkpoint's dtype)
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
	DisplayPaths func(string) string // how source paths are written into the file
}

// Run executes the command. Input errors are *InputError or *TooFewError.
func (c *Command) Run(stdout, stderr io.Writer) error {
	n := 0
	for _, s := range []string{c.StepTimes, c.Requests, c.ServingPoints} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return usageErr("expected exactly one of --step-times, --requests, --serving-points, found %d", n)
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
	var rep *Report
	var coef *fitted.Coefficients
	var resNames []string
	var err error
	switch {
	case c.StepTimes != "":
		rep, coef, err = c.runSteps()
		resNames = []string{"step"}
	case c.ServingPoints != "":
		rep, coef, resNames, err = c.runServing(progress)
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
		out := c.Output
		if strings.HasSuffix(out, "/") {
			// A directory: the canonical <model>/<gpu>-tp<N>-<engine>-<version>.yaml under it.
			out = filepath.Join(out, coef.FileName())
		}
		if err := coef.Save(out); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", out)
		return nil
	}
	b, err := coef.Marshal()
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// IsUsage reports whether err is the user's to fix (exit 2).
func IsUsage(err error) bool {
	var u *usageError
	var ie *InputError
	var tf *TooFewError
	var re *trace.RowError
	return errors.As(err, &u) || errors.As(err, &ie) || errors.As(err, &tf) || errors.As(err, &re)
}

func usageErr(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

func openFile(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &InputError{Path: path, Msg: err.Error()}
	}
	return f, nil
}

// splitIdx applies --holdout (seeded); with no holdout everything trains.
func (c *Command) splitIdx(n int) (train, test []int) {
	if c.Holdout == 0 {
		train = make([]int, n)
		for i := range train {
			train[i] = i
		}
		return train, nil
	}
	return Split(n, c.Holdout, c.Seed, "holdout")
}

func pick[T any](v []T, idx []int) []T {
	out := make([]T, len(idx))
	for i, j := range idx {
		out[i] = v[j]
	}
	return out
}

func (c *Command) source(path string, rows int, filter string) (fitted.Source, error) {
	return FileSource(path, c.DisplayPaths(path), rows, filter)
}

// ---- step-level ----

func (c *Command) runSteps() (*Report, *fitted.Coefficients, error) {
	read := func(path string) ([]StepSample, StepStats, error) {
		f, err := openFile(path)
		if err != nil {
			return nil, StepStats{}, err
		}
		defer f.Close()
		return ReadStepTimes(path, f, StepFilter{Model: c.Dep.Model, GPU: c.Dep.GPU, TP: c.Dep.TP})
	}
	all, st, err := read(c.StepTimes)
	if err != nil {
		return nil, nil, err
	}
	if len(all) == 0 {
		return nil, nil, &InputError{Path: c.StepTimes, Msg: fmt.Sprintf("no rows match --model %q --gpu %q --tp %d (%d rows read)", c.Dep.Model, c.Dep.GPU, c.Dep.TP, st.Rows)}
	}
	setup, err := NewSetup(c.Dep)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	names, err := FeatureNames(c.Features, setup.Dep.TP)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	fs, err := setup.Features(names)
	if err != nil {
		return nil, nil, usageErr("%v", err)
	}
	rep := &Report{Title: fmt.Sprintf("blis-calibrate: step-level NNLS fit of %s on %s tp%d", setup.Resolved.Roofline.A.Name, setup.Resolved.Roofline.G.Name, setup.Dep.TP),
		Notes: []string{fmt.Sprintf("%s: %s format, %d rows read, %d filtered out, %d kept → %d step samples", c.StepTimes, st.Format, st.Rows, st.Filtered, st.Kept, len(all))}}
	var train, test []StepSample
	var testPairs []Pair
	switch {
	case c.Test != "":
		train = all
		if test, _, err = read(c.Test); err != nil {
			return nil, nil, err
		}
	case c.KFold > 0:
		train = all
		folds, err := Folds(len(all), c.KFold, c.Seed, "kfold")
		if err != nil {
			return nil, nil, usageErr("--kfold: %v", err)
		}
		for k, fold := range folds {
			in := make([]bool, len(all))
			for _, i := range fold {
				in[i] = true
			}
			var tr []StepSample
			for i := range all {
				if !in[i] {
					tr = append(tr, all[i])
				}
			}
			f, err := FitSteps(tr, fs)
			if err != nil {
				return nil, nil, fmt.Errorf("fold %d: %w", k+1, err)
			}
			testPairs = append(testPairs, PredictSteps(pick(all, fold), fs, f.Values)...)
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d-fold cross-validation (seed %d): test error is out-of-fold", c.KFold, c.Seed))
	default:
		tr, te := c.splitIdx(len(all))
		train, test = pick(all, tr), pick(all, te)
	}
	f, err := FitSteps(train, fs)
	if err != nil {
		return nil, nil, err
	}
	if test != nil {
		testPairs = PredictSteps(test, fs, f.Values)
	}
	tst := Summarise("step time", testPairs, 5)
	rep.Train = []Stat{f.Train}
	if tst.N > 0 {
		rep.Test = []Stat{tst}
		rep.Residuals = ResidualRows([][]Pair{testPairs})
	} else {
		rep.Residuals = ResidualRows([][]Pair{f.Pairs})
	}
	rep.Warnings = f.Warnings
	for j, n := range names {
		note := ""
		if f.AtBound[j] {
			note = "at bound 0"
		}
		rep.Coef = append(rep.Coef, CoefRow{Name: n, Value: f.Values[j], Unit: Unit(n), Note: note})
	}
	coef := setup.Coefficients(names, f.Values, latency.Alpha{})
	coef.Fit = fitted.FitInfo{Method: "nnls", Target: "step_us", TrainRows: len(train), TestRows: tst.N,
		TrainMAPE: round2(f.Train.MAPE), TestMAPE: round2(tst.MAPE)}
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

func (c *Command) readServing(path string) ([]ServingPoint, ServingStats, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, ServingStats{}, err
	}
	defer f.Close()
	return ReadServingPoints(path, f, ServingFilter{Model: c.Dep.Model, GPU: c.Dep.GPU, Engine: c.Dep.Engine,
		Version: c.Dep.Version, Precision: c.Precision, TP: c.Dep.TP})
}

func (c *Command) servingSetup(p ServingPoint) (*Setup, error) {
	dep := c.Dep
	dep.Model, dep.TP, dep.Engine, dep.Version = p.Model, p.TP, p.Engine, p.Version
	if dep.GPU == "" {
		dep.GPU = p.GPU
	}
	if dep.WeightDtype == "" && p.Precision != "" {
		dep.WeightDtype = p.Precision
	}
	s, err := NewSetup(dep)
	if err == nil {
		s.PerChain = c.PerChain
	}
	return s, err
}

func (c *Command) runServing(progress io.Writer) (*Report, *fitted.Coefficients, []string, error) {
	pts, st, err := c.readServing(c.ServingPoints)
	if err != nil {
		return nil, nil, nil, err
	}
	statNames := []string{"mean TTFT", "mean TPOT"}
	if c.Evaluate {
		rep, err := c.evaluateServing(pts, st, progress)
		return rep, nil, statNames, err
	}
	if err := SingleGroup(c.ServingPoints, pts, st); err != nil {
		return nil, nil, nil, err
	}
	setup, err := c.servingSetup(pts[0])
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	names, err := FeatureNames(c.Features, setup.Dep.TP)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	var train, test []ServingPoint
	if c.Test != "" {
		train = pts
		var tst ServingStats
		if test, tst, err = c.readServing(c.Test); err != nil {
			return nil, nil, nil, err
		}
		// Test points are simulated with the trained deployment's setup, so
		// points of another deployment would give a meaningless error.
		if err := SingleGroup(c.Test, test, tst); err != nil {
			return nil, nil, nil, err
		}
		if g, want := test[0].Group(), pts[0].Group(); g != want {
			return nil, nil, nil, &InputError{Path: c.Test, Msg: fmt.Sprintf("expected test points of the trained deployment %s, found %s (narrow --test with the same flags, or fit that deployment separately)", want, g)}
		}
	} else if c.KFold > 0 {
		return nil, nil, nil, usageErr("--kfold is for --step-times (a simulator-in-the-loop fit per fold is too slow); use --holdout or --test")
	} else {
		tr, te := c.splitIdx(len(pts))
		train, test = pick(pts, tr), pick(pts, te)
	}
	in, out := MaxLengths(pts)
	job := &SimFitJob{Setup: setup, Names: names, Train: setup.ServingTargets(train), Test: setup.ServingTargets(test),
		MaxIn: in, MaxOut: out, Method: "nelder-mead-sim", TargetID: "mean_ttft_tpot",
		Options: SimFitOptions{MaxEvals: c.MaxEvals, FitAlpha: true, Progress: progress, Workers: c.Workers, Label: "fit"}}
	t0 := time.Now()
	res, err := job.Run()
	if err != nil {
		return nil, nil, nil, err
	}
	g := pts[0].Group()
	res.Report.Notes = append([]string{
		fmt.Sprintf("%s: %d rows read, %d kept (%s); %d filtered out, %d not aggregated, %d without tp_size", c.ServingPoints, st.Rows, st.Kept, g, st.Filtered, st.NotAgg, st.MissingTP),
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
func (c *Command) evaluateServing(pts []ServingPoint, st ServingStats, progress io.Writer) (*Report, error) {
	if len(pts) == 0 {
		return nil, SingleGroup(c.ServingPoints, pts, st)
	}
	rep := &Report{Title: fmt.Sprintf("blis-calibrate --evaluate --latency %s: simulated vs measured closed-loop serving points", c.Latency)}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d rows read, %d kept, %d filtered out, %d not aggregated, %d without tp_size", c.ServingPoints, st.Rows, st.Kept, st.Filtered, st.NotAgg, st.MissingTP))
	byGroup := map[string][]ServingPoint{}
	for _, p := range pts {
		byGroup[p.Group()] = append(byGroup[p.Group()], p)
	}
	var allPairs [2][]Pair
	if c.Holdout > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("only the points a fit with --holdout %g --seed %d held out of each deployment are evaluated", c.Holdout, c.Seed))
	}
	for _, g := range st.Groups() {
		gp := byGroup[g]
		if c.Holdout > 0 {
			// The same seeded split a fit of this deployment alone makes.
			_, te := Split(len(gp), c.Holdout, c.Seed, "holdout")
			gp = pick(gp, te)
			if len(gp) == 0 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d point(s), none held out", g, len(byGroup[g])))
				continue
			}
		}
		setup, err := c.servingSetup(gp[0])
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("skipped %s (%d points): %v", g, len(gp), err))
			continue
		}
		spec := resolve.Spec{Mode: c.Latency, Model: setup.Dep.Model, GPU: setup.Dep.GPU, TP: setup.Dep.TP,
			WeightDtype: setup.Dep.WeightDtype, CoefficientsFile: c.Coefficients, Engine: setup.Dep.Engine, Version: setup.Dep.Version}
		r0, err := resolve.Resolve(spec)
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("skipped %s (%d points): %v", g, len(gp), err))
			continue
		}
		newModel := func() latency.Model {
			r, err := resolve.Resolve(spec)
			if err != nil {
				return r0.Model // cannot happen: the same spec resolved above
			}
			return r.Model
		}
		if progress != nil {
			fmt.Fprintf(progress, "evaluate: %s (%d points) with %s\n", g, len(gp), r0.Why)
		}
		pairs, err := EvalTargets(newModel, setup.ServingTargets(gp), c.Workers)
		if err != nil {
			return nil, err
		}
		for k := range pairs {
			for i := range pairs[k] {
				pairs[k][i].Label = g + " " + pairs[k][i].Label
			}
			allPairs[k] = append(allPairs[k], pairs[k]...)
		}
		gs := StatsOf([]string{"mean TTFT", "mean TPOT"}, pairs, 0)
		rep.Notes = append(rep.Notes, fmt.Sprintf("%-55s %3d points  TTFT MAPE %6.1f%% (median %5.1f%%, bias %+6.1f%%)  TPOT MAPE %6.1f%% (median %5.1f%%, bias %+6.1f%%)  [%s]",
			g, len(gp), gs[0].MAPE, gs[0].MedAPE, gs[0].Bias, gs[1].MAPE, gs[1].MedAPE, gs[1].Bias, r0.Model.Name()))
		rep.Residuals = append(rep.Residuals, ResidualRows(pairs)...)
	}
	if len(allPairs[0]) == 0 {
		return nil, usageErr("no deployment group could be evaluated:\n  %s", strings.Join(rep.Warnings, "\n  "))
	}
	rep.Test = StatsOf([]string{"mean TTFT", "mean TPOT"}, allPairs[:], 5)
	return rep, nil
}

// ---- replayed runs ----

type run struct {
	path  string
	reqs  []trace.Request
	cfg   RunConfig
	setup *Setup
}

func (c *Command) loadRun(path, metaPath, model, gpu string, tp int) (*run, error) {
	r := &run{path: path}
	if metaPath != "" {
		f, err := openFile(metaPath)
		if err != nil {
			return nil, err
		}
		r.cfg, err = ReadRunMeta(metaPath, f)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if strings.HasSuffix(path, ".jsonl") || strings.HasSuffix(path, ".json") {
		r.reqs, err = ReadRunRequests(path, f)
	} else {
		var src *trace.Source
		if src, err = trace.Open(path, nil); err == nil {
			r.reqs, err = trace.ReadAllRequests(src)
			src.Close()
		}
	}
	if err != nil {
		return nil, err
	}
	dep := c.Dep
	dep.Engine, dep.Version = firstNonEmpty(c.Dep.Engine, r.cfg.Engine), firstNonEmpty(c.Dep.Version, r.cfg.Version)
	dep.Model = firstNonEmpty(model, r.cfg.Model)
	dep.GPU = firstNonEmpty(gpu, deviceGPU(r.cfg.Device))
	if tp == 0 {
		tp = r.cfg.TP
	}
	dep.TP = tp
	if dep.MaxNumSeqs == 0 {
		dep.MaxNumSeqs = r.cfg.MaxNumSeqs
	}
	if dep.MaxNumBatchedTokens == 0 {
		dep.MaxNumBatchedTokens = r.cfg.MaxNumBatchedTokens
	}
	if dep.KVBlocks == 0 {
		dep.KVBlocks = int64(r.cfg.KVBlocks)
	}
	if dep.BlockSize == 0 {
		dep.BlockSize = r.cfg.BlockSize
	}
	if dep.MaxNumSeqs == 0 {
		dep.MaxNumSeqs = 256 // vLLM's default when the run does not say
	}
	dep.PrefixCaching = dep.PrefixCaching || r.cfg.PrefixCaching
	if dep.GPU == "" && r.cfg.Device != "" {
		return nil, usageErr("%s: field hardware.device_name: %q is not a catalogued GPU (%s); pass --gpu NAME or --gpu FILE.yaml", metaPath, r.cfg.Device, strings.Join(roofline.GPUNames(), ", "))
	}
	if dep.Model == "" || dep.GPU == "" {
		return nil, usageErr("%s: the model and GPU are needed (from --engine-config or --model/--gpu), found model %q gpu %q", path, dep.Model, dep.GPU)
	}
	if r.setup, err = NewSetup(dep); err != nil {
		return nil, usageErr("%s: %v", path, err)
	}
	return r, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// deviceGPU maps a CUDA device name ("NVIDIA GeForce RTX 4090") to a
// catalogue GPU name; "" when unknown (then --gpu is required).
func deviceGPU(dev string) string {
	d := strings.ToLower(dev)
	if strings.Contains(d, "a100") && strings.Contains(d, "40gb") {
		return "" // the catalogue's A100 is the 80 GB card: KV capacity would be wrong
	}
	// gb200 before b200, which it contains.
	for _, m := range []struct{ sub, gpu string }{
		{"rtx 4090", "rtx4090"}, {"rtx pro 6000", "rtxpro6000"}, {"h100", "h100"}, {"h200", "h200"},
		{"gb200", "gb200"}, {"b200", "b200"}, {"a100", "a100-80gb"}, {"l40s", "l40s"},
	} {
		if strings.Contains(d, m.sub) {
			return m.gpu
		}
	}
	return ""
}

func (c *Command) runRequests(progress io.Writer) (*Report, *fitted.Coefficients, []string, error) {
	tr, err := c.loadRun(c.Requests, c.EngineConfig, c.Dep.Model, c.Dep.GPU, c.Dep.TP)
	if err != nil {
		return nil, nil, nil, err
	}
	trainT, err := NewRunTarget(c.Requests, tr.reqs, EngineRunner(tr.setup.Engine))
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
		pairs, err := EvalTargets(func() latency.Model { return r.Model }, []Target{trainT}, 1)
		if err != nil {
			return nil, nil, nil, err
		}
		rep := &Report{Title: "blis-calibrate --evaluate: replay of " + c.Requests, Notes: []string{r.Why, runNote(tr)}}
		rep.Test = StatsOf(RunStatNames, pairs, 0)
		return rep, nil, []string{"stat"}, nil
	}
	names, err := FeatureNames(c.Features, tr.setup.Dep.TP)
	if err != nil {
		return nil, nil, nil, usageErr("%v", err)
	}
	job := &SimFitJob{Setup: tr.setup, Names: names, Train: []Target{trainT}, MaxIn: maxIn, MaxOut: maxOut,
		Method: "nelder-mead-sim", TargetID: "run_ttft_tpot_e2e",
		Options: SimFitOptions{MaxEvals: c.MaxEvals, FitAlpha: true, Progress: progress, Workers: 1, Label: "fit"}}
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
		testT, err := NewRunTarget(c.Test, te.reqs, EngineRunner(te.setup.Engine))
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
		pairs, err := EvalTargets(newModel, []Target{testT}, 1)
		if err != nil {
			return nil, nil, nil, err
		}
		res.Report.Test = StatsOf(RunStatNames, pairs, 0)
		res.Report.Notes = append(res.Report.Notes, "test: "+runNote(te))
		res.Report.Residuals = append(res.Report.Residuals, perStatRows(pairs, "test")...)
		res.Coeffs.Fit.TestRows = len(te.reqs)
		res.Coeffs.Fit.TestMAPE = round2(meanMAPE(res.Report.Test))
		res.Coeffs.Notes += " " + statNote("test on "+c.DisplayPaths(c.Test), res.Report.Test)
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
func perStatRows(pairs [][]Pair, what string) []Residual {
	var out []Residual
	for k := range pairs {
		for _, p := range pairs[k] {
			out = append(out, Residual{Label: what + " " + RunStatNames[k], Cols: []Pair{p}})
		}
	}
	return out
}

// RelPath writes p relative to base when it lies under it (for source paths
// recorded in committed files); otherwise p unchanged.
func RelPath(base string) func(string) string {
	return func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return p
		}
		rel, err := filepath.Rel(base, abs)
		if err != nil {
			return p
		}
		return filepath.ToSlash(rel)
	}
}

func chainDesc(n int) string {
	if n > 0 {
		return fmt.Sprint(n)
	}
	return "max(10, ⌈24/C⌉)"
}
