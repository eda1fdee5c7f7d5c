package autoscale

import (
	"math"
	"math/rand/v2"

	"github.com/blis-sim/blis/lib/engine/config"
)

// Delay draws provisioning delays (µs) from a pool's distribution, on its
// own random stream.
type Delay struct {
	d   config.Distribution
	src rand.PCG
}

// NewDelay returns a sampler of d drawing from src (held by value, so a
// copy continues the stream independently).
func NewDelay(d config.Distribution, src *rand.PCG) *Delay { return &Delay{d: d, src: *src} }

// Draw returns the next delay, >= 0.
func (s *Delay) Draw() int64 {
	d := &s.d
	r := rand.New(&s.src)
	var v float64
	switch d.Dist {
	case "constant":
		return d.Value.US()
	case "uniform":
		lo, hi := float64(d.Min.US()), float64(d.Max.US())
		v = lo + r.Float64()*(hi-lo)
	case "normal":
		v = float64(d.Mean.US()) + r.NormFloat64()*float64(d.Stddev.US())
	case "lognormal":
		v = float64(d.Median.US()) * math.Exp(d.Sigma*r.NormFloat64())
	}
	if !(v > 0) {
		return 0
	}
	return int64(math.Round(min(v, 1<<50)))
}

// Clone copies the sampler with its stream position.
func (s *Delay) Clone() *Delay { d := *s; return &d }

// WarmFactor is the step-time factor of a replica warming up, elapsed µs
// into a warm-up of durUS from initial to 1:
//
//	linear:      f = initial − (initial − 1) · x
//	exponential: f = 1 + (initial − 1) · e^(−5x)  (within 1% of the gap at the end)
//	step:        f = initial until the end
//
// with x = elapsed / duration in [0, 1]; 1 after the end.
func WarmFactor(curve string, initial float64, elapsedUS, durUS int64) float64 {
	if elapsedUS >= durUS || initial <= 1 {
		return 1
	}
	x := float64(max(elapsedUS, 0)) / float64(durUS)
	switch curve {
	case "linear":
		return initial - (initial-1)*x
	case "exponential":
		return 1 + (initial-1)*math.Exp(-5*x)
	}
	return initial
}
