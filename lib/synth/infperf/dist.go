package infperf

import (
	"math"
	"math/rand/v2"
)

// lengthDist is a resolved Distribution. inference-perf samples lengths
// with two functions: sample_from_distribution (shared_prefix: normal,
// skew_normal, lognormal, uniform, poisson, fixed) and the older
// generate_distribution (random and synthetic data: normal, a lognormal
// shifted to start at min, uniform, fixed). legacy selects the second.
type lengthDist struct {
	typ             string
	min, max        int
	mean, std, skew float64
	legacy          bool
}

func fixedLength(v int) lengthDist {
	return lengthDist{typ: "fixed", min: v, max: v, mean: float64(v)}
}

// sample draws n lengths.
func (d lengthDist) sample(r *rand.Rand, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = d.one(r)
	}
	return out
}

func (d lengthDist) one(r *rand.Rand) int {
	var x float64
	switch d.typ {
	case "fixed":
		return int(d.mean) // not clipped: np.full(count, int(mean))
	case "uniform":
		if d.legacy {
			x = float64(d.min) + r.Float64()*float64(d.max-d.min)
		} else {
			x = float64(d.min) + r.Float64()*float64(d.max+1-d.min)
		}
	case "lognormal":
		m := d.mean
		if d.legacy {
			m -= float64(d.min)
			if m <= 0 {
				m = 1
			}
		}
		if d.std <= 0 && !d.legacy {
			x = m
			break
		}
		s2 := math.Log(1 + (d.std/m)*(d.std/m))
		x = math.Exp(math.Log(m) - s2/2 + math.Sqrt(s2)*r.NormFloat64())
		if d.legacy {
			x += float64(d.min)
		}
	case "poisson":
		lam := d.mean
		if lam <= 0 {
			lam = 1
		}
		x = float64(poisson(r, lam))
	case "skew_normal":
		// Azzalini's two-normal construction, as inference-perf draws it.
		delta := d.skew / math.Sqrt(1+d.skew*d.skew)
		u0, v := r.NormFloat64(), r.NormFloat64()
		u1 := delta*u0 + math.Sqrt(1-delta*delta)*v
		if u0 < 0 {
			u1 = -u1
		}
		x = d.mean + d.std*u1
	default: // normal
		x = d.mean + d.std*r.NormFloat64()
	}
	lo, hi := float64(d.min), float64(d.max)
	x = math.RoundToEven(min(max(x, lo), hi)) // numpy rounds half to even
	return int(min(max(x, lo), hi))
}
