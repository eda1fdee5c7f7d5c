package fit

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestNNLSHandSolved(t *testing.T) {
	tests := []struct {
		name string
		a    []float64
		m, n int
		b    []float64
		want []float64
	}{
		// Unconstrained optimum is already non-negative.
		{"interior", []float64{1, 0, 0, 1, 1, 1}, 3, 2, []float64{1, 2, 3}, []float64{1, 2}},
		// Identity with a negative target: that coordinate sits at 0.
		{"identity", []float64{1, 0, 0, 1}, 2, 2, []float64{3, -2}, []float64{3, 0}},
		// Unconstrained LS gives x = (2, -1); NNLS: x2 = 0, x1 = argmin (x-1)²+(x-1)²+(x-... )
		// A = [[1,1],[1,0],[0,1]], b = [1,2,-1]: with x2=0, x1 = (1+2)/2 = 1.5.
		{"bound", []float64{1, 1, 1, 0, 0, 1}, 3, 2, []float64{1, 2, -1}, []float64{1.5, 0}},
		// Constant + slope, exact data with intercept 5 and slope 0.25 on wildly scaled columns.
		{"scaled", []float64{1, 1000, 1, 20000, 1, 300000, 1, 4e6}, 4, 2,
			[]float64{5 + 250, 5 + 5000, 5 + 75000, 5 + 1e6}, []float64{5, 0.25}},
		// All-negative target: everything at zero.
		{"zero", []float64{1, 2, 3, 4}, 2, 2, []float64{-1, -1}, []float64{0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := NNLS(mat.NewDense(tc.m, tc.n, tc.a), tc.b)
			if err != nil {
				t.Fatal(err)
			}
			for j := range tc.want {
				if math.Abs(res.X[j]-tc.want[j]) > 1e-8*math.Max(1, math.Abs(tc.want[j])) {
					t.Errorf("x[%d] = %.12g, want %.12g", j, res.X[j], tc.want[j])
				}
			}
		})
	}
}

// checkKKT verifies the optimality conditions of NNLS: x ≥ 0, gradient
// w = Aᵀ(b − Ax) ≤ 0 where x = 0, and w = 0 where x > 0.
func checkKKT(t *testing.T, a *mat.Dense, b []float64, x []float64) {
	t.Helper()
	m, n := a.Dims()
	r := mat.NewVecDense(m, nil)
	r.MulVec(a, mat.NewVecDense(n, x))
	r.SubVec(mat.NewVecDense(m, b), r)
	for j := 0; j < n; j++ {
		col := a.ColView(j)
		w := mat.Dot(col, r) / (mat.Norm(col, 2) * math.Max(mat.Norm(mat.NewVecDense(m, b), 2), 1))
		switch {
		case x[j] < 0:
			t.Errorf("x[%d] = %g < 0", j, x[j])
		case x[j] == 0 && w > 1e-8:
			t.Errorf("x[%d] = 0 but scaled gradient %g > 0: could improve", j, w)
		case x[j] > 0 && math.Abs(w) > 1e-8:
			t.Errorf("x[%d] = %g > 0 but scaled gradient %g ≠ 0", j, x[j], w)
		}
	}
}

func TestNNLSKKTRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		m, n := 5+rng.IntN(40), 1+rng.IntN(8)
		a := mat.NewDense(m, n, nil)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				a.Set(i, j, rng.NormFloat64()*math.Pow(10, float64(j%4)))
			}
		}
		b := make([]float64, m)
		for i := range b {
			b[i] = rng.NormFloat64() * 10
		}
		res, err := NNLS(a, b)
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		checkKKT(t, a, b, res.X)
	}
}

func TestNNLSRecoversExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := 500
	truth := []float64{6000, 0.05, 12, 0, 3e-4}
	a := mat.NewDense(m, len(truth), nil)
	b := make([]float64, m)
	for i := 0; i < m; i++ {
		row := []float64{1, float64(rng.IntN(8192)), float64(rng.IntN(256)), float64(rng.IntN(100)), float64(rng.IntN(1 << 20))}
		a.SetRow(i, row)
		for j, v := range row {
			b[i] += truth[j] * v
		}
	}
	res, err := NNLS(a, b)
	if err != nil {
		t.Fatal(err)
	}
	for j := range truth {
		if math.Abs(res.X[j]-truth[j]) > 1e-6*math.Max(truth[j], 1) {
			t.Errorf("x[%d] = %g, want %g", j, res.X[j], truth[j])
		}
	}
}

func TestNNLSBadShape(t *testing.T) {
	if _, err := NNLS(mat.NewDense(2, 2, nil), []float64{1}); err == nil {
		t.Fatal("want an error for mismatched b")
	}
}

func BenchmarkNNLS10k(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, n := 10000, 6
	a := mat.NewDense(m, n, nil)
	y := make([]float64, m)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			a.Set(i, j, float64(rng.IntN(4096)+1)*math.Pow(10, float64(j-2)))
		}
		y[i] = 100 + rng.NormFloat64()*5 + 0.5*a.At(i, 1) + 0.2*a.At(i, 3)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := NNLS(a, y); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDegeneracyWarnings(t *testing.T) {
	// Column 2 is 3 × column 1: the split between them is arbitrary.
	a := mat.NewDense(4, 3, []float64{1, 2, 6, 1, 5, 15, 1, 9, 27, 1, 4, 12})
	w := Degeneracy(a, []string{"const", "x", "3x"}, []bool{false, false, false})
	if len(w) == 0 || !strings.Contains(w[0], "x and 3x are nearly collinear") {
		t.Fatalf("warnings %q", w)
	}
	// Independent columns: no warning.
	b := mat.NewDense(4, 2, []float64{1, 0, 1, 1, 1, 4, 1, 9})
	if w := Degeneracy(b, []string{"const", "x²"}, []bool{false, false}); len(w) != 0 {
		t.Fatalf("unexpected warnings %q", w)
	}
	// A column held at its bound is not trading off anything.
	if w := Degeneracy(a, []string{"const", "x", "3x"}, []bool{false, false, true}); len(w) != 0 {
		t.Fatalf("unexpected warnings with a bound column %q", w)
	}
}
