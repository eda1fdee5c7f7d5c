package fit

import (
	"fmt"
	"math"
	"sort"

	"gonum.org/v1/gonum/stat"
)

// Pair is one predicted-vs-measured value of a statistic.
type Pair struct {
	Label     string // where the measurement came from (file:line, request id)
	Measured  float64
	Predicted float64
}

// RelErr is (predicted − measured)/measured.
func (p Pair) RelErr() float64 { return (p.Predicted - p.Measured) / p.Measured }

// Stat summarises the error of one statistic over a set of points.
type Stat struct {
	Name    string
	N       int
	MAPE    float64 // mean |relative error|, in %
	MedAPE  float64 // median |relative error|, in %
	Bias    float64 // mean signed relative error, in % (positive: the model is slow)
	Pearson float64 // correlation of predicted and measured; NaN when undefined
	Worst   []Pair  // largest |relative error| first
}

// Summarise computes the error statistics of pairs, keeping the worst k.
func Summarise(name string, pairs []Pair, k int) Stat {
	s := Stat{Name: name, N: len(pairs)}
	if len(pairs) == 0 {
		return s
	}
	abs := make([]float64, len(pairs))
	meas := make([]float64, len(pairs))
	pred := make([]float64, len(pairs))
	for i, p := range pairs {
		e := p.RelErr()
		abs[i] = math.Abs(e) * 100
		s.MAPE += abs[i]
		s.Bias += e * 100
		meas[i], pred[i] = p.Measured, p.Predicted
	}
	s.MAPE /= float64(len(pairs))
	s.Bias /= float64(len(pairs))
	sorted := append([]float64(nil), abs...)
	sort.Float64s(sorted)
	// The usual median: the mean of the middle two for an even count
	// (stat.Quantile's Empirical kind returns the lower one).
	n := len(sorted)
	s.MedAPE = (sorted[(n-1)/2] + sorted[n/2]) / 2
	s.Pearson = math.NaN() // undefined for one point or a constant series
	if len(pairs) > 1 {
		s.Pearson = stat.Correlation(meas, pred, nil)
	}
	idx := make([]int, len(pairs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return abs[idx[a]] > abs[idx[b]] })
	for _, i := range idx[:min(k, len(idx))] {
		s.Worst = append(s.Worst, pairs[i])
	}
	return s
}

// Grade turns a MAPE into a letter a user can act on: A and B are fit for
// capacity planning, C for trends, D and F are not to be trusted.
func Grade(mape float64) string {
	switch {
	case math.IsNaN(mape):
		return "?"
	case mape <= 5:
		return "A"
	case mape <= 10:
		return "B"
	case mape <= 20:
		return "C"
	case mape <= 35:
		return "D"
	}
	return "F"
}

// Split returns a seeded train/test split of n items: the test set has
// round(frac·n) items (at least 1 when frac > 0 and n > 1).
func Split(n int, frac float64, seed uint64, name string) (train, test []int) {
	perm := Perm(n, seed, name)
	k := int(math.Round(frac * float64(n)))
	if frac > 0 && k == 0 && n > 1 {
		k = 1
	}
	if k >= n {
		k = n - 1
	}
	test = append([]int(nil), perm[:k]...)
	train = append([]int(nil), perm[k:]...)
	sort.Ints(test)
	sort.Ints(train)
	return train, test
}

// Folds splits n items into k seeded folds of near-equal size.
func Folds(n, k int, seed uint64, name string) ([][]int, error) {
	if k < 2 || k > n {
		return nil, fmt.Errorf("k-fold: expected 2 ≤ k ≤ %d points, found k=%d", n, k)
	}
	perm := Perm(n, seed, name)
	folds := make([][]int, k)
	for i, p := range perm {
		folds[i%k] = append(folds[i%k], p)
	}
	for _, f := range folds {
		sort.Ints(f)
	}
	return folds, nil
}
