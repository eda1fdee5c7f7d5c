package fit

import (
	"fmt"
	"github.com/blis-sim/blis/lib/measure"
	"math"

	"github.com/blis-sim/blis/lib/latency"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"
)

// FeatureSet names the terms of a linear step-time model and evaluates them
// for a batch: step µs = Σ value[j]·feature[j](batch), values ≥ 0.
type FeatureSet struct {
	Names []string
	Eval  func(b *latency.Batch, out []float64)
}

// StepFit is the result of a step-level fit.
type StepFit struct {
	Names    []string
	Values   []float64
	AtBound  []bool // value held at 0 by the constraint
	Warnings []string
	Train    Stat
	Test     Stat // zero N when no test points
	Pairs    []Pair
}

// TooFewError says how many points a fit needs.
type TooFewError struct {
	What       string
	Have, Need int
}

func (e *TooFewError) Error() string {
	return fmt.Sprintf("too few %s to fit %s: have %d, need at least %d", e.What, "the coefficients", e.Have, e.Need)
}

// BadInput marks the error as the user's to fix (exit status 2): more data
// or fewer features.
func (e *TooFewError) BadInput() bool { return true }

// FitSteps fits fs to samples by exact NNLS on relative error (each row
// divided by its measured time), so that short decode steps count as much
// as long prefills: the fit minimises Σ((pred − meas)/meas)².
func FitSteps(samples []measure.StepSample, fs FeatureSet) (StepFit, error) {
	n := len(fs.Names)
	if len(samples) < n+1 {
		return StepFit{}, &TooFewError{What: "step samples", Have: len(samples), Need: n + 1}
	}
	m := len(samples)
	a := mat.NewDense(m, n, nil)
	b := make([]float64, m)
	row := make([]float64, n)
	for i := range samples {
		fs.Eval(&samples[i].Batch, row)
		w := 1 / samples[i].US
		for j := range row {
			row[j] *= w
		}
		a.SetRow(i, row)
		b[i] = 1
	}
	res, err := NNLS(a, b)
	if err != nil {
		return StepFit{}, err
	}
	f := StepFit{Names: fs.Names, Values: res.X, AtBound: res.Active}
	f.Warnings = Degeneracy(a, fs.Names, res.Active)
	for j, v := range res.X {
		if res.Active[j] || v == 0 {
			f.Warnings = append(f.Warnings, fmt.Sprintf("coefficient %s hit its lower bound 0: the data give this term no weight", fs.Names[j]))
		}
	}
	f.Pairs = PredictSteps(samples, fs, f.Values)
	f.Train = Summarise("step time", f.Pairs, 5)
	return f, nil
}

// PredictSteps evaluates a fitted feature set on samples.
func PredictSteps(samples []measure.StepSample, fs FeatureSet, values []float64) []Pair {
	row := make([]float64, len(fs.Names))
	out := make([]Pair, len(samples))
	for i := range samples {
		fs.Eval(&samples[i].Batch, row)
		p := 0.0
		for j, v := range values {
			p += v * row[j]
		}
		out[i] = Pair{Label: samples[i].Source, Measured: samples[i].US, Predicted: p}
	}
	return out
}

// Degeneracy warns when two terms can trade off against each other: highly
// correlated columns, or a near-singular scaled design matrix. Columns at
// their bound are left out (they are not trading off anything).
func Degeneracy(a *mat.Dense, names []string, atBound []bool) []string {
	m, n := a.Dims()
	var warn []string
	cols := make([][]float64, n)
	for j := 0; j < n; j++ {
		cols[j] = mat.Col(nil, j, a)
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if atBound[i] || atBound[j] {
				continue
			}
			// Uncentred cosine: a constant column is as collinear with a
			// near-constant one as two proportional ones.
			ci, cj := cols[i], cols[j]
			cos := mat.Dot(mat.NewVecDense(m, ci), mat.NewVecDense(m, cj)) /
				(math.Sqrt(mat.Dot(mat.NewVecDense(m, ci), mat.NewVecDense(m, ci))) * math.Sqrt(mat.Dot(mat.NewVecDense(m, cj), mat.NewVecDense(m, cj))))
			r := stat.Correlation(ci, cj, nil)
			if cos > 0.999 || math.Abs(r) > 0.995 {
				warn = append(warn, fmt.Sprintf("terms %s and %s are nearly collinear (cosine %.4f, correlation %.4f): their split is poorly determined", names[i], names[j], cos, r))
			}
		}
	}
	// Condition number of the unit-norm columns still in play.
	var keep []int
	for j := 0; j < n; j++ {
		if !atBound[j] {
			keep = append(keep, j)
		}
	}
	if len(keep) > 1 {
		s := mat.NewDense(m, len(keep), nil)
		for k, j := range keep {
			norm := math.Sqrt(mat.Dot(mat.NewVecDense(m, cols[j]), mat.NewVecDense(m, cols[j])))
			if norm == 0 {
				continue
			}
			for i := 0; i < m; i++ {
				s.Set(i, k, cols[j][i]/norm)
			}
		}
		var svd mat.SVD
		if svd.Factorize(s, mat.SVDNone) {
			v := svd.Values(nil)
			if cond := v[0] / v[len(v)-1]; cond > 1e6 || math.IsInf(cond, 0) {
				warn = append(warn, fmt.Sprintf("the scaled design matrix is near-singular (condition number %.3g): some coefficients are not identifiable from these data", cond))
			}
		}
	}
	return warn
}
