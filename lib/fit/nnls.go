// Package fit fits the coefficients of the fitted latency model to real
// measurements: step-level timings by exact non-negative least squares,
// request-level and closed-loop serving measurements with the simulator in
// the loop.
package fit

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// NNLSResult is the solution of min ‖Ax − b‖² subject to x ≥ 0.
type NNLSResult struct {
	X          []float64 // coefficients in the units of A's columns
	Residual   float64   // ‖Ax − b‖₂
	Iterations int       // outer iterations of the active-set loop
	Active     []bool    // X[j] is held at its bound 0 (not in the passive set)
}

// ErrNNLSIterations is returned when the active-set loop fails to converge,
// which only happens on numerically hopeless problems.
var ErrNNLSIterations = errors.New("nnls: active-set iterations exceeded")

// NNLS solves min ‖Ax − b‖₂ subject to x ≥ 0 exactly with the Lawson–Hanson
// active-set method. Columns are scaled to unit norm first: token counts next
// to a constant column give condition numbers near 1e10, and the tolerance
// tests below are only meaningful on comparable columns.
func NNLS(a *mat.Dense, b []float64) (NNLSResult, error) {
	m, n := a.Dims()
	if len(b) != m {
		return NNLSResult{}, fmt.Errorf("nnls: %d rows in A but %d in b", m, len(b))
	}
	if m == 0 || n == 0 {
		return NNLSResult{}, errors.New("nnls: empty problem")
	}
	scale := make([]float64, n)
	as := mat.NewDense(m, n, nil)
	for j := 0; j < n; j++ {
		norm := mat.Norm(a.ColView(j), 2)
		if norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
			scale[j] = 0 // an all-zero column can take no weight
			continue
		}
		scale[j] = 1 / norm
		for i := 0; i < m; i++ {
			as.Set(i, j, a.At(i, j)*scale[j])
		}
	}
	bv := mat.NewVecDense(m, append([]float64(nil), b...))
	bnorm := mat.Norm(bv, 2)
	tol := 1e-10 * math.Max(bnorm, 1) * float64(max(m, n))

	x := make([]float64, n)
	passive := make([]bool, n)
	w := make([]float64, n)
	s := make([]float64, n)
	resid := mat.NewVecDense(m, nil)

	gradient := func() {
		xv := mat.NewVecDense(n, x)
		resid.MulVec(as, xv)
		resid.SubVec(bv, resid)
		wv := mat.NewVecDense(n, w)
		wv.MulVec(as.T(), resid)
	}
	gradient()
	iters := 0
	maxIter := 3*n + 30
	for {
		// Pick the most promising variable at its bound.
		best, bestJ := tol, -1
		for j := 0; j < n; j++ {
			if !passive[j] && scale[j] != 0 && w[j] > best {
				best, bestJ = w[j], j
			}
		}
		if bestJ < 0 {
			break
		}
		iters++
		if iters > maxIter {
			return NNLSResult{}, ErrNNLSIterations
		}
		passive[bestJ] = true
		for inner := 0; ; inner++ {
			if inner > maxIter {
				return NNLSResult{}, ErrNNLSIterations
			}
			if err := lstsqSubset(as, bv, passive, s); err != nil {
				return NNLSResult{}, err
			}
			minS := math.Inf(1)
			for j := 0; j < n; j++ {
				if passive[j] && s[j] < minS {
					minS = s[j]
				}
			}
			if minS > 0 {
				copy(x, s)
				break
			}
			// Step from x towards s until the first passive variable hits 0.
			alpha := math.Inf(1)
			for j := 0; j < n; j++ {
				if passive[j] && s[j] <= 0 {
					if r := x[j] / (x[j] - s[j]); r < alpha {
						alpha = r
					}
				}
			}
			for j := 0; j < n; j++ {
				if passive[j] {
					x[j] += alpha * (s[j] - x[j])
					if x[j] <= 1e-14 {
						x[j] = 0
						passive[j] = false
					}
				}
			}
		}
		gradient()
	}
	res := NNLSResult{X: make([]float64, n), Iterations: iters, Active: make([]bool, n)}
	for j := 0; j < n; j++ {
		res.X[j] = x[j] * scale[j]
		res.Active[j] = !passive[j]
	}
	res.Residual = mat.Norm(resid, 2)
	return res, nil
}

// lstsqSubset solves the unconstrained least-squares problem on the passive
// columns, writing 0 for the others. The SVD gives a minimum-norm answer when
// passive columns are collinear instead of failing.
func lstsqSubset(a *mat.Dense, b *mat.VecDense, passive []bool, out []float64) error {
	m, n := a.Dims()
	idx := make([]int, 0, n)
	for j := 0; j < n; j++ {
		out[j] = 0
		if passive[j] {
			idx = append(idx, j)
		}
	}
	sub := mat.NewDense(m, len(idx), nil)
	for k, j := range idx {
		for i := 0; i < m; i++ {
			sub.Set(i, k, a.At(i, j))
		}
	}
	var svd mat.SVD
	if !svd.Factorize(sub, mat.SVDThin) {
		return errors.New("nnls: SVD failed to converge")
	}
	vals := svd.Values(nil)
	rank := 0
	for _, v := range vals {
		if v > vals[0]*1e-12 {
			rank++
		}
	}
	var sol mat.Dense
	svd.SolveTo(&sol, b, rank)
	for k, j := range idx {
		out[j] = sol.At(k, 0)
	}
	return nil
}
