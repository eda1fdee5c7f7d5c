package fit

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/blis-sim/blis/lib/bug"
	"github.com/blis-sim/blis/lib/latency"
	"gonum.org/v1/gonum/optimize"
)

// Target is a measurement the simulator must reproduce: Predict runs the
// simulator with a latency model and returns the statistics named by Names,
// in the order of Measured.
type Target interface {
	Label() string
	Names() []string
	Measured() []float64
	Predict(m latency.Model) ([]float64, error)
}

// Alpha terms a fit can move (SimFitOptions.Alpha).
const (
	AlphaQueueBase      = 1 << iota // α0, µs per request before queueing
	AlphaPerInputToken              // α1, µs per prompt token before queueing
	AlphaPerOutputToken             // α2, µs per streamed token
)

// ParseAlphaTerms reads a --fit-alpha list ("a0,a1,a2", "none").
func ParseAlphaTerms(s string) (int, error) {
	if s == "" || s == "none" {
		return 0, nil
	}
	m := 0
	for _, t := range strings.Split(s, ",") {
		switch strings.TrimSpace(t) {
		case "a0", "α0", "queue_base_us":
			m |= AlphaQueueBase
		case "a1", "α1", "queue_per_input_token_us":
			m |= AlphaPerInputToken
		case "a2", "α2", "per_output_token_us":
			m |= AlphaPerOutputToken
		default:
			return 0, fmt.Errorf("expected a comma list of a0, a1, a2 (or none), found %q", t)
		}
	}
	return m, nil
}

// alphaStart is where a fitted α term starts (it must be > 0: the fit
// moves it in log space): the engine's default α0, and for the per-token
// terms about what vLLM's API server spends (tokenisation ~2 µs per prompt
// token; detokenising and streaming ~1 µs per token).
func alphaStart(a latency.Alpha) latency.Alpha {
	if !(a.QueueBase > 0) {
		a.QueueBase = latency.DefaultAlpha().QueueBase
	}
	if !(a.QueuePerInputToken > 0) {
		a.QueuePerInputToken = 2
	}
	if !(a.PerOutputToken > 0) {
		a.PerOutputToken = 1
	}
	return a
}

// SimFitOptions control a simulator-in-the-loop fit.
type SimFitOptions struct {
	MaxEvals  int       // loss evaluations (each simulates every target); 0 → 200
	Alpha     int       // α terms fitted too (AlphaQueueBase | ...); the others stay as given
	HoldTerms bool      // keep the coefficients at their warm start: fit the α terms only
	Progress  io.Writer // nil: silent
	Workers   int       // goroutines simulating targets; ≤ 2 on a shared machine
	Label     string
	StatScale []float64 // optional weight per statistic (same order as Names)
}

// SimFit is the result of a simulator-in-the-loop fit.
type SimFit struct {
	Names    []string
	Values   []float64
	Alpha    latency.Alpha
	Loss     float64
	Evals    int
	Starts   string // "" (one start), or which of α0's two starts won
	Warnings []string
}

// FitSim minimises Σ log²(predicted/measured) over targets and statistics
// with Nelder–Mead on the logarithms of the coefficients, which keeps them
// positive without a penalty. Coefficients the warm start holds at 0 stay
// at 0: the step-level or roofline prior found no support for them.
func FitSim(fs FeatureSet, start []float64, alpha latency.Alpha, targets []Target, opt SimFitOptions) (SimFit, error) {
	if len(start) != len(fs.Names) {
		return SimFit{}, fmt.Errorf("fit: %d start values for %d features", len(start), len(fs.Names))
	}
	var free []int
	for j, v := range start {
		if v > 0 && !opt.HoldTerms {
			free = append(free, j)
		}
	}
	var aterms []int
	for _, t := range []int{AlphaQueueBase, AlphaPerInputToken, AlphaPerOutputToken} {
		if opt.Alpha&t != 0 {
			aterms = append(aterms, t)
		}
	}
	nparam := len(free) + len(aterms)
	nstat := 0
	for _, t := range targets {
		nstat += len(t.Measured())
	}
	if nstat < nparam+1 {
		return SimFit{}, &TooFewError{What: "measured statistics", Have: nstat, Need: nparam + 1}
	}
	if opt.MaxEvals <= 0 {
		opt.MaxEvals = 200
	}
	workers := opt.Workers
	if workers <= 0 || workers > 2 {
		workers = 2
	}
	x0 := make([]float64, nparam)
	for k, j := range free {
		x0[k] = math.Log(start[j])
	}
	// A fitted α term starts where the engine's own would be, not near 0:
	// from 0.1 ms a log-space simplex could not reach milliseconds.
	as := alphaStart(alpha)
	for k, t := range aterms {
		x0[len(free)+k] = math.Log(*alphaField(&as, t))
	}
	decode := func(x []float64) ([]float64, latency.Alpha) {
		vals := append([]float64(nil), start...) // held terms keep their start (0 unless HoldTerms)
		for k, j := range free {
			vals[j] = math.Exp(x[k])
		}
		a := alpha
		for k, t := range aterms {
			*alphaField(&a, t) = math.Exp(x[len(free)+k])
		}
		return vals, a
	}
	// α0 and the per-step constant trade off under closed-loop data (both
	// add to every request's TTFT): the simplex settles in whichever corner
	// it starts near. When α0 moves with free step terms, a second descent
	// starts α0 near 0 (0.1 ms, where the fit began before α0 had an engine
	// default) and the lower training loss wins. Each start has the budget.
	k0 := alphaIndex(aterms, AlphaQueueBase)
	twoStarts := k0 >= 0 && len(free) > 0 && x0[len(free)+k0] > math.Log(lowAlphaStartUS)
	budget := opt.MaxEvals
	if twoStarts {
		budget *= 2
	}
	var simErr error
	var mu sync.Mutex
	evals := 0
	began := time.Now()
	bestLoss := math.Inf(1)
	lossOf := func(x []float64) float64 {
		vals, a := decode(x)
		loss, err := Loss(fs, vals, a, targets, workers, opt.StatScale)
		mu.Lock()
		defer mu.Unlock()
		evals++
		if err != nil {
			if simErr == nil {
				simErr = err
			}
			return math.Inf(1)
		}
		if loss < bestLoss {
			bestLoss = loss
		}
		if opt.Progress != nil && (evals%10 == 0 || evals == 1) {
			el := time.Since(began)
			left := time.Duration(float64(el) / float64(evals) * float64(budget-evals))
			fmt.Fprintf(opt.Progress, "%s: eval %d/%d  loss %.5f  best %.5f  elapsed %s  at most %s left\n",
				opt.Label, evals, budget, loss, bestLoss, el.Round(time.Second), left.Round(time.Second))
		}
		return loss
	}
	if nparam == 0 {
		vals, a := decode(x0)
		return SimFit{Names: fs.Names, Values: vals, Alpha: a, Loss: lossOf(x0), Evals: 1}, simErr
	}
	prob := optimize.Problem{Func: lossOf}
	settings := &optimize.Settings{
		FuncEvaluations: opt.MaxEvals,
		Converger:       &optimize.FunctionConverge{Absolute: 1e-7, Relative: 1e-6, Iterations: 40},
		Concurrent:      1, // Nelder–Mead is sequential; targets are simulated in parallel instead
	}
	res, err := optimize.Minimize(prob, x0, settings, &optimize.NelderMead{SimplexSize: 0.4})
	if simErr != nil {
		return SimFit{}, simErr
	}
	if err != nil && res == nil {
		return SimFit{}, fmt.Errorf("fit: Nelder–Mead: %w", err)
	}
	starts := ""
	if twoStarts {
		x1 := append([]float64(nil), x0...)
		x1[len(free)+k0] = math.Log(lowAlphaStartUS)
		res1, err1 := optimize.Minimize(prob, x1, settings, &optimize.NelderMead{SimplexSize: 0.4})
		if simErr != nil {
			return SimFit{}, simErr
		}
		hi := fmt.Sprintf("%.3g ms", math.Exp(x0[len(free)+k0])/1000)
		if res1 != nil && res1.F < res.F {
			res, err = res1, err1
			starts = fmt.Sprintf("α0 started at %s and at 0.1 ms; the 0.1 ms start won", hi)
		} else {
			starts = fmt.Sprintf("α0 started at %s and at 0.1 ms; the %s start won", hi, hi)
		}
	}
	vals, a := decode(res.X)
	out := SimFit{Names: fs.Names, Values: vals, Alpha: a, Loss: res.F, Evals: evals, Starts: starts}
	if err != nil && !errors.Is(err, optimize.ErrLinesearcherFailure) {
		out.Warnings = append(out.Warnings, "optimiser stopped: "+err.Error())
	}
	if res.Status == optimize.FunctionEvaluationLimit {
		out.Warnings = append(out.Warnings, fmt.Sprintf("optimiser used its whole budget of %d evaluations without converging: raise --max-evals", opt.MaxEvals))
	}
	for j, v := range start {
		if v == 0 && !opt.HoldTerms {
			out.Warnings = append(out.Warnings, fmt.Sprintf("coefficient %s held at its lower bound 0 (the warm start gave it no weight)", fs.Names[j]))
		}
	}
	// A coefficient whose term is negligible everywhere has drifted to its
	// log-space floor: report it like a bound hit.
	for _, j := range free {
		if vals[j] < start[j]*1e-4 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("coefficient %s fell by more than 10⁴× from its warm start (%.3g → %.3g): it is drifting to its bound 0", fs.Names[j], start[j], vals[j]))
		}
	}
	return out, nil
}

// lowAlphaStartUS is the second start of a fitted α0 (FitSim), µs.
const lowAlphaStartUS = 100

func alphaIndex(terms []int, t int) int {
	for k, u := range terms {
		if u == t {
			return k
		}
	}
	return -1
}

func alphaField(a *latency.Alpha, t int) *float64 {
	switch t {
	case AlphaQueueBase:
		return &a.QueueBase
	case AlphaPerInputToken:
		return &a.QueuePerInputToken
	}
	return &a.PerOutputToken
}

// Loss is the mean of squared log errors over targets and statistics.
func Loss(fs FeatureSet, vals []float64, a latency.Alpha, targets []Target, workers int, scale []float64) (float64, error) {
	preds, err := PredictAll(fs, vals, a, targets, workers)
	if err != nil {
		return 0, err
	}
	sum, n := 0.0, 0
	for i, t := range targets {
		meas := t.Measured()
		for k, m := range meas {
			w := 1.0
			if k < len(scale) {
				w = scale[k]
			}
			p := preds[i][k]
			if !(p > 0) || !(m > 0) {
				return math.Inf(1), nil
			}
			l := math.Log(p / m)
			sum += w * l * l
			n++
		}
	}
	return sum / float64(n), nil
}

// PredictAll simulates every target with its own model instance (models keep
// scratch buffers), on at most workers goroutines; results keep target order.
func PredictAll(fs FeatureSet, vals []float64, a latency.Alpha, targets []Target, workers int) ([][]float64, error) {
	return PredictAllWith(func() latency.Model { return NewFeatureModel(fs, vals, a, "") }, targets, workers)
}

// PredictAllWith is PredictAll for any model constructor.
func PredictAllWith(newModel func() latency.Model, targets []Target, workers int) ([][]float64, error) {
	if workers < 1 {
		workers = 1
	}
	out := make([][]float64, len(targets))
	errs := make([]error, len(targets))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer bug.Catch()
			m := newModel()
			for i := range next {
				out[i], errs[i] = targets[i].Predict(m)
			}
		}()
	}
	for i := range targets {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", targets[i].Label(), err)
		}
	}
	return out, nil
}
