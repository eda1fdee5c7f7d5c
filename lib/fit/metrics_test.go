package fit

import (
	"math"
	"testing"
)

// Figures worked out by hand (see the comments) for tiny cases.
func TestSummariseByHand(t *testing.T) {
	for _, c := range []struct {
		name               string
		meas, pred         []float64
		mape, med, bias, r float64
		pearson            string
	}{
		// errors -10%, +10%, +20%, -20%: MAPE 15, median of 10,10,20,20 = 15, bias 0
		{"even count", []float64{100, 100, 100, 100}, []float64{90, 110, 120, 80}, 15, 15, 0, 0, "n/a"},
		// errors +10%, -5%, +30%: MAPE 15, median 10, bias 11.667;
		// r of (100,200,300) vs (110,190,390) = 28000/sqrt(20000·41600) = 0.97073
		{"odd count", []float64{100, 200, 300}, []float64{110, 190, 390}, 15, 10, 35.0 / 3, 0.970725343394151, "0.9707"},
		// constant predictions: correlation undefined, not 0
		{"constant prediction", []float64{100, 200, 300}, []float64{150, 150, 150}, (50 + 25 + 50.0) / 3, 50, (50 - 25 - 50.0) / 3, math.NaN(), "n/a"},
	} {
		pairs := make([]Pair, len(c.meas))
		for i := range pairs {
			pairs[i] = Pair{Measured: c.meas[i], Predicted: c.pred[i]}
		}
		s := Summarise("x", pairs, 2)
		for _, f := range []struct {
			what      string
			got, want float64
		}{{"MAPE", s.MAPE, c.mape}, {"median APE", s.MedAPE, c.med}, {"bias", s.Bias, c.bias}} {
			if math.Abs(f.got-f.want) > 1e-6 {
				t.Errorf("%s: %s = %v, want %v", c.name, f.what, f.got, f.want)
			}
		}
		if c.pearson != "n/a" && math.Abs(s.Pearson-c.r) > 1e-6 {
			t.Errorf("%s: Pearson = %v, want %v", c.name, s.Pearson, c.r)
		}
		if got := pearson(s); got != c.pearson {
			t.Errorf("%s: Pearson shown as %q, want %q", c.name, got, c.pearson)
		}
	}
}
