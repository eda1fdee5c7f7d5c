package fit

import (
	"fmt"
	"github.com/blis-sim/blis/lib/measure"
	"strings"

	"github.com/blis-sim/blis/lib/latency"
	"github.com/blis-sim/blis/lib/latency/fitted"
	"gonum.org/v1/gonum/mat"
)

// EvalTargets simulates targets with fresh models from newModel and returns,
// per statistic (in the targets' Names order), the predicted-vs-measured pairs.
func EvalTargets(newModel func() latency.Model, targets []Target, workers int) ([][]Pair, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	preds, err := PredictAllWith(newModel, targets, workers)
	if err != nil {
		return nil, err
	}
	names := targets[0].Names()
	out := make([][]Pair, len(names))
	for i, t := range targets {
		meas := t.Measured()
		for k := range names {
			out[k] = append(out[k], Pair{Label: t.Label(), Measured: meas[k], Predicted: preds[i][k]})
		}
	}
	return out, nil
}

// StatsOf summarises per-statistic pairs.
func StatsOf(names []string, pairs [][]Pair, worst int) []Stat {
	out := make([]Stat, len(pairs))
	for k := range pairs {
		out[k] = Summarise(names[k], pairs[k], worst)
	}
	return out
}

// ResidualRows turns per-statistic pairs into residual table rows.
func ResidualRows(pairs [][]Pair) []Residual {
	if len(pairs) == 0 {
		return nil
	}
	rows := make([]Residual, len(pairs[0]))
	for i := range rows {
		rows[i].Label = pairs[0][i].Label
		for k := range pairs {
			rows[i].Cols = append(rows[i].Cols, pairs[k][i])
		}
	}
	return rows
}

// SimFitJob is a simulator-in-the-loop fit with its validation data.
type SimFitJob struct {
	Setup   *Setup
	Names   []string // features
	Train   []Target
	Test    []Target // may be empty
	MaxIn   int      // longest prompt in the data (for the roofline prior grid)
	MaxOut  int
	Options SimFitOptions
	Start   []float64 // warm start; nil → the roofline prior
	// Alpha is the α the fit starts from and keeps for the terms it does
	// not fit (Options.Alpha); zero → the engine's default (latency.DefaultAlpha).
	Alpha    *latency.Alpha
	Method   string // recorded in the file
	TargetID string // recorded in the file: what was matched
}

// SimFitResult is a finished fit with its file and report.
type SimFitResult struct {
	Fit        SimFit
	Coeffs     *fitted.Coefficients
	Report     *Report
	TrainPairs [][]Pair
	TestPairs  [][]Pair
}

// Run fits and validates the job.
func (j *SimFitJob) Run() (*SimFitResult, error) {
	if len(j.Train) == 0 {
		return nil, fmt.Errorf("no training data")
	}
	fs, err := j.Setup.Features(j.Names)
	if err != nil {
		return nil, err
	}
	start := j.Start
	if start == nil {
		if start, err = j.Setup.RooflinePrior(fs, j.MaxIn, j.MaxOut); err != nil {
			return nil, fmt.Errorf("roofline warm start: %w", err)
		}
	}
	if !j.Options.HoldTerms {
		start = FloorStart(fs, start, PriorBatches(PriorShape{MaxBatchedTokens: j.Setup.Engine.Engine.MaxNumBatchedTokens,
			MaxSeqs: j.Setup.Engine.Engine.MaxNumSeqs, MaxInput: j.MaxIn, MaxOutput: j.MaxOut}))
	}
	base := latency.DefaultAlpha()
	if j.Alpha != nil {
		base = *j.Alpha
	}
	f, err := FitSim(fs, start, base, j.Train, j.Options)
	if err != nil {
		return nil, err
	}
	// Degeneracy of the features over the step compositions this engine
	// produces: the simulator fit cannot tell collinear terms apart either.
	grid := PriorBatches(PriorShape{MaxBatchedTokens: j.Setup.Engine.Engine.MaxNumBatchedTokens,
		MaxSeqs: j.Setup.Engine.Engine.MaxNumSeqs, MaxInput: j.MaxIn, MaxOutput: j.MaxOut})
	dm := mat.NewDense(len(grid), len(j.Names), nil)
	row := make([]float64, len(j.Names))
	for i := range grid {
		fs.Eval(&grid[i], row)
		dm.SetRow(i, row)
	}
	atZero := make([]bool, len(f.Values))
	for k, v := range f.Values {
		atZero[k] = v == 0
	}
	f.Warnings = append(Degeneracy(dm, j.Names, atZero), f.Warnings...)
	res := &SimFitResult{Fit: f}
	workers := j.Options.Workers
	newModel := func() latency.Model { return NewFeatureModel(fs, f.Values, f.Alpha, "") }
	if res.TrainPairs, err = EvalTargets(newModel, j.Train, workers); err != nil {
		return nil, err
	}
	if res.TestPairs, err = EvalTargets(newModel, j.Test, workers); err != nil {
		return nil, err
	}
	statNames := j.Train[0].Names()
	c := j.Setup.Coefficients(j.Names, f.Values, f.Alpha)
	train := StatsOf(statNames, res.TrainPairs, 5)
	test := StatsOf(statNames, res.TestPairs, 5)
	c.Fit = fitted.FitInfo{Method: j.Method, Target: j.TargetID, TrainRows: len(j.Train), TestRows: len(j.Test),
		TrainMAPE: Round2(MeanMAPE(train)), TestMAPE: Round2(MeanMAPE(test))}
	c.Notes = StatNote("train", train) + StatNote("test", test) + fmt.Sprintf("Nelder–Mead: %d simulations of the training set, final loss %.5f (mean squared log error).", f.Evals, f.Loss)
	if f.Starts != "" {
		c.Notes += " " + f.Starts + "."
	}
	res.Coeffs = c
	rep := &Report{Title: fmt.Sprintf("blis-calibrate: %s on %s tp%d (%s %s), %s", c.Model, c.GPU, c.TP, c.Engine, c.Version, j.Method),
		Train: train, Test: test, Warnings: f.Warnings}
	for jdx, n := range j.Names {
		note := ""
		if f.Values[jdx] == 0 {
			note = "at bound 0"
		}
		rep.Coef = append(rep.Coef, CoefRow{Name: n, Value: f.Values[jdx], Unit: Unit(n), Note: note})
	}
	for _, a := range []struct {
		term       int
		name, unit string
		v          float64
	}{{AlphaQueueBase, "alpha.queue_base", "µs/request", f.Alpha.QueueBase},
		{AlphaPerInputToken, "alpha.queue_per_input_token", "µs/prompt token", f.Alpha.QueuePerInputToken},
		{AlphaPerOutputToken, "alpha.per_output_token", "µs/output token", f.Alpha.PerOutputToken}} {
		note := "fitted"
		if j.Options.Alpha&a.term == 0 {
			note = "held (not fitted)"
		}
		rep.Coef = append(rep.Coef, CoefRow{Name: a.name, Value: a.v, Unit: a.unit, Note: note})
	}
	if len(j.Test) > 0 {
		rep.Residuals = ResidualRows(res.TestPairs)
	} else {
		rep.Residuals = ResidualRows(res.TrainPairs)
	}
	res.Report = rep
	return res, nil
}

// MeanMAPE is the mean of the statistics' MAPEs (0 with no points).
func MeanMAPE(st []Stat) float64 {
	if len(st) == 0 || st[0].N == 0 {
		return 0
	}
	s := 0.0
	for _, x := range st {
		s += x.MAPE
	}
	return s / float64(len(st))
}

// Round2 keeps two decimals, as the coefficients files record errors.
func Round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// StatNote is "what MAPE (n points): stat x%, ...", for a file's notes.
func StatNote(what string, st []Stat) string {
	if len(st) == 0 || st[0].N == 0 {
		return ""
	}
	parts := make([]string, len(st))
	for i, s := range st {
		parts[i] = fmt.Sprintf("%s %.1f%%", s.Name, s.MAPE)
	}
	return fmt.Sprintf("%s MAPE (%d points): %s. ", what, st[0].N, strings.Join(parts, ", "))
}

// ServingTargets wraps points as targets, each simulated on the setup's
// engine with the limits it was measured with (PointEngine).
func (s *Setup) ServingTargets(pts []measure.ServingPoint) []Target {
	out := make([]Target, len(pts))
	for i := range pts {
		out[i] = &ServingTarget{P: pts[i], Run: EngineRunner(s.PointEngine(pts[i])), PerChain: s.PerChain}
	}
	return out
}

// MaxLengths returns the longest input and output of points.
func MaxLengths(pts []measure.ServingPoint) (in, out int) {
	for _, p := range pts {
		in, out = max(in, p.InputTokens), max(out, p.OutputTokens)
	}
	return in, out
}
